#!/usr/bin/env python3
"""The install as an administrator meets it:

- `cmake --install BUILD --prefix P` (and with DESTDIR) keeps every file
  inside P, translators included;
- the units name P's programs and configuration, pass `systemd-analyze
  verify`, and `systemd-analyze security` rates each at most 3.0;
- the pkg-config file follows the prefix;
- the installed collector refuses to start with a bad key file, a listening
  address in use or an HTTP address in use, and leaves no store behind;
- the installed volume.sh answers --help with its usage;
- each unit's ExecStart, run as the service user with the unit's state and
  runtime directories, starts the daemon (a real collector and agent, the
  agent's socket open to other users) and a batch goes through; the
  collector serves the dashboard installed under P, and the server
  translator finds libiotrace-server under P.

usage: install_test.py BUILD_DIR PRODUCER"""
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, free_port  # noqa: E402

BUILD, PRODUCER = sys.argv[1:3]
MAX_EXPOSURE = 3.0


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def install(prefix, destdir=None):
    env = dict(os.environ)
    if destdir:
        env["DESTDIR"] = destdir
    r = run(["cmake", "--install", BUILD, "--prefix", prefix], env=env)
    check(r.returncode == 0, f"cmake --install --prefix {prefix}: {r.stderr[-2000:]}")
    with open(os.path.join(BUILD, "install_manifest.txt")) as f:
        return [line.strip() for line in f if line.strip()]


def service_user():
    """The package creates `iotrace`; here it is made the same way if missing."""
    try:
        return pwd.getpwnam("iotrace")
    except KeyError:
        r = run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                 "--shell", "/usr/sbin/nologin", "iotrace"])
        check(r.returncode == 0, "useradd iotrace: " + r.stderr)
        return pwd.getpwnam("iotrace")


def exec_start(unit):
    line = [x for x in open(unit).read().splitlines() if x.startswith("ExecStart=")][0]
    return shlex.split(line[len("ExecStart="):])


def failed_starts(prefix, tmp):
    """Each start that cannot succeed exits non-zero before it makes the store."""
    collector = os.path.join(prefix, "bin/iotrace-collector")
    keys = os.path.join(tmp, "bad-keys")
    os.makedirs(os.path.join(keys, "agents"))
    bad_key = os.path.join(keys, "collector")
    with open(bad_key, "w") as f:
        f.write("not a key\n")
    os.chmod(bad_key, 0o600)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    try:
        for what, extra in (("a bad key file", ["--curve-key", bad_key, "--curve-clients", os.path.join(keys, "agents")]),
                            ("its listening port in use", ["--listen", f"tcp://127.0.0.1:{busy}"]),
                            ("its HTTP port in use", ["--http", f"127.0.0.1:{busy}"])):
            store = os.path.join(tmp, "failed-store")
            argv = [collector, "--store", store, "--listen", f"tcp://127.0.0.1:{free_port()}",
                    "--http", f"127.0.0.1:{free_port()}"] + extra
            try:
                r = run(argv, timeout=30)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired:
                rc, err = "still running after 30 s", ""
            check(rc not in (0, "still running after 30 s") and not os.path.lexists(store),
                  f"collector with {what}: exit {rc}, store {'left behind' if os.path.lexists(store) else 'none'}: "
                  f"{err[-600:]}")
            shutil.rmtree(store, ignore_errors=True)
    finally:
        taken.close()


