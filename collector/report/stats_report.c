#include "stats_report.h"

#include "timeutil.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "iot_functions.h"
#include "wire.h"

/* One job of the report. */
struct job_view {
    const char *name;
    uint32_t job;
    const struct iot_an_job *st; /* NULL: only events outside the statistics (POSIX) */
    const uint64_t *pairs;       /* its (job, node) pairs */
    size_t n_pairs;
};

/* ---- the jobs of the report ------------------------------------------- */

static int cmp_view(const void *a, const void *b)
{
    return strcmp(((const struct job_view *)a)->name, ((const struct job_view *)b)->name);
}

/* One view per job seen, sorted by job id; pairs must be unique and sorted. */
static size_t job_views(const struct xp_data *d, const struct iot_pipe *p, const uint64_t *pairs,
                        size_t n_pairs, uint32_t want, struct job_view *views)
{
    size_t n = 0;
    for (size_t i = 0; i < n_pairs; i++) {
        uint32_t job = (uint32_t)(pairs[i] >> 32);
        if (want != UINT32_MAX && job != want)
            continue;
        if (n == 0 || views[n - 1].job != job) {
            const struct iot_an_stats *st = &p->an.stats;
            views[n++] = (struct job_view){xp_string(&d->jobs, job), job,
                                           job < st->n_job ? st->job[job] : NULL, &pairs[i], 0};
        }
        views[n - 1].n_pairs++;
    }
    qsort(views, n, sizeof *views, cmp_view);
    return n;
}

static const char *func_name(unsigned f, char *buf, size_t len)
{
    const char *name = iot_func_name(f);
    if (name)
        return name;
    snprintf(buf, len, "func_%u", f);
    return buf;
}

struct named {
    const char *name;
    unsigned id;
};

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

/* The functions of a job with at least one event, sorted by name. */
static size_t job_functions(const struct iot_an_job *j, struct named *v, char (*buf)[32])
{
    size_t n = 0;
    for (unsigned f = 0; j && f < IOT_AN_FUNCS; f++)
        if (j->func[f] && j->func[f]->count)
            v[n] = (struct named){func_name(f, buf[n], sizeof buf[n]), f}, n++;
    qsort(v, n, sizeof *v, cmp_named);
    return n;
}

/* The servers a job has disk operations on, sorted by name. */
static size_t job_servers(const struct iot_an_job *j, const struct xp_strings *names,
                          struct named *v)
{
    size_t n = 0;
    for (size_t i = 0; j && i < j->n_server; i++)
        if (j->server[i].ops)
            v[n++] = (struct named){xp_string(names, (uint32_t)i), (unsigned)i};
    qsort(v, n, sizeof *v, cmp_named);
    return n;
}

/* The nodes of a job, sorted by name. */
static size_t job_nodes(const struct xp_data *d, const struct job_view *v, struct named *out)
{
    for (size_t i = 0; i < v->n_pairs; i++) {
        uint32_t node = (uint32_t)v->pairs[i];
        out[i] = (struct named){xp_string(&d->nodes, node), node};
    }
    qsort(out, v->n_pairs, sizeof *out, cmp_named);
    return v->n_pairs;
}

static uint64_t mean_ns(const struct iot_an_func *f)
{
    return f->count ? (f->time_ns + f->count / 2) / f->count : 0;
}

/* ---- JSON --------------------------------------------------------------- */

/* jansson only takes UTF-8; anything else in a name is shown as '?'. */
json_t *iot_json_text(const char *s)
{
    json_t *j = json_string(s);
    if (j)
        return j;
    char *copy = strdup(s);
    if (!copy)
        return json_null();
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j ? j : json_null();
}

static json_t *uint_json(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *ratio_json(uint64_t num, uint64_t den)
{
    return den ? json_real((double)num / (double)den) : json_null();
}

static json_t *ops_json(const struct iot_an_func *f)
{
    json_t *hist = json_object();
    for (unsigned b = 0; b < IOT_AN_OPS_BUCKETS; b++)
        json_object_set_new(hist, iot_an_ops_bucket_names[b], uint_json(f->ops_hist[b]));
    json_t *o = json_object();
    json_object_set_new(o, "mean", ratio_json(f->ops_sum, f->samples));
    json_object_set_new(o, "max", uint_json(f->ops_max));
    json_object_set_new(o, "histogram", hist);
    return o;
}

static json_t *function_json(const struct iot_an_func *f)
{
    json_t *o = json_object();
    json_object_set_new(o, "count", uint_json(f->count));
    json_object_set_new(o, "bytes", uint_json(f->bytes));
    json_object_set_new(o, "time_ns", uint_json(f->time_ns));
    json_object_set_new(o, "mean_ns", uint_json(mean_ns(f)));
    json_object_set_new(o, "p50_ns", uint_json(iot_qhist_quantile(&f->dur, 0.50)));
    json_object_set_new(o, "p99_ns", uint_json(iot_qhist_quantile(&f->dur, 0.99)));
    json_object_set_new(o, "disk_ops_per_call", ops_json(f));
    json_object_set_new(o, "disk_bytes", uint_json(f->disk_bytes));
    return o;
}

static json_t *functions_json(const struct iot_an_job *j)
{
    struct named v[IOT_AN_FUNCS];
    char buf[IOT_AN_FUNCS][32];
    size_t n = job_functions(j, v, buf);
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, v[i].name, function_json(j->func[v[i].id]));
    return o;
}

