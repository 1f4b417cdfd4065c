#!/usr/bin/env python3
"""Another user takes the agent's endpoint first (docs/agent.md, *Whom
producers trust*):

- user nobody listens on a socket of its own, speaking the agent's side of
  ZMTP, with a drop box beside it; a process of root pointed there (as the
  /tmp default used to point every process while no agent ran) writes a
  file in root's private directory: nobody receives not one byte and its
  drop box stays empty; the process says once why (IOTRACE_VERBOSE) and
  counts its events as dropped;
- nobody's directory is one root made for nobody, as a home directory is:
  that vouches for no one (only /run/iotrace's owner is the service's
  account);
- the default endpoint is in /run/iotrace, which nobody cannot make, for
  the library and for the agent.

usage: test_squat.py --collector=... --agent=... --client=... --burst-app=... ..."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import exit_reports, parse_bins, sanitizer_env  # noqa: E402

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
PYTHON = "/usr/bin/python3"  # one nobody may run

# The attacker: listens at argv[1] with a drop box beside it, answers every
# connection with the agent's greeting and READY (PULL), and writes the
# number of bytes received, and the drop box's entries, to argv[2] until
# killed.
LISTENER = r"""
import os, selectors, socket, sys
path, out = sys.argv[1], sys.argv[2]
box = path + ".dropbox"
os.mkdir(box)
os.chmod(box, 0o1733)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o666)
srv.listen(64)
srv.setblocking(False)
sel = selectors.DefaultSelector()
sel.register(srv, selectors.EVENT_READ)
greeting = bytes([0xff] + [0] * 7 + [1, 0x7f, 3, 0]) + b"NULL" + bytes(48)
ready = bytes([0x04, 26, 5]) + b"READY" + bytes([11]) + b"Socket-Type" + bytes([0, 0, 0, 4]) + b"PULL"
got = conns = 0
while True:
    for key, _ in sel.select(0.1):
        if key.fileobj is srv:
            c, _ = srv.accept()
            conns += 1
            c.sendall(greeting + ready)
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
        else:
            try:
                data = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
            got += len(data)
    with open(out + ".tmp", "w") as f:
        f.write(f"{conns} {got} {len(os.listdir(box))}\n")
    os.replace(out + ".tmp", out)
"""


def listen_as_nobody(dirpath):
    sock, out = os.path.join(dirpath, "agent.sock"), os.path.join(dirpath, "seen")
    proc = subprocess.Popen(NOBODY + [PYTHON, "-c", LISTENER, sock, out])
    deadline = time.time() + 30
    while not os.path.exists(out) and time.time() < deadline:
        time.sleep(0.05)
    assert os.path.exists(out), "the listener of nobody did not start"
    return proc, sock, out


def seen(out):
    conns, got, boxed = map(int, open(out).read().split())
    return conns, got, boxed


def traced_root(bins, sock, private, env_extra=None):
    """A process of root writing in its private directory, sent to `sock`."""
    env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"], IOTRACE_AGENT="ipc://" + sock,
               IOTRACE_JOB_ID="squat", IOTRACE_VERBOSE="1", IOTRACE_LINGER_MS="300", **sanitizer_env(bins))
    env.update(env_extra or {})
    r = subprocess.run([bins["burst_app"], os.path.join(private, "secret-plans.dat"), "3", "2000", "150"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stderr


def squatted(bins, tmp, private):
    """nobody's own directory, made by root as a home is: nothing of root's
    reaches it."""
    mine = os.path.join(tmp, "nobody-home")
    os.mkdir(mine, 0o755)
    os.chown(mine, 65534, 65534)
    proc, sock, out = listen_as_nobody(mine)
    try:
        err = traced_root(bins, sock, private)
        time.sleep(0.5)
        conns, got, boxed = seen(out)
        reports = exit_reports(err)
        assert got == 0, f"nobody's socket received {got} bytes of root's process over {conns} connections"
        assert boxed == 0, f"root's process left {boxed} files in nobody's drop box"
        assert err.count("not sending to") == 1, "the refusal was not said once:\n" + err
        assert reports and all(r["made"] > 0 and r["sent"] == 0 for r in reports.values()), err
        print(f"ok: squatted endpoint: {conns} connections of root's process to nobody's socket, 0 bytes "
              f"written, 0 files in its drop box; {sum(r['made'] for r in reports.values())} events made, "
              "none sent")
    finally:
        proc.kill()
        proc.wait()


def default_endpoint(bins, tmp):
    """The default is in /run/iotrace: nobody cannot take it, and the
    library and the agent both name it."""
    r = subprocess.run(NOBODY + [PYTHON, "-c",
                                 "import os,socket; os.makedirs('/run/iotrace', exist_ok=True); "
                                 "socket.socket(socket.AF_UNIX).bind('/run/iotrace/agent.sock')"],
                       capture_output=True, text=True)
    assert r.returncode != 0, "nobody could create the default agent socket"
    env = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"], IOTRACE_VERBOSE="1",
               IOTRACE_LINGER_MS="0", **sanitizer_env(bins))
    env.pop("IOTRACE_AGENT", None)
    data = os.path.join(tmp, "nobody-data")
    os.mkdir(data)
    os.chown(data, 65534, 65534)
    r = subprocess.run(NOBODY + [bins["burst_app"], os.path.join(data, "f"), "1", "10", "0"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    if os.path.exists("/run/iotrace/agent.sock"):
        print("note: an agent listens at /run/iotrace/agent.sock: the library's default not checked")
    else:
        assert "ipc:///run/iotrace/agent.sock" in r.stderr, "the library's default is not /run/iotrace:\n" + r.stderr
    h = subprocess.run([bins["agent"], "--help"], capture_output=True, text=True)
    assert "default ipc:///run/iotrace/agent.sock" in h.stdout, h.stdout
    print("ok: default endpoint ipc:///run/iotrace/agent.sock, which nobody cannot make")


def main():
    bins = parse_bins(sys.argv[1:])
    if os.geteuid() != 0:
        print("skipped: needs root to act as another user")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-squat-")
    os.chmod(tmp, 0o755)
    private = os.path.join(tmp, "root-private")
    os.mkdir(private, 0o700)
    try:
        squatted(bins, tmp, private)
        default_endpoint(bins, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
