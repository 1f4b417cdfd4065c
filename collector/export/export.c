/* iotrace-export: turns a collector store into JSON Lines or CSV (one row
 * per event, in time order; export_rows.c), a list of the jobs it holds, statistics per job
 * (export_stats.c) or a report of the nodes' clocks.  Event times are
 * aligned to the collector's clock (unless --no-align).  Reads without
 * locking, so it works while a collector is writing.  See docs/export.md. */
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis.h"
#include "events.h"
#include "export_chrome.h"
#include "export_out.h"
#include "export_progress.h"
#include "export_rows.h"
#include "export_slog2.h"
#include "export_sort.h"
#include "stats_report.h"
#include "iot_functions.h"
#include "log.h"
#include "opts.h"
#include "slog2_read.h"
#include "slog2_write.h"
#include "store.h"
#include "timeutil.h"
#include "wire.h"

static char *opt_store;
static char *opt_job;
static char *opt_jsonl;
static char *opt_csv;
static int opt_jsonl_schema;
static int opt_list_jobs;
static int opt_clock;
static int opt_verify;
static int opt_no_align;
static char *opt_dump_slog2;
static int opt_stats;
static char *opt_format;
static long opt_lateness_ms = -1;
static long opt_grace_ms = -1;
static char *opt_slog2;
static char *opt_chrome;
static char *opt_from;
static char *opt_to;
static char *opt_layers;
static uint64_t opt_leaf_size;
static long opt_children = -1;
static int opt_progress;
static int opt_no_progress;

static const struct iot_opt options[] = {
    {"store", 's', IOT_OPT_STRING, &opt_store, "DIR", "store directory written by iotrace-collector (required)"},
    {"jsonl", 0, IOT_OPT_STRING, &opt_jsonl, "FILE", "write one JSON object per event to FILE ('-': standard output), every object with the same keys (docs/export.md, Columns)"},
    {"csv", 0, IOT_OPT_STRING, &opt_csv, "FILE", "write the same columns as CSV with a header line to FILE ('-': standard output)"},
    {"jsonl-schema", 0, IOT_OPT_FLAG, &opt_jsonl_schema, NULL, "print the JSON Schema of a --jsonl line (alone, no --store)"},
    {"list-jobs", 0, IOT_OPT_FLAG, &opt_list_jobs, NULL, "print one line per job in the store"},
    {"clock", 0, IOT_OPT_FLAG, &opt_clock, NULL, "print one line per node: clock samples, offset to the collector, round trip, error bound, drift"},
    {"verify", 0, IOT_OPT_FLAG, &opt_verify, NULL, "read and check the whole store (every record's checksum, every batch's envelope and body) and print what it holds and any damage; exit 1 if there is any"},
    {"stats", 0, IOT_OPT_FLAG, &opt_stats, NULL, "print statistics per job: calls per function, disk operations per call, servers, amplification, unmatched and lost events, clocks (docs/statistics.md)"},
    {"format", 0, IOT_OPT_STRING, &opt_format, "text|json", "--stats output format (default text)"},
    {"slog2", 0, IOT_OPT_STRING, &opt_slog2, "FILE", "write an SLOG-2 file for Jumpshot: a timeline per rank and storage-server thread, states, arrows from each MPI-IO call to its disk operations"},
    {"chrome", 0, IOT_OPT_STRING, &opt_chrome, "FILE", "write a Chrome trace-event JSON file (- for standard output) for ui.perfetto.dev: a track per rank and storage-server thread, grouped by node, a slice per event, flows from each MPI-IO call to its disk operations, drop records as instants"},
    {"perfetto", 0, IOT_OPT_STRING, &opt_chrome, "FILE", "the same as --chrome FILE"},
    {"from", 0, IOT_OPT_STRING, &opt_from, "SEC", "--slog2, --chrome: leave out what ends before SEC seconds after the first event"},
    {"to", 0, IOT_OPT_STRING, &opt_to, "SEC", "--slog2, --chrome: leave out what starts after SEC seconds after the first event"},
    {"layers", 0, IOT_OPT_STRING, &opt_layers, "LIST", "--slog2: what to draw, comma-separated: mpiio, posix, disk, arrows, all (default all)"},
    {"leaf-size", 0, IOT_OPT_SIZE, &opt_leaf_size, "BYTES", "--slog2: largest tree node (TreeLeafByteSize), 128 to 1G (default 65536)"},
    {"children", 0, IOT_OPT_INT, &opt_children, "N", "--slog2: children per tree node, 2 to 32767 (default 2)"},
    {"lateness", 0, IOT_OPT_INT, &opt_lateness_ms, "MS", "--stats, --slog2, --chrome: how far behind its newest event a process may still deliver one (default 2000)"},
    {"grace", 0, IOT_OPT_INT, &opt_grace_ms, "MS", "--stats, --slog2, --chrome: how long after a call's end its disk operations may start (default 2000)"},
    {"job", 'j', IOT_OPT_STRING, &opt_job, "ID", "only events of job ID"},
    {"no-align", 0, IOT_OPT_FLAG, &opt_no_align, NULL, "keep every event on its node's own clock instead of mapping it to the collector's"},
    {"progress", 0, IOT_OPT_FLAG, &opt_progress, NULL, "show a progress line on standard error for an export that takes over two seconds, also when it is not a terminal (the default: only on a terminal)"},
    {"no-progress", 0, IOT_OPT_FLAG, &opt_no_progress, NULL, "never show the progress line"},
    {"dump-slog2", 0, IOT_OPT_STRING, &opt_dump_slog2, "FILE", "print an SLOG-2 file one item per line and check its tree (alone, no --store)"},
};

