#!/bin/bash
# shellcheck disable=SC2016 # sh -c scripts take their arguments as $1...
# Slurm on a cluster of hosts that are namespaces of one machine: a munged
# per host, slurmctld on the controller, slurmd on each node, and iotrace's
# TaskProlog (deploy/slurm/iotrace-taskprolog) preloading the client library
# into every task. cluster.sh calls it; it runs as well on any hosts that
# ENTER reaches, as long as each has a mount namespace of its own.
# Notes: deploy/cluster/SLURM-NOTES.md.
set -eu

usage() {
    cat <<'EOF'
usage: slurm.sh up   --dir DIR --enter ENTER --controller HOST=ADDR
                     --node HOST=ADDR [--node HOST=ADDR]... [--prefix PREFIX]
                     [--client LIB] [--cpus N] [--timeout SECONDS]
       slurm.sh start --dir DIR --enter ENTER HOST
       slurm.sh down --dir DIR --enter ENTER

  up     writes DIR/etc/slurm.conf and a munge key, starts a munged on every
         host, slurmctld on the controller, slurmd -N HOST on every node, and
         waits until sinfo shows every node idle (--timeout, default 60 s).
         On failure: the logs' tails, then what was started is stopped.
  start  starts HOST's part again (its munged, and slurmctld or slurmd) after
         the host lost its processes, as a rebooted node does; the
         controller then takes a node back (ReturnToService=2)
  down   stops every process up started (jobs are cancelled first; slurmd,
         slurmstepd, slurmctld, munged) and undoes its mounts in the hosts;
         safe to run twice; removes nothing (DIR keeps the logs; the next
         up keeps one generation as *.1).

  --dir DIR         everything lives here: DIR/etc/slurm.conf, DIR/munge.key,
                    DIR/HOST/{log,run,munge,munged,slurmd,slurmctld}
  --enter ENTER     a command prefix: "ENTER HOST CMD ARGS..." runs CMD on
                    HOST (e.g. "deploy/cluster.sh exec"); split at spaces
  --controller HOST=ADDR  the host of slurmctld (may also be a node)
  --node HOST=ADDR  a compute node: its name (slurmd -N) and address
  --prefix PREFIX   where Slurm and MUNGE are installed (default /usr:
                    PREFIX/sbin/slurmctld, PREFIX/bin/srun, ...)
  --client LIB      the client library the TaskProlog preloads (default: the
                    installed libiotrace-client.so); a job opts out with
                    IOTRACE_DISABLE=1 (sbatch/srun --export=ALL,IOTRACE_DISABLE=1)
  --cpus N          CPUs each node offers (default: the machine's, at least 4)
  --task-env DIR    DIR/HOST.env, lines NAME=value, set in every task on HOST
                    before iotrace's TaskProlog runs (cluster.sh: the host's
                    clock, libfaketime's settings; LD_PRELOAD_FIRST=LIB goes
                    first in LD_PRELOAD): a task's environment comes from
                    the srun or sbatch that started it, on another host

On each host, DIR/etc is bind-mounted over /etc/slurm (srun, sbatch, squeue,
sinfo find slurm.conf without SLURM_CONF) and DIR/HOST/munge over DIR/munge,
the socket directory slurm.conf names (AuthInfo=socket=...). Exit status: 0,
1 on failure, 2 on misuse.
EOF
}

