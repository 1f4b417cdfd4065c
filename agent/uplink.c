#include "uplink.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "link.h"
#include "log.h"
#include "spool.h"
#include "timeutil.h"

/* A dead collector (or a cut cable, which no FIN reports) is noticed within
 * HEARTBEAT_TIMEOUT; reconnects back off up to RECONNECT_MAX. */
#define HEARTBEAT_IVL_MS 1000
#define HEARTBEAT_TIMEOUT_MS 5000
#define RECONNECT_IVL_MS 100
#define RECONNECT_MAX_MS 2000
/* More credit than this would only move batches from the pending store into
 * ZeroMQ's queues, where they cannot be accounted for. */
#define MAX_CREDIT 65536
#define MAX_FRAMES 8

static int open_socket(struct uplink *ul)
{
    ul->sock = zmq_socket(ul->zctx, ZMQ_DEALER);
    if (!ul->sock)
        return -1;
    int v;
    v = 0;
    zmq_setsockopt(ul->sock, ZMQ_LINGER, &v, sizeof v);
    zmq_setsockopt(ul->sock, ZMQ_SNDHWM, &v, sizeof v);
    zmq_setsockopt(ul->sock, ZMQ_RCVHWM, &v, sizeof v);
    v = HEARTBEAT_IVL_MS;
    zmq_setsockopt(ul->sock, ZMQ_HEARTBEAT_IVL, &v, sizeof v);
    v = HEARTBEAT_TIMEOUT_MS;
    zmq_setsockopt(ul->sock, ZMQ_HEARTBEAT_TIMEOUT, &v, sizeof v);
    zmq_setsockopt(ul->sock, ZMQ_HEARTBEAT_TTL, &v, sizeof v);
    v = RECONNECT_IVL_MS;
    zmq_setsockopt(ul->sock, ZMQ_RECONNECT_IVL, &v, sizeof v);
    v = RECONNECT_MAX_MS;
    zmq_setsockopt(ul->sock, ZMQ_RECONNECT_IVL_MAX, &v, sizeof v);
    if (ul->curve_own &&
        (zmq_setsockopt(ul->sock, ZMQ_CURVE_SERVERKEY, ul->curve_collector->public_key,
                        IOT_CURVE_Z85 + 1) < 0 ||
         zmq_setsockopt(ul->sock, ZMQ_CURVE_PUBLICKEY, ul->curve_own->public_key,
                        IOT_CURVE_Z85 + 1) < 0 ||
         zmq_setsockopt(ul->sock, ZMQ_CURVE_SECRETKEY, ul->curve_own->secret_key,
                        IOT_CURVE_Z85 + 1) < 0)) {
        iot_err("cannot set up CURVE: %s", zmq_strerror(zmq_errno()));
        return -1;
    }

    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://iotrace-agent-monitor-%u", ul->mon_serial++);
    if (zmq_socket_monitor(ul->sock, mon_ep,
                           ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                               ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) < 0)
        return -1;
    ul->mon = zmq_socket(ul->zctx, ZMQ_PAIR);
    if (!ul->mon || zmq_connect(ul->mon, mon_ep) < 0)
        return -1;
    if (zmq_connect(ul->sock, ul->endpoint) < 0) {
        iot_err("cannot connect to collector %s: %s", ul->endpoint, zmq_strerror(zmq_errno()));
        return -1;
    }
    ul->state = UPLINK_CONNECTING;
    ul->credit = 0;
    ul->retry_logged = 0;
    return 0;
}

static void close_socket(struct uplink *ul)
{
    if (ul->sock)
        zmq_socket_monitor(ul->sock, NULL, 0);
    if (ul->mon)
        zmq_close(ul->mon);
    if (ul->sock)
        zmq_close(ul->sock);
    ul->sock = ul->mon = NULL;
}