static const struct iot_man_section export_man[] = {
    {"EXAMPLES",
     "  iotrace-export --store /var/lib/iotrace/store --list-jobs\n"
     "  iotrace-export --store /var/lib/iotrace/store --job 4242 --stats\n"
     "  iotrace-export --store /var/lib/iotrace/store --job 4242 --slog2 job.slog2\n"
     "  iotrace-export --store /var/lib/iotrace/store --job 4242 --chrome job.json\n"
     "  iotrace-export --store /var/lib/iotrace/store --verify"},
    {"EXIT STATUS",
     "0 on success (warnings on stderr for what is lost but does not stop the export); 1 on "
     "a data error (store missing, unreadable or of an unsupported format, --verify finding "
     "damage, a job without events, output not writable); 2 on a usage error; 3 when the "
     "export was written but the store holds less than was stored (damaged records skipped, "
     "segments or bytes missing by its manifest, a cut end), each loss named on stderr."},
    {"SEE ALSO",
     "iotrace-collector(8), iotrace-agent(8), jumpshot(1); docs/export.md, "
     "docs/statistics.md and docs/store-format.md in the documentation directory."},
};

static const struct iot_opts_spec spec = {
    .program = "iotrace-export",
    .synopsis = "--store DIR [--job ID] [--no-align] (--jsonl FILE | --csv FILE | --list-jobs)\n"
                "   or: iotrace-export --store DIR [--job ID] [--no-align] --stats "
                "[--format text|json] [--lateness MS] [--grace MS]\n"
                "   or: iotrace-export --store DIR [--job ID] [--no-align] --slog2 FILE "
                "[--from SEC] [--to SEC] [--layers LIST] [--leaf-size BYTES] [--children N] "
                "[--lateness MS] [--grace MS]\n"
                "   or: iotrace-export --store DIR [--job ID] [--no-align] --chrome FILE "
                "[--from SEC] [--to SEC] [--lateness MS] [--grace MS]\n"
                "   or: iotrace-export --store DIR --clock\n"
                "   or: iotrace-export --store DIR --verify\n"
                "   or: iotrace-export --dump-slog2 FILE\n"
                "   or: iotrace-export --jsonl-schema",
    .description = "Exports the events in an iotrace collector store.  See docs/export.md.",
    .opts = options,
    .n_opts = (int)(sizeof options / sizeof options[0]),
    .allow_config = 0,
    .man_section = 1,
    .summary = "export the events of an iotrace store: JSON Lines, statistics, SLOG-2 for "
               "Jumpshot, Chrome trace events for Perfetto, clock alignment, verification",
    .man = export_man,
    .n_man = (int)(sizeof export_man / sizeof export_man[0]),
};

/* --jsonl: events are collected, then sorted. */

/* --list-jobs: per-job totals, plus which producers contributed. */
struct job_stat {
    uint64_t events, dropped;
    int64_t first, last;
    int seen;
};

struct job_list {
    struct job_stat *v;
    size_t cap;
    struct job_stat *pending; /* per producer: events sent before its job was known */
    size_t cap_pending;
    uint64_t *pairs; /* job << 32 | producer, deduplicated at the end */
    size_t n_pairs, cap_pairs;
    uint32_t job;
};

static void usage_error(const char *msg)
{
    fprintf(stderr, "%s: %s\nTry '%s --help'.\n", spec.program, msg, spec.program);
    exit(IOT_EXIT_USAGE);
}

/* Exit status of an export that wrote what the store holds while the store
 * holds less than it should (docs/export.md). */
#define XP_EXIT_INCOMPLETE 3

/* What a reading of the store found missing or damaged, said on stderr
 * (the places are named by the warnings before it); `verb` says what was
 * done with the rest. */
static int report_incomplete(const struct iot_store_scan_info *i, const char *verb)
{
    if (!iot_store_scan_incomplete(i))
        return 0;
    fprintf(stderr, "%s: the store holds less than was stored: %llu damaged records skipped "
            "(%llu bytes), %u segments missing, %llu bytes missing by its manifest%s%s%s; %s\n",
            spec.program, (unsigned long long)i->damaged_records,
            (unsigned long long)i->damaged_bytes, i->missing_segments,
            (unsigned long long)i->missing_bytes, i->cut_segment[0] && !i->writer ? ", " : "",
            i->cut_segment[0] && !i->writer ? i->cut_segment : "",
            i->cut_segment[0] && !i->writer ? " cut inside a record" : "", verb);
    if (!i->manifest)
        fprintf(stderr, "%s: the store has no MANIFEST (written before 2026-12): a deleted last "
                "segment or a cut at a record boundary cannot be told\n", spec.program);
    return 1;
}

