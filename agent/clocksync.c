#include "clocksync.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "spool.h"
#include "stats.h"
#include "timeutil.h"
#include "uplink.h"

/* A few ms between exchanges, so that one stall of either side (a group
 * commit's fdatasync, a burst of producer traffic) does not hit them all. */
#define SPACING_NS (5 * 1000000ll)
/* An answer later than this is not worth waiting for: its round trip, and
 * so its error bound, would be worse than any sample kept. */
#define PING_TIMEOUT_NS (1000 * 1000000ll)

static void on_pong(void *ctx, int64_t t1, int64_t t2, int64_t t3, int64_t t4);

void clocksync_init(struct clocksync *cs, struct uplink *ul, struct spool *sp,
                    struct agent_stats *st, const char *node, const char *peer,
                    int64_t interval_ns)
{
    memset(cs, 0, sizeof *cs);
    cs->ul = ul;
    cs->spool = sp;
    cs->stats = st;
    cs->interval_ns = interval_ns;
    cs->id = (iot_producer)IOTRACE__PRODUCER__INIT;
    cs->id.node = (char *)node;
    cs->id.pid = (uint32_t)getpid();
    cs->id.start_time_ns = (uint64_t)iot_now_ns();
    cs->id.kind = IOTRACE__PRODUCER_KIND__PRODUCER_AGENT;
    cs->id.rank = -1;
    cs->peer = peer;
    if (iot_wire_producer_key(&cs->id, NULL, cs->key, sizeof cs->key) < 0)
        cs->interval_ns = 0; /* a node name too long to be a key: nothing could be sent */
    if (getrandom(&cs->epoch, sizeof cs->epoch, 0) != sizeof cs->epoch)
        cs->epoch = (uint64_t)iot_now_ns() ^ ((uint64_t)getpid() << 32);
    cs->next_burst = INT64_MAX;
    ul->on_pong = on_pong;
    ul->pong_ctx = cs;
}

/* The kept sample goes out as a batch of the agent's own, through the
 * pending store like every producer's batch. */
static void emit_sample(struct clocksync *cs)
{
    Iotrace__ClockSync rec = IOTRACE__CLOCK_SYNC__INIT, *recs[1] = {&rec};
    rec.local_ns = cs->best_local;
    rec.offset_ns = cs->best_offset;
    rec.rtt_ns = cs->best_rtt;
    rec.peer = (char *)cs->peer;
    const struct agent_stats *st = cs->stats;
    Iotrace__AgentStatus status = IOTRACE__AGENT_STATUS__INIT;
    status.received = st->received;
    status.invalid = st->invalid;
    status.forwarded = st->forwarded;
    status.resent = st->resent;
    status.acked = st->acked;
    status.duplicates = st->duplicates;
    status.rejected = st->rejected;
    status.reconnects = st->reconnects;
    status.pending = cs->spool->count;
    status.pending_bytes = cs->spool->bytes;
    iot_body body = IOTRACE__BODY__INIT;
    body.n_clock = 1;
    body.clock = recs;
    body.agent = &status;
    uint8_t *buf;
    size_t len;
    char err[256];
    if (iot_wire_encode(&cs->id, cs->epoch, cs->seq, &body, &buf, &len, err, sizeof err) < 0) {
        iot_warn("cannot encode a clock sample: %s", err);
        return;
    }
    if (spool_push(cs->spool, cs->key, cs->epoch, cs->seq, buf, len) < 0)
        iot_err("out of memory storing a clock sample");
    else {
        cs->seq++;
        cs->stats->clock_samples++;
    }
    free(buf);
}

static void end_burst(struct clocksync *cs, int64_t now_mono)
{
    cs->in_burst = cs->waiting = 0;
    cs->next_burst = now_mono + cs->interval_ns;
    if (!cs->have_best)
        return;
    struct agent_stats *st = cs->stats;
    st->clock_valid = 1;
    st->clock_offset_ns = cs->best_offset;
    st->clock_rtt_ns = cs->best_rtt;
    iot_info("clock: offset %lld ns to the collector, rtt %llu ns, error bound %llu ns "
             "(best of %d exchanges)", (long long)cs->best_offset,
             (unsigned long long)cs->best_rtt,
             (unsigned long long)(cs->best_rtt / 2 + (cs->best_rtt & 1)), cs->answered);
    emit_sample(cs);
}

