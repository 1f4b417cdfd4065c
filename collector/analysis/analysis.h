/* The collector's analysis pipeline, independent of where events come
 * from (a store read by iotrace-export, or batches arriving live):
 *
 *   push ──► merge (time order behind a watermark, analysis_merge.h)
 *                 │
 *                 ├──► optional ordered-event sink
 *                 ├──► match (calls ⋈ disk operations on (job, CallID),
 *                 │           collective groups, analysis_match.h)
 *                 └──► statistics per job (analysis_stats.h) ◄── closed calls
 *
 * Events must already be on the collector's clock (events.c aligns
 * them).  pipeline.h feeds it from a store or from live batches.  Everything runs in the caller's thread; the memory held is the
 * events behind the watermark plus the calls in flight, never the trace.
 *
 * Usage: iot_an_init(); for each batch: iot_an_producer() for a producer
 * not yet described, iot_an_push() its events, iot_an_advance(arrival
 * time); iot_an_close_producer() when a producer is known to have ended;
 * iot_an_finish() at the end; then read an->stats. */
#ifndef IOT_ANALYSIS_H
#define IOT_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis_match.h"
#include "analysis_merge.h"
#include "analysis_stats.h"
#include "events.h"

struct iot_an_config {
    int64_t lateness_ns; /* how far behind its newest event a producer may still send one */
    int64_t grace_ns;    /* how long after a call's end its disk operations may start */
    int64_t idle_ns;     /* silence (arrival time) after which a producer stops holding the
                            watermark back; 0: never */
    int no_stats;        /* match only: no statistics (drawing) */
    /* Optional: receives every event in merged order, before the matcher
     * does; *tag (UINT32_MAX unless set) is handed back with the pairs the
     * event is part of (iot_match_pair_sink). */
    int (*ordered)(void *ctx, const struct xp_event *ev, uint32_t *tag);
    iot_match_pair_sink pairs; /* optional: every call -> disk operation pair */
    void *ctx;                 /* for ordered and pairs */
};

/* Defaults of iotrace-export --stats (docs/statistics.md). */
#define IOT_AN_DEFAULT_LATENESS_NS 2000000000ll
#define IOT_AN_DEFAULT_GRACE_NS 2000000000ll
#define IOT_AN_DEFAULT_IDLE_NS 10000000000ll

struct iot_an {
    struct iot_an_config cfg;
    struct iot_merge merge;
    struct iot_match match;
    struct iot_an_stats stats;
    uint32_t *server; /* per producer: server id of its disk operations */
    size_t n_server;
};

/* What is held, for memory reports and the benchmark. */
struct iot_an_memory {
    size_t events_held, events_peak; /* in the merge */
    size_t entries_held, entries_peak; /* (job, CallID) entries in the matcher */
    size_t groups_held, groups_peak;
    size_t merge_bytes, match_bytes, stats_bytes; /* allocated */
    uint64_t pushed, late;
    int64_t max_late_ns;
    int64_t watermark;
};

int iot_an_init(struct iot_an *an, const struct iot_an_config *cfg);
void iot_an_free(struct iot_an *an);

/* Says which server a producer's disk operations come from (any dense id
 * the caller chooses; the statistics are kept per id). */
int iot_an_producer(struct iot_an *an, uint32_t producer, uint32_t server);

/* One event (ev->producer, ev->job: the caller's dense ids).  -1 when out
 * of memory. */
int iot_an_push(struct iot_an *an, const struct xp_event *ev);

/* Releases what the watermark allows at arrival time now_ns. */
int iot_an_advance(struct iot_an *an, int64_t now_ns);

void iot_an_close_producer(struct iot_an *an, uint32_t producer);

/* Its slot is about to go to another producer (xp_retire_producers): -1
 * while the merge still holds events of it.  Events of it the matcher
 * still holds are told apart by their job, not their producer. */
int iot_an_forget_producer(struct iot_an *an, uint32_t producer);

/* End of input: everything is released, matched and counted. */
int iot_an_finish(struct iot_an *an);

void iot_an_memory(const struct iot_an *an, struct iot_an_memory *m);

#endif