die() {
    echo "slurm.sh: $*" >&2
    exit 1
}
misuse() {
    echo "slurm.sh: $*" >&2
    echo "(slurm.sh --help)" >&2
    exit 2
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
PROLOG_SRC=$ROOT/deploy/slurm/iotrace-taskprolog

[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h | --help) usage; exit 0 ;; esac
CMD=$1
shift
START_HOST=""
if [ "$CMD" = start ] && [ $# -gt 0 ]; then
    # The host is the last word: slurm.sh start --dir D --enter E HOST.
    START_HOST=${!#}
    set -- "${@:1:$(($# - 1))}"
fi
DIR="" ENTER="" CONTROLLER="" PREFIX=/usr CLIENT="" CPUS="" TIMEOUT=60 TASK_ENV=""
NODES=()
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --dir | --enter | --controller | --node | --prefix | --client | --cpus | --timeout | --task-env)
        [ $# -ge 2 ] || misuse "$1 needs a value" ;;
    *) misuse "unknown argument $1" ;;
    esac
    case $1 in
    --dir) DIR=$2 ;;
    --enter) ENTER=$2 ;;
    --controller) CONTROLLER=$2 ;;
    --node) NODES+=("$2") ;;
    --prefix) PREFIX=$2 ;;
    --client) CLIENT=$2 ;;
    --task-env) TASK_ENV=$2 ;;
    --cpus) CPUS=$2 ;;
    --timeout) TIMEOUT=$2 ;;
    esac
    shift 2
done
[ -n "$DIR" ] || misuse "--dir is needed"
[ -n "$ENTER" ] || misuse "--enter is needed"
case $DIR in /*) ;; *) DIR=$(pwd -P)/$DIR ;; esac
DIR=${DIR%/}
case $DIR in "" | / | /etc | /etc/* | /usr | /usr/* | /var | /tmp | /run | /root | /home) misuse "--dir $DIR: not a directory to fill" ;; esac
case $DIR in *[[:space:]]* | *,* | *=*) misuse "--dir: no spaces, commas or '=' (slurm.conf)" ;; esac
read -r -a ENTER_CMD <<<"$ENTER"
[ ${#ENTER_CMD[@]} -gt 0 ] || misuse "--enter is empty"

# The daemons get none of the caller's preload, job or Slurm settings; the
# mark tells down which processes are this cluster's (slurmd passes its
# environment on to slurmstepd).
unset LD_PRELOAD SLURM_CONF
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
MARK="IOTRACE_SLURM_DIR=$DIR"
CONF=$DIR/etc/slurm.conf

on() { # on HOST CMD...: CMD on HOST
    local h=$1
    shift
    "${ENTER_CMD[@]}" "$h" "$@"
}

hosts() { [ -f "$DIR/hosts.list" ] && awk '{print $1}' "$DIR/hosts.list"; }
nodes() { [ -f "$DIR/hosts.list" ] && awk '$3 ~ /node/ {print $1}' "$DIR/hosts.list"; }
controller() { awk '$3 ~ /controller/ {print $1; exit}' "$DIR/hosts.list"; }

tail_logs() {
    local f
    for f in "$DIR"/*/log/*.log "$DIR"/*/munged/munged.log; do
        [ -s "$f" ] || continue
        echo "----- $f -----" >&2
        tail -n 15 "$f" >&2
    done
}

fail_up() {
    # A host's start leaves the rest of the cluster's Slurm as it is.
    [ "$CMD" != start ] || die "start failed: $*"
    echo "slurm.sh: up failed: $*" >&2
    tail_logs
    echo "slurm.sh: stopping what was started" >&2
    do_down >/dev/null 2>&1 || true
    exit 1
}

# ------------------------------------------------------------------ up

check_host_spec() { # HOST=ADDR
    local h=${1%%=*} a=${1#*=}
    case $1 in *=*) ;; *) misuse "$1: HOST=ADDR" ;; esac
    case $h in "" | *[!A-Za-z0-9-]*) misuse "$1: a host name of letters, digits and '-'" ;; esac
    case $a in "" | *[!0-9.]*) misuse "$1: an IPv4 address" ;; esac
}

