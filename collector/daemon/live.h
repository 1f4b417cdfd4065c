/* Live analysis: a thread that follows the store as the ingest loop makes
 * it durable and runs the pipeline of iotrace-export --stats over every
 * batch (analysis/pipeline.h), per job, while the job runs.  It reads the
 * store, not the ingest loop's memory, so it can fall behind without
 * holding up ingest or acknowledgements, and it never loses a batch.
 *
 * A job is running while batches of its processes arrive; it is finished
 * after `job_idle_ns` without one.  Its final statistics are then computed
 * from the store exactly as `iotrace-export --stats --format json --job`
 * computes them (with every clock sample, which the live figures could
 * not yet use), kept for `keep_ns`, and recomputed from the store when
 * asked for after that.  Everything the HTTP server shows is built from
 * this state under live->lock (docs/http-api.md). */
#ifndef IOT_DAEMON_LIVE_H
#define IOT_DAEMON_LIVE_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "ingest.h"

struct live_config {
    const char *store;
    int64_t lateness_ns, grace_ns;
    int64_t job_idle_ns; /* silence after which a job is finished */
    /* Silence after which a producer no longer holds the merge's watermark
     * back in the running figures.  Shorter than the store readers' (final
     * figures, iotrace-export): there a quiet producer only delays a
     * result, here it freezes what the dashboard shows of a quiet job. */
    int64_t producer_idle_ns;
    int64_t keep_ns;     /* how long a finished job's figures stay in memory */
    int nice;            /* the analysis thread's niceness, above ingest's */
    int64_t yield_ns;    /* while no core is spare, wait this long at most; 0: never */
};

struct live;

/* Starts the thread; NULL with a reason in err. */
struct live *live_start(const struct live_config *cfg, struct ingest_view *ingest, char *err,
                        size_t errlen);
void live_stop(struct live *l);

/* Waits until the live state changes or timeout_ms passes; returns the
 * update counter (for Server-Sent Events). */
uint64_t live_wait_update(struct live *l, uint64_t seen, int timeout_ms);

/* JSON documents of the HTTP API (docs/http-api.md); NULL when out of
 * memory.  A job that is not known gives *status 404. */
/* Running jobs, then finished ones, the latest first: those of the states
 * asked for, at most finished_limit finished ones and limit in all (0: no
 * limit). */
enum { LIVE_RUNNING = 1, LIVE_FINISHED = 2, LIVE_ALL = 3 };
/* only_uid: the jobs of that uid alone (a job whose owner is not known is
 * nobody's), or LIVE_ANY_UID for every job. */
#define LIVE_ANY_UID (-1)
json_t *live_jobs_json(struct live *l, unsigned states, size_t finished_limit, size_t limit,
                       int64_t only_uid);
/* The uid the job belongs to, -1 when not known; *known 0 when there is no
 * such job. */
int64_t live_job_owner(struct live *l, const char *job, int *known);
json_t *live_nodes_json(struct live *l);
json_t *live_status_json(struct live *l);
/* The job's statistics: exactly iotrace-export --stats --format json --job. */
char *live_job_stats(struct live *l, const char *job, int *status);
/* The timeline and the series take a cursor: 0 for the whole view, else
 * the `cursor` of an earlier answer for only what was added or changed
 * since (docs/http-api.md). */
json_t *live_job_timeline(struct live *l, const char *job, double from_s, double to_s,
                          uint64_t since, int *status);
json_t *live_job_series(struct live *l, const char *job, uint64_t since, int *status);
int live_job_known(struct live *l, const char *job);
/* The job's line of the job list, or JSON null while it is not known. */
json_t *live_job_json(struct live *l, const char *job);

/* The storage servers now (/api/v1/servers): totals, the rates of the last
 * seconds, latency p50/p99 and the jobs with the most bytes on each (only
 * only_uid's, or any with LIVE_ANY_UID). */
json_t *live_servers_json(struct live *l, int64_t only_uid);

/* Prometheus text exposition of the daemon (collector, agents, jobs): the
 * jobs' series of only_uid's jobs, or every job's (LIVE_ANY_UID). */
char *live_metrics(struct live *l, int64_t only_uid);

#endif