static json_t *servers_json(const struct iot_an_job *j, const struct xp_strings *names)
{
    json_t *o = json_object();
    struct named *v = j ? calloc(j->n_server + 1, sizeof *v) : NULL;
    size_t n = v ? job_servers(j, names, v) : 0;
    for (size_t i = 0; i < n; i++) {
        const struct iot_an_server *sv = &j->server[v[i].id];
        json_t *s = json_object();
        json_object_set_new(s, "ops", uint_json(sv->ops));
        json_object_set_new(s, "bytes", uint_json(sv->bytes));
        json_object_set_new(s, "busy_ns", uint_json(iot_an_busy_ns(sv)));
        json_object_set_new(o, v[i].name, s);
    }
    free(v);
    return o;
}

/* Over the samples that align the job's own events, so that a node's
 * later samples do not change a finished job's figures. */
static void job_clock(const struct iot_clockmap *m, const struct job_view *v,
                      struct iot_clock_summary *cs)
{
    if (v->st && v->st->spanned)
        iot_clockmap_summary_span(m, v->st->first_ns, v->st->last_ns, cs);
    else
        iot_clockmap_summary(m, cs);
}

static json_t *clock_json(const struct xp_data *d, const struct job_view *v)
{
    json_t *o = json_object();
    struct named *nodes = calloc(v->n_pairs + 1, sizeof *nodes);
    size_t n = nodes ? job_nodes(d, v, nodes) : 0;
    for (size_t i = 0; i < n; i++) {
        const struct iot_clockmap *m = xp_node_clock(d, nodes[i].id);
        struct iot_clock_summary cs;
        json_t *c = json_object();
        if (m)
            job_clock(m, v, &cs);
        json_object_set_new(c, "offset_ns", m ? json_integer(cs.offset_ns) : json_null());
        json_object_set_new(c, "rtt_ns", m ? uint_json(cs.rtt_ns) : json_null());
        json_object_set_new(c, "error_ns", m ? json_integer(cs.error_ns) : json_null());
        json_object_set_new(o, nodes[i].name, c);
    }
    free(nodes);
    return o;
}

/* The job's first start and last end among the calls and disk operations
 * counted, as ns and as UTC text for people. */
static json_t *span_json(const struct iot_an_job *j)
{
    if (!j->spanned)
        return json_null();
    char first[40], last[40];
    iot_format_utc(first, sizeof first, j->first_ns);
    iot_format_utc(last, sizeof last, j->last_ns);
    return json_pack("{s:I, s:I, s:I, s:s, s:s}", "first_ns", (json_int_t)j->first_ns, "last_ns",
                     (json_int_t)j->last_ns, "duration_ns", (json_int_t)(j->last_ns - j->first_ns),
                     "first", first, "last", last);
}

/* {"RANK": calls, ...} in rank order; an empty object when there are none. */
static json_t *disk_only_json(const struct iot_an_job *j)
{
    struct iot_an_rank_count *rc;
    size_t n = iot_an_disk_only_ranks(j, &rc);
    if (n == SIZE_MAX)
        return json_null();
    json_t *o = json_object();
    char key[16];
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%u", rc[i].rank);
        json_object_set_new(o, key, uint_json(rc[i].calls));
    }
    free(rc);
    return o;
}

