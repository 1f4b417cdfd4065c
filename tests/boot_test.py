#!/usr/bin/env python3
"""The packaged units booted under a real systemd, as an administrator runs them.

A Debian 12 root made with debootstrap (systemd as init, the packages'
dependencies, read from their Depends fields) gets the .debs of
deploy.packages installed with dpkg; the keys and configuration are set up
the way docs/install.md says; then `systemd-nspawn --boot` starts that root
with systemd as PID 1 on a private network.  A check unit in it
(boot-check.sh below) enables and starts both services with systemctl and
checks, with systemd's own tools, what the units promise: they run as
`iotrace`, the state and runtime directories are made with their modes, the
agent's socket is open to every user and a traced program run by an ordinary
user reaches the collector's store under that user's uid, the daemons log to
the journal, a killed agent is restarted, a job that ends while the agent
is stopped reaches the store through the drop box once it starts again,
`systemd-analyze security` of the running units stays at most 3.0, and a
stop leaves nothing running.  Then the
container powers itself off.

usage: boot_test.py DEB_DIR WORK_DIR"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures  # noqa: E402

DEBS, WORK = sys.argv[1:3]
PACKAGES = ["iotrace-agent", "iotrace-collector", "libiotrace-client"]
MIRROR = os.environ.get("IOTRACE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
MAX_EXPOSURE = 3.0

# Runs inside the booted container as a oneshot unit; every line it prints
# starting with "ok " or "FAIL " is a verdict, read back by the host.
CHECK = r"""#!/bin/sh
exec > /var/tmp/boot-check.log 2>&1
fail() { echo "FAIL $*"; }
ok() { echo "ok $*"; }
wait_for() {  # wait_for SECONDS COMMAND...: true once COMMAND succeeds
    n=$(($1 * 5)); shift
    while [ $n -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; n=$((n - 1)); done
    return 1
}
[ "$(cat /proc/1/comm)" = systemd ] && ok "PID 1 is systemd" || fail "PID 1 is $(cat /proc/1/comm)"
for u in iotrace-agent iotrace-collector; do
    [ "$(systemctl is-enabled $u)" = disabled ] && ok "$u not enabled by the package" \
        || fail "$u is $(systemctl is-enabled $u) after install"
done
systemctl enable --now iotrace-collector iotrace-agent || fail "systemctl enable --now"
for u in iotrace-collector iotrace-agent; do
    wait_for 20 systemctl is-active --quiet $u && ok "$u active" \
        || { fail "$u is $(systemctl is-active $u)"; systemctl status --no-pager $u; }
    pid=$(systemctl show -P MainPID $u)
    # Type=simple: active as soon as forked, so the uid may change a moment later.
    uid_of() { awk '/^Uid:/ {print $2}' /proc/$(systemctl show -P MainPID $1)/status 2>/dev/null; }
    wait_for 10 sh -c "[ \"\$(awk '/^Uid:/ {print \$2}' /proc/$pid/status)\" = $(id -u iotrace) ]" \
        && ok "$u runs as iotrace" || fail "$u pid $pid runs as uid '$(uid_of $u)'"
    e=$(systemd-analyze security $u 2>/dev/null | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
    echo "exposure $u $e"
done
wait_for 20 test -S /run/iotrace/agent.sock || fail "no /run/iotrace/agent.sock"
m=$(stat -c '%a %U' /run/iotrace/agent.sock); [ "$m" = "666 iotrace" ] && ok "agent.sock $m" || fail "agent.sock $m"
m=$(stat -c '%a %U' /var/lib/iotrace-agent); [ "$m" = "700 iotrace" ] && ok "agent state $m" || fail "agent state $m"
m=$(stat -c '%a %U' /var/lib/iotrace); [ "$m" = "700 iotrace" ] && ok "collector state $m" || fail "collector state $m"
wait_for 20 sh -c 'journalctl -b -u iotrace-agent | grep -q "collector welcomed us"' \
    && ok "agent logs to the journal; CURVE session with the collector open" \
    || { fail "the journal does not show the agent welcomed by the collector"; journalctl -b --no-pager -u iotrace-agent; }

useradd -m alice
lib=$(dpkg -L libiotrace-client | grep '/libiotrace-client.so$')
# split writes with write(2) into files it opens itself (cp would use
# copy_file_range and tee fwrite_unlocked, which the library does not follow).
runuser -u alice -- sh -c "cd /home/alice && env LD_PRELOAD=$lib IOTRACE_JOB_ID=bootjob IOTRACE_VERBOSE=1 \
    split -b 10000 /usr/share/common-licenses/GPL-3 part-"
cat /home/alice/part-* | cmp -s /usr/share/common-licenses/GPL-3 - && ok "traced split wrote its files" \
    || fail "traced split"
uid=$(id -u alice)
store=/var/lib/iotrace/store
wait_for 30 sh -c "iotrace-export --store $store --list-jobs | grep -q '^bootjob .*uid=$uid'" \
    && ok "alice's job reached the store under uid $uid" \
    || { fail "job not in the store"; iotrace-export --store $store --list-jobs; }
n=$(iotrace-export --store $store --job bootjob --jsonl - | grep '"uid":'$uid | grep -c '"func":"write"')
[ "$n" -gt 0 ] && ok "$n writes of alice's split recorded" || fail "no write of alice's split recorded"

before=$(systemctl show -P NRestarts iotrace-agent)
systemctl kill -s KILL iotrace-agent
wait_for 30 sh -c "[ \$(systemctl show -P NRestarts iotrace-agent) -gt $before ] && systemctl is-active --quiet iotrace-agent" \
    && ok "killed agent restarted (Restart=on-failure)" || fail "agent not restarted: $(systemctl is-active iotrace-agent)"
wait_for 30 sh -c '[ $(journalctl -b -u iotrace-agent | grep -c "collector welcomed us") -ge 2 ]' \
    && ok "restarted agent welcomed by the collector again" || fail "restarted agent did not reconnect"

# Stopped on purpose: the socket goes, the drop box stays (RuntimeDirectoryPreserve=yes);
# a job that ends meanwhile leaves its batches there, the next start stores them.
systemctl stop iotrace-agent
[ ! -S /run/iotrace/agent.sock ] && [ -d /run/iotrace/agent.sock.dropbox ] \
    && ok "stopped agent: socket removed, drop box kept" || fail "after stop: $(ls -la /run/iotrace)"
# (split closes stderr before it exits: the library's exit report cannot show.)
runuser -u alice -- sh -c "cd /home/alice && env LD_PRELOAD=$lib IOTRACE_JOB_ID=stoppedjob \
    split -b 10000 /usr/share/common-licenses/GPL-3 stopped-"
n=$(find /run/iotrace/agent.sock.dropbox -type f -user alice ! -name '.*' | wc -l)
[ "$n" -ge 1 ] && ok "a job run while the agent was stopped left $n batch(es) in the drop box" \
    || fail "drop box not used: $(ls -la /run/iotrace/agent.sock.dropbox)"
systemctl start iotrace-agent
wait_for 30 sh -c "iotrace-export --store $store --list-jobs | grep -q '^stoppedjob .*uid=$uid'" \
    && ok "the restarted agent stored it under uid $uid" \
    || { fail "stoppedjob not in the store"; iotrace-export --store $store --list-jobs; }
n=$(iotrace-export --store $store --job stoppedjob --jsonl - | grep -c '"func":"write"')
[ "$n" -gt 0 ] && ok "$n writes of the stopped-agent split recorded" || fail "no write of it recorded"
wait_for 10 sh -c '[ -z "$(ls /run/iotrace/agent.sock.dropbox)" ]' && ok "drop box emptied" \
    || fail "drop box still holds $(ls /run/iotrace/agent.sock.dropbox)"

systemctl stop iotrace-agent iotrace-collector
for u in iotrace-agent iotrace-collector; do
    s=$(systemctl is-active $u); [ "$s" = inactive ] && ok "$u stopped cleanly" || fail "$u is $s after stop"
done
journalctl -b --no-pager -u iotrace-agent -u iotrace-collector | grep -v ' info: ' | grep -iv 'started\|stopp\|deactivated\|consumed' \
    | sed 's/^/journal: /'
pgrep -u iotrace >/dev/null && fail "processes of iotrace left: $(pgrep -a -u iotrace)" || ok "nothing left running"
[ -S /run/iotrace/agent.sock ] && fail "socket left after stop" || ok "socket removed at stop"
echo done
"""

UNIT = """[Unit]
Description=iotrace boot check
After=multi-user.target
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/boot-check.sh
[Install]
WantedBy=multi-user.target
"""


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def depends(deb):
    """Package names of a .deb's Depends (first of each alternative, no versions), ours left out."""
    field = run(["dpkg-deb", "-f", deb, "Depends"]).stdout
    names = [re.split(r"[\s(]", alt.split("|")[0].strip())[0] for alt in field.split(",") if alt.strip()]
    return [n for n in names if n and not n.startswith(("iotrace", "libiotrace"))]


def base_root(debs):
    """A pristine Debian root with systemd and the packages' dependencies, cached by its package list."""
    include = sorted({"systemd", "systemd-sysv", "dbus", "procps", *[d for deb in debs for d in depends(deb)]})
    key = hashlib.sha256(" ".join(include + [MIRROR]).encode()).hexdigest()[:12]
    base = os.path.join(WORK, "base-" + key)
    if not os.path.exists(os.path.join(base, ".complete")):
        shutil.rmtree(base, ignore_errors=True)
        r = run(["debootstrap", "--variant=minbase", "--include=" + ",".join(include), "bookworm", base, MIRROR],
                timeout=1200)
        if r.returncode != 0:
            # No mirror reachable: the machine does not allow this test
            # (deploy.install covers the units without a systemd).
            print("skipped: debootstrap could not make a root from", MIRROR, r.stdout[-2000:], r.stderr[-2000:])
            shutil.rmtree(base, ignore_errors=True)
            sys.exit(77)
        open(os.path.join(base, ".complete"), "w").close()
    return base


def in_root(root, *cmd):
    return run(["systemd-nspawn", "-q", "--register=no", "--keep-unit", "-D", root, *cmd])


def boot(root, timeout=300):
    """Boots ROOT until the check unit powers it off; on a hang, stops the container rather than orphan it."""
    p = subprocess.Popen(["systemd-nspawn", "-q", "--register=no", "--keep-unit", "--private-network", "-D", root,
                          "--boot"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # nspawn halts the container on a first SIGTERM, ends it on a second.
        p.send_signal(signal.SIGTERM)
        time.sleep(2)
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        err += f"\n(the container did not power off within {timeout} s)"
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def main():
    if os.geteuid() != 0:
        print("skipped: debootstrap and systemd-nspawn need root")
        sys.exit(77)
    for tool in ("debootstrap", "systemd-nspawn"):
        if not shutil.which(tool):
            print(f"skipped: {tool} is not installed (deploy/install-deps.sh installs it)")
            sys.exit(77)
    debs = {}
    for f in os.listdir(DEBS):
        if f.endswith(".deb"):
            debs[run(["dpkg-deb", "-f", os.path.join(DEBS, f), "Package"]).stdout.strip()] = os.path.join(DEBS, f)
    missing = [p for p in PACKAGES if p not in debs]
    check(not missing, f"packages missing in {DEBS}: {missing} (deploy.packages builds them)")
    if failures:
        sys.exit(1)
    base = base_root([debs[p] for p in PACKAGES])
    r = in_root(base, "/bin/true")
    if r.returncode != 0:
        print("skipped: systemd-nspawn cannot start a container here:", r.stderr[-2000:])
        sys.exit(77)

    root = os.path.join(WORK, "root")
    shutil.rmtree(root, ignore_errors=True)
    r = run(["cp", "-a", base, root])
    check(r.returncode == 0, "copy of the base root: " + r.stderr)
    os.makedirs(os.path.join(root, "root/debs"), exist_ok=True)
    for p in PACKAGES:
        shutil.copy(debs[p], os.path.join(root, "root/debs"))
    r = in_root(root, "sh", "-c", "dpkg -i /root/debs/*.deb")
    check(r.returncode == 0, "dpkg -i in the root: " + r.stdout[-2000:] + r.stderr[-2000:])

    # docs/install.md's set-up, on one host: the keys, then the agent's config
    # pointed at the collector on this host (the packaged one names a remote one).
    setup = """set -e
runuser -u iotrace -- iotrace-collector --keygen /etc/iotrace/keys/collector
runuser -u iotrace -- iotrace-agent --keygen /etc/iotrace/keys/agent
install -d -o iotrace -g iotrace -m 0750 /etc/iotrace/keys/agents
cp /etc/iotrace/keys/agent.pub /etc/iotrace/keys/agents/node1.pub
sed -i 's|^# node = .*|node = node1|' /etc/iotrace/agent.conf
sed -i 's|^collector = .*|collector = tcp://127.0.0.1:5555|' /etc/iotrace/agent.conf
sed -i 's|^listen = tcp://0.0.0.0:5555|listen = tcp://127.0.0.1:5555|' /etc/iotrace/collector.conf
"""
    r = in_root(root, "sh", "-c", setup)
    check(r.returncode == 0, "key set-up: " + r.stdout[-2000:] + r.stderr[-2000:])
    with open(os.path.join(root, "usr/local/sbin/boot-check.sh"), "w") as f:
        f.write(CHECK)
    os.chmod(os.path.join(root, "usr/local/sbin/boot-check.sh"), 0o755)
    with open(os.path.join(root, "etc/systemd/system/boot-check.service"), "w") as f:
        f.write(UNIT)
    os.symlink("/etc/systemd/system/boot-check.service",
               os.path.join(root, "etc/systemd/system/multi-user.target.wants/boot-check.service"))
    if failures:
        sys.exit(1)

    r = boot(root)
    log_path = os.path.join(root, "var/tmp/boot-check.log")
    log = open(log_path).read() if os.path.exists(log_path) else ""
    check("done" in log.splitlines(), "the check did not finish; nspawn said:\n" + r.stdout[-3000:] + r.stderr[-2000:])
    for line in log.splitlines():
        if line.startswith("FAIL "):
            check(False, line[5:])
    oks = [line for line in log.splitlines() if line.startswith("ok ")]
    check(len(oks) >= 15, f"only {len(oks)} checks passed")
    for unit, exposure in re.findall(r"^exposure (\S+) (\S*)$", log, re.M):
        check(exposure != "" and float(exposure) <= MAX_EXPOSURE,
              f"{unit}: systemd-analyze security of the running unit says '{exposure}'")
    if failures:
        print(log)
        print("root kept in", root)
        sys.exit(1)
    print(log)
    shutil.rmtree(root)
    print(f"ok: both units booted under systemd in a container, {len(oks)} checks passed")


if __name__ == "__main__":
    main()