static int data_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "%s: ", spec.program);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return IOT_EXIT_FAILURE;
}

static int wanted(uint32_t want, const struct xp_event *ev)
{
    return want == UINT32_MAX || ev->job == want;
}

/* Under Hydra a rank learns its job id in MPI_Init, after it may have sent
 * events (POSIX I/O before MPI_Init, say): those carry no job yet, and the
 * job its producer announces later applies to them too. Disk events name
 * their job themselves. */
static int job_pending(const struct xp_event *ev)
{
    return ev->job == 0 && ev->kind != XP_DISK;
}

static void resolve_job(const struct xp_data *d, struct xp_event *ev)
{
    if (job_pending(ev))
        ev->job = d->producers[ev->producer].job;
}

/* --jsonl and --csv: the events of the job (and those still waiting for
 * their producer's job, job_pending) go through the sorter; how many are
 * the job's is known once the store is read. */
struct row_events {
    struct xp_sorter *sorter;
    uint32_t job; /* wanted job, UINT32_MAX for all */
    uint64_t read, matched;
    uint64_t *pending; /* per producer: events waiting for its job */
    size_t n_pending;
};

static int collect_event(void *ctx, const struct xp_data *d, const struct xp_event *ev,
                         char *err, size_t errlen)
{
    (void)d;
    struct row_events *l = ctx;
    xp_progress_step(++l->read);
    int pending = job_pending(ev);
    if (!wanted(l->job, ev) && !pending)
        return 0;
    if (pending && l->job != UINT32_MAX) {
        if (ev->producer >= l->n_pending) {
            size_t n = (ev->producer + 1) * 2;
            uint64_t *v = realloc(l->pending, n * sizeof *v);
            if (!v) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            memset(v + l->n_pending, 0, (n - l->n_pending) * sizeof *v);
            l->pending = v;
            l->n_pending = n;
        }
        l->pending[ev->producer]++;
    } else {
        l->matched++;
    }
    if (xp_sorter_add(l->sorter, ev) < 0) {
        snprintf(err, errlen, "cannot sort the events: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static const char *const rows_format[] = {"JSON Lines", "CSV"};

/* --jsonl and --csv: the rows of export_rows.c, in time order
 * (export_sort.h), in memory bounded whatever the job's size. */
static int export_rows(struct xp_data *d, uint32_t job)
{
    struct row_events l = {.job = job, .sorter = xp_sorter_new(d, 0)};
    char err[512];
    if (!l.sorter)
        return data_error("%s%s", "out of memory", "");
    xp_progress_phase("reading the store", 0);
    int rc = xp_read_store(opt_store, d, collect_event, &l, err, sizeof err);
    for (size_t p = 0; rc == 0 && p < l.n_pending && p < d->n_producers; p++)
        if (d->producers[p].job == job)
            l.matched += l.pending[p];
    free(l.pending);
    if (rc < 0) {
        xp_sorter_free(l.sorter);
        xp_progress_end();
        return data_error("%s%s", "", err);
    }
    if (job != UINT32_MAX && l.matched == 0) {
        xp_sorter_free(l.sorter);
        xp_progress_end();
        return data_error("job '%s' has no events in %s", opt_job, opt_store);
    }
    xp_progress_phase("sorting", 0);
    if (xp_sorter_finish(l.sorter) < 0) {
        int e = errno;
        xp_sorter_free(l.sorter);
        xp_progress_end();
        return data_error("cannot sort the events: %s%s", strerror(e), "");
    }
    const char *path = opt_jsonl ? opt_jsonl : opt_csv;
    FILE *out = xp_output_open(path);
    struct xp_rows *w = out ? xp_rows_open(out, opt_jsonl ? "jsonl" : "csv") : NULL;
    rc = w ? 0 : -1;
    xp_progress_phase(opt_jsonl ? "writing JSON Lines" : "writing CSV", l.matched);
    (void)rows_format;
    struct xp_event ev;
    uint64_t written = 0;
    int got;
    while (w && rc == 0 && (got = xp_sorter_next(l.sorter, &ev)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        resolve_job(d, &ev);
        if (!wanted(job, &ev))
            continue;
        rc = xp_rows_write(w, d, &ev);
        xp_progress_step(++written);
    }
    int e = errno;
    if (w && xp_rows_close(w) < 0 && rc == 0)
        rc = -1, e = errno;
    if (out && xp_output_close(out) < 0 && rc == 0)
        rc = -1, e = errno;
    xp_sorter_free(l.sorter);
    xp_progress_end();
    if (rc < 0)
        return data_error("cannot write %s: %s", xp_output_name(path), strerror(e));
    return IOT_EXIT_OK;
}

static int grow_jobs(struct job_list *l, size_t need)
{
    if (need <= l->cap)
        return 0;
    size_t cap = l->cap ? l->cap : 16;
    while (cap < need)
        cap *= 2;
    struct job_stat *v = realloc(l->v, cap * sizeof *v);
    if (!v)
        return -1;
    memset(v + l->cap, 0, (cap - l->cap) * sizeof *v);
    l->v = v;
    l->cap = cap;
    return 0;
}

static int add_pair(struct job_list *l, uint32_t job, uint32_t producer)
{
    uint64_t pair = (uint64_t)job << 32 | producer;
    if (l->n_pairs && l->pairs[l->n_pairs - 1] == pair)
        return 0; /* events of one batch come in runs; the rest is removed by sorting */
    if (l->n_pairs == l->cap_pairs) {
        size_t cap = l->cap_pairs ? l->cap_pairs * 2 : 256;
        uint64_t *p = realloc(l->pairs, cap * sizeof *p);
        if (!p)
            return -1;
        l->pairs = p;
        l->cap_pairs = cap;
    }
    l->pairs[l->n_pairs++] = pair;
    return 0;
}

static void count_event(struct job_stat *s, const struct xp_event *ev)
{
    if (ev->kind == XP_DROP) {
        s->dropped += ev->bytes;
        return;
    }
    if (s->events == 0 || ev->t_start < s->first)
        s->first = ev->t_start;
    if (s->events == 0 || ev->t_end > s->last)
        s->last = ev->t_end;
    s->events++;
}

static int grow_pending(struct job_list *l, size_t need)
{
    if (need <= l->cap_pending)
        return 0;
    size_t cap = l->cap_pending ? l->cap_pending : 16;
    while (cap < need)
        cap *= 2;
    struct job_stat *v = realloc(l->pending, cap * sizeof *v);
    if (!v)
        return -1;
    memset(v + l->cap_pending, 0, (cap - l->cap_pending) * sizeof *v);
    l->pending = v;
    l->cap_pending = cap;
    return 0;
}

static void merge_stat(struct job_stat *into, const struct job_stat *s)
{
    if (s->events && (into->events == 0 || s->first < into->first))
        into->first = s->first;
    if (s->events && (into->events == 0 || s->last > into->last))
        into->last = s->last;
    into->events += s->events;
    into->dropped += s->dropped;
}

static int tally_event(void *ctx, const struct xp_data *d, const struct xp_event *ev,
                       char *err, size_t errlen)
{
    (void)d;
    struct job_list *l = ctx;
    if (job_pending(ev)) {
        if (grow_pending(l, (size_t)ev->producer + 1) < 0) {
            snprintf(err, errlen, "out of memory listing jobs");
            return -1;
        }
        l->pending[ev->producer].seen = 1;
        count_event(&l->pending[ev->producer], ev);
        return 0;
    }
    /* Disk operations tagged with no job belong to no job's line. */
    if (ev->job == 0 || !wanted(l->job, ev))
        return 0;
    if (grow_jobs(l, (size_t)ev->job + 1) < 0 || add_pair(l, ev->job, ev->producer) < 0) {
        snprintf(err, errlen, "out of memory listing jobs");
        return -1;
    }
    l->v[ev->job].seen = 1;
    count_event(&l->v[ev->job], ev);
    return 0;
}

/* Events held per producer go to the job the producer announced at last. */
static int settle_pending(const struct xp_data *d, struct job_list *l)
{
    for (size_t p = 0; p < l->cap_pending; p++) {
        uint32_t job = p < d->n_producers ? d->producers[p].job : 0;
        if (!l->pending[p].seen || job == 0 || (l->job != UINT32_MAX && job != l->job))
            continue;
        if (grow_jobs(l, (size_t)job + 1) < 0 || add_pair(l, job, (uint32_t)p) < 0)
            return -1;
        l->v[job].seen = 1;
        merge_stat(&l->v[job], &l->pending[p]);
    }
    return 0;
}

/* pairs[from, to) all belong to one job; counts its ranks and nodes. */
static void count_members(const struct xp_data *d, const uint64_t *pairs, size_t n,
                          uint64_t *scratch, size_t *ranks, size_t *nodes)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct xp_producer *p = &d->producers[(uint32_t)pairs[i]];
        if (p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT && p->rank >= 0)
            scratch[k++] = (uint64_t)p->rank;
    }
    *ranks = xp_unique_u64(scratch, k);
    for (size_t i = 0; i < n; i++)
        scratch[i] = d->producers[(uint32_t)pairs[i]].node;
    *nodes = xp_unique_u64(scratch, n);
}

struct job_row {
    const char *name;
    uint32_t job;
    size_t from, to; /* its range in the sorted pairs */
};

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const struct job_row *)a)->name, ((const struct job_row *)b)->name);
}

