/* Clock synchronisation with the collector: NTP-style exchanges, a burst at
 * a time, over UDP with the kernel's receive times where the collector
 * answers there (common/clockudp.h: CLOCKKEY/CLOCKUDP on the uplink), else
 * over the uplink itself (PING/PONG, common/link.h).
 *
 * Each exchange yields t1 (agent sends PING), t2 (collector reads it), t3
 * (collector sends PONG), t4 (agent reads PONG), giving
 *     offset = ((t2 - t1) + (t3 - t4)) / 2    collector clock - node clock
 *     rtt    = (t4 - t1) - (t3 - t2)
 * The true offset lies within offset +- rtt/2 whatever the path asymmetry,
 * so of a burst only the exchange with the smallest rtt is kept.  It becomes
 * one ClockSync record in a batch of the agent's own (producer kind AGENT),
 * which goes through the pending store like a producer's batch: stored
 * durably by the collector, resent after a reconnect.
 *
 * Bursts start right after every WELCOME and then every interval.  A
 * collector that never answers (an older one) costs one unanswered PING per
 * burst and nothing else: no sample, and batches flow as before. */
#ifndef IOT_AGENT_CLOCKSYNC_H
#define IOT_AGENT_CLOCKSYNC_H

#include <stdint.h>

#include "wire.h"

struct uplink;
struct spool;
struct agent_stats;

#define CLOCKSYNC_BURST 8 /* exchanges per burst */

struct clocksync {
    struct uplink *ul;
    struct spool *spool;
    struct agent_stats *stats;
    int64_t interval_ns; /* 0: clock synchronisation off */

    const char *peer; /* collector endpoint, recorded in every sample */
    iot_producer id;  /* the agent as a producer of clock batches */
    char key[512];
    uint64_t epoch, seq;

    uint64_t session_seen;  /* uplink session the current schedule belongs to */
    int64_t session_at;     /* monotonic: when it was seen first */
    int session_answered;   /* a PONG arrived in this session */
    int silence_logged;
    int64_t next_burst;     /* monotonic ns */
    int in_burst;
    int sent;               /* exchanges started in this burst */
    int answered;           /* of those, answered in time */
    int waiting;            /* a PING is unanswered */
    int64_t t1;             /* of that PING, node clock */
    int64_t deadline;       /* monotonic: give up waiting */
    int64_t next_ping;      /* monotonic: spacing between exchanges */
    int have_best;
    int64_t best_offset, best_local;
    uint64_t best_rtt;

    /* Over UDP (common/clockudp.h) when the collector gave a port for the
     * session's key: the socket (connected to the collector's address,
     * -1 without), the port it was made for, whether this burst uses it,
     * and whether it answered or was given up on in this session. */
    int udp_fd;
    int udp_port;
    int burst_udp;
    int udp_answered, udp_failed;
    uint64_t nonce; /* of the exchange waiting */
};

/* `node` and `peer` (the collector endpoint, recorded in every sample) must
 * outlive the clocksync.  Registers the PONG handler with the uplink. */
void clocksync_init(struct clocksync *cs, struct uplink *ul, struct spool *sp,
                    struct agent_stats *st, const char *node, const char *peer,
                    int64_t interval_ns);

/* Starts bursts, sends PINGs and gives up on unanswered ones.  Call every
 * loop turn. */
void clocksync_tick(struct clocksync *cs, int64_t now_mono);

/* The UDP socket to poll for answers (ZMQ_POLLIN), -1 when there is none. */
int clocksync_fd(const struct clocksync *cs);

/* Reads the answers waiting on that socket. */
void clocksync_readable(struct clocksync *cs);

/* Monotonic time by which clocksync_tick wants to run again (INT64_MAX if
 * nothing is scheduled), to bound the poll timeout. */
int64_t clocksync_due(const struct clocksync *cs);

/* No more exchanges (shutdown): a burst in progress is abandoned. */
void clocksync_stop(struct clocksync *cs);

#endif