int uplink_open(struct uplink *ul, void *zctx, const char *endpoint, const char *node,
                uint64_t session, int64_t credit_timeout_ns, struct spool *sp,
                struct agent_stats *st, const struct iot_curve_keys *own,
                const struct iot_curve_keys *collector)
{
    memset(ul, 0, sizeof *ul);
    ul->curve_own = own;
    ul->curve_collector = collector;
    ul->zctx = zctx;
    ul->endpoint = endpoint;
    ul->node = node;
    ul->session = session;
    ul->credit_timeout_ns = credit_timeout_ns;
    ul->spool = sp;
    ul->stats = st;
    ul->reject_log.interval_ns = 1000000000;
    ul->defer_log.interval_ns = 60 * 1000000000ll;
    if (open_socket(ul) < 0) {
        close_socket(ul);
        return -1;
    }
    iot_info("connecting to collector %s as node '%s', session %016llx%s", endpoint, node,
             (unsigned long long)session, own ? ", CURVE" : "");
    return 0;
}

/* Everything in flight goes back to waiting, and a fresh socket starts the
 * next session. */
static void restart_session(struct uplink *ul)
{
    spool_unsend_all(ul->spool);
    close_socket(ul);
    if (open_socket(ul) < 0) {
        /* Only a broken ZeroMQ context gets here; retrying from tick is all
         * that can be done. */
        iot_err("cannot open a new collector socket: %s", zmq_strerror(zmq_errno()));
        close_socket(ul);
    }
}

static void back_off(struct uplink *ul)
{
    spool_unsend_all(ul->spool);
    close_socket(ul);
    ul->state = UPLINK_CONNECTING;
    ul->credit = 0;
    ul->backoff_ns = ul->backoff_ns ? ul->backoff_ns * 2 : 1000000000;
    if (ul->backoff_ns > 30000000000)
        ul->backoff_ns = 30000000000;
    ul->retry_at = iot_mono_ns() + ul->backoff_ns;
    iot_debug("next attempt to reach collector %s in %.0f s", ul->endpoint, ul->backoff_ns / 1e9);
}

static void send_hello(struct uplink *ul)
{
    uint8_t session[8];
    iot_put_u64(session, ul->session);
    /* Without a WELCOME in time the session starts again (uplink_tick),
     * also when the HELLO could not be sent. */
    ul->state = UPLINK_WAIT_WELCOME;
    ul->quiet_since = iot_mono_ns();
    /* Not waiting: when the handshake fails right after the connection (a
     * collector that requires CURVE), the socket has no peer by the time
     * this runs, and a blocking send would hold the agent, signals and
     * producers included, until a later connection that may never come. */
    if (zmq_send(ul->sock, IOT_LINK_PROTO, strlen(IOT_LINK_PROTO), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        iot_debug("HELLO to collector %s not sent: %s", ul->endpoint, zmq_strerror(zmq_errno()));
        return;
    }
    if (zmq_send(ul->sock, IOT_LINK_HELLO, strlen(IOT_LINK_HELLO), ZMQ_SNDMORE) < 0 ||
        zmq_send(ul->sock, ul->node, strlen(ul->node), ZMQ_SNDMORE) < 0 ||
        zmq_send(ul->sock, session, sizeof session, 0) < 0)
        iot_warn("cannot send HELLO: %s", zmq_strerror(zmq_errno()));
}

static void on_monitor_event(struct uplink *ul)
{
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev);
    zmq_msg_init(&addr);
    if (zmq_msg_recv(&ev, ul->mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        zmq_msg_close(&addr);
        return;
    }
    uint16_t event = 0;
    if (zmq_msg_size(&ev) >= 2)
        memcpy(&event, zmq_msg_data(&ev), 2);
    if (zmq_msg_more(&ev))
        zmq_msg_recv(&addr, ul->mon, 0);
    zmq_msg_close(&ev);
    zmq_msg_close(&addr);

    switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        /* Said once until a session opens. */
        if (!ul->auth_logged)
            iot_err("collector %s refused this agent's CURVE key (not among its "
                    "--curve-clients); batches are kept and sent once it is admitted",
                    ul->endpoint);
        ul->auth_logged = 1;
        back_off(ul);
        break;
    case ZMQ_EVENT_CONNECTED:
        if (ul->ever_connected)
            ul->stats->reconnects++;
        ul->ever_connected = 1;
        iot_info("connected to collector %s", ul->endpoint);
        send_hello(ul);
        break;
    case ZMQ_EVENT_DISCONNECTED:
        iot_warn("lost the connection to collector %s; %zu batches in flight will be resent",
                 ul->endpoint, ul->spool->in_flight);
        restart_session(ul);
        break;
    case ZMQ_EVENT_CONNECT_RETRIED:
        if (!ul->retry_logged)
            iot_info("collector %s not reachable yet; retrying", ul->endpoint);
        ul->retry_logged = 1;
        break;
    default:
        if (!ul->auth_logged)
            iot_warn("handshake with collector %s failed (event 0x%x)%s", ul->endpoint, event,
                     ul->curve_own ? "" : ": does it require CURVE?");
        ul->auth_logged = 1;
        back_off(ul);
        break;
    }
}