static void print_row(FILE *out, const struct xp_data *d, const struct job_list *l,
                      const struct job_row *r, uint64_t *scratch)
{
    const struct job_stat *s = &l->v[r->job];
    size_t ranks, nodes;
    char first[48] = "-", last[48] = "-";
    count_members(d, l->pairs + r->from, r->to - r->from, scratch, &ranks, &nodes);
    if (s->events) {
        iot_format_utc(first, sizeof first, s->first);
        iot_format_utc(last, sizeof last, s->last);
    }
    fprintf(out, "%s ranks=%zu nodes=%zu events=%llu dropped=%llu first=%s last=%s", r->name,
            ranks, nodes, (unsigned long long)s->events, (unsigned long long)s->dropped, first,
            last);
    /* What the launcher and the agents said about it, when they did. */
    int64_t uid = xp_job_owner(d, r->job);
    if (uid >= 0) {
        char user[64];
        fprintf(out, " uid=%lld", (long long)uid);
        if (xp_user_name(uid, user, sizeof user)[0])
            fprintf(out, " user=%s", user);
    }
    const char *name = xp_job_name(d, r->job);
    if (name[0]) {
        fputs(" name=", out);
        for (const char *c = name; *c; c++) /* one row, one word */
            fputc(*c == ' ' || *c == '\n' || *c == '\t' ? '_' : *c, out);
    }
    fputc('\n', out);
}

