#!/bin/bash
# Integration tests of iotrace-agent: the real agent between the synthetic
# producer (ipc, temporary directory) and the test collector (tcp, loopback,
# random port).
#
#   agent-test.sh CASE AGENT PRODUCER TEST_COLLECTOR
#
# The test collector appends one line per event to $T/record (HELLO,
# STORED, DUPLICATE, REJECTED) and reads it back when restarted, so the file
# is the ground truth for "arrived exactly once".
set -u
CASE=$1 AGENT=$2 PRODUCER=$3 COLLECTOR=$4

T=$(mktemp -d /tmp/iotrace-agent-test.XXXXXX)
SOCK="ipc://$T/run/agent.sock"
REC=$T/record
APID= CPID=

cleanup() {
    [ -n "$APID" ] && kill -KILL "$APID" 2>/dev/null
    [ -n "$CPID" ] && kill -KILL "$CPID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "FAIL ($CASE): $*"
    for f in "$T"/*.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }
    done
    [ -f "$REC" ] && { echo "--- record (last lines)"; tail -10 "$REC"; }
    exit 1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)

start_collector() {
    "$COLLECTOR" --listen "tcp://127.0.0.1:$PORT" --record "$REC" "$@" >>"$T/collector.log" 2>&1 &
    CPID=$!
}

start_agent() {
    "$AGENT" --collector "tcp://127.0.0.1:$PORT" --listen "$SOCK" --node testnode \
        --stats-interval 1s "$@" >>"$T/agent.log" 2>&1 &
    APID=$!
}

# Sends SIGTERM and waits; an agent still running after 20 s is killed and
# fails the test.  Sets AGENT_RC and AGENT_SECONDS.
stop_agent() {
    local t0=$(date +%s.%N)
    kill -TERM "$APID"
    local deadline=$((SECONDS + 20))
    while kill -0 "$APID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
        sleep 0.05
    done
    kill -0 "$APID" 2>/dev/null && fail "agent did not stop within 20 s of SIGTERM"
    wait "$APID"
    AGENT_RC=$?
    AGENT_SECONDS=$(echo "$(date +%s.%N) - $t0" | bc)
    APID=
}

stop_collector() {
    kill -TERM "$CPID" 2>/dev/null
    wait "$CPID" 2>/dev/null
    CPID=
}

# wait_for SECONDS DESCRIPTION COMMAND...
wait_for() {
    local limit=$1 what=$2
    shift 2
    local deadline=$((SECONDS + limit))
    until "$@"; do
        [ $SECONDS -ge $deadline ] && fail "timed out waiting for $what"
        sleep 0.05
    done
}

stored_count() { cat "$REC" 2>/dev/null | grep -c '^STORED'; }
has_stored() { [ "$(stored_count)" -ge "$1" ]; }
has_line() { grep -q "$1" "$2" 2>/dev/null; }
not_running() { ! kill -0 "$1" 2>/dev/null; }

# The value of one counter in the agent's last stats line.
final_stat() {
    grep 'stats:' "$T/agent.log" | tail -1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}

expect_stat() {
    local v
    v=$(final_stat "$1")
    [ "$v" = "$2" ] || fail "agent stat $1 is '$v', expected $2"
}

# run_producer NAME ARGS...: runs in the foreground, output in $T/NAME.out.
run_producer() {
    local name=$1
    shift
    "$PRODUCER" --agent "$SOCK" --node testnode "$@" >"$T/$name.out" 2>>"$T/producer.log" ||
        fail "producer $name failed"
}

# The key the agent files a producer's batches under: the producer's own,
# and the user the ipc socket says sent them.
producer_key() { echo "$(sed -n 's/^key=\([^ ]*\) .*/\1/p' "$T/$1.out")/u$(id -u)"; }

# Every seq 0..N-1 of a producer stored exactly once, nothing else from it.
check_exactly_once() {
    local key=$1 n=$2
    awk -v key="$key" -v n="$n" '
        $1 == "STORED" && $2 == key { seen[$4]++; total++ }
        END {
            for (s = 0; s < n; s++)
                if (seen[s] != 1) { printf "seq %d stored %d times\n", s, seen[s]; bad = 1 }
            if (total != n) { printf "%d STORED lines, expected %d\n", total, n; bad = 1 }
            exit bad
        }' "$REC" >"$T/check.out" || fail "producer $key: $(head -3 "$T/check.out")"
}

case_usage() {
    "$AGENT" --help >"$T/help.out" 2>&1 || fail "--help exited with $?"
    for opt in collector listen node max-pending credit-timeout drain-timeout stats-interval \
               clock-interval log-level config help version; do
        grep -q -- "--$opt" "$T/help.out" || fail "--help does not mention --$opt"
    done
    local rc
    for bad in "--bogus" "--max-pending 12Q" "--drain-timeout soon" "--credit-timeout 0" \
               "--clock-interval often" \
               "--log-level loud" "--node" "stray-argument" "--config $T/missing.conf"; do
        # shellcheck disable=SC2086
        "$AGENT" $bad >"$T/bad.out" 2>&1
        rc=$?
        [ $rc -eq 2 ] || fail "'$bad' exited with $rc, expected 2"
        [ -s "$T/bad.out" ] || fail "'$bad' printed no message"
    done
    printf 'bogus-key = 1\n' >"$T/bad.conf"
    "$AGENT" --config "$T/bad.conf" >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "unknown config key exited with $rc, expected 2"

    # A config file works, the command line wins over it, and a stale socket
    # file is replaced.
    mkdir -p "$T/run"
    python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" \
        "$T/run/agent.sock"
    cat >"$T/agent.conf" <<CONF
# test configuration
collector = tcp://127.0.0.1:$PORT
listen = ipc://$T/elsewhere.sock
node = fromconfig
drain-timeout = 1s
CONF
    "$AGENT" --config "$T/agent.conf" --listen "$SOCK" >>"$T/agent.log" 2>&1 &
    APID=$!
    wait_for 10 "the agent to listen" has_line "listening for producers on $SOCK" "$T/agent.log"
    has_line "removing stale socket" "$T/agent.log" || fail "stale socket not reported"
    has_line "as node 'fromconfig'" "$T/agent.log" || fail "node from config not used"
    # A second agent on the same socket must refuse to start.
    "$AGENT" --listen "$SOCK" >"$T/second.log" 2>&1
    rc=$?
    [ $rc -eq 1 ] || fail "second agent on a live socket exited with $rc, expected 1"
    grep -q "already listening" "$T/second.log" || fail "second agent gave no reason"
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
}

case_exactly_once() {
    start_collector
    start_agent
    local pids=""
    for p in a b c; do
        run_producer $p --batches 40 --events-per-batch 1000 --rank 1 &
        pids="$pids $!"
    done
    wait_for 30 "120 stored batches" has_stored 120
    # shellcheck disable=SC2086
    wait $pids
    sleep 0.3
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    for p in a b c; do check_exactly_once "$(producer_key $p)" 40; done
    expect_stat received 120
    expect_stat acked 120
    expect_stat pending 0
    expect_stat duplicate 0
    expect_stat invalid 0
    has_line "all batches acknowledged" "$T/agent.log" || fail "no drain message"
}

case_slow_acks() {
    start_collector --credit 4 --ack-delay 20
    start_agent
    run_producer a --batches 30 --events-per-batch 500 &
    local pa=$!
    run_producer b --batches 30 --events-per-batch 500 --rank 2 &
    local pb=$!
    wait_for 30 "60 stored batches" has_stored 60
    wait $pa $pb
    stop_agent
    for p in a b; do check_exactly_once "$(producer_key $p)" 30; done
    expect_stat received 60
    expect_stat forwarded 60
    expect_stat pending 0
}

case_collector_restart() {
    start_collector --credit 4 --ack-delay 20
    start_agent
    run_producer a --batches 200 --events-per-batch 500
    wait_for 30 "40 stored batches" has_stored 40
    kill -KILL "$CPID"
    wait "$CPID" 2>/dev/null
    local before
    before=$(stored_count)
    [ "$before" -lt 200 ] || fail "collector finished before it could be killed"
    wait_for 20 "the agent to notice" has_line "lost the connection" "$T/agent.log"
    sleep 0.5
    start_collector --credit 16
    wait_for 60 "200 stored batches" has_stored 200
    sleep 0.3
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key a)" 200
    [ "$(grep -c '^HELLO' "$REC")" -ge 2 ] || fail "no second HELLO"
    [ "$(awk '/^HELLO/ {print $3}' "$REC" | sort -u | wc -l)" -eq 1 ] ||
        fail "session id changed across reconnects"
    [ "$(final_stat reconnects)" -ge 1 ] || fail "reconnect not counted"
    expect_stat received 200
    expect_stat acked 200
    expect_stat pending 0
}

