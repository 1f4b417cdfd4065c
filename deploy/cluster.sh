#!/bin/bash
# A cluster on one machine: hosts as network namespaces (each with its own
# hostname, mount namespace, /dev/shm, /run/iotrace and optionally clock)
# on one bridge, running what a facility runs: a collector, an agent per
# node, a GlusterFS brick per storage host, a FUSE client per compute host,
# MPI ranks launched across the compute hosts. docs/cluster.md.
set -eu

usage() {
    cat <<'EOF'
usage: cluster.sh [--dir DIR] [--prefix NAME] [--build DIR] COMMAND [ARGS]

  up [--compute N] [--storage M] [--volume distribute|replicate|disperse]
     [--clock HOST=OFFSET[,DRIFT_PPM]]... [--mount DIR] [--clock-interval DUR]
     [--no-slurm]
                 builds the hosts and starts everything (default: 2 compute
                 hosts, 2 storage hosts, a replicate volume; disperse needs
                 3 storage hosts), mounted at /mnt/iotrace on every compute
                 host. OFFSET: +3s, -2s, +250ms; DRIFT_PPM: 50 or -20.
                 Slurm (slurmctld on the collector host, slurmd on each
                 compute host, iotrace's TaskProlog) unless --no-slurm.
  exec HOST CMD...            runs CMD on HOST (its namespaces, its clock)
  mpiexec [MPIEXEC-ARGS] PROG [ARGS]
                              runs PROG traced with MPICH's mpiexec from the
                              first compute host, ranks spread over all of them
  export ARGS...              iotrace-export ARGS on the collector host's store
  status                      hosts, addresses, clocks and processes
  link HOST down|up [PEER]    takes HOST's link to the bridge down or up; with
                              PEER, only the path between HOST and PEER (every
                              packet between them lost)
  disk collector full|free    fills the collector host's store (a 1 GiB file
                              system of its own) to the last byte, or frees it
  crash HOST                  kills every process of HOST (what is on its disk,
                              the agent's spool and the bricks, stays)
  start HOST                  starts HOST's services again after a crash
  clock HOST OFFSET[,DRIFT_PPM]
                              steps HOST's clock (every process sees it within 1 s)
  down                        removes everything up made: processes, mounts,
                              namespaces, files; safe to run twice

  --dir DIR      the cluster's files: each host's disk (DIR/hosts/HOST), logs,
                 keys (default $IOTRACE_CLUSTER_DIR or /var/tmp/iotrace-cluster)
  --prefix NAME  network namespaces are NAME-HOST, NAME-net the bridge's
                 (default $IOTRACE_CLUSTER_PREFIX or iotc)
  --build DIR    the build tree with the programs (default: build/ of this
                 checkout, or $IOTRACE_BUILD)
Hosts are collector, compute1..N, storage1..M; addresses 10.77.0.0/24 exist
inside the namespaces only. Exit status: 0, 1 on failure, 2 on misuse; exec
and mpiexec exit with the command's status.
EOF
}

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}
misuse() {
    echo "cluster.sh: $*" >&2
    echo "(cluster.sh --help)" >&2
    exit 2
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
DIR=${IOTRACE_CLUSTER_DIR:-/var/tmp/iotrace-cluster}
PREFIX=${IOTRACE_CLUSTER_PREFIX:-iotc}
BUILD=${IOTRACE_BUILD:-$ROOT/build}
SUBNET=10.77.0
COLLECTOR_PORT=5555
BRICK_PORT=49152
FAKETIME_LIB=""

while [ $# -gt 0 ]; do
    case $1 in
    --dir) [ $# -ge 2 ] || misuse "--dir needs a value"; DIR=$2; shift 2 ;;
    --prefix) [ $# -ge 2 ] || misuse "--prefix needs a value"; PREFIX=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || misuse "--build needs a value"; BUILD=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) misuse "unknown option $1" ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
CMD=$1
shift
case $PREFIX in *[!a-z0-9]* | "") misuse "--prefix: lower-case letters and digits" ;; esac
[ ${#PREFIX} -le 6 ] || misuse "--prefix: at most 6 characters (interface names are short)"
case $DIR in /*) ;; *) DIR=$(pwd -P)/$DIR ;; esac

AGENT=$BUILD/agent/iotrace-agent
COLLECTOR=$BUILD/collector/iotrace-collector
EXPORT=$BUILD/collector/iotrace-export
CLIENT=$BUILD/clientlib/libiotrace-client.so
XLATORS=$BUILD/serverhooks

# ---------------------------------------------------------------- hosts

hostdir() { echo "$DIR/hosts/$1"; }
role_of() {
    case $1 in
    collector) echo collector ;;
    compute[1-9] | compute[1-9][0-9]) echo compute ;;
    storage[1-9] | storage[1-9][0-9]) echo storage ;;
    *) return 1 ;;
    esac
}
addr_of() {
    case $1 in
    collector) echo "$SUBNET.2" ;;
    compute*) echo "$SUBNET.$((10 + ${1#compute}))" ;;
    storage*) echo "$SUBNET.$((100 + ${1#storage}))" ;;
    esac
}
hosts() { [ -f "$DIR/hosts.list" ] && cat "$DIR/hosts.list"; }
hosts_of() { for h in $(hosts); do [ "$(role_of "$h")" = "$1" ] && echo "$h"; done; return 0; }

holder_pid() {
    local f p
    f=$(hostdir "$1")/holder.pid
    [ -f "$f" ] || return 1
    p=$(cat "$f")
    # The holder is the process whose namespaces the host's commands enter;
    # a recycled pid would be in another network namespace.
    [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$(cat "${f%.pid}.netns" 2>/dev/null)" ] || return 1
    echo "$p"
}

# enter HOST CMD...: CMD in HOST's network, UTS and mount namespaces, with
# HOST's clock: libfaketime first in LD_PRELOAD (ahead of the client library,
# so that its clock readings are the host's) and the host's FAKETIME_*; a
# caller's own faketime settings (another host's, when Hydra's launcher is
# called from a rank host) are taken out first.
enter() {
    local h=$1 p pre="" e
    shift
    p=$(holder_pid "$h") || die "host $h is not up (cluster.sh up, or start $h after a crash)"
    local -a envs=(-u FAKETIME -u FAKETIME_TIMESTAMP_FILE -u FAKETIME_SHARED -u FAKETIME_CACHE_DURATION
        -u FAKETIME_DONT_FAKE_MONOTONIC)
    for e in $(echo "${LD_PRELOAD:-}" | tr ': ' '\n\n'); do
        case $e in *libfaketime*) ;; *) pre="$pre${pre:+:}$e" ;; esac
    done
    e=$(hostdir "$h")/clock.env
    if [ -f "$e" ]; then
        # shellcheck disable=SC1090 # written by up: FT_LIB, FT_SHARED
        . "$e"
        pre="$FT_LIB${pre:+:}$pre"
        envs+=("FAKETIME_TIMESTAMP_FILE=$(hostdir "$h")/clock" "FAKETIME_SHARED=$FT_SHARED"
            FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1)
    fi
    if [ -n "$pre" ]; then envs+=("LD_PRELOAD=$pre"); else envs+=(-u LD_PRELOAD); fi
    # The same working directory: the hosts see the machine's files.
    local wd=/
    [ -d "$PWD" ] && wd=$PWD
    # nsenter itself without the preload: a process with threads of its own
    # (the client library's sender) cannot join a mount namespace.
    env -u LD_PRELOAD nsenter -t "$p" -n -u -m --wd="$wd" -- env "${envs[@]}" "$@"
}

# spawn HOST NAME CMD...: a service of HOST in the background, as its own
# session, output in HOST's log/NAME.log, pid in run/NAME.pid.
spawn() {
    local h=$1 name=$2 d
    shift 2
    d=$(hostdir "$h")
    enter "$h" setsid "$@" </dev/null >>"$d/log/$name.log" 2>&1 &
    echo $! >"$d/run/$name.pid"
}

# As the user the packages' units run the services as (User=iotrace).
AS_IOTRACE=(setpriv --reuid iotrace --regid iotrace --init-groups --)

# alive HOST NAME: the service HOST's run/NAME.pid names still runs.
alive() { [ -f "$(hostdir "$1")/run/$2.pid" ] && kill -0 "$(cat "$(hostdir "$1")/run/$2.pid")" 2>/dev/null; }

# wait_service SECONDS HOST NAME CMD...: until CMD succeeds on HOST, as
# long as the service runs.
wait_service() {
    local t=$1 h=$2 name=$3 end
    shift 3
    end=$((SECONDS + t))
    until enter "$h" "$@" >/dev/null 2>&1; do
        alive "$h" "$name" || return 1
        [ $SECONDS -lt $end ] || return 1
        sleep 0.1
    done
}

wait_for() { # wait_for SECONDS WHAT CMD...
    local t=$1 what=$2 end
    shift 2
    end=$((SECONDS + t))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.1
    done
}

tail_logs() {
    local f
    for f in "$@"; do
        [ -f "$f" ] || continue
        echo "----- $f -----" >&2
        tail -n 20 "$f" >&2
    done
}

fail_up() {
    echo "cluster.sh: up failed: $*" >&2
    tail_logs "$DIR"/hosts/*/log/*.log
    echo "cluster.sh: removing what was made" >&2
    do_down >/dev/null 2>&1 || true
    exit 1
}

# The parts of a host that hold state live on its disk, DIR/hosts/HOST;
# /run/iotrace and /dev/shm are the host's own tmpfs, gone with it.
make_host() {
    local h=$1 d a p
    d=$(hostdir "$h")
    a=$(addr_of "$h")
    mkdir -p "$d/log" "$d/run" "$d/keys"
    ip netns add "$PREFIX-$h"
    ip link add "v-$h" netns "$PREFIX-net" type veth peer name eth0 netns "$PREFIX-$h"
    ip -n "$PREFIX-net" link set "v-$h" master br0 up
    ip -n "$PREFIX-$h" link set lo up
    ip -n "$PREFIX-$h" addr add "$a/24" dev eth0
    ip -n "$PREFIX-$h" link set eth0 up
    # What every Slurm task on the host gets (slurm.sh --task-env): the
    # host's clock (start_holder).
    mkdir -p "$DIR/task-env"
    : >"$DIR/task-env/$h.env"
    start_holder "$h"
}

# The holder: the host's first process, whose UTS and mount namespaces every
# command of the host enters. With a clock of its own it is libfaketime's
# wrapper, whose shared memory gives every process of the host one start
# time, so that a drift is one line for the whole host, not one per process.
start_holder() {
    local h=$1 d p
    d=$(hostdir "$h")
    rm -f "$d/ready" "$d/clock.env" "$d/holder.netns"
    local run=(sleep infinity)
    [ -f "$d/clock" ] && run=(faketime -f +0s sleep infinity)
    ip netns exec "$PREFIX-$h" unshare --uts --mount --propagation private \
        sh -c 'h=$1 d=$2 etc=$3; shift 3
            hostname "$h"
            mount -t tmpfs -o mode=1777,size=256m tmpfs /dev/shm
            mount -t tmpfs -o mode=0755,size=64m,uid=$(id -u iotrace),gid=$(id -g iotrace) tmpfs /run/iotrace
            mount --bind "$etc" /etc/hosts
            readlink /proc/self/ns/net >"$d/holder.netns"
            touch "$d/ready"
            exec "$@"' holder "$h" "$d" "$DIR/etc-hosts" "${run[@]}" </dev/null >>"$d/log/holder.log" 2>&1 &
    p=$!
    echo "$p" >"$d/holder.pid"
    wait_for 10 holder test -f "$d/ready" || fail_up "host $h did not start (log/holder.log)"
    if [ -f "$d/clock" ]; then
        echo "FT_LIB=$FAKETIME_LIB" >"$d/clock.env"
        echo "FT_SHARED='/faketime_sem_$p /faketime_shm_$p'" >>"$d/clock.env"
        wait_for 10 clock enter "$h" test -e "/dev/shm/faketime_shm_$p" ||
            fail_up "host $h: libfaketime's shared clock did not appear"
        date -u +%s.%N >"$d/clock.t0"
        # For Slurm's tasks (slurm.sh --task-env), whose environment comes
        # from the srun or sbatch that started them, maybe on another host.
        { echo "LD_PRELOAD_FIRST=$FAKETIME_LIB"
          echo "FAKETIME_TIMESTAMP_FILE=$d/clock"
          echo "FAKETIME_SHARED=/faketime_sem_$p /faketime_shm_$p"
          echo "FAKETIME_CACHE_DURATION=1"
          echo "FAKETIME_DONT_FAKE_MONOTONIC=1"; } >>"$DIR/task-env/$h.env"
    fi
}

# clock_spec OFFSET[,DRIFT_PPM] -> libfaketime's "+3s x1.00005"
clock_spec() {
    local off=${1%%,*} ppm="" ns
    case $1 in *,*) ppm=${1#*,} ;; esac
    case $off in
    [+-]*ms) ns=$(awk -v v="${off%ms}" 'BEGIN { printf "%.0f", v * 1e6 }') ;;
    [+-]*s) ns=$(awk -v v="${off%s}" 'BEGIN { printf "%.0f", v * 1e9 }') ;;
    *) misuse "clock offset $off: +3s, -2s or +250ms" ;;
    esac
    case $ppm in "" | [0-9]* | -[0-9]*) ;; *) misuse "clock drift $ppm: ppm, such as 50 or -20" ;; esac
    awk -v ns="$ns" -v ppm="${ppm:-0}" 'BEGIN {
        printf "%+.6fs", ns / 1e9
        if (ppm != 0) printf " x%.9f", 1 + ppm / 1e6
        printf "\n" }'
}

# ---------------------------------------------------------------- services

start_collector() {
    local d
    d=$(hostdir collector)
    mount_store
    spawn collector collector "${AS_IOTRACE[@]}" "$COLLECTOR" --config "$d/collector.conf"
    wait_service 30 collector collector sh -c "ss -Hltn 'sport = :$COLLECTOR_PORT' | grep -q ." ||
        fail_up "the collector is not listening (log/collector.log)"
}

start_agent() {
    local h=$1 d
    d=$(hostdir "$h")
    spawn "$h" agent "${AS_IOTRACE[@]}" "$AGENT" --config "$d/agent.conf"
    wait_service 30 "$h" agent test -S /run/iotrace/agent.sock ||
        fail_up "$h: the agent made no socket (log/agent.log)"
}

# --post-op-delay 0: the compute hosts' clients write the same files, and
# with AFR's 1 s (glusterd's default) each waits for the other's eager lock:
# mpiio_mix took 16 s instead of 1.2 (docs/cluster.md).
volume_args() {
    local t addrs="" s
    t=$(cat "$DIR/volume")
    for s in $(hosts_of storage); do addrs="$addrs${addrs:+,}$(addr_of "$s")"; done
    case $t in replicate) t=replica ;; esac
    echo "--type $t --bricks $(hosts_of storage | wc -l) --brick-hosts $addrs --allow $SUBNET.* \
--base-port $BRICK_PORT --xlator-dir $XLATORS --name iotrace --post-op-delay 0"
}

start_brick() {
    local h=$1 d i
    d=$(hostdir "$h")
    i=$((${h#storage} - 1))
    # shellcheck disable=SC2046 # volume_args is words on purpose
    enter "$h" sh "$HERE/gluster/volume.sh" start $(volume_args) --dir "$d/gluster" --only "brick:$i" \
        >>"$d/log/volume.log" 2>&1 || fail_up "$h: brick $i did not start (log/volume.log)"
}

start_client() {
    local h=$1 d
    d=$(hostdir "$h")
    # shellcheck disable=SC2046
    enter "$h" sh "$HERE/gluster/volume.sh" start $(volume_args) --dir "$d/gluster" --only client \
        --mount "$(cat "$DIR/mount")" >>"$d/log/volume.log" 2>&1 ||
        fail_up "$h: the volume did not mount (log/volume.log)"
}

# Slurm as a facility runs it (deploy/cluster/slurm.sh): slurmctld on the
# collector host, slurmd on every compute host, a munged on each, and
# iotrace's TaskProlog tracing every task of every job. Its files are in
# DIR/slurm; each host enters through this script.
SLURM_SH=$HERE/cluster/slurm.sh
slurm_enter() { echo "$HERE/cluster.sh --dir $DIR --prefix $PREFIX --build $BUILD exec"; }

start_slurm() {
    local -a nodes=()
    local h
    for h in $(hosts_of compute); do nodes+=(--node "$h=$(addr_of "$h")"); done
    "$SLURM_SH" up --dir "$DIR/slurm" --enter "$(slurm_enter)" \
        --controller "collector=$(addr_of collector)" "${nodes[@]}" --client "$CLIENT" \
        --task-env "$DIR/task-env" \
        >>"$DIR/slurm.log" 2>&1 || { cat "$DIR/slurm.log" >&2; fail_up "Slurm did not start ($DIR/slurm.log)"; }
}

start_host() {
    local h=$1
    case $(role_of "$h") in
    collector) start_collector ;;
    compute) start_agent "$h"; start_client "$h" ;;
    storage) start_agent "$h"; start_brick "$h" ;;
    esac
    # After a crash: the host's part of Slurm too.
    if [ -f "$DIR/slurm.on" ] && [ "$(role_of "$h")" != storage ]; then
        "$SLURM_SH" start --dir "$DIR/slurm" --enter "$(slurm_enter)" "$h" >>"$DIR/slurm.log" 2>&1 ||
            die "$h: Slurm did not start again ($DIR/slurm.log)"
    fi
}

write_configs() {
    local h d c
    c=$(hostdir collector)
    mkdir -p "$c/keys/agents"
    cat >"$c/collector.conf" <<EOF
# Written by cluster.sh up; as deploy/config/collector.conf, with this
# cluster's paths (docs/cluster.md).
listen = tcp://$(addr_of collector):$COLLECTOR_PORT
curve-key = $c/keys/collector
curve-clients = $c/keys/agents
store = $c/store
http = 127.0.0.1:8080
log-level = info
job-idle = 10000
producer-idle = 2000
analysis-yield = 0
EOF
    "${AS_IOTRACE[@]}" true 2>/dev/null || die "cannot run as user iotrace (setpriv)"
    chown -R iotrace:iotrace "$c/keys"
    "${AS_IOTRACE[@]}" "$COLLECTOR" --keygen "$c/keys/collector" >/dev/null
    for h in $(hosts_of compute) $(hosts_of storage); do
        d=$(hostdir "$h")
        mkdir -p "$d/state"
        chown iotrace:iotrace "$d/keys" "$d/state"
        chmod 0700 "$d/state"
        "${AS_IOTRACE[@]}" "$AGENT" --keygen "$d/keys/agent" >/dev/null
        # The key speaks for this node only (docs/transport.md).
        cp "$d/keys/agent.pub" "$c/keys/agents/$h.pub"
        cp "$c/keys/collector.pub" "$d/keys/collector.pub"
        cat >"$d/agent.conf" <<EOF
# Written by cluster.sh up; as deploy/config/agent.conf, with this host's paths.
collector = tcp://collector:$COLLECTOR_PORT
curve-key = $d/keys/agent
collector-key = $d/keys/collector.pub
listen = ipc:///run/iotrace/agent.sock
state-dir = $d/state
clock-interval = $CLOCK_INTERVAL
log-level = info
EOF
    done
    chown -R iotrace:iotrace "$c/keys" "$DIR"/hosts/*/keys
}

# ---------------------------------------------------------------- commands

do_up() {
    local ncompute=2 nstorage=2 volume=replicate mnt=/mnt/iotrace h spec
    local -a clocks=()
    CLOCK_INTERVAL=2s
    local slurm=1
    while [ $# -gt 0 ]; do
        [ "$1" = --no-slurm ] && { slurm=0; shift; continue; }
        case $1 in -*) [ $# -ge 2 ] || misuse "$1 needs a value" ;; esac
        case $1 in
        --compute) ncompute=$2 ;;
        --storage) nstorage=$2 ;;
        --volume) volume=$2 ;;
        --clock) clocks+=("$2") ;;
        --mount) mnt=$2 ;;
        --clock-interval) CLOCK_INTERVAL=$2 ;;
        *) misuse "up: unknown argument $1" ;;
        esac
        shift 2
    done
    case $ncompute in [1-9] | [1-6][0-9]) ;; *) misuse "--compute: 1 to 69" ;; esac
    case $nstorage in [1-9] | [1-9][0-9]) ;; *) misuse "--storage: 1 to 99" ;; esac
    case $volume in
    distribute) ;;
    replicate) [ $((nstorage % 2)) -eq 0 ] || misuse "a replicate volume needs an even number of storage hosts" ;;
    disperse) [ $((nstorage % 3)) -eq 0 ] || misuse "a disperse volume needs 3 (or 6, 9...) storage hosts" ;;
    *) misuse "--volume: distribute, replicate or disperse" ;;
    esac
    case $mnt in /*) ;; *) misuse "--mount: an absolute path" ;; esac

    [ "$(id -u)" -eq 0 ] || die "must run as root (namespaces, mounts, bricks)"
    for c in ip nsenter unshare setpriv glusterfsd glusterfs mpiexec ss; do
        command -v $c >/dev/null 2>&1 || die "$c not found (./deploy/install-deps.sh)"
    done
    if [ $slurm -eq 1 ]; then
        for c in slurmctld slurmd srun munged; do
            PATH=$PATH:/usr/sbin command -v $c >/dev/null 2>&1 ||
                die "$c not found: Slurm needs packages slurm-wlm and munge (./deploy/install-deps.sh), or up --no-slurm"
        done
    fi
    [ -c /dev/fuse ] || die "/dev/fuse missing (modprobe fuse)"
    for f in "$AGENT" "$COLLECTOR" "$EXPORT" "$CLIENT" "$XLATORS/iotrace-client.so"; do
        [ -e "$f" ] || die "$f missing: build first (./deploy/build.sh $BUILD) or pass --build"
    done
    if [ ${#clocks[@]} -gt 0 ]; then
        command -v faketime >/dev/null 2>&1 || die "faketime not found (packages faketime, libfaketime)"
        FAKETIME_LIB=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n1)
        [ -n "$FAKETIME_LIB" ] || die "libfaketime.so.1 not found (package libfaketime)"
    fi
    if [ -d "$DIR" ] && [ -f "$DIR/hosts.list" ]; then
        for h in $(hosts); do
            holder_pid "$h" >/dev/null && die "a cluster is up from $DIR (cluster.sh down first)"
        done
        do_down >/dev/null 2>&1 || true
    fi
    ip netns list 2>/dev/null | grep -q "^$PREFIX-" &&
        die "network namespaces $PREFIX-* exist from another cluster (cluster.sh --prefix $PREFIX down)"
    if ! id iotrace >/dev/null 2>&1; then
        # What the packages' postinst makes (docs/install.md).
        useradd --system --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin iotrace ||
            die "cannot create the user iotrace"
    fi

    mkdir -p "$DIR/hosts"
    chmod 0755 "$DIR" "$DIR/hosts"
    : >"$DIR/made"
    echo "$volume" >"$DIR/volume"
    echo "$mnt" >"$DIR/mount"
    { echo collector
      for ((i = 1; i <= ncompute; i++)); do echo "compute$i"; done
      for ((i = 1; i <= nstorage; i++)); do echo "storage$i"; done; } >"$DIR/hosts.list"
    { echo "127.0.0.1 localhost"
      for h in $(hosts); do echo "$(addr_of "$h") $h"; done; } >"$DIR/etc-hosts"
    for h in $(hosts); do mkdir -p "$(hostdir "$h")"; done
    for spec in "${clocks[@]}"; do
        h=${spec%%=*}
        grep -qx "$h" "$DIR/hosts.list" || misuse "--clock $spec: no host $h"
        [ "$h" != collector ] || misuse "--clock: the collector's clock is the reference"
        clock_spec "${spec#*=}" >"$(hostdir "$h")/clock"
        echo "${spec#*=}" >"$(hostdir "$h")/clock.set"
    done
    # Mount points on the machine for the hosts' own mounts; removed by down
    # if up made them.
    for m in /run/iotrace "$mnt"; do
        [ -d "$m" ] || { mkdir -p "$m" && echo "$m" >>"$DIR/made"; }
    done
    echo "cluster.sh: $ncompute compute, $nstorage storage hosts, $volume volume, in $DIR"

    ip netns add "$PREFIX-net" || fail_up "ip netns add $PREFIX-net"
    ip -n "$PREFIX-net" link add br0 type bridge
    ip -n "$PREFIX-net" link set br0 up
    for h in $(hosts); do make_host "$h" || fail_up "host $h"; done
    write_configs || fail_up "configuration"
    start_collector
    for h in $(hosts_of storage); do start_agent "$h"; done
    for h in $(hosts_of compute); do start_agent "$h"; done
    for h in $(hosts_of storage); do start_brick "$h"; done
    for h in $(hosts_of compute); do start_client "$h"; done
    if [ $slurm -eq 1 ]; then
        start_slurm
        touch "$DIR/slurm.on"
        echo "cluster.sh: Slurm: slurmctld on collector, slurmd on $(hosts_of compute | tr '\n' ' ')(cluster.sh exec compute1 srun -N$ncompute ...)"
    fi
    echo "cluster.sh: up; volume $volume on $(hosts_of storage | tr '\n' ' ')mounted at $mnt on $(hosts_of compute | tr '\n' ' ')"
    echo "cluster.sh: dashboard: cluster.sh exec collector curl http://127.0.0.1:8080/  (docs/cluster.md)"
}

host_pids() { ip netns pids "$PREFIX-$1" 2>/dev/null || true; }

kill_host() { # kill_host HOST [keep-holder]
    local h=$1 keep=${2:-} holder p i
    holder=$(holder_pid "$h" 2>/dev/null) || holder=""
    for sig in TERM KILL; do
        for p in $(host_pids "$h"); do
            [ -n "$keep" ] && [ "$p" = "$holder" ] && continue
            # The holder's own children (libfaketime's sleep) go with it.
            [ -n "$keep" ] && [ -n "$holder" ] && [ "$(ps -o ppid= -p "$p" | tr -d ' ')" = "$holder" ] && continue
            kill -"$sig" "$p" 2>/dev/null || true
        done
        for ((i = 0; i < 50; i++)); do
            local left=0
            for p in $(host_pids "$h"); do
                [ -n "$keep" ] && [ "$p" = "$holder" ] && continue
                [ -n "$keep" ] && [ -n "$holder" ] && [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$holder" ] && continue
                left=1
            done
            [ $left -eq 0 ] && return 0
            [ "$sig" = KILL ] || [ -n "$keep" ] || break
            sleep 0.1
        done
    done
}

# cut_path HOST PEER down|up: HOST's route to PEER becomes a blackhole:
# what HOST sends to PEER is discarded without a word back, as on a broken
# path (new connections fail at once; this kernel has no tc drop action).
# Both directions are cut with a call each way.
cut_path() {
    local h=$1 peer=$2 how=$3
    ip -n "$PREFIX-$h" route del blackhole "$(addr_of "$peer")/32" 2>/dev/null || true
    [ "$how" = down ] || return 0
    ip -n "$PREFIX-$h" route add blackhole "$(addr_of "$peer")/32" || die "$h: cannot cut the path to $peer"
}

# The collector's store is a file system of its own (a tmpfs in the
# collector host's mount namespace, the host's "disk": a crash keeps it), so
# that it can be filled without filling the machine's.
STORE_SIZE=1g
mount_store() {
    local d
    d=$(hostdir collector)
    mkdir -p "$d/store"
    enter collector sh -c "grep -q ' $d/store ' /proc/mounts ||
        mount -t tmpfs -o size=$STORE_SIZE,mode=0750,uid=$(id -u iotrace),gid=$(id -g iotrace) store '$d/store'" ||
        fail_up "cannot mount the collector's store"
}

# disk HOST full|free: HOST's state file system (the collector's store)
# filled to its last byte by one file, or that file removed.
do_disk() {
    local h=$1 how=$2 dir
    # The other hosts' disks are the machine's: filling one would fill it.
    [ "$(role_of "$h")" = collector ] || die "disk: only the collector host's store is a file system of its own"
    dir=$(hostdir collector)/store
    if [ "$how" = full ]; then
        # dd ends with ENOSPC: that is the point.
        enter "$h" sh -c "dd if=/dev/zero of='$dir/.cluster-fill' bs=1M 2>/dev/null; sync; df -h '$dir' | tail -n1"
    else
        enter "$h" rm -f "$dir/.cluster-fill"
    fi
}

do_crash() {
    local h=$1 d m
    role_of "$h" >/dev/null || misuse "no host $h"
    holder_pid "$h" >/dev/null || die "host $h is not up"
    d=$(hostdir "$h")
    # Every process at once, as a power cut would: no TERM first.
    for p in $(host_pids "$h"); do
        [ "$p" = "$(holder_pid "$h")" ] && continue
        [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$(holder_pid "$h")" ] && continue
        kill -KILL "$p" 2>/dev/null || true
    done
    kill_host "$h" keep
    m=$(cat "$DIR/mount")
    enter "$h" sh -c "grep -q ' $m ' /proc/mounts && umount -l '$m'" 2>/dev/null || true
    # A power cut also empties the tmpfs: /run/iotrace and /dev/shm.
    enter "$h" sh -c 'rm -rf /run/iotrace/* /dev/shm/iotrace* 2>/dev/null' || true
    rm -f "$d"/run/*.pid "$d"/gluster/run/*.pid
    echo "cluster.sh: $h crashed: its processes are gone, its disk ($d) stays"
}

do_down() {
    local h m
    if [ -f "$DIR/hosts.list" ]; then
        for h in $(hosts); do kill_host "$h"; done
    fi
    # Also namespaces whose files are gone (a removed DIR, a failed up).
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX-" || true); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    done
    sleep 0.2
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX-" || true); do
        ip netns del "$ns" 2>/dev/null || echo "cluster.sh: cannot remove namespace $ns" >&2
    done
    if [ -f "$DIR/made" ]; then
        while read -r m; do rmdir "$m" 2>/dev/null || true; done <"$DIR/made"
    fi
    if [ -d "$DIR" ]; then
        case $DIR in / | /var | /var/tmp | /tmp | /root | /home) die "refusing to remove $DIR" ;; esac
        [ -f "$DIR/hosts.list" ] || [ -z "$(ls -A "$DIR")" ] || [ -d "$DIR/hosts" ] ||
            die "$DIR does not look like a cluster's directory; not removing it"
        rm -rf "$DIR"
    fi
    echo "cluster.sh: down"
}

do_status() {
    local h p c
    [ -f "$DIR/hosts.list" ] || { echo "no cluster in $DIR"; return 1; }
    echo "cluster in $DIR: $(cat "$DIR/volume") volume mounted at $(cat "$DIR/mount"); namespaces $PREFIX-*"
    for h in $(hosts); do
        c=$(cat "$(hostdir "$h")/clock.set" 2>/dev/null || echo "machine's")
        if p=$(holder_pid "$h"); then
            link=$(ip -n "$PREFIX-net" -br link show "v-$h" 2>/dev/null | awk '{print $2}')
            printf '%-10s %-9s %-12s clock %-12s link %s\n' "$h" "$(role_of "$h")" "$(addr_of "$h")" "$c" "$link"
            for q in $(host_pids "$h"); do
                ps -o pid=,user=,args= -p "$q" 2>/dev/null | cut -c1-110 | sed 's/^/    /'
            done
        else
            printf '%-10s %-9s %-12s down\n' "$h" "$(role_of "$h")" "$(addr_of "$h")"
        fi
    done
}

do_mpiexec() {
    local first hostlist
    [ $# -ge 1 ] || misuse "mpiexec: a program to run"
    first=$(hosts_of compute | head -n1)
    [ -n "$first" ] || die "no cluster in $DIR (cluster.sh up)"
    hostlist=$(hosts_of compute | tr '\n' ',' | sed 's/,$//')
    # Hydra starts one proxy per host through the launcher, which enters the
    # host; -genvnone leaves each rank the environment of its own host's
    # proxy: its clock ahead of the client library in LD_PRELOAD (the
    # launcher runs under mpiexec's preload), and the IOTRACE_* variables
    # travel explicitly.
    local -a genv=()
    for v in $(env | sed -n 's/^\(IOTRACE_[A-Z_]*\)=.*/\1/p'); do genv+=(-genv "$v" "${!v}"); done
    # The launcher is this script again, called with no options of its own:
    # the cluster it enters travels in the environment.
    export IOTRACE_CLUSTER_DIR=$DIR IOTRACE_CLUSTER_PREFIX=$PREFIX IOTRACE_BUILD=$BUILD
    LD_PRELOAD="$CLIENT" enter "$first" mpiexec -launcher rsh -launcher-exec "$HERE/cluster.sh" \
        -hosts "$hostlist" -genvnone ${genv[@]+"${genv[@]}"} "$@"
}

