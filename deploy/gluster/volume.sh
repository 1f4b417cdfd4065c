#!/bin/sh
# Starts and stops a local GlusterFS volume without glusterd: N bricks as
# `glusterfsd -f brick.vol` processes on 127.0.0.1 and a FUSE client
# `glusterfs -f client.vol MOUNTPOINT`, from the volfile templates next to
# this script. See docs/gluster.md.
set -eu

usage() {
    cat <<'EOF'
usage: volume.sh start --type distribute|replica|disperse --dir WORKDIR --mount MNT
                       [--bricks N] [--name NAME] [--xlator-dir DIR]
                       [--no-client-hook] [--client-hook-at bricks|top] [--no-server-hook]
                       [--agent ENDPOINT] [--registry NAME] [--base-port PORT]
                       [--direct-io on|off] [--post-op-delay SEC] [--log-level LEVEL] [--hook-log-level LEVEL]
                       [--timeout SEC] [--fresh]
                       [--brick-hosts ADDR,ADDR,...] [--allow PATTERN] [--only brick:I|client]
       volume.sh stop --dir WORKDIR
       volume.sh status --dir WORKDIR

start  creates WORKDIR/{bricks,vol,log,run}, starts the bricks, mounts the
       volume on MNT and returns once a probe file can be written and read
       through the mount (exit 1 with the logs' tails otherwise, after
       cleaning up).
         --bricks N       distribute: N >= 1 (default 2); replica: a multiple
                          of 2 (default 2; > 2 distributes over replica pairs);
                          disperse: a multiple of 3 (default 3; 2+1 sets)
         --xlator-dir DIR where iotrace-client.so / iotrace-server.so are
                          (default: GlusterFS's translator dir, debug/)
         --no-client-hook / --no-server-hook   leave a translator out
         --client-hook-at bricks (default): one iotrace-client above each
                          protocol/client, below DHT/AFR/EC, so requests those
                          make on their own (disperse's read-modify-write
                          reads) are tagged too; top: one at the top of the
                          client graph, which sees only the application's
         --agent, --registry   translator options (default: the bricks' and
                          client's IOTRACE_AGENT / IOTRACE_REGISTRY)
         --base-port PORT first brick port to try (default 49400); bricks use
                          the next free ones on 127.0.0.1
         --direct-io on   (default) every read and write goes to GlusterFS as
                          the application issued it (no kernel page cache)
         --post-op-delay SEC   replica: how long AFR keeps a write's eager
                          lock and changelog open for the next one (default 1,
                          glusterd's); a second client writing the same file
                          waits that long for the lock
         --log-level L    of the bricks and the client (default INFO)
         --hook-log-level L   of the iotrace translators alone; DEBUG makes
                          iotrace-server log every disk operation it records
         --fresh          wipe existing brick directories first
         --brick-hosts A,B,...  brick I listens on (and the client reaches
                          it at) the I-th address, on port --base-port + I,
                          instead of 127.0.0.1 (a cluster: docs/cluster.md)
         --allow PATTERN  client addresses each brick accepts (default
                          127.0.0.1; GlusterFS's auth.addr syntax, 10.77.0.*)
         --only brick:I   start brick I alone; --only client: the FUSE
                          client alone (its bricks run elsewhere); the
                          volfiles are the same on every host
stop   unmounts MNT and ends the client and brick processes of WORKDIR, also
       after a partial start. Logs and brick data stay.
EOF
}

die() {
    echo "volume.sh: $*" >&2
    exit 1
}

HERE=$(cd "$(dirname "$0")" && pwd -P)
TEMPLATES=$HERE/templates

# ---------------------------------------------------------------- helpers

# fill TEMPLATE KEY=VALUE...: prints the template with @KEY@ replaced by
# VALUE; a line holding a @KEY@ marker whose VALUE is empty is dropped.
fill() {
    tpl=$TEMPLATES/$1
    shift
    [ -f "$tpl" ] || die "missing template $tpl"
    script=""
    for kv in "$@"; do
        k=${kv%%=*}
        v=${kv#*=}
        if [ -z "$v" ]; then
            script="$script
/@$k@/d"
        else
            v=$(printf '%s' "$v" | sed 's/[|&\\]/\\&/g')
            script="$script
s|@$k@|$v|g"
        fi
    done
    sed "$script" "$tpl"
}

# GlusterFS's translator directory: where storage/posix.so is.
gluster_xlator_dir() {
    if [ -n "${GLUSTER_XLATOR_DIR:-}" ]; then
        echo "$GLUSTER_XLATOR_DIR"
        return
    fi
    for d in /usr/lib/*/glusterfs/*/xlator /usr/lib64/glusterfs/*/xlator /usr/lib/glusterfs/*/xlator; do
        if [ -f "$d/storage/posix.so" ]; then
            (cd "$d" && pwd -P)
            return
        fi
    done
    die "GlusterFS translator directory not found (is glusterfs-server installed?)"
}

# xlator_type DIR NAME: the volfile `type` that loads DIR/NAME.so. GlusterFS
# dlopen()s "<translator dir>/<type>.so", so a directory elsewhere is reached
# by climbing from the translator dir up to / first.
xlator_type() {
    xl=$(gluster_xlator_dir)
    dir=$(cd "$1" && pwd -P)
    if [ "$dir" = "$xl/debug" ]; then
        echo "debug/$2"
        return
    fi
    up=""
    rest=$xl
    while [ -n "$rest" ] && [ "$rest" != "/" ]; do
        up="../$up"
        rest=${rest%/*}
    done
    echo "${up}${dir#/}/$2"
}

# Any TCP socket on the port, not only listening ones: brick ports lie in
# the kernel's ephemeral range (32768-60999 by default), so an outgoing
# connection of another program can hold one, and the brick's bind fails.
port_in_use() {
    command -v ss >/dev/null 2>&1 || return 1
    [ -n "$(ss -Htan "sport = :$1" 2>/dev/null)" ]
}

is_mounted() {
    # /proc/mounts escapes spaces as \040; our mount points have none.
    awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts
}

# proc_ours PID: true if PID is alive and its command line names our volfiles
# (guards against a recycled pid).
proc_ours() {
    [ -r "/proc/$1/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$WORKDIR/vol/"
}

end_process() {
    pid=$1
    proc_ours "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while proc_ours "$pid" && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if proc_ours "$pid"; then
        echo "volume.sh: pid $pid ignored SIGTERM, sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
}

show_logs() {
    for f in "$@"; do
        [ -f "$f" ] || continue
        echo "----- last lines of $f (errors/warnings first) -----" >&2
        grep -E '\] [EWC] \[' "$f" | grep -v -e ulimit -e "open fd to 64k" -e "file descriptors to 64k" | tail -n 5 >&2 || true
        tail -n 15 "$f" >&2
    done
}

# ---------------------------------------------------------------- stop

do_stop() {
    [ -d "$WORKDIR" ] || die "no such directory $WORKDIR"
    mnt=""
    [ -f "$WORKDIR/state" ] && mnt=$(sed -n 's/^mount=//p' "$WORKDIR/state")
    if [ -n "$mnt" ] && is_mounted "$mnt"; then
        umount "$mnt" 2>/dev/null || umount -l "$mnt" ||
            echo "volume.sh: cannot unmount $mnt" >&2
    fi
    # Client first (it talks to the bricks), then the bricks.
    for pf in "$WORKDIR"/run/client.pid "$WORKDIR"/run/brick*.pid; do
        [ -f "$pf" ] || continue
        end_process "$(cat "$pf")"
        rm -f "$pf"
    done
    # Backstop: a process that died before writing its pid file cannot be
    # running, but one that wrote it late could be. Look for our volfiles.
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = "$$" ] && continue
        proc_ours "$pid" && end_process "$pid"
    done
    if [ -n "$mnt" ] && is_mounted "$mnt"; then
        umount -l "$mnt" 2>/dev/null || true
    fi
    if [ -f "$WORKDIR/state" ]; then sed -i 's/^running=.*/running=no/' "$WORKDIR/state"; fi
    return 0
}

# ---------------------------------------------------------------- start

start_failed() {
    echo "volume.sh: start failed: $*" >&2
    show_logs "$WORKDIR"/log/*.log
    echo "volume.sh: stopping what was started; logs stay in $WORKDIR/log" >&2
    do_stop
    exit 1
}

do_start() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (bricks store trusted.* xattrs, the client mounts FUSE)"
    for b in glusterfsd glusterfs; do
        command -v $b >/dev/null 2>&1 || die "$b not found (install glusterfs-server glusterfs-client)"
    done
    [ -c /dev/fuse ] || die "/dev/fuse missing (modprobe fuse)"
    [ -n "$TYPE" ] || die "--type is required"
    case $ONLY in brick:*) ;; *) [ -n "$MNT" ] || die "--mount is required" ;; esac

    case $TYPE in
    distribute)
        : "${NBRICKS:=2}"
        [ "$NBRICKS" -ge 1 ] || die "distribute needs at least 1 brick"
        GROUP=1 ;;
    replica)
        : "${NBRICKS:=2}"
        GROUP=2 ;;
    disperse)
        : "${NBRICKS:=3}"
        GROUP=3 ;;
    *) die "unknown --type $TYPE (distribute, replica or disperse)" ;;
    esac
    if [ "$NBRICKS" -le 0 ] || [ $((NBRICKS % GROUP)) -ne 0 ]; then
        die "$TYPE needs a multiple of $GROUP bricks, not $NBRICKS"
    fi

    if [ "$CLIENT_HOOK" = yes ] || [ "$SERVER_HOOK" = yes ]; then
        [ -n "$XLATOR_DIR" ] || XLATOR_DIR=$(gluster_xlator_dir)/debug
        for r in client server; do
            if [ "$r" = client ]; then want=$CLIENT_HOOK; else want=$SERVER_HOOK; fi
            if [ "$want" = yes ] && [ ! -f "$XLATOR_DIR/iotrace-$r.so" ]; then
                die "$XLATOR_DIR/iotrace-$r.so not found (build it, pass --xlator-dir, or --no-$r-hook)"
            fi
        done
    fi

    mkdir -p "$WORKDIR"
    WORKDIR=$(cd "$WORKDIR" && pwd -P)
    for pf in "$WORKDIR"/run/*.pid; do
        if [ -f "$pf" ] && proc_ours "$(cat "$pf")"; then
            die "a volume is already running from $WORKDIR (volume.sh stop --dir $WORKDIR)"
        fi
    done
    if [ -n "$MNT" ]; then
        case $MNT in /*) ;; *) MNT=$(pwd -P)/$MNT ;; esac
        MNT=$(printf '%s' "$MNT" | sed 's|/*$||')
        if is_mounted "$MNT"; then
            die "$MNT is already a mount point (a stale one? umount -l $MNT)"
        fi
        mkdir -p "$MNT"
        MNT=$(cd "$MNT" && pwd -P)
        if is_mounted "$MNT"; then die "$MNT is already a mount point"; fi
    fi
    if [ -n "$BRICK_HOSTS" ] &&
        [ "$(echo "$BRICK_HOSTS" | tr ',' '\n' | grep -c .)" -ne "$NBRICKS" ]; then
        die "--brick-hosts names $(echo "$BRICK_HOSTS" | tr ',' '\n' | grep -c .) addresses for $NBRICKS bricks"
    fi

    if [ "$FRESH" = yes ]; then rm -rf "$WORKDIR/bricks"; fi
    if [ -f "$WORKDIR/state" ] && [ -d "$WORKDIR/bricks" ]; then
        old=$(sed -n 's/^layout=//p' "$WORKDIR/state")
        [ -z "$old" ] || [ "$old" = "$TYPE/$NBRICKS" ] ||
            die "bricks in $WORKDIR hold a $old volume; use --fresh to wipe them"
    fi
    rm -rf "$WORKDIR/vol" "$WORKDIR/run"
    mkdir -p "$WORKDIR/bricks" "$WORKDIR/vol" "$WORKDIR/log" "$WORKDIR/run"
    rm -f "$WORKDIR"/log/*.log

    # State first, so that stop cleans up after a partial start.
    cat >"$WORKDIR/state" <<EOF
running=yes
name=$NAME
layout=$TYPE/$NBRICKS
mount=$MNT
EOF

    # --- volfiles
    port=$BASE_PORT
    i=0
    clients="" # protocol/client translators
    subs=""    # what the cluster translators sit on: those, or hooks above them
    : >"$WORKDIR/vol/client.vol"
    while [ $i -lt "$NBRICKS" ]; do
        # On hosts of their own, every host writes the same volfiles: the
        # ports cannot depend on what happens to be free where they are made.
        if [ -n "$BRICK_HOSTS" ]; then
            addr=$(echo "$BRICK_HOSTS" | cut -d, -f$((i + 1)))
            port=$((BASE_PORT + i))
        else
            addr=127.0.0.1
            while port_in_use "$port"; do port=$((port + 1)); done
        fi
        b=$NAME-brick-$i
        dir=$WORKDIR/bricks/b$i
        mkdir -p "$dir"
        vol=$WORKDIR/vol/brick-$i.vol
        fill brick-posix.vol.in NAME="$b-posix" BRICK="$b" DIR="$dir" >"$vol"
        below=$b-posix
        if [ "$SERVER_HOOK" = yes ]; then
            fill iotrace-hook.vol.in NAME="$b-iotrace" ROLE=iotrace-server \
                TYPE="$(xlator_type "$XLATOR_DIR" iotrace-server)" \
                AGENT="$AGENT" REGISTRY="$REGISTRY" HOOK_LOG_LEVEL="$HOOK_LOG_LEVEL" CHILD="$below" >>"$vol"
            below=$b-iotrace
        fi
        fill brick-server.vol.in NAME="$b" CHILD="$below" PORT="$port" ADDR="$addr" ALLOW="$ALLOW" >>"$vol"
        echo "brick$i=$port $dir" >>"$WORKDIR/state"

        fill client-brick.vol.in NAME="$NAME-client-$i" PORT="$port" ADDR="$addr" REMOTE="$b" \
            >>"$WORKDIR/vol/client.vol"
        clients="$clients $NAME-client-$i"
        if [ "$CLIENT_HOOK" = yes ] && [ "$CLIENT_HOOK_AT" = bricks ]; then
            fill iotrace-hook.vol.in NAME="$NAME-client-$i-iotrace" ROLE=iotrace-client \
                TYPE="$(xlator_type "$XLATOR_DIR" iotrace-client)" \
                AGENT="$AGENT" REGISTRY="$REGISTRY" HOOK_LOG_LEVEL="$HOOK_LOG_LEVEL" CHILD="$NAME-client-$i" \
                >>"$WORKDIR/vol/client.vol"
            subs="$subs $NAME-client-$i-iotrace"
        else
            subs="$subs $NAME-client-$i"
        fi
        port=$((port + 1))
        i=$((i + 1))
    done

    # Cluster translators: one AFR/EC set per GROUP clients, DHT over sets.
    sets=""
    if [ "$GROUP" -eq 1 ]; then
        sets=$subs
    else
        # shellcheck disable=SC2086 # names without blanks, split on purpose
        set -- $subs
        s=0
        while [ $# -gt 0 ]; do
            members=""
            g=0
            while [ $g -lt "$GROUP" ]; do
                members="$members $1"
                shift
                g=$((g + 1))
            done
            members=${members# }
            if [ "$TYPE" = replica ]; then
                fill cluster-replicate.vol.in NAME="$NAME-replicate-$s" CHILDREN="$members" \
                    CHILDREN_COMMA="$(echo "$members" | sed 's/-iotrace//g' | tr ' ' ',')" \
                    POST_OP_DELAY="$POST_OP_DELAY" >>"$WORKDIR/vol/client.vol"
                sets="$sets $NAME-replicate-$s"
            else
                fill cluster-disperse.vol.in NAME="$NAME-disperse-$s" CHILDREN="$members" \
                    REDUNDANCY=1 >>"$WORKDIR/vol/client.vol"
                sets="$sets $NAME-disperse-$s"
            fi
            s=$((s + 1))
        done
    fi
    # shellcheck disable=SC2086
    set -- $sets
    if [ $# -gt 1 ] || [ "$TYPE" = distribute ]; then
        fill cluster-distribute.vol.in NAME="$NAME-dht" CHILDREN="$*" >>"$WORKDIR/vol/client.vol"
        top=$NAME-dht
    else
        top=$1
    fi
    if [ "$CLIENT_HOOK" = yes ] && [ "$CLIENT_HOOK_AT" = top ]; then
        fill iotrace-hook.vol.in NAME="$NAME" ROLE=iotrace-client \
            TYPE="$(xlator_type "$XLATOR_DIR" iotrace-client)" \
            AGENT="$AGENT" REGISTRY="$REGISTRY" HOOK_LOG_LEVEL="$HOOK_LOG_LEVEL" CHILD="$top" >>"$WORKDIR/vol/client.vol"
    fi

    # --- bricks
    i=0
    while [ $i -lt "$NBRICKS" ]; do
        if [ -n "$ONLY" ] && [ "$ONLY" != "brick:$i" ]; then i=$((i + 1)); continue; fi
        glusterfsd -f "$WORKDIR/vol/brick-$i.vol" --volfile-id "$NAME-brick-$i" \
            -l "$WORKDIR/log/brick-$i.log" -L "$LOG_LEVEL" -p "$WORKDIR/run/brick$i.pid" ||
            start_failed "glusterfsd for brick $i exited with $?"
        i=$((i + 1))
    done
    deadline=$(($(date +%s) + TIMEOUT))
    i=0
    while [ $i -lt "$NBRICKS" ]; do
        if [ -n "$ONLY" ] && [ "$ONLY" != "brick:$i" ]; then i=$((i + 1)); continue; fi
        port=$(sed -n "s/^brick$i=\([0-9]*\) .*/\1/p" "$WORKDIR/state")
        until grep -q "listening on port ($port)" "$WORKDIR/log/brick-$i.log" 2>/dev/null; do
            pf=$WORKDIR/run/brick$i.pid
            if [ -f "$pf" ] && ! proc_ours "$(cat "$pf")"; then
                start_failed "brick $i (port $port) died"
            fi
            [ "$(date +%s)" -lt "$deadline" ] || start_failed "brick $i not listening on $port after ${TIMEOUT}s"
            sleep 0.1
        done
        i=$((i + 1))
    done

    if [ -n "$ONLY" ] && [ "$ONLY" != client ]; then
        echo "volume.sh: brick ${ONLY#brick:} of $TYPE volume $NAME listening under $WORKDIR/bricks"
        return 0
    fi

    # --- client
    glusterfs -f "$WORKDIR/vol/client.vol" --volfile-id "$NAME" \
        -l "$WORKDIR/log/client.log" -L "$LOG_LEVEL" -p "$WORKDIR/run/client.pid" \
        --direct-io-mode="$( [ "$DIRECT_IO" = on ] && echo enable || echo disable)" "$MNT" ||
        start_failed "glusterfs (FUSE client) exited with $?"
    # Usable = every brick connected (else AFR/EC would start out degraded)
    # and a probe file written and read back through the mount.
    for c in $clients; do
        until grep -qF "attached to remote volume [{conn-name=$c}" "$WORKDIR/log/client.log" 2>/dev/null; do
            [ "$(date +%s)" -lt "$deadline" ] || start_failed "$c did not connect to its brick within ${TIMEOUT}s"
            sleep 0.1
        done
    done
    probe=$MNT/.iotrace-volume-probe.$$
    until is_mounted "$MNT" && echo ok >"$probe" 2>/dev/null && [ "$(cat "$probe" 2>/dev/null)" = ok ]; do
        [ "$(date +%s)" -lt "$deadline" ] || start_failed "$MNT not usable within ${TIMEOUT}s"
        sleep 0.2
    done
    rm -f "$probe"
    echo "volume.sh: $TYPE volume $NAME ($NBRICKS bricks under $WORKDIR/bricks) mounted on $MNT"
}

do_status() {
    [ -f "$WORKDIR/state" ] || die "no volume state in $WORKDIR"
    cat "$WORKDIR/state"
    for pf in "$WORKDIR"/run/*.pid; do
        [ -f "$pf" ] || continue
        pid=$(cat "$pf")
        if proc_ours "$pid"; then s=alive; else s=gone; fi
        echo "$(basename "$pf" .pid): pid $pid $s"
    done
    mnt=$(sed -n 's/^mount=//p' "$WORKDIR/state")
    if is_mounted "$mnt"; then echo "mounted: yes"; else echo "mounted: no"; fi
}

# ---------------------------------------------------------------- main

[ $# -ge 1 ] || { usage >&2; exit 2; }
CMD=$1
shift
# The command first: --help (or an unknown command) must not be answered
# with what start, stop and status require.
case $CMD in
start | stop | status) ;;
-h | --help) usage; exit 0 ;;
*) usage >&2; echo "volume.sh: unknown command $CMD" >&2; exit 2 ;;
esac
TYPE="" NBRICKS="" WORKDIR="" MNT="" NAME=iotrace XLATOR_DIR="" AGENT="" REGISTRY=""
CLIENT_HOOK=yes CLIENT_HOOK_AT=bricks SERVER_HOOK=yes BASE_PORT=49400 DIRECT_IO=on LOG_LEVEL=INFO HOOK_LOG_LEVEL="" TIMEOUT=30 FRESH=no
POST_OP_DELAY=1
BRICK_HOSTS="" ALLOW=127.0.0.1 ONLY=""
while [ $# -gt 0 ]; do
    case $1 in
    --no-* | --fresh | -h | --help) ;;
    -*) [ $# -ge 2 ] || die "$1 needs a value" ;;
    esac
    case $1 in
    --type) TYPE=$2; shift 2 ;;
    --bricks) NBRICKS=$2; shift 2 ;;
    --dir) WORKDIR=$2; shift 2 ;;
    --mount) MNT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --xlator-dir) XLATOR_DIR=$2; shift 2 ;;
    --agent) AGENT=$2; shift 2 ;;
    --registry) REGISTRY=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --direct-io) DIRECT_IO=$2; shift 2 ;;
    --post-op-delay) POST_OP_DELAY=$2; shift 2 ;;
    --log-level) LOG_LEVEL=$2; shift 2 ;;
    --hook-log-level) HOOK_LOG_LEVEL=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --client-hook-at) CLIENT_HOOK_AT=$2; shift 2 ;;
    --no-client-hook) CLIENT_HOOK=no; shift ;;
    --no-server-hook) SERVER_HOOK=no; shift ;;
    --fresh) FRESH=yes; shift ;;
    --brick-hosts) BRICK_HOSTS=$2; shift 2 ;;
    --allow) ALLOW=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument $1" ;;
    esac
done
[ -n "$WORKDIR" ] || die "--dir is required"
case $DIRECT_IO in on | off) ;; *) die "--direct-io takes on or off" ;; esac
case $POST_OP_DELAY in '' | *[!0-9]*) die "--post-op-delay takes whole seconds" ;; esac
case $CLIENT_HOOK_AT in top | bricks) ;; *) die "--client-hook-at takes top or bricks" ;; esac
case $HOOK_LOG_LEVEL in "" | TRACE | DEBUG | INFO | WARNING | ERROR | CRITICAL | NONE) ;;
*) die "--hook-log-level takes TRACE, DEBUG, INFO, WARNING, ERROR, CRITICAL or NONE" ;;
esac
case $NAME in *[!A-Za-z0-9_-]* | "") die "--name: letters, digits, - and _ only" ;; esac
case $ONLY in "" | client | brick:[0-9] | brick:[0-9][0-9]) ;; *) die "--only takes brick:I or client" ;; esac
case $ALLOW in *[!0-9A-Za-z.*:,_-]* | "") die "--allow: an address pattern such as 10.77.0.*" ;; esac

case $CMD in
start) do_start ;;
stop)
    WORKDIR=$(cd "$WORKDIR" 2>/dev/null && pwd -P) || die "no such directory"
    do_stop ;;
status)
    WORKDIR=$(cd "$WORKDIR" 2>/dev/null && pwd -P) || die "no such directory"
    do_status ;;
esac
