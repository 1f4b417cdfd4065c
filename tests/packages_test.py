#!/usr/bin/env python3
"""The Debian packages as an administrator installs them.

Builds them (deploy/build-packages.sh), checks each one's name, contents and
dependencies (dpkg-deb), installs all of them with dpkg into a clean root
(`dpkg --root`, maintainer scripts run against that root through DPKG_ROOT),
checks `dpkg -L`, that the service user was made and nothing was enabled,
runs the installed `iotrace-agent --version`, and removes and purges them,
leaving no file of theirs behind.

Runs lintian on every package and fails on any error or warning that no
override shipped with the package explains; checks that the binaries are
stripped and their debug information is in PACKAGE-dbgsym under
/usr/lib/debug/.build-id, and that what README.md and docs/install.md tell
an administrator holds for the packages: the dpkg --root command as
docs/install.md gives it configures every package, the setup makes no user
the packages made, the keys directories collector.conf names exist, the
units' Documentation= is in their own package, and README's paths are the
packages'.

usage: packages_test.py SOURCE_DIR WORK_DIR"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures  # noqa: E402

SRC, WORK = sys.argv[1:3]
PACKAGES = ["iotrace-agent", "iotrace-collector", "libiotrace-client", "iotrace-replay",
            "libiotrace-server1", "libiotrace-server-dev", "glusterfs-iotrace"]
# Every package with an ELF binary: its debug information apart.
DBGSYM = [p + "-dbgsym" for p in PACKAGES if p != "libiotrace-server-dev"]


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
    every = {control(os.path.join(WORK, f), "Package"): os.path.join(WORK, f)
             for f in os.listdir(WORK) if f.endswith((".deb", ".ddeb"))}
    check(sorted(every) == sorted(PACKAGES + DBGSYM), f"packages built: {sorted(every)}")
    debs = {p: d for p, d in every.items() if p in PACKAGES}
    check_lintian(every)
    check_debug_symbols(every)
    contents = {p: run(["dpkg-deb", "-c", d]).stdout for p, d in debs.items()}
    for pkg, want in (("iotrace-agent", ["./usr/bin/iotrace-agent", "./usr/lib/systemd/system/iotrace-agent.service",
                                          "./etc/iotrace/agent.conf", "./usr/share/man/man8/iotrace-agent.8"]),
                      ("iotrace-collector", ["./usr/bin/iotrace-collector", "./usr/bin/iotrace-export",
                                              "./usr/share/iotrace/web/index.html",
                                              "./usr/lib/systemd/system/iotrace-collector.service",
                                              "./usr/share/man/man1/iotrace-export.1",
                                              "./usr/share/man/man8/iotrace-collector.8"]),
                      ("libiotrace-client", ["libiotrace-client.so", "./usr/share/man/man7/libiotrace-client.7",
                                             "./usr/share/iotrace/slurm/iotrace-taskprolog"]),
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
    # The install into another root exactly as docs/install.md gives it.
    r = run(documented_dpkg_root(root, [debs[p] for p in PACKAGES]))
    check(r.returncode == 0, "dpkg -i as docs/install.md says: " + r.stdout[-1500:] + r.stderr[-1500:])
    dpkg = ["dpkg", f"--root={root}", "--force-script-chrootless", "--force-depends",
            "--force-not-root", "--log=/dev/null"]
    listed = run(["dpkg", f"--root={root}", "-L", "iotrace-agent"]).stdout
    check("/usr/bin/iotrace-agent" in listed and "/usr/lib/systemd/system/iotrace-agent.service" in listed,
          "dpkg -L iotrace-agent: " + listed)
    status = run(["dpkg", f"--root={root}", "-l"] + PACKAGES).stdout
    check(sum(1 for line in status.splitlines() if line.startswith("ii ")) == len(PACKAGES),
          "not all installed:\n" + status)
    check(any(line.startswith("iotrace:") for line in open(os.path.join(root, "etc/passwd"))),
          "the postinst did not make the user iotrace")
    uid = [int(line.split(":")[2]) for line in open(os.path.join(root, "etc/passwd"))
           if line.startswith("iotrace:")]
    # collector.conf's curve-clients names keys/agents: the agents' public
    # keys go there.
    for d in ("etc/iotrace/keys", "etc/iotrace/keys/agents"):
        path = os.path.join(root, d)
        st = os.stat(path) if os.path.isdir(path) else None
        check(st and st.st_mode & 0o777 == 0o750 and [st.st_uid] == uid,
              f"/{d}: {oct(st.st_mode & 0o777) + ' uid ' + str(st.st_uid) if st else 'missing'}, "
              f"want 0750 owned by iotrace")
    conf_path = os.path.join(root, "etc/iotrace/collector.conf")
    check(os.path.isfile(conf_path), "no /etc/iotrace/collector.conf")
    conf = open(conf_path).read() if os.path.isfile(conf_path) else ""
    for d in re.findall(r"^curve-clients\s*=\s*(\S+)", conf, re.M):
        check(os.path.isdir(root + d), f"collector.conf names curve-clients {d}, which no package made")
    check_units_documentation(root, contents)
    check_readme_paths(contents)
    check_setup_block()
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


def check_lintian(every):
    """No error and no warning left without an override that says why."""
    total = 0
    for pkg, deb in sorted(every.items()):
        r = run(["lintian", "--tag-display-limit", "0", deb])
        tags = [line for line in r.stdout.splitlines() if re.match(r"[EW]: ", line)]
        total += len(tags)
        check(not tags, f"lintian {pkg}:\n  " + "\n  ".join(tags))
        check(r.returncode == 0 or tags, f"lintian {pkg} failed: {r.stderr[-800:]}")
    print(f"lintian: {len(every)} packages, {total} errors and warnings")


def unpack(deb, into):
    r = run(["dpkg-deb", "-x", deb, into])
    check(r.returncode == 0, f"dpkg-deb -x {deb}: {r.stderr}")
    return into


def check_debug_symbols(every):
    """Stripped binaries; each one's debug information, found by its build
    id, in PACKAGE-dbgsym, which depends on that exact PACKAGE."""
    tmp = tempfile.mkdtemp(prefix="iotrace-dbgsym-")
    try:
        for pkg in DBGSYM:
            parent = pkg[:-len("-dbgsym")]
            if parent not in every or pkg not in every:
                continue
            want = f"{parent} (= {control(every[parent], 'Version')})"
            check(control(every[pkg], "Depends") == want, f"{pkg} Depends: {control(every[pkg], 'Depends')}")
            bins = unpack(every[parent], os.path.join(tmp, parent))
            dbg = unpack(every[pkg], os.path.join(tmp, pkg))
            elves = 0
            for d, _, fs in os.walk(bins):
                for f in fs:
                    path = os.path.join(d, f)
                    if os.path.islink(path) or open(path, "rb").read(4) != b"\x7fELF":
                        continue
                    elves += 1
                    rel = os.path.relpath(path, bins)
                    sections = run(["readelf", "-S", "-W", path]).stdout
                    check(".debug_info" not in sections and ".symtab" not in sections,
                          f"{parent}: {rel} is not stripped")
                    m = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", run(["readelf", "-n", path]).stdout)
                    debug = os.path.join(dbg, "usr/lib/debug/.build-id", m.group(1), m.group(2) + ".debug") \
                        if m else ""
                    check(m and os.path.isfile(debug) and ".debug_info" in
                          run(["readelf", "-S", "-W", debug]).stdout,
                          f"{pkg}: no debug information for {rel} (build id {m and m.group(0)})")
            check(elves > 0, f"{parent}: no ELF file")
            check(os.path.islink(os.path.join(dbg, "usr/share/doc", pkg)),
                  f"{pkg}: no /usr/share/doc/{pkg} link to {parent}'s copyright")
        for pkg in PACKAGES:
            names = run(["dpkg-deb", "-c", every[pkg]]).stdout
            for want in (f"./usr/share/doc/{pkg}/copyright", f"./usr/share/doc/{pkg}/changelog.gz"):
                check(want in names, f"{pkg} lacks {want}")
            raw = [n for n in re.findall(r"(\./usr/share/man/\S+)", names) if not n.endswith((".gz", "/"))]
            check(not raw, f"{pkg}: uncompressed manual pages {raw}")
        for pkg in ("libiotrace-client", "libiotrace-server1"):
            trig = run(["dpkg-deb", "-I", every[pkg], "triggers"]).stdout
            check("activate-noawait ldconfig" in trig, f"{pkg}: no ldconfig trigger ({trig!r})")
    finally:
        shutil.rmtree(tmp)


def documented_dpkg_root(root, debs):
    """docs/install.md's command for installing into another root."""
    text = open(os.path.join(SRC, "docs/install.md")).read()
    lines = [x.strip() for x in re.findall(r"^\s*(dpkg --root .*)$", text, re.M)] or \
        re.findall(r"`(dpkg --root [^`]*)`", text)
    check(lines, "docs/install.md gives no dpkg --root command")
    argv = shlex.split(lines[0].split("#")[0]) if lines else ["false"]
    argv = [a.replace("DIR", root) for a in argv if not a.endswith(".deb")]
    if "-i" not in argv:
        argv.append("-i")
    # Not in the documentation: this test may run as any user, and logs
    # nowhere.
    return argv + ["--force-not-root", "--log=/dev/null"] + debs