/* One row per job seen, with its range of (job, producer) pairs. */
static size_t job_rows(const struct xp_data *d, struct job_list *l, struct job_row *rows)
{
    l->n_pairs = xp_unique_u64(l->pairs, l->n_pairs);
    size_t n = 0;
    for (size_t i = 0; i < l->n_pairs; i++) {
        uint32_t job = (uint32_t)(l->pairs[i] >> 32);
        if (n == 0 || rows[n - 1].job != job)
            rows[n++] = (struct job_row){xp_string(&d->jobs, job), job, i, i};
        rows[n - 1].to = i + 1;
    }
    qsort(rows, n, sizeof *rows, cmp_row);
    return n;
}

static int print_jobs(FILE *out, const struct xp_data *d, struct job_list *l)
{
    struct job_row *rows = calloc(l->n_pairs + 1, sizeof *rows);
    uint64_t *scratch = calloc(l->n_pairs + 1, sizeof *scratch);
    if (!rows || !scratch) {
        free(rows);
        free(scratch);
        return -1;
    }
    size_t n = job_rows(d, l, rows);
    for (size_t i = 0; i < n; i++)
        print_row(out, d, l, &rows[i], scratch);
    free(rows);
    free(scratch);
    return fflush(out);
}

static int list_jobs(struct xp_data *d, uint32_t job)
{
    struct job_list l = {.job = job};
    char err[512];
    int rc = IOT_EXIT_OK;
    if (xp_read_store(opt_store, d, tally_event, &l, err, sizeof err) < 0)
        rc = data_error("%s%s", "", err);
    else if (settle_pending(d, &l) < 0)
        rc = data_error("%s%s", "out of memory listing jobs", "");
    else if (l.n_pairs == 0 && job != UINT32_MAX)
        rc = data_error("job '%s' has no events in %s", opt_job, opt_store);
    else if (print_jobs(stdout, d, &l) < 0)
        rc = data_error("cannot write the job list: %s%s", strerror(errno), "");
    free(l.v);
    free(l.pending);
    free(l.pairs);
    return rc;
}

static void check_options(int argc, char **argv, int first)
{
    if (first < argc) {
        char msg[256];
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[first]);
        usage_error(msg);
    }
    if (!opt_store || !opt_store[0])
        usage_error("--store DIR is required");
    if ((opt_jsonl != NULL) + (opt_csv != NULL) + opt_list_jobs + opt_clock + opt_stats +
            (opt_slog2 != NULL) + (opt_chrome != NULL) + opt_verify != 1)
        usage_error("give exactly one of --jsonl FILE, --csv FILE, --list-jobs, --stats, "
                    "--slog2 FILE, --chrome FILE, --clock and --verify");
    if (opt_verify && (opt_job || opt_no_align))
        usage_error("--verify checks the whole store and takes neither --job nor --no-align");
    if (!opt_stats && opt_format)
        usage_error("--format goes with --stats only");
    if (!opt_stats && !opt_slog2 && !opt_chrome && (opt_lateness_ms >= 0 || opt_grace_ms >= 0))
        usage_error("--lateness and --grace go with --stats, --slog2 or --chrome only");
    if (!opt_slog2 && !opt_chrome && (opt_from || opt_to))
        usage_error("--from and --to go with --slog2 or --chrome only");
    if (!opt_slog2 && (opt_layers || opt_leaf_size || opt_children >= 0))
        usage_error("--layers, --leaf-size and --children go with --slog2 only");
    if ((opt_slog2 && !opt_slog2[0]) || (opt_chrome && !opt_chrome[0]))
        usage_error("--slog2 and --chrome need a file name");
    if (opt_leaf_size && (opt_leaf_size < IOT_SLOG2_MIN_LEAF_BYTESIZE || opt_leaf_size > (1u << 30)))
        usage_error("--leaf-size takes 128 to 1G bytes");
    if (opt_children != -1 && (opt_children < 2 || opt_children > 32767))
        usage_error("--children takes 2 to 32767");
    if (opt_format && strcmp(opt_format, "text") != 0 && strcmp(opt_format, "json") != 0)
        usage_error("--format takes text or json");
    if (opt_lateness_ms < -1 || opt_grace_ms < -1 || opt_lateness_ms > 86400000 ||
        opt_grace_ms > 86400000)
        usage_error("--lateness and --grace take milliseconds, 0 to 86400000");
    if (opt_clock && (opt_job || opt_no_align))
        usage_error("--clock reports every node and takes neither --job nor --no-align");
    if (opt_jsonl && !opt_jsonl[0])
        usage_error("--jsonl needs a file name, or '-' for standard output");
    if (opt_csv && !opt_csv[0])
        usage_error("--csv needs a file name, or '-' for standard output");
    if (opt_job && !opt_job[0])
        usage_error("--job needs a job id");
}