case_collector_dies() {
    # Stores batch 25, then dies before acknowledging it: the resend must be
    # answered DUPLICATE and still count as delivered.
    start_collector --die-after 25
    start_agent
    run_producer a --batches 60 --events-per-batch 200
    wait_for 20 "the test collector to die" not_running "$CPID"
    wait "$CPID"
    [ $? -eq 3 ] || fail "test collector did not die as asked"
    CPID=
    start_collector
    wait_for 30 "60 stored batches" has_stored 60
    wait_for 10 "the duplicate" has_line "^DUPLICATE" "$REC"
    sleep 0.3
    stop_agent
    check_exactly_once "$(producer_key a)" 60
    [ "$(final_stat duplicate)" -ge 1 ] || fail "duplicate ACK not counted"
    [ "$(final_stat resent)" -ge 1 ] || fail "resend not counted"
    expect_stat acked 60
    expect_stat pending 0
}

case_never_ack() {
    start_collector --no-ack
    start_agent --drain-timeout 1s --credit-timeout 1s
    run_producer a --batches 20 --events-per-batch 200
    wait_for 20 "20 stored batches" has_stored 20
    # With no acknowledgement for the credit timeout the agent reconnects and
    # resends; the collector sees the same batches again.
    wait_for 20 "a resend after the credit timeout" has_line "^DUPLICATE" "$REC"
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    [ "$(echo "$AGENT_SECONDS < 3" | bc)" -eq 1 ] ||
        fail "agent took $AGENT_SECONDS s to stop with a 1 s drain timeout"
    has_line "20 batches ([0-9]* bytes) remain unacknowledged" "$T/agent.log" ||
        fail "unacknowledged batches not reported"
    has_line "no acknowledgement from collector" "$T/agent.log" || fail "credit timeout not logged"
    expect_stat pending 20
    expect_stat acked 0
}

