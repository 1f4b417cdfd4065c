/* The collector side of the agent: one DEALER session at a time speaking
 * the protocol of common/link.h.
 *
 * A session starts when the TCP connection comes up (HELLO), is usable after
 * WELCOME (credit), and ends when the connection drops or the collector goes
 * quiet for too long.  A session never outlives its socket: the socket is
 * closed and a new one connected, so nothing queued for a dead connection can
 * reach the collector out of order after the next HELLO. */
#ifndef IOT_AGENT_UPLINK_H
#define IOT_AGENT_UPLINK_H

#include <stdint.h>
#include <zmq.h>

#include "curve.h"
#include "stats.h"

struct spool;

enum uplink_state {
    UPLINK_CONNECTING,   /* waiting for the TCP connection */
    UPLINK_WAIT_WELCOME, /* HELLO sent */
    UPLINK_READY,        /* WELCOME received: batches flow within the credit */
};

struct uplink {
    void *zctx;
    const char *endpoint;
    const char *node;
    uint64_t session;
    int64_t credit_timeout_ns;
    struct spool *spool;
    struct agent_stats *stats;

    /* CURVE: this agent's key pair and the collector's public key; NULL
     * for a plain connection. */
    const struct iot_curve_keys *curve_own, *curve_collector;
    int auth_logged;
    /* After a failed handshake the socket stays closed until retry_at, the
     * wait doubling up to 30 s, so that a refused agent does not hammer the
     * collector; a WELCOME resets it. */
    int64_t retry_at, backoff_ns;

    void *sock, *mon;
    unsigned mon_serial;
    enum uplink_state state;
    uint32_t credit;
    int ever_connected;
    int retry_logged;
    int64_t quiet_since; /* when the collector last gave a sign of progress */
    struct ratelimit reject_log;
    uint64_t sessions;   /* WELCOMEs received: a new value means a new session */
    /* After ACK DEFERRED (the collector's store has no room) nothing is
     * sent until hold_until; the pause doubles from 1 s up to 8 s while
     * the answers stay DEFERRED, and ends with the first batch stored. */
    int64_t hold_until, hold_ns;
    uint64_t deferred_run; /* batches deferred since the collector last stored one */
    struct ratelimit defer_log;
    /* This session's key for clock exchanges over UDP (CLOCKKEY) and the
     * port the collector answered (CLOCKUDP): -1 not yet, 0 none. */
    uint8_t clock_key[32];
    uint64_t clock_key_id;
    int clock_port;

    /* Called for every well-formed PONG with its timestamps (t4: when it was
     * read); set by the clock synchronisation. */
    void (*on_pong)(void *ctx, int64_t t1, int64_t t2, int64_t t3, int64_t t4);
    void *pong_ctx;
};

#define UPLINK_POLL_ITEMS 2

int uplink_open(struct uplink *ul, void *zctx, const char *endpoint, const char *node,
                uint64_t session, int64_t credit_timeout_ns, struct spool *sp,
                struct agent_stats *st, const struct iot_curve_keys *own,
                const struct iot_curve_keys *collector);

/* Fills UPLINK_POLL_ITEMS poll items (socket, monitor) ... */
void uplink_poll_items(const struct uplink *ul, zmq_pollitem_t *items);
/* ... and handles whatever they reported. */
void uplink_handle(struct uplink *ul, const zmq_pollitem_t *items);

/* Sends waiting batches, oldest first, while the credit allows. */
void uplink_pump(struct uplink *ul);

/* Sends a PING stamped with the node clock, returned in *t1, taken just
 * before sending.  -1 outside a session (before WELCOME) or if the socket
 * refuses it. */
int uplink_send_ping(struct uplink *ul, int64_t *t1);

/* Ends a session in which the collector stopped answering. */
void uplink_tick(struct uplink *ul, int64_t now_ns);

void uplink_close(struct uplink *ul);

#endif
