/* Statistics per job, fed with the merged event stream and with the calls
 * the matcher closes (docs/statistics.md defines every figure).
 *
 * Memory: per job, per MPI-IO function a duration histogram (about 1 KiB
 * per power of two of durations seen) and per storage server a few words;
 * nothing per event or per call. */
#ifndef IOT_ANALYSIS_STATS_H
#define IOT_ANALYSIS_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis_match.h"
#include "analysis_quantile.h"
#include "events.h"

/* Disk operations per call: 0, 1, 2, 3-4, 5-8, 9-16, more than 16. */
#define IOT_AN_OPS_BUCKETS 7
extern const char *const iot_an_ops_bucket_names[IOT_AN_OPS_BUCKETS];

#define IOT_AN_FUNCS 128 /* MPI-IO function ids are below 128 */

struct iot_an_func {
    uint64_t count, bytes, time_ns; /* every MPI-IO event of the function */
    struct iot_qhist dur;           /* their durations */
    uint64_t samples, ops_sum, ops_max; /* disk operations per call, over closed calls */
    uint64_t ops_hist[IOT_AN_OPS_BUCKETS];
    uint64_t disk_bytes; /* bytes of the disk operations that carried these calls' CallIDs */
};

struct iot_an_server {
    uint64_t ops, bytes;
    uint64_t busy_ns; /* closed busy intervals; see iot_an_busy_ns() */
    int64_t from, to; /* the busy interval being extended */
    int open;
};

struct iot_an_job {
    struct iot_an_func *func[IOT_AN_FUNCS];
    struct iot_an_server *server; /* indexed by server id */
    size_t n_server;
    uint64_t call_bytes;   /* bytes of MPI-IO calls, completion records excluded */
    uint64_t call_time_ns; /* durations of all MPI-IO events */
    uint64_t disk_ops, disk_bytes; /* every disk operation tagged with the job */
    uint64_t attr_disk_bytes, attr_disk_time_ns; /* those attributed to a call */
    uint64_t unmatched_calls, unmatched_disk_ops, dropped_events;
    /* CallIDs of unmatched disk operations that no call of the job came
     * for afterwards: calls that the disks saw and the store has no record
     * of (died with their process, dropped, or outside their window).  A
     * set (open addressing, 0 free) of at most IOT_AN_DISK_ONLY_MAX, so a
     * call counts once however many operations it had; past it, counted in
     * disk_only_more without a rank. */
    uint64_t *disk_only;
    size_t disk_only_n, disk_only_cap;
    uint64_t disk_only_more;
    uint64_t events; /* events and drop records */
    int64_t first_ns, last_ns; /* span of the calls and disk operations counted */
    int spanned;               /* first_ns and last_ns hold a value */
};

struct iot_an_stats {
    struct iot_an_job **job; /* indexed by job id; NULL: no event of that job */
    size_t n_job;
    uint64_t unattributed_drops; /* drop records of producers without a job (servers) */
    size_t bytes;                /* allocated for jobs, functions and servers */
    int failed;                  /* ran out of memory while taking a closed call */
    uint8_t completion[IOT_AN_FUNCS];
};

#define IOT_AN_DISK_ONLY_MAX 65536

/* Calls seen only by their disk operations, per rank (the CallID's upper
 * 24 bits), in rank order: *out (malloc'd, freed by the caller) and their
 * number; SIZE_MAX when out of memory.  Their total is disk_only_n +
 * disk_only_more. */
struct iot_an_rank_count {
    uint32_t rank;
    uint64_t calls;
};
size_t iot_an_disk_only_ranks(const struct iot_an_job *j, struct iot_an_rank_count **out);

void iot_an_stats_init(struct iot_an_stats *s);
void iot_an_stats_free(struct iot_an_stats *s);

/* One event of the merged stream; `server` is the server id of a disk
 * operation's producer.  -1 when out of memory. */
int iot_an_stats_event(struct iot_an_stats *s, const struct xp_event *ev, uint32_t server);

/* One entry the matcher closed (an iot_match_sink). */
void iot_an_stats_closed(void *stats, const struct iot_match_closed *c);

/* Frees a job's figures (a finished job the daemon no longer shows); an
 * event of the job after that starts them again from zero. */
void iot_an_stats_forget(struct iot_an_stats *s, uint32_t job);

/* A server's busy time: the closed intervals plus the open one. */
uint64_t iot_an_busy_ns(const struct iot_an_server *sv);

/* Bucket of iot_an_ops_bucket_names for a number of disk operations. */
unsigned iot_an_ops_bucket(uint64_t ops);

#endif