# A collector that sends malformed messages, one of an unknown type and an
# ACK naming a batch the agent does not hold, before each real ACK, and
# answers the first copy of every fifth batch, which it does not store, with
# an ACK of another epoch: the agent logs them, lets no batch go on them,
# sends the refused ones again after the credit timeout, and every batch is
# stored once.
case_collector_junk() {
    start_collector --junk
    start_agent --credit-timeout 1s
    run_producer a --batches 20 --events-per-batch 100
    wait_for 30 "20 stored batches" has_stored 20
    [ "$(grep -c '^REFUSED' "$REC")" -eq 4 ] || fail "the collector did not refuse 4 batches"
    sleep 0.3
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key a)" 20
    expect_stat acked 20
    expect_stat pending 0
    expect_stat duplicate 0
    for what in "without the IOT1 header" "unknown message type 'ZZZ'" "malformed ACK" \
                "malformed PONG" "malformed WELCOME"; do
        has_line "$what" "$T/agent.log" || fail "agent did not log: $what"
    done
}

# A collector that refuses batches (REJECTED, with a reason): the agent
# lets them go, counts them as rejected and says which and why.
case_collector_rejects() {
    start_collector --reject-every 5
    start_agent
    run_producer a --batches 20 --events-per-batch 100
    wait_for 20 "16 stored batches" has_stored 16
    sleep 0.3
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    [ "$(grep -c '^REJECTED' "$REC")" -eq 4 ] || fail "the collector did not reject 4 batches"
    expect_stat acked 20
    expect_stat rejected 4
    expect_stat pending 0
    has_line "collector rejected batch $(producer_key a) seq=4: refused by the test collector" \
        "$T/agent.log" || fail "the rejection of seq 4 was not logged with its reason"
}