def check_units_documentation(root, contents):
    """Each unit's Documentation= is installed by the unit's own package."""
    for pkg, unit in (("iotrace-agent", "iotrace-agent.service"),
                      ("iotrace-collector", "iotrace-collector.service")):
        path = os.path.join(root, "usr/lib/systemd/system", unit)
        text = open(path).read() if os.path.isfile(path) else ""
        check(text, f"{unit} not installed")
        for doc in " ".join(re.findall(r"^Documentation=(.*)$", text, re.M)).split():
            if doc.startswith("file://"):
                want = "." + doc[len("file://"):]
            elif doc.startswith("man:"):
                m = re.match(r"man:([^(]+)\((\d)\)", doc)
                want = f"./usr/share/man/man{m.group(2)}/{m.group(1)}.{m.group(2)}" if m else doc
            else:
                continue
            check(want in contents[pkg], f"{unit}: Documentation={doc} is not in package {pkg}")


def check_readme_paths(contents):
    """README's Using it: the library and configuration where the packages
    put them."""
    readme = open(os.path.join(SRC, "README.md")).read()
    using = readme.split("## Using it", 1)[-1].split("\n## ", 1)[0]
    block = using.split("```sh", 1)[-1].split("```", 1)[0]
    preload = re.findall(r"LD_PRELOAD[= ](\S+)", block)
    check(preload and all("./" + p.lstrip("/") in contents["libiotrace-client"] for p in preload),
          f"README's LD_PRELOAD {preload} is not where libiotrace-client puts the library")
    every = "".join(contents.values())
    for conf in re.findall(r"(/\S*/iotrace/\S+\.conf)", block):
        check("." + conf in every, f"README names {conf}, which no package installs")


def check_setup_block():
    """docs/install.md's setup runs on a host where the packages made the
    user: no useradd that fails when the user exists."""
    text = open(os.path.join(SRC, "docs/install.md")).read()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        # A command continued over lines (`||`, `&&`, `\`) is one.
        for cmd in re.sub(r"(\|\||&&|\\)\s*\n\s*", r"\1 ", block).splitlines():
            if re.match(r"\s*useradd\b", cmd):
                check(False, f"docs/install.md: '{cmd.strip()}' fails once a package made the user")


if __name__ == "__main__":
    main()
