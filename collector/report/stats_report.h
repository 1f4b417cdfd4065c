/* Statistics per job as text or JSON (fields: docs/statistics.md), for
 * iotrace-export --stats and for the daemon's HTTP API. */
#ifndef IOT_STATS_REPORT_H
#define IOT_STATS_REPORT_H

#include <stdint.h>
#include <jansson.h>
#include <stdio.h>

#include "events.h"
#include "pipeline.h"

/* The version of the JSON of --stats --format json and /api/v1/jobs/ID/stats
 * (docs/statistics.md, "JSON"): raised when a field changes meaning or goes. */
#define IOT_STATS_SCHEMA "iotrace-stats/2"

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

/* A name from a producer as a JSON string: jansson takes UTF-8 only, so
 * anything else is shown as '?'. */
json_t *iot_json_text(const char *s);

/* The same for a line of text: printable ASCII, anything else '?'. */
const char *iot_printable(const char *s, char *buf, size_t len);

/* The JSON of `iotrace-export --stats --format json` (with --job when job
 * is not UINT32_MAX) for what the pipeline has seen so far, as a malloc'd
 * string ending in a newline; NULL when out of memory. */
char *iot_report_stats_json(const struct xp_data *d, struct iot_pipe *s, uint32_t job);

/* The whole of `iotrace-export --store STORE [--job JOB] --stats --format
 * json`, computed the same way; NULL with the reason in err. */
char *xp_stats_json(const char *store, const char *job, int64_t lateness_ns, int64_t grace_ns,
                    char *err, size_t errlen);

#endif