def volume_sh_help(prefix):
    """volume.sh --help: the usage on stdout, exit 0; no command: exit 2."""
    script = os.path.join(prefix, "share/iotrace/gluster/volume.sh")
    for args, rc in ((["--help"], 0), (["-h"], 0), (["nonsense"], 2)):
        r = run([script] + args)
        where = r.stdout if rc == 0 else r.stderr
        check(r.returncode == rc and where.startswith("usage: volume.sh start"),
              f"volume.sh {' '.join(args)}: exit {r.returncode}, want {rc}: {r.stdout[:200]}{r.stderr[:200]}")


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (service user, ownership)")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-install-")
    os.chmod(tmp, 0o755)
    prefix = os.path.join(tmp, "opt", "iotrace")
    files = pfiles = install(prefix)
    outside = [f for f in files if not f.startswith(prefix + "/")]
    check(not outside, f"files outside the prefix: {outside[:5]}")
    names = {os.path.relpath(f, prefix) for f in files}
    for want in ("bin/iotrace-agent", "bin/iotrace-collector", "bin/iotrace-export",
                 "bin/iotrace-replay", "share/man/man1/iotrace-replay.1",
                 "lib/systemd/system/iotrace-agent.service", "lib/systemd/system/iotrace-collector.service",
                 "etc/iotrace/agent.conf", "etc/iotrace/collector.conf",
                 "share/man/man8/iotrace-agent.8", "share/man/man8/iotrace-collector.8",
                 "share/man/man1/iotrace-export.1", "share/man/man7/libiotrace-client.7"):
        check(want in names, f"{want} not installed")
    xlators = [n for n in names if re.search(r"glusterfs/[^/]+/xlator/debug/iotrace-(client|server)\.so$", n)]
    check(len(xlators) == 2, f"translators under the prefix: {xlators}")
    # glusterfsd loads the server translator from the prefix: it must find
    # libiotrace-server there, relative to itself, not in the build tree.
    for x in xlators:
        if x.endswith("iotrace-server.so"):
            path = os.path.join(prefix, x)
            r = run(["readelf", "-d", path])
            check("$ORIGIN/" in r.stdout, f"{x}: no RUNPATH relative to the module: {r.stdout[-600:]}")
            r = run(["ldd", path])
            lib = [line for line in r.stdout.splitlines() if "libiotrace-server.so" in line]
            where = lib[0].split("=>")[1].split("(")[0].strip() if lib and "=>" in lib[0] else ""
            check(where and os.path.realpath(where).startswith(os.path.realpath(prefix) + "/"),
                  f"{x} resolves libiotrace-server as {lib or r.stdout}")

    # DESTDIR: the same tree below it, nothing elsewhere.
    dest = os.path.join(tmp, "dest")
    files = install("/usr/local", destdir=dest)
    # The manifest names some files with DESTDIR and some without; each must
    # be there below DESTDIR/usr/local.
    placed = [f if f.startswith(dest + "/") else dest + f for f in files]
    escaped = [f for f in placed if not f.startswith(dest + "/usr/local/") or not os.path.lexists(f)]
    check(files and not escaped, f"DESTDIR install: {escaped[:5]}")
    unit = open(os.path.join(dest, "usr/local/lib/systemd/system/iotrace-agent.service")).read()
    check("ExecStart=/usr/local/bin/iotrace-agent --config /usr/local/etc/iotrace/agent.conf" in unit,
          "DESTDIR leaked into the unit or paths wrong")

    failed_starts(prefix, tmp)
    volume_sh_help(prefix)

    user = service_user()
    units = {u: os.path.join(prefix, "lib/systemd/system", f"iotrace-{u}.service") for u in ("agent", "collector")}
    for u, path in units.items():
        text = open(path).read()
        check(f"ExecStart={prefix}/bin/iotrace-{u} --config {prefix}/etc/iotrace/{u}.conf" in text,
              f"{u} unit does not follow the prefix")
        r = run(["systemd-analyze", "verify", "--man=no", path])
        bad = [x for x in (r.stdout + r.stderr).splitlines() if x.strip() and "iotrace" in x]
        check(r.returncode == 0 and not bad, f"systemd-analyze verify {u}: {r.stdout}{r.stderr}")
        r = run(["systemd-analyze", "security", "--offline=yes", path])
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
        check(m and float(m.group(1)) <= MAX_EXPOSURE,
              f"systemd-analyze security {u}: {m.group(1) if m else r.stderr}")
        if m:
            print(f"{u}: exposure {m.group(1)}")

    pcdirs = sorted({os.path.dirname(f) for f in pfiles if f.endswith(".pc")})
    for var, want in (("includedir", os.path.join(prefix, "include")), ("libdir", None)):
        r = run(["pkg-config", f"--variable={var}", "iotrace-server"],
                env=dict(os.environ, PKG_CONFIG_PATH=":".join(pcdirs)))
        got = os.path.normpath(r.stdout.strip()) if r.returncode == 0 else r.stderr
        check(got == want if want else got.startswith(prefix + "/lib"), f"pkg-config {var}: {got}")

    # Each ExecStart as the service user, with what systemd would prepare.
    state, runtime = os.path.join(tmp, "state"), os.path.join(tmp, "run")
    for d, mode in ((state, 0o700), (runtime, 0o755)):
        os.makedirs(d)
        os.chown(d, user.pw_uid, user.pw_gid)
        os.chmod(d, mode)
    port, http_port = free_port(), free_port()
    sock = os.path.join(runtime, "agent.sock")
    with open(os.path.join(prefix, "etc/iotrace/collector.conf"), "w") as f:
        f.write(f"listen = tcp://127.0.0.1:{port}\nstore = {state}/store\nhttp = 127.0.0.1:{http_port}\n")
    # The dashboard must come from the prefix: mark the installed page.
    index = os.path.join(prefix, "share/iotrace/web/index.html")
    with open(index, "a") as f:
        f.write("<!-- served from the moved install -->\n")
    with open(os.path.join(prefix, "etc/iotrace/agent.conf"), "w") as f:
        f.write(f"collector = tcp://127.0.0.1:{port}\nlisten = ipc://{sock}\nnode = n1\n")
    as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    logs = {u: open(os.path.join(tmp, u + ".log"), "w") for u in units}
    env = dict(os.environ, STATE_DIRECTORY=state)
    umask = {"collector": 0o077, "agent": 0o022}  # the units' UMask=
    procs = {u: subprocess.Popen(as_user + exec_start(units[u]), stderr=logs[u], env=env, cwd="/",
                                 preexec_fn=lambda m=umask[u]: os.umask(m))
             for u in ("collector", "agent")}
    try:
        deadline = time.time() + 15
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.1)
        check(os.path.exists(sock), "the agent's socket did not appear")
        r = run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", PRODUCER,
                 "--agent", "ipc://" + sock, "--node", "n1", "--job", "installjob", "--batches", "3",
                 "--events-per-batch", "10"])
        check(r.returncode == 0, "producer as nobody: " + r.stderr)
        export = os.path.join(prefix, "bin/iotrace-export")
        ok = False
        while time.time() < deadline + 15 and not ok:
            r = run(as_user + [export, "--store", os.path.join(state, "store"), "--list-jobs"])
            ok = "installjob " in r.stdout and "events=30 " in r.stdout
            time.sleep(0.2)
        check(ok, f"the batch did not reach the installed collector's store: {r.stdout} {r.stderr}")
        try:
            page = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/", timeout=10).read().decode()
        except OSError as e:
            page = str(e)
        check("served from the moved install" in page, f"the dashboard is not the prefix's: {page[:300]}")
        check(os.path.isdir(os.path.join(state, "spool")), "the agent did not spool in $STATE_DIRECTORY")
        st = os.stat(os.path.join(state, "store"))
        check(st.st_uid == user.pw_uid and st.st_mode & 0o077 == 0,
              f"store owned by {st.st_uid}, mode {st.st_mode & 0o777:o}")
    finally:
        for p in procs.values():
            p.terminate()
        for u, p in procs.items():
            check(p.wait(timeout=30) == 0, f"{u} did not stop cleanly:\n" + open(logs[u].name).read()[-2000:])
    if failures:
        print("files kept in", tmp)
        sys.exit(1)
    print(f"ok: installed under {prefix}, {len(names)} files, none outside; units verified and "
          f"run as {user.pw_name}; a batch from user nobody stored")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
