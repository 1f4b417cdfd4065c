/* The live analysis's state, shared by its three parts: the thread that
 * follows the store and keeps per-job figures and views (live.c), the JSON
 * documents of the HTTP API built from them (live_json.c) and the
 * Prometheus exposition (live_metrics.c).  Everything here is guarded by
 * live->lock but for what the thread alone touches (said where). */
#ifndef IOT_DAEMON_LIVE_INT_H
#define IOT_DAEMON_LIVE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis_quantile.h"
#include "idlecores.h"
#include "live.h"
#include "pipeline.h"

/* What the dashboard's live views keep per running job: the newest calls,
 * disk operations and pairs (the timeline) and one row per second of event
 * time (the charts).  Bounded, whatever the job's length. */
#define TL_CALLS 4096
#define TL_DISK 8192
#define TL_PAIRS 8192
#define SERIES 600
#define SERIES_SERVERS 16 /* per-server disk bytes; further servers are summed as "other" */
#define TICK_MS 250

/* Every item of a job's views carries `seq`, the job's view_seq when it was
 * added or last changed: a client that has seen up to N asks for what is
 * newer (?since=N) instead of the whole view again. */
struct tl_item {
    int64_t t_start, t_end, offset;
    uint64_t seq, id, callid, bytes, file;
    uint32_t producer, tid, server;
    uint16_t func;
    uint8_t kind;
};

struct tl_pair {
    uint64_t seq, call, disk;
};

struct second {
    int64_t sec; /* event time, collector clock, whole seconds */
    uint64_t seq;
    uint64_t calls, read_bytes, write_bytes;
    uint64_t disk_bytes[SERIES_SERVERS + 1];
    uint64_t p50_ns, p99_ns;
};

#define RING(type, n)                                                                         \
    struct {                                                                                   \
        type *v;                                                                               \
        size_t head, len;                                                                      \
    }

struct ljob {
    uint32_t job; /* in l->d.jobs */
    int finished;
    uint64_t events, calls, bytes_read, bytes_written, dropped, disk_ops, disk_bytes;
    int64_t first_ns, last_ns; /* event times, collector clock */
    int64_t last_arrival;      /* when its newest batch was stored (collector clock) */
    int64_t finished_at;       /* monotonic */
    char *final;               /* final statistics (iotrace-export --stats --format json) */
    int unsettled;             /* final, but a node's clock lacks a sample after its end */
    size_t clock_samples;      /* of its nodes, when final was computed */
    int views;                 /* rings and series allocated */
    uint64_t view_seq;         /* changes to its views so far; never goes back */
    int forgotten;             /* finished and out of memory but for this summary */
    uint32_t processes, ranks, nodes; /* counted by count_members() */
    uint32_t unaligned; /* clocks of its events (forwarding agents) without samples */
    RING(struct tl_item, TL_CALLS) calls_tl;
    RING(struct tl_item, TL_DISK) disk_tl;
    RING(struct tl_pair, TL_PAIRS) pairs_tl;
    RING(struct second, SERIES) series;
    struct iot_qhist open_q; /* call durations of the newest second */
};

/* A storage server's last seconds (live_servers.c). */
#define LSV_SECONDS 8   /* slots: the window and the seconds still filling */
#define LSV_RATE_S 5    /* the window: RATE_S seconds that ended LSV_LAG_S ago */
#define LSV_LAG_S 2
#define LSV_BUCKETS 128 /* latency, a quarter octave each from 1 ns */
#define LSV_JOBS 8      /* jobs told apart per second */
struct lsv_second {
    int64_t sec; /* event time, collector clock, whole seconds */
    uint64_t ops, read_bytes, write_bytes, others;
    uint32_t lat[LSV_BUCKETS];
    uint32_t job[LSV_JOBS]; /* 0: free */
    uint64_t job_bytes[LSV_JOBS];
};
struct lserver {
    int seen;
    uint64_t ops, read_bytes, write_bytes; /* since the collector started */
    uint64_t read_ops, write_ops;
    uint64_t lat_total[LSV_BUCKETS]; /* since the collector started: /metrics */
    uint64_t lat_sum_ns;
    struct lsv_second sec[LSV_SECONDS];
};
int live_servers_event(struct live *l, const struct xp_event *ev, uint32_t server);
void live_servers_free(struct live *l);

struct live {
    struct live_config cfg;
    struct ingest_view *ingest;
    pthread_t thread;
    int running;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t updated;
    uint64_t update_seq;
    int stop;
    struct xp_data d;
    struct iot_pipe pipe;
    struct ljob **jobs; /* by job id */
    size_t n_jobs;
    struct iot_store_pos pos; /* the live thread's own */
    /* The end of the store the live thread last read up to, and when it
     * took that end: whatever was stored after it is unread, and none of
     * it has waited longer than since read_at_ns (docs/http-api.md,
     * analysis_lag_s). */
    struct iot_store_pos read_to;
    int64_t read_at_ns;
    uint64_t records_read; /* store records, whether they decode or not */
    uint64_t batches_read, events_read;
    int64_t newest_arrival_ns; /* recv time of the newest batch read (collector clock) */
    int64_t current_arrival;   /* of the batch being read */
    uint64_t finalized, recomputed;
    struct iot_idlecores cores; /* the live thread's own */
    int waiting;                /* for a core to spare (--analysis-yield) */
    int64_t waited_ns;
    size_t samples_checked; /* all_samples() when unsettled jobs were last looked at */
    uint64_t members_at; /* batches_read when the jobs' members were last counted */
    uint32_t *retiring;  /* retire_producers()'s list */
    size_t cap_retiring;
    uint64_t retired;    /* processes forgotten so far */
    struct lserver *servers; /* by server id (pipe.names), live_servers.c */
    size_t n_servers;
    int failed;
    char error[512];
};

#define RING_PUSH(r, cap, item)                                                               \
    do {                                                                                       \
        (r).v[((r).head + (r).len) % (cap)] = (item);                                          \
        if ((r).len < (cap))                                                                   \
            (r).len++;                                                                         \
        else                                                                                   \
            (r).head = ((r).head + 1) % (cap);                                                 \
    } while (0)

#define RING_AT(r, cap, i) ((r).v[((r).head + (i)) % (cap)])
/* An agent counts as connected while it was heard from (a batch or a clock
 * exchange) within this long; agents exchange clocks every few seconds. */
#define CONNECTED_NS (30ll * 1000000000)

/* How far the live analysis is behind the store: the batches stored and
 * not read yet, and how long the oldest of them has waited at most (0 when
 * none).  `durable` and `stored` (records in the store) are the ingest
 * view's; called with live->lock held. */
struct live_lag {
    uint64_t batches;
    int64_t ns;
};
void live_lag(const struct live *l, const struct iot_store_pos *durable, uint64_t stored,
              struct live_lag *out);

/* Free space of the store's file system in bytes, NAN when unknown. */
double live_store_free_bytes(const char *store);

#endif