/* A key of this session's own for the clock exchanges over UDP
 * (common/clockudp.h), given over this link, which CURVE encrypts: an
 * older collector ignores it (and logs a message of unknown type), and the
 * clock stays on PING. */
static void send_clock_key(struct uplink *ul)
{
    ul->clock_port = -1;
    randombytes_buf(ul->clock_key, sizeof ul->clock_key);
    do
        randombytes_buf(&ul->clock_key_id, sizeof ul->clock_key_id);
    while (!ul->clock_key_id);
    uint8_t id[8];
    iot_put_u64(id, ul->clock_key_id);
    if (zmq_send(ul->sock, IOT_LINK_PROTO, strlen(IOT_LINK_PROTO), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(ul->sock, IOT_LINK_CLOCKKEY, strlen(IOT_LINK_CLOCKKEY), ZMQ_SNDMORE) < 0 ||
        zmq_send(ul->sock, id, sizeof id, ZMQ_SNDMORE) < 0 ||
        zmq_send(ul->sock, ul->clock_key, sizeof ul->clock_key, 0) < 0)
        iot_debug("CLOCKKEY not sent: %s", zmq_strerror(zmq_errno()));
}

static void on_clockudp(struct uplink *ul, zmq_msg_t *f, int n)
{
    if (n != 3 || zmq_msg_size(&f[2]) != 2) {
        iot_warn("malformed CLOCKUDP from the collector");
        return;
    }
    const uint8_t *p = zmq_msg_data(&f[2]);
    ul->clock_port = p[0] | p[1] << 8;
}

static void on_welcome(struct uplink *ul, zmq_msg_t *f, int n)
{
    if (n != 3 || zmq_msg_size(&f[2]) != 4) {
        iot_warn("malformed WELCOME from the collector");
        return;
    }
    uint32_t credit = iot_get_u32(zmq_msg_data(&f[2]));
    if (credit > MAX_CREDIT)
        credit = MAX_CREDIT;
    if (credit == 0)
        iot_warn("collector granted no credit; nothing can be sent in this session");
    if (ul->state != UPLINK_WAIT_WELCOME)
        iot_warn("unexpected WELCOME; taking its credit of %u", credit);
    else
        iot_info("collector welcomed us with credit %u; %zu batches pending", credit,
                 ul->spool->count);
    ul->credit = credit;
    ul->state = UPLINK_READY;
    ul->auth_logged = 0;
    ul->backoff_ns = 0;
    ul->sessions++;
    send_clock_key(ul);
}

static void log_rejection(struct uplink *ul, const char *key, uint64_t seq, zmq_msg_t *reason)
{
    uint64_t suppressed = 0;
    if (!ratelimit_allow(&ul->reject_log, iot_mono_ns(), &suppressed))
        return;
    int rlen = reason ? (int)zmq_msg_size(reason) : 0;
    const char *r = reason ? (const char *)zmq_msg_data(reason) : "";
    iot_warn("collector rejected batch %s seq=%llu: %.*s%s", key, (unsigned long long)seq,
             rlen, r, suppressed ? " (and more since the last report)" : "");
}

#define HOLD_MIN_NS 1000000000ll
#define HOLD_MAX_NS 8000000000ll

/* The collector kept nothing of a batch for want of room: the agent keeps
 * it, and pauses before sending again, so that a full collector is not
 * sent every batch over and over (one answer per batch, each pause
 * longer). */
static void hold_sending(struct uplink *ul, int64_t now)
{
    ul->stats->deferred++;
    ul->deferred_run++;
    if (now < ul->hold_until)
        return; /* an answer of the round already paused */
    ul->hold_ns = ul->hold_ns ? (ul->hold_ns * 2 < HOLD_MAX_NS ? ul->hold_ns * 2 : HOLD_MAX_NS)
                              : HOLD_MIN_NS;
    ul->hold_until = now + ul->hold_ns;
    uint64_t suppressed;
    if (ratelimit_allow(&ul->defer_log, now, &suppressed))
        iot_warn("collector %s has no room in its store: %zu batches held here, sending "
                 "again in %.0f s",
                 ul->endpoint, ul->spool->count, ul->hold_ns / 1e9);
}

static void on_ack(struct uplink *ul, zmq_msg_t *f, int n)
{
    if (n < 6 || zmq_msg_size(&f[3]) != 8 || zmq_msg_size(&f[4]) != 8 ||
        zmq_msg_size(&f[5]) != 1 || zmq_msg_size(&f[2]) >= 512) {
        iot_warn("malformed ACK from the collector");
        return;
    }
    char key[512];
    memcpy(key, zmq_msg_data(&f[2]), zmq_msg_size(&f[2]));
    key[zmq_msg_size(&f[2])] = '\0';
    uint64_t epoch = iot_get_u64(zmq_msg_data(&f[3]));
    uint64_t seq = iot_get_u64(zmq_msg_data(&f[4]));
    uint8_t status = *(const uint8_t *)zmq_msg_data(&f[5]);

    ul->quiet_since = iot_mono_ns();
    if (status == IOT_ACK_DEFERRED) {
        if (spool_defer(ul->spool, key, epoch, seq))
            hold_sending(ul, ul->quiet_since);
        return;
    }
    if (ul->deferred_run && status != IOT_ACK_REJECTED) {
        iot_info("collector %s stores again (%llu batches were deferred and are sent again)",
                 ul->endpoint, (unsigned long long)ul->deferred_run);
        ul->deferred_run = 0;
        ul->hold_ns = 0;
    }
    if (spool_ack(ul->spool, key, epoch, seq) == SPOOL_ACK_UNKNOWN) {
        iot_debug("ACK for a batch not held: %s epoch=%016llx seq=%llu", key,
                  (unsigned long long)epoch, (unsigned long long)seq);
        return;
    }
    ul->stats->acked++;
    if (status == IOT_ACK_DUPLICATE)
        ul->stats->duplicates++;
    else if (status == IOT_ACK_REJECTED) {
        ul->stats->rejected++;
        log_rejection(ul, key, seq, n > 6 ? &f[6] : NULL);
    }
}

/* t4 is taken first thing: whatever this loop turn did before reading the
 * message already counts in the round trip, nothing after it should. */
static void on_pong(struct uplink *ul, zmq_msg_t *f, int n)
{
    int64_t t4 = iot_now_ns();
    if (n != 5 || zmq_msg_size(&f[2]) != 8 || zmq_msg_size(&f[3]) != 8 ||
        zmq_msg_size(&f[4]) != 8) {
        iot_warn("malformed PONG from the collector");
        return;
    }
    if (ul->on_pong)
        ul->on_pong(ul->pong_ctx, (int64_t)iot_get_u64(zmq_msg_data(&f[2])),
                    (int64_t)iot_get_u64(zmq_msg_data(&f[3])),
                    (int64_t)iot_get_u64(zmq_msg_data(&f[4])), t4);
}

static const struct {
    const char *type;
    void (*handle)(struct uplink *ul, zmq_msg_t *frames, int n);
} handlers[] = {
    {IOT_LINK_WELCOME, on_welcome},
    {IOT_LINK_ACK, on_ack},
    {IOT_LINK_PONG, on_pong},
    {IOT_LINK_CLOCKUDP, on_clockudp},
};

static int frame_is(zmq_msg_t *f, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size(f) == n && !memcmp(zmq_msg_data(f), s, n);
}

static void dispatch(struct uplink *ul, zmq_msg_t *f, int n)
{
    if (n < 2 || !frame_is(&f[0], IOT_LINK_PROTO)) {
        iot_warn("message from the collector without the %s header; ignored", IOT_LINK_PROTO);
        return;
    }
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (frame_is(&f[1], handlers[i].type)) {
            handlers[i].handle(ul, f, n);
            return;
        }
    iot_warn("unknown message type '%.*s' from the collector; ignored",
             (int)zmq_msg_size(&f[1]), (const char *)zmq_msg_data(&f[1]));
}

/* Returns 0 when no message was waiting.  Frames past MAX_FRAMES are read
 * and dropped so that one odd message cannot desynchronise the socket. */
static int receive_one(struct uplink *ul)
{
    zmq_msg_t f[MAX_FRAMES];
    int n = 0, seen = 0, more = 1;
    while (more) {
        zmq_msg_t scratch, *m = n < MAX_FRAMES ? &f[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, ul->sock, seen == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(m);
            for (int i = 0; i < n; i++)
                zmq_msg_close(&f[i]);
            return 0;
        }
        more = zmq_msg_more(m);
        seen++;
        if (m == &scratch)
            zmq_msg_close(m);
        else
            n++;
    }
    dispatch(ul, f, n);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
    return 1;
}

void uplink_poll_items(const struct uplink *ul, zmq_pollitem_t *items)
{
    /* Without a socket, fd -1: zmq_poll would otherwise watch fd 0. */
    items[0] = (zmq_pollitem_t){.socket = ul->sock, .fd = -1, .events = ZMQ_POLLIN};
    items[1] = (zmq_pollitem_t){.socket = ul->mon, .fd = -1, .events = ZMQ_POLLIN};
}

void uplink_handle(struct uplink *ul, const zmq_pollitem_t *items)
{
    if (!ul->sock)
        return;
    if (items[1].revents & ZMQ_POLLIN)
        on_monitor_event(ul);
    /* The monitor may have replaced the socket the poll items name. */
    if (items[0].socket == ul->sock && (items[0].revents & ZMQ_POLLIN))
        while (receive_one(ul))
            ;
}

static int send_batch(struct uplink *ul, const struct spool_entry *e)
{
    if (zmq_send(ul->sock, IOT_LINK_PROTO, strlen(IOT_LINK_PROTO), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    if (zmq_send(ul->sock, IOT_LINK_BATCH, strlen(IOT_LINK_BATCH), ZMQ_SNDMORE) < 0 ||
        zmq_send(ul->sock, e->data, e->len, 0) < 0) {
        iot_warn("sending a batch: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

void uplink_pump(struct uplink *ul)
{
    if (ul->state != UPLINK_READY || (ul->hold_until && iot_mono_ns() < ul->hold_until))
        return;
    struct spool_entry *e;
    while (ul->spool->in_flight < ul->credit && (e = spool_next_unsent(ul->spool))) {
        if (send_batch(ul, e) < 0)
            return;
        if (ul->spool->in_flight == 0)
            ul->quiet_since = iot_mono_ns();
        if (e->sends > 0)
            ul->stats->resent++;
        spool_mark_sent(ul->spool, e);
        ul->stats->forwarded++;
    }
}

int uplink_send_ping(struct uplink *ul, int64_t *t1)
{
    if (ul->state != UPLINK_READY)
        return -1;
    uint8_t stamp[8];
    *t1 = iot_now_ns();
    iot_put_u64(stamp, (uint64_t)*t1);
    if (zmq_send(ul->sock, IOT_LINK_PROTO, strlen(IOT_LINK_PROTO), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    if (zmq_send(ul->sock, IOT_LINK_PING, strlen(IOT_LINK_PING), ZMQ_SNDMORE) < 0 ||
        zmq_send(ul->sock, stamp, sizeof stamp, 0) < 0) {
        iot_warn("sending a clock PING: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

void uplink_tick(struct uplink *ul, int64_t now_ns)
{
    if (!ul->sock) {
        if (now_ns >= ul->retry_at)
            restart_session(ul);
        return;
    }
    int waiting = ul->state == UPLINK_WAIT_WELCOME ||
                  (ul->state == UPLINK_READY && ul->spool->in_flight > 0);
    if (!waiting || now_ns - ul->quiet_since < ul->credit_timeout_ns)
        return;
    if (ul->state == UPLINK_WAIT_WELCOME)
        iot_warn("no WELCOME from collector %s within %.1f s; reconnecting", ul->endpoint,
                 ul->credit_timeout_ns / 1e9);
    else
        iot_warn("no acknowledgement from collector %s within %.1f s with %zu batches in "
                 "flight; reconnecting to resend them",
                 ul->endpoint, ul->credit_timeout_ns / 1e9, ul->spool->in_flight);
    restart_session(ul);
}

void uplink_close(struct uplink *ul) { close_socket(ul); }