/* --dump-slog2 reads a file, not a store; see docs/slog2-format.md. */
static int dump_slog2(int argc, int first)
{
    char err[512];
    if (first < argc || opt_store || opt_job || opt_jsonl || opt_csv || opt_jsonl_schema ||
        opt_list_jobs || opt_clock || opt_verify ||
        opt_no_align || opt_stats || opt_format || opt_lateness_ms >= 0 || opt_grace_ms >= 0 ||
        opt_slog2 || opt_chrome || opt_from || opt_to || opt_layers || opt_leaf_size ||
        opt_children >= 0)
        usage_error("--dump-slog2 FILE takes no other option or argument");
    int rc = iot_slog2_dump(stdout, opt_dump_slog2, err, sizeof err);
    if (fflush(stdout) != 0)
        return data_error("cannot write the dump: %s%s", strerror(errno), "");
    if (rc < 0)
        return data_error("%s%s", "", err);
    if (rc > 0)
        return data_error("%s: %s", opt_dump_slog2,
                          "violates SLOG-2 invariants (see the 'violation' lines)");
    return IOT_EXIT_OK;
}


/* --verify: everything in the store read and decoded, nothing kept. */
struct verify {
    uint64_t batches, events, unreadable, unreadable_events, bad_envelopes;
};

static int verify_record(void *ctx, const uint8_t *buf, size_t len, uint64_t recv_ns)
{
    struct verify *v = ctx;
    char why[256];
    iot_batch *b = iot_wire_open(buf, len, why, sizeof why);
    if (!b) {
        if (++v->bad_envelopes <= 10)
            iot_warn("record received at %llu ns: %s", (unsigned long long)recv_ns, why);
        return 0;
    }
    v->batches++;
    v->events += b->event_count;
    iot_body *body = iot_wire_body(b, why, sizeof why);
    if (!body) {
        v->unreadable_events += b->event_count;
        if (++v->unreadable <= 10)
            iot_warn("batch received at %llu ns (%u events): %s", (unsigned long long)recv_ns,
                     b->event_count, why);
    }
    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    return 0;
}

static int verify_store(void)
{
    struct verify v = {0};
    struct iot_store_scan_info info;
    char err[512];
    int rc = iot_store_scan_info(opt_store, verify_record, &v, &info, err, sizeof err);
    if (rc < 0 && info.segments == 0) /* not a store at all */
        return data_error("%s%s", "", err);
    printf("segments %u\nbytes %llu\nrecords %llu\nbatches %llu\nevents %llu\n"
           "unreadable_batches %llu\nunreadable_events %llu\nbad_envelopes %llu\n",
           info.segments, (unsigned long long)info.bytes, (unsigned long long)info.records,
           (unsigned long long)v.batches, (unsigned long long)v.events,
           (unsigned long long)v.unreadable, (unsigned long long)v.unreadable_events,
           (unsigned long long)v.bad_envelopes);
    if (info.cut_segment[0])
        printf("end %s cut at offset %llu of %llu bytes%s\n", info.cut_segment,
               (unsigned long long)info.cut_offset, (unsigned long long)info.cut_size,
               info.writer ? " (a collector is writing it)" : "");
    else if (rc == 0)
        printf("end complete\n");
    printf("damaged_records %llu\ndamaged_bytes %llu\nmissing_segments %u\nmissing_bytes %llu\n"
           "manifest %s\n",
           (unsigned long long)info.damaged_records, (unsigned long long)info.damaged_bytes,
           info.missing_segments, (unsigned long long)info.missing_bytes,
           info.manifest ? "yes" : "no");
    if (rc < 0)
        printf("damage %s\n", err);
    else if (info.damage[0])
        printf("damage %s\n", info.damage);
    int bad = rc < 0 || iot_store_scan_incomplete(&info) || v.unreadable || v.bad_envelopes;
    printf("verdict %s\n", bad ? "damaged" : "ok");
    if (fflush(stdout) != 0)
        return data_error("cannot write the report: %s%s", strerror(errno), "");
    return bad ? data_error("%s: %s", opt_store, "the store is damaged (see the report)")
               : IOT_EXIT_OK;
}