static json_t *job_json(const struct xp_data *d, const struct iot_pipe *s,
                        const struct job_view *v)
{
    static const struct iot_an_job none;
    const struct iot_an_job *j = v->st ? v->st : &none;
    json_t *o = json_object();
    json_object_set_new(o, "job", iot_json_text(v->name));
    const char *name = v->job != UINT32_MAX ? xp_job_name(d, v->job) : NULL;
    int64_t owner = v->job != UINT32_MAX ? xp_job_owner(d, v->job) : -1;
    json_object_set_new(o, "name", name && name[0] ? iot_json_text(name) : json_null());
    json_object_set_new(o, "uid", owner >= 0 ? json_integer(owner) : json_null());
    json_object_set_new(o, "time_span", span_json(j));
    json_object_set_new(o, "functions", functions_json(j));
    json_object_set_new(o, "servers", servers_json(j, &s->names));
    json_object_set_new(o, "amplification", ratio_json(j->disk_bytes, j->call_bytes));
    json_object_set_new(o, "disk_time_share", ratio_json(j->attr_disk_time_ns, j->call_time_ns));
    json_object_set_new(o, "unmatched_calls", uint_json(j->unmatched_calls));
    json_object_set_new(o, "unmatched_disk_ops", uint_json(j->unmatched_disk_ops));
    json_object_set_new(o, "dropped_events", uint_json(j->dropped_events));
    json_object_set_new(o, "disk_only_calls", uint_json(j->disk_only_n + j->disk_only_more));
    json_object_set_new(o, "disk_only_calls_by_rank", disk_only_json(j));
    json_object_set_new(o, "clock", clock_json(d, v));
    return o;
}

static json_t *report_json(const struct xp_data *d, const struct iot_pipe *s,
                           const struct job_view *views, size_t n)
{
    json_t *jobs = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(jobs, job_json(d, s, &views[i]));
    json_t *root = json_object();
    /* What a reader needs to know the figures' meaning: the format's
     * version, which iotrace made them, and the analysis's parameters.  The
     * tool is named "iotrace", not the program, so that the collector's
     * live figures and iotrace-export's stay byte-identical. */
    json_object_set_new(root, "schema", json_string(IOT_STATS_SCHEMA));
    json_object_set_new(root, "tool", json_pack("{s:s, s:s}", "name", "iotrace", "version",
                                                IOTRACE_VERSION));
    json_object_set_new(root, "parameters",
                        json_pack("{s:I, s:I, s:b}", "lateness_ms",
                                  (json_int_t)(s->cfg.lateness_ns / 1000000), "grace_ms",
                                  (json_int_t)(s->cfg.grace_ns / 1000000), "aligned", d->align));
    json_object_set_new(root, "jobs", jobs);
    return root;
}

/* One text for iotrace-export and the HTTP API, so that they cannot differ
 * by as much as a space. */
static char *dump_json(json_t *root)
{
    char *body = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!body)
        return NULL;
    size_t len = strlen(body);
    char *text = realloc(body, len + 2);
    if (!text) {
        free(body);
        return NULL;
    }
    text[len] = '\n';
    text[len + 1] = '\0';
    return text;
}

static int write_json(FILE *out, const struct xp_data *d, const struct iot_pipe *s,
                      const struct job_view *views, size_t n)
{
    char *text = dump_json(report_json(d, s, views, n));
    int rc = text && fputs(text, out) != EOF ? 0 : -1;
    free(text);
    return rc;
}

/* ---- text --------------------------------------------------------------- */