case $CMD in
up) do_up "$@" ;;
down) [ $# -eq 0 ] || misuse "down takes no arguments"; do_down ;;
status) do_status ;;
exec)
    [ $# -ge 2 ] || misuse "exec HOST CMD..."
    role_of "$1" >/dev/null || misuse "no host $1 (collector, computeN, storageN)"
    enter "$@" ;;
mpiexec) do_mpiexec "$@" ;;
export)
    enter collector "$EXPORT" --store "$(hostdir collector)/store" "$@" ;;
link)
    [ $# -eq 2 ] || [ $# -eq 3 ] || misuse "link HOST down|up [PEER]"
    case $2 in down | up) ;; *) misuse "link HOST down|up [PEER]" ;; esac
    holder_pid "$1" >/dev/null || die "host $1 is not up"
    if [ $# -eq 2 ]; then
        ip -n "$PREFIX-net" link set "v-$1" "$2"
    else
        holder_pid "$3" >/dev/null || die "host $3 is not up"
        cut_path "$1" "$3" "$2"
        cut_path "$3" "$1" "$2"
    fi ;;
disk)
    [ $# -eq 2 ] || misuse "disk HOST full|free"
    case $2 in full | free) ;; *) misuse "disk HOST full|free" ;; esac
    holder_pid "$1" >/dev/null || die "host $1 is not up"
    do_disk "$1" "$2" ;;
crash) [ $# -eq 1 ] || misuse "crash HOST"; do_crash "$1" ;;
start)
    [ $# -eq 1 ] || misuse "start HOST"
    holder_pid "$1" >/dev/null || die "host $1 is not up"
    start_host "$1" ;;
clock)
    [ $# -eq 2 ] || misuse "clock HOST OFFSET[,DRIFT_PPM]"
    [ -f "$(hostdir "$1")/clock" ] || die "$1 runs on the machine's clock (up --clock $1=... gives it one)"
    clock_spec "$2" >"$(hostdir "$1")/clock.new"
    mv "$(hostdir "$1")/clock.new" "$(hostdir "$1")/clock"
    echo "$2" >"$(hostdir "$1")/clock.set" ;;
# Hydra's rsh launcher: cluster.sh HOST COMMAND-LINE (its -launcher-exec);
# as rsh does, the words are joined into one line for a shell on the host.
collector | compute[0-9]* | storage[0-9]*)
    enter "$CMD" sh -c "$*" ;;
*) misuse "unknown command $CMD" ;;
esac