write_conf() {
    local ctl=$1 ctl_addr=$2 h a r
    {
        echo "# Written by deploy/cluster/slurm.sh up; regenerated at every up."
        echo "ClusterName=iotrace"
        echo "SlurmctldHost=$ctl($ctl_addr)"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        # Each host's munged listens here: DIR/HOST/munge bind-mounted in.
        echo "AuthInfo=socket=$DIR/munge/munge.socket.2"
        echo "SlurmctldPort=6817"
        echo "SlurmdPort=6818"
        echo "StateSaveLocation=$DIR/$ctl/slurmctld"
        echo "SlurmctldPidFile=$DIR/$ctl/run/slurmctld.pid"
        echo "SlurmctldLogFile=$DIR/$ctl/log/slurmctld.log"
        # %n: the node's name (slurmd -N), a directory per node.
        echo "SlurmdSpoolDir=$DIR/%n/slurmd"
        echo "SlurmdPidFile=$DIR/%n/run/slurmd.pid"
        echo "SlurmdLogFile=$DIR/%n/log/slurmd.log"
        echo "SlurmctldDebug=info"
        echo "SlurmdDebug=info"
        # No cgroups: the machine's hierarchy is shared by every node, and
        # proctrack/linuxproc follows a step's processes by their parents.
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "TaskProlog=$DIR/$PROLOG"
        echo "MpiDefault=pmi2"
        echo "ReturnToService=2"
        echo "SchedulerType=sched/backfill"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_CPU"
        # The nodes offer CPUs=$CPUS though slurmd counts fewer.
        echo "SlurmdParameters=config_overrides"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "JobCompType=jobcomp/none"
        echo "MailProg=/bin/true"
        echo "SlurmctldTimeout=30"
        echo "SlurmdTimeout=60"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        echo "MinJobAge=60"
        echo "Waittime=0"
        while read -r h a r; do
            case $r in *node*) echo "NodeName=$h NodeAddr=$a NodeHostname=$h CPUs=$CPUS State=UNKNOWN" ;; esac
        done <"$DIR/hosts.list"
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    } >"$CONF.new"
    mv "$CONF.new" "$CONF"
    # slurmd loads a cgroup plugin whatever ProctrackType and TaskPlugin
    # say, and its autodetection fails in a host made by "ip netns exec",
    # whose /sys is a sysfs of its own with nothing under /sys/fs/cgroup
    # ("No filesystem mounted on /sys/fs/cgroup", slurmd exits). Named,
    # the v1 plugin loads and, with the plugins above, is never used.
    {
        echo "# Written by deploy/cluster/slurm.sh up."
        echo "CgroupPlugin=cgroup/v1"
    } >"$DIR/etc/cgroup.conf"
}

# The TaskProlog with --task-env: the host's settings first, then iotrace's
# TaskProlog, whose LD_PRELOAD keeps LD_PRELOAD_FIRST (libfaketime) first.
write_task_env_prolog() {
    cat >"$DIR/taskprolog.new" <<EOF
#!/bin/sh
# Written by deploy/cluster/slurm.sh up (--task-env $TASK_ENV): HOST.env's
# settings, then iotrace's TaskProlog. A task's environment comes from the
# srun or sbatch that started it, maybe on another host: what belongs to
# this host (its clock) is set here.
f="$TASK_ENV/\$(hostname).env"
first=""
if [ -r "\$f" ]; then
    while IFS= read -r line; do
        case \$line in
        LD_PRELOAD_FIRST=*) first=\${line#*=} ;;
        [A-Za-z_]*=*) echo "export \$line" ;;
        esac
    done <"\$f"
fi
if [ -n "\$first" ]; then
    case ":\${LD_PRELOAD:-}:" in
    *":\$first:"*) ;;
    *) LD_PRELOAD=\$first\${LD_PRELOAD:+:\$LD_PRELOAD}; export LD_PRELOAD ;;
    esac
fi
out=\$("$DIR/iotrace-taskprolog")
echo "\$out"
# An opted-out job gets no preload from iotrace, but keeps the host's.
case \$out in *"export LD_PRELOAD="*) ;; *) [ -z "\$first" ] || echo "export LD_PRELOAD=\$LD_PRELOAD" ;; esac
exit 0
EOF
    chmod 0755 "$DIR/taskprolog.new"
    mv "$DIR/taskprolog.new" "$DIR/taskprolog"
}