case_garbage() {
    start_collector
    start_agent
    local kinds="truncated flip version magic garbage empty multipart"
    for k in $kinds; do
        run_producer bad-$k --bad $k --batches 3 --events-per-batch 50
    done
    run_producer good --batches 10 --events-per-batch 100
    wait_for 20 "10 stored batches" has_stored 10
    kill -0 "$APID" 2>/dev/null || fail "agent died on garbage"
    sleep 1.2 # one stats interval, so the counters are logged
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key good)" 10
    expect_stat invalid 21
    expect_stat received 10
    local logged
    logged=$(grep -c "rejected a message from a producer" "$T/agent.log")
    [ "$logged" -ge 1 ] || fail "rejections not logged"
    [ "$logged" -lt 21 ] || fail "rejection log not rate limited ($logged lines for 21)"
    grep -q '^REJECTED\|^UNREADABLE' "$REC" && fail "garbage reached the collector"
    return 0
}

# Messages larger than a producer's batch may be (256 KiB; these are 65 MiB)
# are refused before they reach the agent's memory, and producers that behave
# are still served.
case_huge() {
    start_collector
    start_agent
    run_producer huge --bad huge --batches 4 --events-per-batch 50
    run_producer good --batches 10 --events-per-batch 100
    wait_for 20 "10 stored batches" has_stored 10
    kill -0 "$APID" 2>/dev/null || fail "agent died on huge messages"
    local hwm
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$APID/status")
    echo "agent peak RSS $hwm KiB"
    [ "$hwm" -lt 65536 ] || fail "agent peak RSS $hwm KiB after huge messages"
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key good)" 10
    expect_stat received 10
}

# Three connections flooding a full agent (1 MiB store) with batches of the
# largest size a producer may send (about 240 KiB).  It keeps reading and
# counts their events (stored as drop records), so its memory stays small;
# were it to stop reading, ZeroMQ would queue at most 100 batches per
# connection: under 3 x 25 MiB more.  The counts are checked end to end,
# exactly, in agent.other_users.
case_flood() {
    start_collector --no-ack
    # Under AddressSanitizer freed blocks wait in its quarantine (256 MiB):
    # the peak would be the sanitizer's, not the agent's.
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1" start_agent --max-pending 1M --max-pending-per-user 1M
    wait_for 10 "the agent to listen" has_line "listening for producers" "$T/agent.log"
    local pids=""
    for p in a b c; do
        run_producer $p --batches 200 --events-per-batch 40000 --nonblocking &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
    sleep 1.2
    local hwm
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$APID/status")
    echo "agent peak RSS $hwm KiB after 3 x 200 batches of ~240 KiB into a full store"
    [ "$hwm" -lt $((3 * 100 * 256 + 40 * 1024)) ] || fail "agent peak RSS $hwm KiB"
    has_line "stored as drop records" "$T/agent.log" || fail "full store not logged"
    stop_agent
    [ "$(final_stat invalid)" -eq 0 ] || fail "batches of the largest size refused"
    [ "$(final_stat store_full)" -gt 0 ] || fail "no batch counted as a drop record"
    [ "$(final_stat discarded)" -eq 0 ] || fail "batches discarded"
    local dropped=0 d
    for p in a b c; do
        d=$(sed -n 's/.*dropped_batches=\([0-9]*\).*/\1/p' "$T/$p.out")
        dropped=$((dropped + d))
    done
    [ $(($(final_stat received) + dropped)) -eq 600 ] ||
        fail "received $(final_stat received) + dropped by the producers $dropped != 600"
}

