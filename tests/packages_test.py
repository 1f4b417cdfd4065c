#!/usr/bin/env python3
"""The Debian packages as an administrator installs them.

Builds them (deploy/build-packages.sh), checks each one's name, contents and
dependencies (dpkg-deb), installs all of them with dpkg into a clean root
(`dpkg --root`, maintainer scripts run against that root through DPKG_ROOT),
checks `dpkg -L`, that the service user was made and nothing was enabled,
runs the installed `iotrace-agent --version`, and removes and purges them,
leaving no file of theirs behind.

usage: packages_test.py SOURCE_DIR WORK_DIR"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures  # noqa: E402

SRC, WORK = sys.argv[1:3]
PACKAGES = ["iotrace-agent", "iotrace-collector", "libiotrace-client", "iotrace-replay",
            "libiotrace-server1", "libiotrace-server-dev", "glusterfs-iotrace"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def control(deb, field):
    return run(["dpkg-deb", "-f", deb, field]).stdout.strip()


def main():
    if os.geteuid() != 0:
        print("skipped: dpkg --root needs root")
        sys.exit(77)
    r = run([os.path.join(SRC, "deploy/build-packages.sh"), WORK])
    check(r.returncode == 0, "build-packages.sh: " + r.stdout[-1500:] + r.stderr[-3000:])
    if failures:
        sys.exit(1)
    debs = {control(os.path.join(WORK, f), "Package"): os.path.join(WORK, f)
            for f in os.listdir(WORK) if f.endswith(".deb")}
    check(sorted(debs) == sorted(PACKAGES), f"packages built: {sorted(debs)}")
    contents = {p: run(["dpkg-deb", "-c", d]).stdout for p, d in debs.items()}
    for pkg, want in (("iotrace-agent", ["./usr/bin/iotrace-agent", "./usr/lib/systemd/system/iotrace-agent.service",
                                          "./etc/iotrace/agent.conf", "./usr/share/man/man8/iotrace-agent.8"]),
                      ("iotrace-collector", ["./usr/bin/iotrace-collector", "./usr/bin/iotrace-export",
                                              "./usr/share/iotrace/web/index.html",
                                              "./usr/lib/systemd/system/iotrace-collector.service",
                                              "./usr/share/man/man1/iotrace-export.1",
                                              "./usr/share/man/man8/iotrace-collector.8"]),
                      ("libiotrace-client", ["libiotrace-client.so", "./usr/share/man/man7/libiotrace-client.7"]),
                      ("iotrace-replay", ["./usr/bin/iotrace-replay", "./usr/share/man/man1/iotrace-replay.1"]),
                      ("libiotrace-server1", ["libiotrace-server.so.1"]),
                      ("libiotrace-server-dev", ["./usr/include/iotrace/server.h", "iotrace-server.pc"]),
                      ("glusterfs-iotrace", ["xlator/debug/iotrace-client.so", "xlator/debug/iotrace-server.so"])):
        for w in want:
            check(w in contents.get(pkg, ""), f"{pkg} lacks {w}")
    # Each package its own summary line (what apt search shows), then its
    # description, Debian-formatted; no list separators leaked from CMake.
    summaries = {}
    for p, d in debs.items():
        desc = control(d, "Description")
        lines = desc.splitlines()
        summaries[p] = lines[0] if lines else ""
        check(len(lines) >= 2 and all(x.startswith(" ") and not x.startswith(("  ", " ;")) for x in lines[1:]),
              f"{p}: malformed description {desc!r}")
    check(len(set(summaries.values())) == len(summaries), f"summaries not distinct: {summaries}")
    deps = {p: control(d, "Depends") for p, d in debs.items()}
    # The preloaded library finds MPI at run time and must install on a node
    # with any MPI; the replay tool is an MPICH program.
    check("mpich" not in deps["libiotrace-client"], "libiotrace-client depends on MPI: " + deps["libiotrace-client"])
    check("libmpich" in deps["iotrace-replay"], "iotrace-replay: " + deps["iotrace-replay"])
    check("libzmq5" in deps["iotrace-agent"] and "libzmq5" in deps["iotrace-collector"],
          f"shared-library dependencies missing: {deps}")
    check("libjs-chart.js" in deps["iotrace-collector"], "collector does not depend on libjs-chart.js")
    check("libiotrace-server1 (= " in deps["glusterfs-iotrace"], "glusterfs-iotrace: " + deps["glusterfs-iotrace"])
    check("/etc/iotrace/agent.conf" in run(["dpkg-deb", "-I", debs["iotrace-agent"], "conffiles"]).stdout,
          "agent.conf is not a conffile")

    # A clean root: an empty dpkg database and the account files.
    root = tempfile.mkdtemp(prefix="iotrace-dpkg-root-")
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc", "usr/bin"):
        os.makedirs(os.path.join(root, d))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    open(os.path.join(root, "var/lib/dpkg/available"), "w").close()
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\n")
    for name in ("shadow", "gshadow"):
        with open(os.path.join(root, "etc", name), "w") as f:
            f.write("root:*::0:99999:7:::\n" if name == "shadow" else "root:*::\n")
    dpkg = ["dpkg", f"--root={root}", "--force-script-chrootless", "--force-depends",
            "--force-not-root", "--log=/dev/null"]
    r = run(dpkg + ["-i"] + [debs[p] for p in PACKAGES])
    check(r.returncode == 0, "dpkg -i: " + r.stdout[-1500:] + r.stderr[-1500:])
    listed = run(["dpkg", f"--root={root}", "-L", "iotrace-agent"]).stdout
    check("/usr/bin/iotrace-agent" in listed and "/usr/lib/systemd/system/iotrace-agent.service" in listed,
          "dpkg -L iotrace-agent: " + listed)
    status = run(["dpkg", f"--root={root}", "-l"] + PACKAGES).stdout
    check(sum(1 for line in status.splitlines() if line.startswith("ii ")) == len(PACKAGES),
          "not all installed:\n" + status)
    check(any(line.startswith("iotrace:") for line in open(os.path.join(root, "etc/passwd"))),
          "the postinst did not make the user iotrace")
    keys = os.path.join(root, "etc/iotrace/keys")
    check(os.path.isdir(keys) and os.stat(keys).st_mode & 0o777 == 0o750, "no /etc/iotrace/keys 0750")
    enabled = [p for p in ("etc/systemd/system/multi-user.target.wants/iotrace-agent.service",
                           "etc/systemd/system/multi-user.target.wants/iotrace-collector.service")
               if os.path.lexists(os.path.join(root, p))]
    check(not enabled, f"enabled by surprise: {enabled}")
    r = run([os.path.join(root, "usr/bin/iotrace-agent"), "--version"])
    check(r.returncode == 0 and r.stdout.startswith("iotrace-agent "), "installed agent --version: " + r.stdout + r.stderr)
    unit = open(os.path.join(root, "usr/lib/systemd/system/iotrace-agent.service")).read()
    check("ExecStart=/usr/bin/iotrace-agent --config /etc/iotrace/agent.conf" in unit, "unit paths")

    r = run(dpkg + ["--purge"] + PACKAGES)
    check(r.returncode == 0, "dpkg --purge: " + r.stdout[-1500:] + r.stderr[-1500:])
    left = []
    for d, _, fs in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel.startswith("var/lib/dpkg") or rel == "etc":
            continue
        left += [os.path.join(rel, f) for f in fs]
    check(not left, f"files left after purge: {left[:10]}")
    if failures:
        print("root kept in", root)
        sys.exit(1)
    shutil.rmtree(root)
    print(f"ok: {len(debs)} packages built, installed into a clean root with dpkg, the user made, "
          "nothing enabled, iotrace-agent --version run, all purged without a trace")


if __name__ == "__main__":
    main()