# bind HOST SRC DST: SRC over DST in HOST's mount namespace (once).
bind() {
    local h=$1 src=$2 dst=$3
    on "$h" sh -c 'grep -q " $2 " /proc/self/mountinfo && umount "$2"; mount --bind "$1" "$2"' bind "$src" "$dst" ||
        fail_up "$h: mount --bind $src $dst"
}

start_munged() {
    local h=$1 d=$DIR/$1
    rm -f "$d/munge/munge.socket.2" "$d/munge/munge.socket.2.lock" "$d/munged/munged.pid"
    on "$h" env "$MARK" setpriv --reuid munge --regid munge --init-groups -- \
        "$PREFIX/sbin/munged" --socket="$DIR/munge/munge.socket.2" --key-file="$DIR/munge.key" \
        --pid-file="$d/munged/munged.pid" --log-file="$d/munged/munged.log" \
        --seed-file="$d/munged/munged.seed" \
        </dev/null >>"$d/log/munged.out" 2>&1 || fail_up "$h: munged did not start (DIR/$h/munged/munged.log)"
    # A credential made and decoded on the host: its socket is in place.
    on "$h" sh -c '"$1/bin/munge" -S "$2" -n | "$1/bin/unmunge" -S "$2" >/dev/null' munge \
        "$PREFIX" "$DIR/munge/munge.socket.2" || fail_up "$h: munge -n | unmunge failed"
}

# wait_pid SECONDS FILE: until FILE names a live process.
wait_pid() {
    local end=$((SECONDS + $1))
    until [ -s "$2" ] && live "$(cat "$2")"; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}