case_backpressure() {
    start_collector --no-ack
    start_agent --max-pending 100K --max-pending-per-user 100K --drain-timeout 0.5s
    # A non-blocking producer that starts before the agent has bound its
    # socket drops everything (retrying connects, linger 0): wait for it.
    wait_for 10 "the agent to listen" has_line "listening for producers" "$T/agent.log"
    # Paced, so that a loaded machine cannot let the producer drop all but
    # the first few batches before the agent has read enough to fill up.
    run_producer a --batches 400 --events-per-batch 1000 --rate 150000 --nonblocking --hwm 5 \
        --linger 0
    wait_for 10 "the full store" has_line "pending store full" "$T/agent.log"
    sleep 1.2
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    local bytes dropped
    bytes=$(final_stat pending_bytes)
    [ "$bytes" -le $((100 * 1024 + 100 * 1024 / 8 + 8 * 1024)) ] ||
        fail "pending store grew to $bytes bytes"
    [ "$(final_stat store_full)" -gt 0 ] || fail "no batch counted as a drop record when full"
    dropped=$(sed -n 's/.*dropped_batches=\([0-9]*\).*/\1/p' "$T/a.out")
    [ $(($(final_stat received) + dropped)) -eq 400 ] ||
        fail "received $(final_stat received) + dropped by the producer $dropped != 400"
}

# Against the real iotrace-collector (passed as TEST_COLLECTOR): killed and
# restarted on the same store mid-stream, every batch ends up acknowledged.
# The spool on disk: the agent killed with everything still unsent (no
# collector), the newest segment torn as by a death inside a write; the next
# agent on the same state directory sends it all, each batch once, and
# leaves no segment behind.
spool_segments() { ls "$T/state/spool" 2>/dev/null | grep -c '\.seg$'; }