static void start_burst(struct clocksync *cs, int64_t now_mono)
{
    cs->in_burst = 1;
    cs->sent = cs->answered = 0;
    cs->waiting = 0;
    cs->have_best = 0;
    cs->next_ping = now_mono;
}

static void on_pong(void *ctx, int64_t t1, int64_t t2, int64_t t3, int64_t t4)
{
    struct clocksync *cs = ctx;
    cs->session_answered = 1;
    cs->silence_logged = 0;
    if (!cs->in_burst || !cs->waiting || t1 != cs->t1)
        return; /* the answer to a PING already given up on */
    cs->waiting = 0;
    cs->answered++;
    cs->next_ping = iot_mono_ns() + SPACING_NS;
    int64_t offset = ((t2 - t1) + (t3 - t4)) / 2;
    int64_t rtt = (t4 - t1) - (t3 - t2);
    iot_debug("clock exchange %d: offset %lld ns, rtt %lld ns", cs->sent, (long long)offset,
              (long long)rtt);
    /* Only a clock stepped back during the exchange (on either side) gives
     * this; as rtt 0 it would win the burst with a meaningless offset. */
    if (rtt < 0)
        return;
    if (!cs->have_best || (uint64_t)rtt < cs->best_rtt) {
        cs->have_best = 1;
        cs->best_offset = offset;
        cs->best_rtt = (uint64_t)rtt;
        cs->best_local = t1 + (t4 - t1) / 2;
    }
}

/* A session whose first PING goes unanswered is most likely served by a
 * collector without PONG: the burst ends at once and is retried next
 * interval. */
static void give_up_ping(struct clocksync *cs, int64_t now_mono)
{
    cs->waiting = 0;
    cs->next_ping = now_mono;
    if (cs->session_answered)
        return;
    if (!cs->silence_logged)
        iot_info("collector %s does not answer clock PINGs (an older collector?): this "
                 "node's clock offset is not measured and its events will not be aligned",
                 cs->peer);
    cs->silence_logged = 1;
    end_burst(cs, now_mono);
}

static void send_ping(struct clocksync *cs, int64_t now_mono)
{
    if (uplink_send_ping(cs->ul, &cs->t1) < 0) {
        end_burst(cs, now_mono);
        return;
    }
    cs->sent++;
    cs->waiting = 1;
    cs->deadline = now_mono + PING_TIMEOUT_NS;
}

/* Every new session starts a burst: the path may have changed, and a
 * restarted collector has not seen this node yet. */
static void follow_session(struct clocksync *cs, int64_t now_mono)
{
    if (cs->ul->sessions == cs->session_seen)
        return;
    cs->session_seen = cs->ul->sessions;
    cs->session_answered = 0;
    cs->in_burst = cs->waiting = 0;
    cs->next_burst = now_mono;
}

void clocksync_tick(struct clocksync *cs, int64_t now_mono)
{
    if (cs->interval_ns <= 0)
        return;
    follow_session(cs, now_mono);
    if (cs->ul->state != UPLINK_READY) {
        cs->in_burst = cs->waiting = 0; /* resumes with the next session */
        return;
    }
    if (!cs->in_burst && now_mono >= cs->next_burst)
        start_burst(cs, now_mono);
    if (!cs->in_burst)
        return;
    if (cs->waiting && now_mono >= cs->deadline)
        give_up_ping(cs, now_mono);
    if (!cs->in_burst || cs->waiting || now_mono < cs->next_ping)
        return;
    if (cs->sent >= CLOCKSYNC_BURST)
        end_burst(cs, now_mono);
    else
        send_ping(cs, now_mono);
}

int64_t clocksync_due(const struct clocksync *cs)
{
    if (cs->interval_ns <= 0 || cs->ul->state != UPLINK_READY)
        return INT64_MAX;
    if (cs->ul->sessions != cs->session_seen)
        return 0;
    if (!cs->in_burst)
        return cs->next_burst;
    return cs->waiting ? cs->deadline : cs->next_ping;
}

void clocksync_stop(struct clocksync *cs)
{
    cs->interval_ns = 0;
    cs->in_burst = cs->waiting = 0;
}
