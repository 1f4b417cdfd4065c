#!/usr/bin/env python3
"""Keys and labels on a cluster (deploy/cluster.sh, docs/cluster.md).

- Every hop of iotrace's own across the bridge (agent -> collector, TCP
  5555) is CURVE, and the clock exchanges beside it (UDP 5556) carry
  times, a key id and a MAC only: tcpdump on the bridge, while mpiio_mix
  runs with a job name and a directory name of its own, captures that
  traffic (it must be there: tens of kB, and the clock datagrams) and
  finds neither name, no function name and no host name of an event in
  it.
- An agent on compute1 with compute1's key that claims to be compute2 is
  refused: the collector logs the refusal, and a traced program that
  writes through that agent leaves nothing in the store; the agent's clock
  samples (which name its node) are not taken either, and compute2's own
  agent goes on unharmed.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import cluster  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, failures  # noqa: E402

MOUNT = "/mnt/iotrace-test"
NAME = "keysjobnamemarker"
SUBDIR = "keysdirmarker"


def capture_hop(c, args):
    pcap = os.path.join(cluster.DIR, "hop.pcap")
    # On the bridge, in its namespace: every packet between the hosts.
    dump = subprocess.Popen(["ip", "netns", "exec", f"{cluster.PREFIX}-net", "tcpdump", "-i", "br0",
                             "-U", "-s", "0", "-w", pcap, "tcp port 5555 or udp port 5556"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while not os.path.exists(pcap) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    c.exec("compute1", "mkdir", "-p", f"{MOUNT}/{SUBDIR}")
    env = dict(os.environ, IOTRACE_JOB_ID="keys-1", IOTRACE_JOB_NAME=NAME)
    c.run("mpiexec", "-n", "4", args.app, f"{MOUNT}/{SUBDIR}", env=env)
    c.wait_settled("keys-1", 4)
    dump.send_signal(signal.SIGINT)
    dump.wait(timeout=10)
    with open(pcap, "rb") as f:
        data = f.read()
    stored = c.jobs()["keys-1"]
    print(f"capture of port 5555 on the bridge: {len(data)} bytes while the job's "
          f"{stored['events']} events were stored")
    check(len(data) > 20000, f"the capture holds {len(data)} bytes: the hop was not seen")
    # The clock exchanges cross on UDP (times, a key id, a MAC: no name).
    udp = subprocess.run(["tcpdump", "-nn", "-r", pcap, "udp port 5556"], capture_output=True,
                         text=True).stdout.splitlines()
    print(f"of which {len(udp)} clock datagrams (UDP 5556)")
    check(len(udp) >= 32, f"only {len(udp)} clock datagrams on UDP 5556 in the capture")
    for word in (NAME, SUBDIR, "MPI_File_write_at", "mpiio_mix", "compute1", "storage1"):
        check(word.encode() not in data, f"'{word}' in clear on the agent-collector hop")
    # The names did reach the store, through the hop.
    names = c.export("--list-jobs")
    events = c.events("keys-1")
    check(any(SUBDIR in (e.get("file") or "") for e in events), "the directory name is not in the store")
    check("keys-1" in names, "the job is not in the store")


def impersonate(c, app):
    d = os.path.join(cluster.DIR, "hosts", "compute1")
    log = os.path.join(d, "log", "impostor.log")
    before = open(os.path.join(cluster.DIR, "hosts", "collector", "log", "collector.log"),
                  errors="replace").read().count("refused the HELLO of node 'compute2'")
    agent = subprocess.Popen(
        [c.sh, "--dir", cluster.DIR, "--prefix", cluster.PREFIX, "--build", c.build, "exec", "compute1", "setpriv", "--reuid", "iotrace", "--regid",
         "iotrace", "--init-groups", "--", os.path.join(c.build, "agent", "iotrace-agent"),
         "--config", os.path.join(d, "agent.conf"), "--node", "compute2",
         "--listen", "ipc:///run/iotrace/impostor.sock", "--state-dir", "none",
         "--dropbox", "none", "--clock-interval", "1s"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while c.exec("compute1", "test", "-S", "/run/iotrace/impostor.sock", check=False).returncode:
            check(time.time() < deadline and agent.poll() is None, "the impostor agent did not start")
            if failures:
                return
            time.sleep(0.2)
        client = os.path.join(c.build, "clientlib", "libiotrace-client.so")
        c.exec("compute1", "env", f"LD_PRELOAD={client}", "IOTRACE_AGENT=ipc:///run/iotrace/impostor.sock",
               "IOTRACE_JOB_ID=impostor-1", "sh", "-c", f"echo forged > {MOUNT}/forged; cat {MOUNT}/forged")
        time.sleep(6)   # several clock intervals and connection attempts
        clog = open(os.path.join(cluster.DIR, "hosts", "collector", "log", "collector.log"),
                    errors="replace").read()
        refused = clog.count("refused the HELLO of node 'compute2'") - before
        print(f"impostor on compute1 as compute2: collector refused {refused} HELLO(s)")
        check(refused >= 1, "the collector did not log refusing compute1's key for compute2")
        check("impostor-1" not in c.export("--list-jobs"), "the impostor's job is in the store")
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
    # compute2's own agent still gets through.
    env = dict(os.environ, IOTRACE_JOB_ID="keys-2")
    c.run("mpiexec", "-n", "4", app, f"{MOUNT}/{SUBDIR}", env=env)
    c.wait_settled("keys-2", 4)
    n = sum(e["node"] == "compute2" for e in c.events("keys-2"))
    print(f"compute2's own agent afterwards: {n} events of compute2 stored")
    check(n > 0, "compute2's own agent forwarded nothing after the impostor")


def main():
    args = cluster.parse_args()
    cluster.skip_unless_possible()
    if not subprocess.run(["sh", "-c", "command -v tcpdump"], capture_output=True).stdout:
        print("skipped: tcpdump (Debian package tcpdump) not installed")
        return 77
    with cluster.Cluster(args, "--mount", MOUNT, "--clock-interval", "1s") as c:
        capture_hop(c, args)
        impersonate(c, args.app)
    return cluster.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