case_spool_kill() {
    start_agent --state-dir "$T/state" --spool-sync always
    run_producer a --batches 100 --events-per-batch 500
    wait_for 20 "100 batches taken" has_line "received=100 " "$T/agent.log"
    kill -KILL "$APID"
    wait "$APID" 2>/dev/null
    APID=
    [ "$(spool_segments)" -ge 1 ] || fail "no spool segment after the kill"
    local newest
    newest=$(ls "$T/state/spool"/*.seg | sort | tail -1)
    printf 'ISPL\001\002' >>"$newest"
    start_collector
    start_agent --state-dir "$T/state"
    wait_for 60 "100 stored batches" has_stored 100
    sleep 0.3
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key a)" 100
    has_line "100 batches (.* bytes) left by the last run will be sent again" "$T/agent.log" ||
        fail "recovery not logged"
    has_line "ends in an incomplete batch (6 of" "$T/agent.log" || fail "torn tail not reported"
    [ "$(spool_segments)" -eq 0 ] || fail "$(spool_segments) segments left after every ack"
    # The log holds the earlier agents' lines too: wait for one more
    # "listening" line, which the new agent writes after taking the lock.
    local before
    before=$(grep -c "listening for producers" "$T/agent.log")
    start_agent --state-dir "$T/state"
    listening_more() { [ "$(grep -c "listening for producers" "$T/agent.log")" -gt "$before" ]; }
    wait_for 10 "the third agent" listening_more
    timeout 10 "$AGENT" --listen "ipc://$T/other.sock" --state-dir "$T/state" >"$T/third.log" 2>&1
    [ $? -eq 1 ] || fail "a second agent on the same state directory did not exit with 1"
    has_line "another agent uses the spool directory" "$T/third.log" ||
        fail "no message for a second agent on the same state directory"
    stop_agent
}

case_real_collector() {
    start_real() {
        "$COLLECTOR" --listen "tcp://127.0.0.1:$PORT" --store "$T/store" --http off "$@" \
            >>"$T/collector.log" 2>&1 &
        CPID=$!
    }
    start_real --credit 2
    start_agent
    wait_for 20 "the first session" has_line "welcomed us" "$T/agent.log"
    local pids=""
    for p in a b c; do
        run_producer $p --batches 40 --events-per-batch 2000 &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
    kill -KILL "$CPID"
    wait "$CPID" 2>/dev/null
    sleep 0.3
    start_real
    # The collector may have stored everything before it was killed: what
    # must happen still is the agent's second session.
    second_session() { [ "$(grep -c "welcomed us" "$T/agent.log")" -ge 2 ]; }
    wait_for 60 "the second session" second_session
    wait_for 60 "every batch acknowledged" has_line "received=120 .* pending=0 " "$T/agent.log"
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    expect_stat received 120
    # The real collector answers clock PINGs: the agent's own clock batches
    # are acknowledged too.
    [ "$(final_stat clock_samples)" -ge 1 ] || fail "no clock sample against the real collector"
    expect_stat acked $((120 + $(final_stat clock_samples)))
    expect_stat rejected 0
    [ "$(final_stat reconnects)" -ge 1 ] || fail "reconnect not counted"
    stop_collector
}

# Clock exchanges with a collector that answers them: every burst's sample
# travels as a batch of the agent's own, stored exactly once, alongside the
# producers' batches.
case_clock_pong() {
    start_collector --pong
    start_agent --clock-interval 0.3s
    run_producer a --batches 20 --events-per-batch 100
    wait_for 20 "20 stored batches of the producer" has_line "acked=[2-9][0-9] .*pending=0 " \
        "$T/agent.log"
    wait_for 20 "three clock samples" eval '[ "$(grep -c "clock: offset" "$T/agent.log")" -ge 3 ]'
    sleep 0.3
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key a)" 20
    local samples own_key
    samples=$(final_stat clock_samples)
    [ "$samples" -ge 3 ] || fail "only $samples clock samples"
    own_key=$(awk '$1 == "STORED" && $2 ~ /^testnode\/[0-9]+\// && $2 != key { print $2 }' \
        key="$(producer_key a)" "$REC" | sort -u)
    [ "$(echo "$own_key" | wc -l)" -eq 1 ] || fail "agent's own batches under keys: $own_key"
    check_exactly_once "$own_key" "$samples"
    expect_stat received 20
    expect_stat acked $((20 + samples))
    expect_stat pending 0
    [ "$(grep -c '^PONG' "$REC")" -ge $((8 * samples)) ] || fail "fewer PINGs than 8 per sample"
    local offset
    offset=$(final_stat clock_offset_ns)
    [ "${offset#-}" -lt 5000000 ] || fail "offset $offset ns to a collector on the same host"
    has_line "info: clock: offset .* rtt .* error bound" "$T/agent.log" || fail "bursts not logged"
}

# A collector that never answers PINGs (an older one): no samples, one log
# line, and batches flow as if clock synchronisation did not exist.
case_clock_silent() {
    start_collector
    start_agent --clock-interval 0.2s
    local t0=$SECONDS
    run_producer a --batches 40 --events-per-batch 500
    wait_for 20 "40 stored batches" has_stored 40
    sleep 2.5 # several intervals, each with an unanswered PING
    stop_agent
    [ $AGENT_RC -eq 0 ] || fail "agent exited with $AGENT_RC"
    check_exactly_once "$(producer_key a)" 40
    expect_stat received 40
    expect_stat acked 40
    expect_stat pending 0
    expect_stat clock_samples 0
    expect_stat clock_offset_ns -
    [ "$(grep -c "does not answer clock PINGs" "$T/agent.log")" -eq 1 ] ||
        fail "the silent collector should be reported exactly once"
    [ $((SECONDS - t0)) -lt 15 ] || fail "forwarding was slow with a silent collector"
}

"case_$CASE"
echo "PASS ($CASE)"
