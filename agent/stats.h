/* Counters the agent logs every stats interval (when they changed) and at
 * exit.  The final line is what an operator reads to see whether anything
 * was left behind. */
#ifndef IOT_AGENT_STATS_H
#define IOT_AGENT_STATS_H

#include <stdint.h>

struct spool;

struct agent_stats {
    uint64_t received;   /* valid batches taken from producers */
    uint64_t invalid;    /* messages from producers that were not valid batches */
    uint64_t over_quota; /* of those, counted as drop records: their user held its limit */
    uint64_t store_full; /* of those, counted as drop records: the pending store was full */
    uint64_t discarded;  /* valid batches dropped: no room even for their drop records */
    uint64_t forwarded;  /* BATCH messages sent, resends included */
    uint64_t resent;     /* of those, batches sent again after a reconnect */
    uint64_t acked;      /* acknowledgements that removed a batch, any status */
    uint64_t duplicates; /* of those, the collector already had the batch */
    uint64_t rejected;   /* of those, the collector refused the batch */
    uint64_t deferred;   /* answers DEFERRED: no room in the collector's store, the batch kept */
    uint64_t reconnects; /* sessions opened after the first */
    uint64_t connections;  /* producer connections open now (own ipc listener) */
    uint64_t conn_refused; /* producer connections closed at once: over a limit, no descriptor */
    uint64_t conn_dropped; /* closed later: stalled, oversized, not ZMTP */
    uint64_t clock_samples; /* clock batches of the agent's own put in the pending store */
    uint64_t clock_valid;   /* the two below hold the last burst's kept sample (not an
                               int: stats_log compares whole structs, padding included) */
    int64_t clock_offset_ns;
    uint64_t clock_rtt_ns;
};

/* Logs one line if anything changed since the last call (or if `force`). */
void stats_log(const struct agent_stats *st, const struct spool *sp, int force);

/* Lets through one message per interval and counts the rest, so that a
 * producer sending garbage in a loop cannot flood the log. */
struct ratelimit {
    int64_t interval_ns;
    int64_t window_start;
    uint64_t suppressed;
};

/* Returns 1 if a message may be logged now; *suppressed then holds how many
 * were held back since the last one. */
int ratelimit_allow(struct ratelimit *rl, int64_t now_ns, uint64_t *suppressed);

#endif
