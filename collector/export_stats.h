/* iotrace-export --stats: runs the analysis pipeline (collector/analysis.h)
 * over a store and prints the statistics per job, as text or JSON.
 * Fields: docs/statistics.md. */
#ifndef IOT_EXPORT_STATS_H
#define IOT_EXPORT_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "export_read.h"

struct xp_stats_options {
    const char *store;
    uint32_t job;         /* in d->jobs; UINT32_MAX: every job */
    const char *job_name; /* for messages */
    int json;
    int64_t lateness_ns, grace_ns;
};

/* Reads the store's events (after xp_read_clocks) and writes the report to
 * out; warnings (late events, unattributed losses) go to standard error.
 * Returns 0, or -1 with the reason in err (a damaged store, a job without
 * events, out of memory, output not writable). */
int xp_stats(struct xp_data *d, const struct xp_stats_options *o, FILE *out, char *err,
             size_t errlen);

#endif
