/* What the ingest loop shows the rest of the daemon: its counters, the
 * agents it has heard from and how far the store is durable.  The ingest
 * thread publishes a copy once per group commit under `lock`; readers (the
 * live analysis, HTTP) copy it out, so neither waits on the other for long. */
#ifndef IOT_DAEMON_INGEST_H
#define IOT_DAEMON_INGEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define IOT_INGEST_MAX_AGENTS 1024
#define IOT_INGEST_NODE_MAX 64

/* By the kind of the sending producer (Iotrace__ProducerKind 0..3). */
#define IOT_INGEST_KINDS 4

struct ingest_counters {
    uint64_t batches[IOT_INGEST_KINDS], events[IOT_INGEST_KINDS]; /* stored */
    uint64_t dup_batches, dup_events;
    uint64_t rejected, malformed;
    uint64_t auth_refused; /* connections refused by CURVE authentication */
    uint64_t bytes_stored; /* batch bytes appended and synced */
    uint64_t acks;         /* acknowledgements sent, any status */
    uint64_t syncs;        /* group commits that reached the disk */
    uint64_t deferred;     /* batches not acknowledged for want of room (sent again) */
    int store_full;        /* no room in the store now: nothing is acknowledged */
    int64_t store_full_since_ns; /* CLOCK_REALTIME */
};

struct ingest_agent {
    char node[IOT_INGEST_NODE_MAX];
    int64_t first_seen_ns, last_seen_ns; /* CLOCK_REALTIME */
    uint64_t batches, events, sessions;
};

struct ingest_view {
    pthread_mutex_t lock;
    pthread_cond_t stored; /* signalled when `durable` moves */
    struct ingest_counters count;
    struct ingest_agent agents[IOT_INGEST_MAX_AGENTS];
    size_t n_agents;
    struct iot_store_pos durable;
    /* Records the store held when the collector started: with the batches
     * stored since, what the live analysis has to read. */
    uint64_t records_at_start;
    int64_t started_ns;
    int stopping;
};

void ingest_view_init(struct ingest_view *v);

/* The agent record of a node, added if new (the oldest is reused when the
 * table is full).  Called with v->lock held. */
struct ingest_agent *ingest_view_agent(struct ingest_view *v, const char *node);

#endif