/* --clock: one line per node, sorted by name. */
static int cmp_node(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void print_clock_line(FILE *out, const char *name, const struct iot_clockmap *m)
{
    char node[256];
    iot_printable(name, node, sizeof node);
    struct iot_clock_summary s;
    iot_clockmap_summary(m, &s);
    if (!s.samples) {
        fprintf(out, "%s samples=0 offset_ns=- rtt_ns=- error_ns=- drift_ppm=- first=- last=-\n",
                node);
        return;
    }
    char first[48], last[48], drift[32] = "-";
    iot_format_utc(first, sizeof first, iot_clockmap_map(m, s.first_local_ns));
    iot_format_utc(last, sizeof last, iot_clockmap_map(m, s.last_local_ns));
    if (s.has_drift)
        snprintf(drift, sizeof drift, "%+.3f", s.drift_ppm);
    fprintf(out, "%s samples=%zu offset_ns=%lld rtt_ns=%llu error_ns=%lld drift_ppm=%s first=%s "
            "last=%s\n", node, s.samples, (long long)s.offset_ns, (unsigned long long)s.rtt_ns,
            (long long)s.error_ns, drift, first, last);
}

static int clock_report(struct xp_data *d)
{
    char err[512];
    if (xp_read_clocks(opt_store, d, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    const char **names = calloc(d->nodes.n + 1, sizeof *names);
    if (!names)
        return data_error("%s%s", "out of memory", "");
    size_t n = 0;
    for (size_t i = 1; i < d->nodes.n; i++) /* 0 is "" */
        names[n++] = d->nodes.str[i];
    qsort(names, n, sizeof *names, cmp_node);
    for (size_t i = 0; i < n; i++)
        print_clock_line(stdout, names[i], &d->clocks[xp_intern(&d->nodes, names[i])].map);
    free(names);
    if (fflush(stdout) != 0)
        return data_error("cannot write the clock report: %s%s", strerror(errno), "");
    return IOT_EXIT_OK;
}

/* A node whose agent sent no clock samples (an old agent, or a collector
 * that did not answer) cannot be aligned; say so rather than mix clocks
 * silently. */
static void report_unaligned(const struct xp_data *d)
{
    char node[256];
    for (size_t i = 1; i < d->n_clocks && i < d->nodes.n; i++)
        if (d->clocks[i].events && !d->clocks[i].map.n)
            fprintf(stderr, "%s: warning: node '%s' has no clock samples; its %llu event%s "
                    "the node's own clock\n", spec.program,
                    iot_printable(d->nodes.str[i], node, sizeof node),
                    (unsigned long long)d->clocks[i].events,
                    d->clocks[i].events == 1 ? " keeps" : "s keep");
}

static int64_t ms_or(long ms, int64_t fallback)
{
    return ms >= 0 ? (int64_t)ms * 1000000 : fallback;
}

/* The clock pass always runs: it also tells which batch is each process's
 * last, and the report shows the clocks even with --no-align. */
static int stats(struct xp_data *d, uint32_t job)
{
    char err[512];
    struct xp_stats_options o = {
        .store = opt_store, .job = job, .job_name = opt_job,
        .json = opt_format && strcmp(opt_format, "json") == 0,
        .lateness_ns = ms_or(opt_lateness_ms, IOT_AN_DEFAULT_LATENESS_NS),
        .grace_ns = ms_or(opt_grace_ms, IOT_AN_DEFAULT_GRACE_NS)};
    if (xp_read_clocks(opt_store, d, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    d->align = !opt_no_align;
    int rc = xp_stats(d, &o, stdout, err, sizeof err) < 0 ? data_error("%s%s", "", err)
                                                           : IOT_EXIT_OK;
    if (!opt_no_align)
        report_unaligned(d);
    return rc;
}

/* Seconds, as a decimal number; usage error otherwise. */
static double seconds_option(const char *name, const char *v, double fallback)
{
    if (!v)
        return fallback;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s takes seconds after the first event, for example 1.5 "
                 "(got '%s')", name, v);
        usage_error(msg);
    }
    return x;
}

static void print_slog2_summary(const struct xp_slog2_result *r)
{
    time_t sec = (time_t)(r->origin_ns / 1000000000);
    struct tm tm;
    char when[32];
    gmtime_r(&sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr,
            "%s: wrote %s: %llu states, %llu arrows, %llu events on %u timelines; "
            "%llu tree nodes, depth %d, %lld bytes; time 0 is %s.%09lldZ\n",
            spec.program, opt_slog2, (unsigned long long)r->states, (unsigned long long)r->arrows,
            (unsigned long long)r->events, r->lines, (unsigned long long)r->nodes_written,
            r->depth, (long long)r->file_bytes, when, (long long)(r->origin_ns % 1000000000));
    if (r->late)
        fprintf(stderr, "%s: warning: %llu drawables ended before drawables already written "
                "(their events came later than --lateness allows) and were left out\n",
                spec.program, (unsigned long long)r->late);
}

static int slog2(struct xp_data *d, uint32_t job)
{
    char err[512];
    struct xp_slog2_options o = {
        .store = opt_store, .path = opt_slog2, .job = job, .job_name = opt_job,
        .lateness_ns = ms_or(opt_lateness_ms, IOT_AN_DEFAULT_LATENESS_NS),
        .grace_ns = ms_or(opt_grace_ms, IOT_AN_DEFAULT_GRACE_NS),
        .from_s = seconds_option("--from", opt_from, -INFINITY),
        .to_s = seconds_option("--to", opt_to, INFINITY),
        .layers = XP_LAYER_ALL,
        .leaf_bytesize = (int32_t)opt_leaf_size,
        .children = (int16_t)(opt_children > 0 ? opt_children : 0)};
    if (o.from_s > o.to_s)
        usage_error("--from is after --to");
    if (opt_layers && xp_slog2_layers(opt_layers, &o.layers, err, sizeof err) < 0)
        usage_error(err);
    if (xp_read_clocks(opt_store, d, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    d->align = !opt_no_align;
    struct xp_slog2_result r;
    if (xp_slog2(d, &o, &r, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    print_slog2_summary(&r);
    if (!opt_no_align)
        report_unaligned(d);
    return IOT_EXIT_OK;
}

static int chrome(struct xp_data *d, uint32_t job)
{
    char err[512];
    struct xp_chrome_options o = {
        .store = opt_store, .path = opt_chrome, .job = job, .job_name = opt_job,
        .lateness_ns = ms_or(opt_lateness_ms, IOT_AN_DEFAULT_LATENESS_NS),
        .grace_ns = ms_or(opt_grace_ms, IOT_AN_DEFAULT_GRACE_NS),
        .from_s = seconds_option("--from", opt_from, -INFINITY),
        .to_s = seconds_option("--to", opt_to, INFINITY)};
    if (o.from_s > o.to_s)
        usage_error("--from is after --to");
    if (xp_read_clocks(opt_store, d, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    d->align = !opt_no_align;
    struct xp_chrome_result r;
    if (xp_chrome(d, &o, &r, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    char size[32] = "";
    if (r.file_bytes >= 0) /* none for standard output */
        snprintf(size, sizeof size, "; %lld bytes", (long long)r.file_bytes);
    fprintf(stderr, "%s: wrote %s: %llu slices, %llu flows, %llu drop instants on %u threads of "
            "%u processes%s\n", spec.program,
            xp_output_name(opt_chrome),
            (unsigned long long)r.slices, (unsigned long long)r.flows,
            (unsigned long long)r.instants, r.threads, r.processes, size);
    if (!opt_no_align)
        report_unaligned(d);
    return IOT_EXIT_OK;
}

static int export_events(struct xp_data *d, uint32_t job)
{
    char err[512];
    if (!opt_no_align && xp_read_clocks(opt_store, d, err, sizeof err) < 0)
        return data_error("%s%s", "", err);
    int rc = opt_list_jobs ? list_jobs(d, job) : export_rows(d, job);
    if (!opt_no_align)
        report_unaligned(d);
    return rc;
}

int main(int argc, char **argv)
{
    iot_log_init(spec.program, IOT_LOG_WARN);
    int first = iot_opts_parse(&spec, argc, argv);
    if (opt_dump_slog2)
        return dump_slog2(argc, first);
    if (opt_jsonl_schema) {
        if (first < argc || argc != 2)
            usage_error("--jsonl-schema takes no other option or argument");
        return xp_rows_schema(stdout) == 0 && fflush(stdout) == 0
                   ? IOT_EXIT_OK
                   : data_error("cannot write the schema: %s%s", strerror(errno), "");
    }
    check_options(argc, argv, first);
    if (opt_progress && opt_no_progress)
        usage_error("--progress and --no-progress contradict each other");
    xp_progress_init(spec.program, opt_no_progress ? XP_PROGRESS_OFF
                                   : opt_progress  ? XP_PROGRESS_ON
                                                   : XP_PROGRESS_AUTO, 2.0);
    struct xp_data d;
    if (xp_data_init(&d) < 0)
        return data_error("%s%s", "out of memory", "");
    uint32_t job = opt_job ? xp_intern(&d.jobs, opt_job) : UINT32_MAX;
    if (opt_job && job == UINT32_MAX) {
        xp_data_free(&d);
        return data_error("%s%s", "out of memory", "");
    }
    int rc = opt_verify  ? verify_store()
             : opt_clock ? clock_report(&d)
             : opt_stats ? stats(&d, job)
             : opt_slog2 ? slog2(&d, job)
             : opt_chrome ? chrome(&d, job)
                         : export_events(&d, job);
    if (!opt_verify && rc == IOT_EXIT_OK &&
        report_incomplete(&d.store_info, "what it holds was exported (exit 3)"))
        rc = XP_EXIT_INCOMPLETE;
    xp_data_free(&d);
    return rc;
}
