#include "clocksync.h"

#include <errno.h>
#include <netdb.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clockudp.h"

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
/* A session's first burst waits this long for the collector's CLOCKUDP, so
 * that its sample is not one over ZeroMQ (a bound ten times as wide, and the
 * bound over a span is its worst sample's). */
#define UDP_WAIT_NS (500 * 1000000ll)

static void on_pong(void *ctx, int64_t t1, int64_t t2, int64_t t3, int64_t t4);
static int udp_ready(struct clocksync *cs);

/* The collector has not yet said whether it has a UDP clock, and the
 * session is young enough to wait for it. */
static int udp_pending(const struct clocksync *cs, int64_t now_mono)
{
    return cs->ul->clock_port < 0 && now_mono - cs->session_at < UDP_WAIT_NS;
}

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
    cs->udp_fd = -1;
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
    cs->burst_udp = udp_ready(cs) == 0;
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
    if (cs->burst_udp)
        cs->udp_answered = 1;
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
    if (cs->burst_udp) {
        /* Not one answer over UDP in this session: a firewall between,
         * most likely; the rest of the session measures over ZeroMQ. */
        if (!cs->udp_answered && !cs->udp_failed) {
            iot_warn("clock: no answer from collector %s on UDP port %d within %.0f s (a "
                     "firewall?): measuring over the ZeroMQ link, with wider error bounds",
                     cs->peer, cs->udp_port, PING_TIMEOUT_NS / 1e9);
            cs->udp_failed = 1;
            cs->burst_udp = 0;
        }
        return;
    }
    if (cs->session_answered)
        return;
    if (!cs->silence_logged)
        iot_info("collector %s does not answer clock PINGs (an older collector?): this "
                 "node's clock offset is not measured and its events will not be aligned",
                 cs->peer);
    cs->silence_logged = 1;
    end_burst(cs, now_mono);
}

/* The socket for the port the collector gave this session, to the host of
 * its endpoint (tcp://HOST:PORT); 0, or -1 when there is none to be had. */
static int udp_ready(struct clocksync *cs)
{
    int port = cs->ul->clock_port;
    if (port <= 0 || cs->udp_failed)
        return -1;
    if (cs->udp_fd >= 0 && cs->udp_port == port)
        return 0;
    if (cs->udp_fd >= 0)
        close(cs->udp_fd);
    cs->udp_fd = -1;
    cs->udp_port = port;
    char host[256], service[16];
    unsigned long ignored;
    if (iot_clockudp_tcp_endpoint(cs->peer, host, sizeof host, &ignored) < 0) {
        cs->udp_failed = 1;
        return -1;
    }
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICSERV},
                    *res = NULL;
    if (getaddrinfo(host, service, &hints, &res) != 0) {
        cs->udp_failed = 1;
        return -1;
    }
    for (struct addrinfo *a = res; a && cs->udp_fd < 0; a = a->ai_next) {
        int fd = iot_clockudp_socket(a->ai_family);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            cs->udp_fd = fd;
        else if (fd >= 0)
            close(fd);
    }
    freeaddrinfo(res);
    if (cs->udp_fd < 0) {
        iot_warn("clock: no UDP socket to collector %s port %d (%s): measuring over the "
                 "ZeroMQ link", cs->peer, port, strerror(errno));
        cs->udp_failed = 1;
        return -1;
    }
    return 0;
}

static int send_udp_ping(struct clocksync *cs)
{
    struct iot_clockudp_msg msg = {.kind = 1, .key_id = cs->ul->clock_key_id};
    randombytes_buf(&cs->nonce, sizeof cs->nonce);
    msg.nonce = cs->nonce;
    uint8_t buf[IOT_CLOCKUDP_REQUEST];
    /* t1 last, just before the send: the packing's time is no round trip. */
    msg.t1 = cs->t1 = iot_now_ns();
    size_t len = iot_clockudp_pack(buf, &msg, cs->ul->clock_key);
    if (send(cs->udp_fd, buf, len, MSG_DONTWAIT) < 0) {
        iot_debug("clock: UDP send: %s", strerror(errno));
        return -1; /* counted as unanswered: ends in give_up_ping */
    }
    return 0;
}

int clocksync_fd(const struct clocksync *cs) { return cs->udp_fd; }

void clocksync_readable(struct clocksync *cs)
{
    for (;;) {
        uint8_t buf[128];
        int64_t t4;
        long n = iot_clockudp_recv(cs->udp_fd, buf, sizeof buf, &t4, NULL, NULL);
        if (n < 0) {
            if (errno == ENOMSG)
                continue;
            return;
        }
        struct iot_clockudp_msg msg;
        if (iot_clockudp_open(buf, (size_t)n, cs->ul->clock_key, &msg) < 0 || msg.kind != 2 ||
            msg.key_id != cs->ul->clock_key_id || !cs->waiting || !cs->burst_udp ||
            msg.nonce != cs->nonce)
            continue; /* not under this session's key, or not the exchange waiting */
        on_pong(cs, msg.t1, msg.t2, msg.t3, t4);
    }
}

static void send_ping(struct clocksync *cs, int64_t now_mono)
{
    if (cs->burst_udp) {
        send_udp_ping(cs);
        cs->sent++;
        cs->waiting = 1;
        cs->deadline = now_mono + PING_TIMEOUT_NS;
        return;
    }
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
    cs->session_at = now_mono;
    cs->session_answered = 0;
    cs->udp_answered = cs->udp_failed = 0;
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
    if (!cs->in_burst && now_mono >= cs->next_burst && !udp_pending(cs, now_mono))
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
    if (!cs->in_burst && udp_pending(cs, cs->next_burst))
        return cs->session_at + UDP_WAIT_NS; /* or CLOCKUDP, which wakes the loop */
    if (!cs->in_burst)
        return cs->next_burst;
    return cs->waiting ? cs->deadline : cs->next_ping;
}

void clocksync_stop(struct clocksync *cs)
{
    cs->interval_ns = 0;
    cs->in_burst = cs->waiting = 0;
    if (cs->udp_fd >= 0)
        close(cs->udp_fd);
    cs->udp_fd = -1;
}
