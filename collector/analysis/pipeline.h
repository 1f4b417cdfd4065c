/* The one pipeline driver: what every consumer of events runs, so that the
 * rules for jobs and for late batches are written once.
 *
 *   stored batches ──► events (decode, intern, align; events.h)
 *        (a store read by iotrace-export, or batches the daemon just stored)
 *                 ──► job rules (below) ──► iot_an (merge, match, statistics)
 *
 * Job rules:
 *  - an event of a process that learned its job later (in MPI_Init) belongs
 *    to that job, as soon as the process's job is known;
 *  - with a job chosen, only its events (and disk operations tagged with it)
 *    go further;
 *  - for statistics only what they count goes further: MPI-IO calls, POSIX
 *    calls inside one (they keep their call open for the matcher), disk
 *    operations and drop records of a job;
 *  - the (job, node) pairs seen are kept, for the clock section of a report.
 * Late batches: after each batch the watermark advances to the batch's
 * arrival time; a producer stops holding it back after its last batch
 * (when the reader knows it: a store read after xp_read_clocks) or after
 * `idle_ns` of silence. */
#ifndef IOT_PIPELINE_H
#define IOT_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "events.h"

struct iot_pipe_config {
    int64_t lateness_ns, grace_ns, idle_ns;
    uint32_t job;  /* in the xp_data's jobs; UINT32_MAX: every job */
    int drawing;   /* every event goes on, no statistics (SLOG-2, timelines) */
    int (*ordered)(void *ctx, const struct xp_event *ev, uint32_t *tag); /* iot_an_config */
    iot_match_pair_sink pairs;
    int (*advanced)(void *ctx, int64_t watermark); /* optional: after each batch */
    void *ctx;
};

struct iot_pipe {
    struct iot_an an;
    struct iot_pipe_config cfg;
    struct xp_strings names; /* server ids: a server producer's identity, else its node */
    uint8_t *known;          /* producers already described to the analysis */
    size_t n_known;
    uint64_t *pairs;         /* job << 32 | node of every event counted */
    size_t n_pairs, cap_pairs;
};

int iot_pipe_init(struct iot_pipe *p, const struct iot_pipe_config *cfg);
void iot_pipe_free(struct iot_pipe *p);

/* An xp_sink and an xp_batch_done (ctx: the iot_pipe) for
 * xp_read_store_batches() or xp_decode_batch(). */
int iot_pipe_event(void *ctx, const struct xp_data *d, const struct xp_event *ev, char *err,
                   size_t errlen);
int iot_pipe_batch_done(void *ctx, const struct xp_data *d, uint32_t producer,
                        uint64_t recv_ns, char *err, size_t errlen);

/* Forgets a producer before xp_retire_producers() gives its slot to
 * another: -1 (nothing done) while the merge still holds events of it. */
int iot_pipe_forget_producer(struct iot_pipe *p, uint32_t producer);

/* Reads the whole store (after xp_read_clocks) and finishes. */
int iot_pipe_run_store(struct iot_pipe *p, const char *store, struct xp_data *d, char *err,
                       size_t errlen);

/* End of input: everything is released, matched and counted. */
int iot_pipe_finish(struct iot_pipe *p, char *err, size_t errlen);

/* The (job, node) pairs seen, sorted and unique (valid until the next event). */
size_t iot_pipe_job_nodes(struct iot_pipe *p, const uint64_t **pairs);

#endif
