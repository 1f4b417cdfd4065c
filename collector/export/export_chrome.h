/* iotrace-export --chrome (alias --perfetto): a store turned into the Chrome
 * trace-event format ("JSON Object Format") that ui.perfetto.dev and the
 * Catapult trace viewer open, streaming (docs/export.md, "--chrome"):
 *
 *   store ──► align ──► merge (start order) ──► tracks ──► "X" slices ─┐
 *                              │                                       ├─► file, as they come
 *                              └──► match (job, CallID) ──► "s"/"f" ───┘
 *
 * One Chrome process per (node, kind): a node's ranks, its other traced
 * processes, each storage server (brick) on it; one Chrome thread per rank
 * or server thread, with extra "lane" threads for slices that overlap
 * without nesting.  The trace-event array needs no time order, so every
 * event is written as soon as the pipeline releases it and nothing is held
 * but the tracks' open slices: memory is what is in flight in the merge and
 * the matcher, never the trace. */
#ifndef IOT_EXPORT_CHROME_H
#define IOT_EXPORT_CHROME_H

#include <stdint.h>

#include "events.h"

struct xp_chrome_options {
    const char *store;
    const char *path;     /* the JSON file to write; "-": standard output */
    uint32_t job;         /* in d->jobs; UINT32_MAX: every job */
    const char *job_name; /* for messages */
    int64_t lateness_ns, grace_ns;
    double from_s, to_s;  /* time window, seconds after time 0; -inf / +inf: none */
};

struct xp_chrome_result {
    uint64_t slices, flows, instants; /* trace events written (metadata aside) */
    uint64_t pairs;                   /* call -> disk operation pairs found (flows before the
                                         window) */
    uint64_t lost;                    /* events the drop records say were lost */
    uint32_t processes, threads;      /* Chrome processes and threads named */
    int64_t origin_ns;                /* time 0 of the file, on the collector's clock */
    int64_t file_bytes;               /* -1 for standard output */
};

/* Reads the store (after xp_read_clocks) and writes o->path.  Returns 0,
 * or -1 with the reason in err (a damaged store, a job without events, an
 * I/O error: the partial file is then removed, not standard output). */
int xp_chrome(struct xp_data *d, const struct xp_chrome_options *o, struct xp_chrome_result *r,
              char *err, size_t errlen);

#endif