const char *iot_printable(const char *s, char *buf, size_t len)
{
    size_t n = 0;
    for (; *s && n + 1 < len; s++)
        buf[n++] = (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?';
    buf[n] = '\0';
    return buf;
}

static void print_ratio(FILE *out, const char *label, uint64_t num, uint64_t den)
{
    if (den)
        fprintf(out, "  %-20s %.3f\n", label, (double)num / (double)den);
    else
        fprintf(out, "  %-20s -\n", label);
}

static void print_function(FILE *out, const char *name, const struct iot_an_func *f)
{
    char mean[32] = "-", hist[160];
    if (f->samples)
        snprintf(mean, sizeof mean, "%.2f", (double)f->ops_sum / (double)f->samples);
    size_t k = 0;
    for (unsigned b = 0; b < IOT_AN_OPS_BUCKETS; b++)
        k += (size_t)snprintf(hist + k, sizeof hist - k, "%s%llu", b ? "/" : "",
                              (unsigned long long)f->ops_hist[b]);
    fprintf(out, "  %-26s %9llu %13llu %14llu %11llu %11llu %11llu %8s %5llu %13llu  %s\n", name,
            (unsigned long long)f->count, (unsigned long long)f->bytes,
            (unsigned long long)f->time_ns, (unsigned long long)mean_ns(f),
            (unsigned long long)iot_qhist_quantile(&f->dur, 0.50),
            (unsigned long long)iot_qhist_quantile(&f->dur, 0.99), mean,
            (unsigned long long)f->ops_max, (unsigned long long)f->disk_bytes, hist);
}

static void print_functions(FILE *out, const struct iot_an_job *j)
{
    struct named v[IOT_AN_FUNCS];
    char buf[IOT_AN_FUNCS][32];
    size_t n = job_functions(j, v, buf);
    fprintf(out, "  %-26s %9s %13s %14s %11s %11s %11s %8s %5s %13s  %s\n", "function", "count",
            "bytes", "time_ns", "mean_ns", "p50_ns", "p99_ns", "ops/call", "max", "disk_bytes",
            "ops per call 0/1/2/3-4/5-8/9-16/>16");
    for (size_t i = 0; i < n; i++)
        print_function(out, v[i].name, j->func[v[i].id]);
    if (n == 0)
        fprintf(out, "  (no MPI-IO calls)\n");
}

static void print_servers(FILE *out, const struct iot_an_job *j, const struct xp_strings *names)
{
    struct named *v = calloc(j->n_server + 1, sizeof *v);
    size_t n = v ? job_servers(j, names, v) : 0;
    char name[256];
    fprintf(out, "  %-26s %9s %13s %14s\n", "server", "ops", "bytes", "busy_ns");
    for (size_t i = 0; i < n; i++) {
        const struct iot_an_server *sv = &j->server[v[i].id];
        fprintf(out, "  %-26s %9llu %13llu %14llu\n", iot_printable(v[i].name, name, sizeof name),
                (unsigned long long)sv->ops, (unsigned long long)sv->bytes,
                (unsigned long long)iot_an_busy_ns(sv));
    }
    if (n == 0)
        fprintf(out, "  (no disk operations)\n");
    free(v);
}

static void print_totals(FILE *out, const struct iot_an_job *j)
{
    print_ratio(out, "amplification", j->disk_bytes, j->call_bytes);
    print_ratio(out, "disk_time_share", j->attr_disk_time_ns, j->call_time_ns);
    fprintf(out, "  %-20s %llu\n  %-20s %llu\n  %-20s %llu\n", "unmatched_calls",
            (unsigned long long)j->unmatched_calls, "unmatched_disk_ops",
            (unsigned long long)j->unmatched_disk_ops, "dropped_events",
            (unsigned long long)j->dropped_events);
    uint64_t only = j->disk_only_n + j->disk_only_more;
    if (!only)
        return; /* the usual case: the line only when there is something to say */
    fprintf(out, "  %-20s %llu", "disk_only_calls", (unsigned long long)only);
    struct iot_an_rank_count *rc;
    size_t n = iot_an_disk_only_ranks(j, &rc);
    for (size_t i = 0; n != SIZE_MAX && i < n; i++)
        fprintf(out, "%srank %u: %llu", i ? ", " : " (", rc[i].rank,
                (unsigned long long)rc[i].calls);
    if (n != SIZE_MAX && n)
        fprintf(out, ")");
    fprintf(out, "\n");
    if (n != SIZE_MAX)
        free(rc);
}

static void print_clock(FILE *out, const struct xp_data *d, const struct job_view *v)
{
    struct named *nodes = calloc(v->n_pairs + 1, sizeof *nodes);
    size_t n = nodes ? job_nodes(d, v, nodes) : 0;
    char name[256];
    fprintf(out, "  %-26s %14s %11s %11s\n", "node", "offset_ns", "rtt_ns", "error_ns");
    for (size_t i = 0; i < n; i++) {
        const struct iot_clockmap *m = xp_node_clock(d, nodes[i].id);
        struct iot_clock_summary cs;
        iot_printable(nodes[i].name, name, sizeof name);
        if (!m) {
            fprintf(out, "  %-26s %14s %11s %11s\n", name, "-", "-", "-");
            continue;
        }
        job_clock(m, v, &cs);
        fprintf(out, "  %-26s %14lld %11llu %11lld\n", name, (long long)cs.offset_ns,
                (unsigned long long)cs.rtt_ns, (long long)cs.error_ns);
    }
    free(nodes);
}

static int write_text(FILE *out, const struct xp_data *d, const struct iot_pipe *s,
                      const struct job_view *views, size_t n)
{
    static const struct iot_an_job none;
    char name[256];
    for (size_t i = 0; i < n; i++) {
        const struct iot_an_job *j = views[i].st ? views[i].st : &none;
        fprintf(out, "%sjob %s\n\n", i ? "\n" : "", iot_printable(views[i].name, name, sizeof name));
        print_functions(out, j);
        fputc('\n', out);
        print_servers(out, j, &s->names);
        fputc('\n', out);
        print_totals(out, j);
        fputc('\n', out);
        print_clock(out, d, &views[i]);
    }
    return ferror(out) ? -1 : 0;
}

/* ---- the run ------------------------------------------------------------ */

/* Loss and lateness are reported, never silent. */
static void warn(const struct iot_pipe *s, const struct xp_stats_options *o)
{
    struct iot_an_memory m;
    iot_an_memory(&s->an, &m);
    if (m.late)
        fprintf(stderr, "iotrace-export: warning: %llu event%s arrived after later events had "
                "been analysed (up to %.3f s behind; --lateness is %.3f s); calls among them "
                "may be counted as unmatched\n", (unsigned long long)m.late,
                m.late == 1 ? "" : "s", (double)m.max_late_ns / 1e9,
                (double)o->lateness_ns / 1e9);
    if (s->an.stats.unattributed_drops && o->job == UINT32_MAX)
        fprintf(stderr, "iotrace-export: warning: producers without a job (storage servers) "
                "lost %llu events; they are in no job's dropped_events\n",
                (unsigned long long)s->an.stats.unattributed_drops);
}

/* The views of the report; NULL when out of memory. */
static struct job_view *views_of(const struct xp_data *d, struct iot_pipe *s, uint32_t job,
                                 size_t *n)
{
    const uint64_t *pairs;
    size_t n_pairs = iot_pipe_job_nodes(s, &pairs);
    struct job_view *views = calloc(n_pairs + 1, sizeof *views);
    if (views)
        *n = job_views(d, s, pairs, n_pairs, job, views);
    return views;
}

char *iot_report_stats_json(const struct xp_data *d, struct iot_pipe *s, uint32_t job)
{
    size_t n = 0;
    struct job_view *views = views_of(d, s, job, &n);
    char *text = views ? dump_json(report_json(d, s, views, n)) : NULL;
    free(views);
    return text;
}

static int report(FILE *out, const struct xp_data *d, struct iot_pipe *s,
                  const struct xp_stats_options *o, char *err, size_t errlen)
{
    size_t n = 0;
    struct job_view *views = views_of(d, s, o->job, &n);
    if (!views) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    if (n == 0 && o->job != UINT32_MAX)
        rc = -1, snprintf(err, errlen, "job '%s' has no events in %s", o->job_name, o->store);
    else if ((o->json ? write_json(out, d, s, views, n) : write_text(out, d, s, views, n)) < 0 ||
             fflush(out) != 0)
        rc = -1, snprintf(err, errlen, "cannot write the statistics: %s", strerror(errno));
    free(views);
    return rc;
}

int xp_stats(struct xp_data *d, const struct xp_stats_options *o, FILE *out, char *err,
             size_t errlen)
{
    struct iot_pipe s;
    struct iot_pipe_config cfg = {.lateness_ns = o->lateness_ns, .grace_ns = o->grace_ns,
                                  .idle_ns = IOT_AN_DEFAULT_IDLE_NS, .job = o->job};
    if (iot_pipe_init(&s, &cfg) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = iot_pipe_run_store(&s, o->store, d, err, errlen);
    if (rc == 0 && (rc = report(out, d, &s, o, err, errlen)) == 0)
        warn(&s, o);
    iot_pipe_free(&s);
    return rc;
}

char *xp_stats_json(const char *store, const char *job, int64_t lateness_ns, int64_t grace_ns,
                    char *err, size_t errlen)
{
    struct xp_data d;
    struct iot_pipe s;
    struct iot_pipe_config cfg = {.lateness_ns = lateness_ns, .grace_ns = grace_ns,
                                  .idle_ns = IOT_AN_DEFAULT_IDLE_NS};
    char *text = NULL;
    if (xp_data_init(&d) < 0) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* The same steps, in the same order, as iotrace-export --stats --job. */
    cfg.job = job ? xp_intern(&d.jobs, job) : UINT32_MAX;
    if (job && cfg.job == UINT32_MAX)
        snprintf(err, errlen, "out of memory");
    else if (xp_read_clocks(store, &d, err, errlen) == 0) {
        d.align = 1;
        if (iot_pipe_init(&s, &cfg) < 0)
            snprintf(err, errlen, "out of memory");
        else {
            if (iot_pipe_run_store(&s, store, &d, err, errlen) == 0) {
                size_t n = 0;
                struct job_view *views = views_of(&d, &s, cfg.job, &n);
                if (views && n == 0 && job)
                    snprintf(err, errlen, "job '%s' has no events in %s", job, store);
                else if (!views || !(text = dump_json(report_json(&d, &s, views, n))))
                    snprintf(err, errlen, "out of memory");
                free(views);
            }
            iot_pipe_free(&s);
        }
    }
    xp_data_free(&d);
    return text;
}