do_up() {
    local ctl ctl_addr spec h a i t0=$SECONDS
    [ -n "$CONTROLLER" ] || misuse "up: --controller HOST=ADDR is needed"
    [ ${#NODES[@]} -gt 0 ] || misuse "up: at least one --node HOST=ADDR"
    check_host_spec "$CONTROLLER"
    for spec in "${NODES[@]}"; do check_host_spec "$spec"; done
    case $TIMEOUT in "" | *[!0-9]*) misuse "--timeout: seconds" ;; esac
    [ -n "$CPUS" ] || { CPUS=$(nproc); [ "$CPUS" -ge 4 ] || CPUS=4; }
    case $CPUS in "" | 0 | *[!0-9]*) misuse "--cpus: a number" ;; esac
    [ "$(id -u)" -eq 0 ] || die "must run as root (mounts, daemons)"
    for f in sbin/munged bin/munge bin/unmunge sbin/slurmctld sbin/slurmd bin/sinfo bin/srun; do
        [ -x "$PREFIX/$f" ] || die "$PREFIX/$f missing (apt-get install --no-install-recommends slurm-wlm munge, or --prefix)"
    done
    id munge >/dev/null 2>&1 || die "no user munge (package munge)"
    [ -f "$PROLOG_SRC" ] || die "$PROLOG_SRC missing"
    if [ -n "$CLIENT" ]; then
        case $CLIENT in /*) ;; *) CLIENT=$(pwd -P)/$CLIENT ;; esac
        [ -r "$CLIENT" ] || die "--client $CLIENT: no such library (build first)"
    fi
    if [ -f "$DIR/hosts.list" ] && running_pids | grep -q .; then
        die "Slurm is up from $DIR (slurm.sh down first)"
    fi

    ctl=${CONTROLLER%%=*} ctl_addr=${CONTROLLER#*=}
    mkdir -p "$DIR"
    chmod 0755 "$DIR"
    {
        echo "$ctl $ctl_addr controller"
        for spec in "${NODES[@]}"; do echo "${spec%%=*} ${spec#*=} node"; done
    } | awk '{ if (!($1 in r)) { o[++n] = $1; a[$1] = $2 } else if (a[$1] != $2) bad = $1
                r[$1] = r[$1] (r[$1] ? "," : "") $3 }
             END { if (bad) { print "conflict " bad; exit 1 }
                   for (i = 1; i <= n; i++) print o[i], a[o[i]], r[o[i]] }' >"$DIR/hosts.list.new" ||
        misuse "$(tail -n1 "$DIR/hosts.list.new"): two addresses for one host"
    mv "$DIR/hosts.list.new" "$DIR/hosts.list"

    # Every host needs a mount namespace of its own, not the machine's: the
    # binds below are per host.
    local self ns seen=" "
    self=$(readlink /proc/self/ns/mnt)
    for h in $(hosts); do
        ns=$(on "$h" readlink /proc/self/ns/mnt) || die "--enter: '$ENTER $h readlink /proc/self/ns/mnt' failed"
        [ "$(on "$h" hostname)" = "$h" ] || echo "slurm.sh: warning: $h's hostname is $(on "$h" hostname)" >&2
        [ "$ns" != "$self" ] || die "$h shares this machine's mount namespace ($ns); each host needs its own"
        case $seen in *" $ns "*) die "$h shares its mount namespace with another host" ;; esac
        seen="$seen$ns "
    done

    # State from an earlier up goes; its logs become *.1.
    mkdir -p "$DIR/etc" "$DIR/munge"
    for h in $(hosts); do
        rm -rf "${DIR:?}/$h/slurmd" "${DIR:?}/$h/slurmctld" "${DIR:?}/$h/run"
        mkdir -p "$DIR/$h/log" "$DIR/$h/run" "$DIR/$h/munge" "$DIR/$h/munged"
        for f in "$DIR/$h"/log/*.log "$DIR/$h"/log/*.out "$DIR/$h/munged/munged.log"; do
            [ -f "$f" ] && mv -f "$f" "$f.1"
        done
        chown munge:munge "$DIR/$h/munge" "$DIR/$h/munged"
        chmod 0755 "$DIR/$h/munge"
        chmod 0700 "$DIR/$h/munged"
    done
    mkdir -p "$DIR/$ctl/slurmctld"
    for h in $(nodes); do mkdir -p "$DIR/$h/slurmd" && chmod 0755 "$DIR/$h/slurmd"; done

    rm -f "$DIR/munge.key"
    dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none || die "cannot write $DIR/munge.key"
    chown munge:munge "$DIR/munge.key"
    chmod 0400 "$DIR/munge.key"

    cp "$PROLOG_SRC" "$DIR/iotrace-taskprolog.new"
    chmod 0755 "$DIR/iotrace-taskprolog.new"
    mv "$DIR/iotrace-taskprolog.new" "$DIR/iotrace-taskprolog"
    PROLOG=iotrace-taskprolog
    if [ -n "$TASK_ENV" ]; then
        write_task_env_prolog
        PROLOG=taskprolog
    fi
    if [ -n "$CLIENT" ]; then
        echo "client=$CLIENT" >"$DIR/iotrace-taskprolog.conf"
    else
        rm -f "$DIR/iotrace-taskprolog.conf"
    fi
    write_conf "$ctl" "$ctl_addr"

    echo "slurm.sh: controller $ctl ($ctl_addr), nodes $(nodes | tr '\n' ' ')in $DIR"
    for h in $(hosts); do echo "$h $(on "$h" readlink /proc/self/ns/mnt)"; done >"$DIR/mntns"
    for h in $(hosts); do
        bind "$h" "$DIR/etc" /etc/slurm
        bind "$h" "$DIR/$h/munge" "$DIR/munge"
    done
    for h in $(hosts); do start_munged "$h"; done

    on "$ctl" env "$MARK" "$PREFIX/sbin/slurmctld" -f "$CONF" -i </dev/null >>"$DIR/$ctl/log/slurmctld.out" 2>&1 ||
        fail_up "$ctl: slurmctld did not start"
    wait_pid 10 "$DIR/$ctl/run/slurmctld.pid" || fail_up "$ctl: slurmctld did not start"
    for h in $(nodes); do
        on "$h" env "$MARK" "$PREFIX/sbin/slurmd" -f "$CONF" -N "$h" </dev/null >>"$DIR/$h/log/slurmd.out" 2>&1 ||
            fail_up "$h: slurmd did not start"
    done
    for h in $(nodes); do wait_pid 10 "$DIR/$h/run/slurmd.pid" || fail_up "$h: slurmd did not start"; done

    local end=$((SECONDS + TIMEOUT)) states want
    want=$(nodes | sort | awk '{printf "%s idle\n", $1}')
    while :; do
        states=$(on "$ctl" env SLURM_CONF="$CONF" "$PREFIX/bin/sinfo" -h -N -o '%N %T' 2>/dev/null | sort -u || true)
        [ "$states" = "$want" ] && break
        [ $SECONDS -lt $end ] || fail_up "not every node idle after ${TIMEOUT}s: $(echo "$states" | tr '\n' ' ')"
        sleep 0.5
    done
    echo "slurm.sh: up in $((SECONDS - t0))s: $(nodes | tr '\n' ' ')idle; try: $ENTER $ctl srun -N$(nodes | wc -l) hostname"
}

# start HOST: HOST's daemons again, with the files up wrote.
do_start() {
    local h=$1 roles
    [ -f "$DIR/hosts.list" ] || die "no Slurm in $DIR (slurm.sh up first)"
    roles=$(awk -v h="$h" '$1 == h {print $3}' "$DIR/hosts.list")
    [ -n "$roles" ] || misuse "start: $h is not one of $(hosts | tr '\n' ' ')"
    # A host that came back may have a mount namespace of its own again.
    bind "$h" "$DIR/etc" /etc/slurm
    bind "$h" "$DIR/$h/munge" "$DIR/munge"
    awk -v h="$h" -v ns="$(on "$h" readlink /proc/self/ns/mnt)" '$1 == h {$2 = ns} {print}' \
        "$DIR/mntns" >"$DIR/mntns.new" && mv "$DIR/mntns.new" "$DIR/mntns"
    start_munged "$h"
    case $roles in
    *controller*)
        rm -f "$DIR/$h/run/slurmctld.pid"
        on "$h" env "$MARK" "$PREFIX/sbin/slurmctld" -f "$CONF" </dev/null >>"$DIR/$h/log/slurmctld.out" 2>&1 ||
            die "$h: slurmctld did not start"
        wait_pid 10 "$DIR/$h/run/slurmctld.pid" || die "$h: slurmctld did not start"
        ;;
    esac
    case $roles in
    *node*)
        rm -f "$DIR/$h/run/slurmd.pid"
        on "$h" env "$MARK" "$PREFIX/sbin/slurmd" -f "$CONF" -N "$h" </dev/null >>"$DIR/$h/log/slurmd.out" 2>&1 ||
            die "$h: slurmd did not start"
        wait_pid 10 "$DIR/$h/run/slurmd.pid" || die "$h: slurmd did not start"
        ;;
    esac
    echo "slurm.sh: $h started ($roles)"
}

# ------------------------------------------------------------------ down

# The processes up started: munged, slurmctld and slurmd carry the mark in
# their environment; slurmstepd does not (slurmd starts it with an
# environment of its own, and its process title overwrites it), so it is
# known by its name and its mount namespace, one of the hosts' (DIR/mntns;
# none is the machine's, up checks).
running_pids() {
    local p st c ns=" "
    [ -f "$DIR/mntns" ] && ns=" $(awk '{print $2}' "$DIR/mntns" | tr '\n' ' ')"
    {
        # A zombie's environment reads empty.
        grep -lzxF "$MARK" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|'
        ps -e -o pid=,stat=,comm= | while read -r p st c; do
            [ "$c" = slurmstepd ] || continue
            case $st in Z* | X*) continue ;; esac
            case $ns in *" $(readlink "/proc/$p/ns/mnt" 2>/dev/null) "*) echo "$p" ;; esac
        done
    } | sort -n
    return 0
}

descendants() { # PIDS...: their descendants
    ps -e -o pid=,ppid= | awk -v roots=" $* " '
        { parent[$1] = $2; pids[n++] = $1 }
        END { do { more = 0
                for (i = 0; i < n; i++) { p = pids[i]
                    if (!(p in in_) && index(roots, " " parent[p] " ")) { in_[p] = 1; roots = roots p " "; more = 1; print p } }
            } while (more) }'
}

comm_of() { cat "/proc/$1/comm" 2>/dev/null || true; }

# live PID: PID runs (a zombie whose parent has not reaped it yet does not).
live() {
    local st
    st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# stop_pids SECONDS PIDS...: TERM, then KILL what is left after SECONDS.
stop_pids() {
    local wait=$1 p i left
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    for ((i = 0; i < wait * 10; i++)); do
        left=""
        for p in "$@"; do live "$p" && left="$left $p"; done
        [ -n "$left" ] || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086 # pids
    kill -KILL $left 2>/dev/null || true
}

do_down() {
    local ctl p steps="" daemons="" munged="" tasks h ns left
    if [ -f "$DIR/hosts.list" ] && ctl=$(controller) && [ -n "$ctl" ] &&
        [ -n "$(running_pids)" ] && [ -f "$DIR/$ctl/run/slurmctld.pid" ] &&
        live "$(cat "$DIR/$ctl/run/slurmctld.pid")"; then
        # Jobs end as Slurm ends them: their steps' tasks signalled and reaped.
        if on "$ctl" env SLURM_CONF="$CONF" "$PREFIX/bin/squeue" -h -o %i 2>/dev/null | grep -q .; then
            on "$ctl" env SLURM_CONF="$CONF" "$PREFIX/bin/scancel" --full --user=root >/dev/null 2>&1 || true
            for _ in $(seq 1 50); do
                on "$ctl" env SLURM_CONF="$CONF" "$PREFIX/bin/squeue" -h -t R,CG -o %i 2>/dev/null | grep -q . || break
                sleep 0.2
            done
        fi
    fi
    for p in $(running_pids); do
        case $(comm_of "$p") in
        slurmstepd) steps="$steps $p" ;;
        munged) munged="$munged $p" ;;
        *) daemons="$daemons $p" ;;
        esac
    done
    # shellcheck disable=SC2086 # pid lists
    {
        tasks=$(descendants $steps)
        # slurmstepd outlives a TERM while its tasks run: one wait for all.
        stop_pids 3 $daemons $steps $tasks
        stop_pids 3 $munged
    }
    # The mounts up made, in hosts that are still the ones it made them in.
    if [ -f "$DIR/mntns" ]; then
        while read -r h ns; do
            [ "$(on "$h" readlink /proc/self/ns/mnt 2>/dev/null)" = "$ns" ] || continue
            on "$h" sh -c 'for m in "$@"; do grep -q " $m " /proc/self/mountinfo && umount "$m"; done; true' \
                umount "$DIR/munge" /etc/slurm </dev/null 2>/dev/null || true
        done <"$DIR/mntns"
    fi
    rm -f "$DIR"/*/run/*.pid "$DIR"/*/munged/munged.pid 2>/dev/null || true
    left=$(running_pids)
    [ -z "$left" ] || die "down: still running: $left"
    echo "slurm.sh: down"
}

case $CMD in
up) do_up ;;
start)
    [ -n "$START_HOST" ] || misuse "start HOST"
    do_start "$START_HOST" ;;
down)
    if [ -n "$CONTROLLER$CLIENT$CPUS" ] || [ ${#NODES[@]} -gt 0 ]; then misuse "down takes --dir and --enter only"; fi
    do_down ;;
*) misuse "unknown command $CMD (up, start, down)" ;;
esac
