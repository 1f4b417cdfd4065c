#!/usr/bin/env python3
"""CURVE between agents and the collector: key files written by --keygen
with the right modes; an agent whose key is listed is admitted and its
batches stored; an agent with an unlisted key and a plain agent are refused
(counted in /metrics, said in both logs) and keep their batches, which an
agent gets through once its key is listed; a secret key readable by others
is refused; listening or connecting beyond loopback without CURVE is a
usage error unless --insecure."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, free_port  # noqa: E402

COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:5]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def stored_jobs(store):
    r = run([EXPORT, "--store", store, "--list-jobs"])
    return {line.split()[0]: int(line.split("events=")[1].split()[0]) for line in r.stdout.splitlines()}


def wait(pred, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def main():
    tmp = tempfile.mkdtemp(prefix="iotrace-curve-")
    keys, clients = os.path.join(tmp, "keys"), os.path.join(tmp, "agents")
    os.makedirs(keys)
    os.makedirs(clients)
    for prog, name in ((COLLECTOR, "collector"), (AGENT, "good"), (AGENT, "bad")):
        r = run([prog, "--keygen", os.path.join(keys, name)])
        check(r.returncode == 0, f"--keygen {name}: {r.stderr}")
    for name in ("collector", "good", "bad"):
        mode = os.stat(os.path.join(keys, name)).st_mode & 0o777
        pub = os.stat(os.path.join(keys, name + ".pub")).st_mode & 0o777
        check(mode == 0o600 and pub == 0o644, f"{name}: modes {mode:o} {pub:o}")
    again = run([AGENT, "--keygen", os.path.join(keys, "good")])
    check(again.returncode == 1 and "File exists" in again.stderr, "keygen overwrote a key: " + again.stderr)
    shutil.copy(os.path.join(keys, "good.pub"), clients)

    # Beyond loopback without CURVE: refused unless --insecure.
    r = run([COLLECTOR, "--store", os.path.join(tmp, "s0"), "--listen", "tcp://0.0.0.0:1", "--http", "off"])
    check(r.returncode == 2 and "beyond loopback" in r.stderr, "collector on 0.0.0.0 without CURVE: " + r.stderr)
    r = run([AGENT, "--collector", "tcp://192.0.2.1:5555", "--listen", "ipc://" + tmp + "/x.sock"])
    check(r.returncode == 2 and "beyond loopback" in r.stderr, "agent to 192.0.2.1 without CURVE: " + r.stderr)
    r = run([COLLECTOR, "--store", os.path.join(tmp, "s0"), "--listen", "tcp://127.0.0.1:1",
             "--curve-key", os.path.join(keys, "collector"), "--http", "off"])
    check(r.returncode == 2 and "--curve-clients" in r.stderr, "--curve-key alone: " + r.stderr)
    loose = os.path.join(tmp, "loose")
    shutil.copy(os.path.join(keys, "collector"), loose)
    os.chmod(loose, 0o644)
    r = run([COLLECTOR, "--store", os.path.join(tmp, "s0"), "--listen", f"tcp://127.0.0.1:{free_port()}",
             "--curve-key", loose, "--curve-clients", clients, "--http", "off"])
    check(r.returncode == 1 and "may be read by others" in r.stderr, "secret key mode 0644: " + r.stderr)

    port, http = free_port(), free_port()
    store = os.path.join(tmp, "store")
    clog = open(os.path.join(tmp, "collector.log"), "wb")
    coll = subprocess.Popen([COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", store,
                             "--http", f"127.0.0.1:{http}", "--curve-key", os.path.join(keys, "collector"),
                             "--curve-clients", clients], stderr=clog)
    agents = []

    def agent(name, *curve):
        sock = os.path.join(tmp, name + ".sock")
        log = open(os.path.join(tmp, name + ".log"), "wb")
        agents.append(subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
                                        "--node", name, "--state-dir", "none"] + list(curve), stderr=log))
        wait(lambda: os.path.exists(sock), 10)
        return "ipc://" + sock

    def produce(ep, job, batches):
        r = run([PRODUCER, "--agent", ep, "--node", job, "--job", job, "--batches", str(batches),
                 "--events-per-batch", "100"])
        check(r.returncode == 0, f"producer {job}: {r.stderr}")

    def text(name):
        return open(os.path.join(tmp, name + ".log"), errors="replace").read()

    try:
        collector_pub = os.path.join(keys, "collector.pub")
        good = agent("good", "--curve-key", os.path.join(keys, "good"), "--collector-key", collector_pub)
        bad = agent("bad", "--curve-key", os.path.join(keys, "bad"), "--collector-key", collector_pub)
        plain = agent("plain")
        produce(good, "jobgood", 20)
        produce(bad, "jobbad", 5)
        produce(plain, "jobplain", 5)
        check(wait(lambda: stored_jobs(store).get("jobgood") == 2000), f"good agent: {stored_jobs(store)}")
        time.sleep(2)
        jobs = stored_jobs(store)
        check("jobbad" not in jobs and "jobplain" not in jobs, f"refused agents got through: {jobs}")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10).read().decode()
        refused = [float(x.split()[1]) for x in metrics.splitlines()
                   if x.startswith("iotrace_collector_auth_refused_total ")]
        # At least the unlisted agent's and the plain agent's first attempts.
        check(refused and refused[0] >= 2, "auth_refused not counted: %r" % refused)
        status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{http}/api/v1/status", timeout=10).read())
        check(status.get("auth_refused", 0) >= 2, f"status: {status.get('auth_refused')}")
        check("refused this agent's CURVE key" in text("bad"), "bad agent does not say why:\n" + text("bad"))
        check(wait(lambda: "handshake with collector" in text("plain"), 10),
              "plain agent does not say:\n" + text("plain"))
        check("is not in --curve-clients" in open(os.path.join(tmp, "collector.log"), errors="replace").read(),
              "collector does not log the refused key")
        # Listing the key admits the agent at its next attempt; it kept its batches.
        shutil.copy(os.path.join(keys, "bad.pub"), clients)
        check(wait(lambda: stored_jobs(store).get("jobbad") == 500, 30),
              f"bad agent after its key was listed: {stored_jobs(store)}")
        print(f"ok: listed agent stored 2000 events; unlisted and plain agents refused "
              f"({refused[0]:.0f} handshakes counted), the first stored its 500 once listed")

        # Agents without CURVE, refused at every attempt, stop when told: an
        # agent used to block in its HELLO when the handshake had already
        # failed (the socket had no peer left), deaf to SIGTERM, in about
        # one attempt in 25.
        plains = [subprocess.Popen([AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen",
                                    "ipc://" + os.path.join(tmp, f"p{i}.sock"), "--node", f"p{i}",
                                    "--state-dir", "none"], stderr=subprocess.DEVNULL)
                  for i in range(20)]
        time.sleep(8)
        for p in plains:
            p.terminate()
        deadline = time.time() + 10
        while time.time() < deadline and any(p.poll() is None for p in plains):
            time.sleep(0.1)
        stuck = [p.pid for p in plains if p.poll() is None]
        for p in plains:
            p.kill()
            p.wait()
        check(not stuck, f"{len(stuck)} of 20 refused agents did not stop within 10 s of SIGTERM")
        print("ok: 20 agents refused for 8 s all stopped on SIGTERM")
    finally:
        for p in agents + [coll]:
            p.terminate()
        for p in agents + [coll]:
            p.wait()
    if failures:
        print("files kept in", tmp)
        sys.exit(1)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
