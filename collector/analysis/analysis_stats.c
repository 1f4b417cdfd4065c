#include "analysis_stats.h"

#include <stdlib.h>
#include <string.h>

const char *const iot_an_ops_bucket_names[IOT_AN_OPS_BUCKETS] = {"0",   "1",    "2",  "3-4",
                                                                  "5-8", "9-16", ">16"};

void iot_an_stats_init(struct iot_an_stats *s)
{
    memset(s, 0, sizeof *s);
    for (unsigned f = 0; f < IOT_AN_FUNCS; f++)
        s->completion[f] = (uint8_t)iot_match_is_completion(f);
}

/* What job_of, func_of, server_of and the histograms added to s->bytes. */
static size_t job_bytes(const struct iot_an_job *j)
{
    size_t n = sizeof *j + j->n_server * sizeof *j->server + j->disk_only_cap * sizeof *j->disk_only;
    for (unsigned f = 0; f < IOT_AN_FUNCS; f++)
        if (j->func[f])
            n += sizeof *j->func[f] + j->func[f]->dur.bytes;
    return n;
}

static void free_job(struct iot_an_job *j)
{
    for (unsigned f = 0; f < IOT_AN_FUNCS; f++)
        if (j->func[f]) {
            iot_qhist_free(&j->func[f]->dur);
            free(j->func[f]);
        }
    free(j->server);
    free(j->disk_only);
    free(j);
}

void iot_an_stats_free(struct iot_an_stats *s)
{
    for (size_t i = 0; i < s->n_job; i++)
        if (s->job[i])
            free_job(s->job[i]);
    free(s->job);
    memset(s, 0, sizeof *s);
}

unsigned iot_an_ops_bucket(uint64_t ops)
{
    if (ops <= 2)
        return (unsigned)ops;
    unsigned ceil_log2 = 64u - (unsigned)__builtin_clzll(ops - 1);
    return ceil_log2 + 1 < IOT_AN_OPS_BUCKETS - 1 ? ceil_log2 + 1 : IOT_AN_OPS_BUCKETS - 1;
}

static struct iot_an_job *job_of(struct iot_an_stats *s, uint32_t job)
{
    if (job >= s->n_job) {
        size_t n = s->n_job ? s->n_job : 8;
        while (n <= job)
            n *= 2;
        struct iot_an_job **v = realloc(s->job, n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + s->n_job, 0, (n - s->n_job) * sizeof *v);
        s->bytes += (n - s->n_job) * sizeof *v;
        s->job = v;
        s->n_job = n;
    }
    if (!s->job[job] && (s->job[job] = calloc(1, sizeof *s->job[job])))
        s->bytes += sizeof *s->job[job];
    return s->job[job];
}

static struct iot_an_func *func_of(struct iot_an_stats *s, struct iot_an_job *j, unsigned func)
{
    if (func >= IOT_AN_FUNCS)
        return NULL;
    if (!j->func[func] && (j->func[func] = calloc(1, sizeof *j->func[func]))) {
        iot_qhist_init(&j->func[func]->dur);
        s->bytes += sizeof *j->func[func];
    }
    return j->func[func];
}

static struct iot_an_server *server_of(struct iot_an_stats *s, struct iot_an_job *j,
                                       uint32_t server)
{
    if (server >= j->n_server) {
        size_t n = j->n_server ? j->n_server : 4;
        while (n <= server)
            n *= 2;
        struct iot_an_server *v = realloc(j->server, n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + j->n_server, 0, (n - j->n_server) * sizeof *v);
        s->bytes += (n - j->n_server) * sizeof *v;
        j->server = v;
        j->n_server = n;
    }
    return &j->server[server];
}

/* ---- calls seen only by their disk operations ------------------------------ */

static size_t disk_only_slot(const uint64_t *set, size_t cap, uint64_t callid)
{
    size_t i = (size_t)((callid * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
    while (set[i] && set[i] != callid)
        i = (i + 1) & (cap - 1);
    return i;
}

static int disk_only_add(struct iot_an_stats *s, struct iot_an_job *j, uint64_t callid)
{
    if (j->disk_only_cap && j->disk_only[disk_only_slot(j->disk_only, j->disk_only_cap, callid)])
        return 0;
    if (j->disk_only_n >= IOT_AN_DISK_ONLY_MAX) {
        j->disk_only_more++;
        return 0;
    }
    if ((j->disk_only_n + 1) * 2 > j->disk_only_cap) {
        size_t cap = j->disk_only_cap ? j->disk_only_cap * 2 : 16;
        uint64_t *set = calloc(cap, sizeof *set);
        if (!set)
            return -1;
        for (size_t i = 0; i < j->disk_only_cap; i++)
            if (j->disk_only[i])
                set[disk_only_slot(set, cap, j->disk_only[i])] = j->disk_only[i];
        free(j->disk_only);
        s->bytes += (cap - j->disk_only_cap) * sizeof *set;
        j->disk_only = set;
        j->disk_only_cap = cap;
    }
    j->disk_only[disk_only_slot(j->disk_only, j->disk_only_cap, callid)] = callid;
    j->disk_only_n++;
    return 0;
}

/* The call came after all (its operations were early, or it was late):
 * not a call only the disks saw.  Removal with backward shift, so that
 * lookups need no tombstones. */
static void disk_only_remove(struct iot_an_job *j, uint64_t callid)
{
    size_t cap = j->disk_only_cap, i = disk_only_slot(j->disk_only, cap, callid);
    if (!j->disk_only[i])
        return;
    j->disk_only[i] = 0;
    j->disk_only_n--;
    for (size_t k = (i + 1) & (cap - 1); j->disk_only[k]; k = (k + 1) & (cap - 1)) {
        uint64_t v = j->disk_only[k];
        j->disk_only[k] = 0;
        j->disk_only[disk_only_slot(j->disk_only, cap, v)] = v;
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

size_t iot_an_disk_only_ranks(const struct iot_an_job *j, struct iot_an_rank_count **out)
{
    *out = NULL;
    if (!j->disk_only_n)
        return 0;
    uint32_t *ranks = malloc(j->disk_only_n * sizeof *ranks);
    struct iot_an_rank_count *rc = malloc(j->disk_only_n * sizeof *rc);
    if (!ranks || !rc) {
        free(ranks);
        free(rc);
        return SIZE_MAX;
    }
    size_t n = 0, k = 0;
    for (size_t i = 0; i < j->disk_only_cap; i++)
        if (j->disk_only[i])
            ranks[n++] = (uint32_t)(j->disk_only[i] >> 40);
    qsort(ranks, n, sizeof *ranks, cmp_u32);
    for (size_t i = 0; i < n; i++) {
        if (!k || rc[k - 1].rank != ranks[i])
            rc[k++] = (struct iot_an_rank_count){ranks[i], 0};
        rc[k - 1].calls++;
    }
    free(ranks);
    *out = rc;
    return k;
}

static int on_call(struct iot_an_stats *s, struct iot_an_job *j, const struct xp_event *ev)
{
    if (j->disk_only_n && ev->callid)
        disk_only_remove(j, ev->callid);
    struct iot_an_func *f = func_of(s, j, ev->func);
    if (!f)
        return ev->func >= IOT_AN_FUNCS ? 0 : -1; /* an id from a newer build: not MPI-IO */
    uint64_t dur = (uint64_t)(ev->t_end > ev->t_start ? ev->t_end - ev->t_start : 0);
    size_t before = f->dur.bytes;
    if (iot_qhist_add(&f->dur, dur) < 0)
        return -1;
    s->bytes += f->dur.bytes - before;
    /* Only data moves count as bytes: an MPI_File_set_view row's bytes
     * column describes the view (docs/client.md, "File views"). */
    uint64_t bytes = s->completion[ev->func] || iot_match_is_transfer(ev->func) ? ev->bytes : 0;
    f->count++;
    f->bytes += bytes;
    f->time_ns += dur;
    j->call_time_ns += dur;
    if (!s->completion[ev->func])
        j->call_bytes += bytes; /* a completion repeats its operation's bytes */
    return 0;
}

/* The union of a server's busy intervals, kept as one open interval: in
 * start order an operation either extends it or, starting after its end,
 * closes it.  A late operation (starting before the open interval) is
 * merged with it if they overlap, else added whole: an over-estimate when
 * it overlaps intervals already closed (docs/statistics.md). */
static void busy_add(struct iot_an_server *sv, int64_t start, int64_t end)
{
    if (end < start)
        end = start;
    if (!sv->open) {
        sv->from = start, sv->to = end, sv->open = 1;
    } else if (start > sv->to) {
        sv->busy_ns += (uint64_t)(sv->to - sv->from);
        sv->from = start, sv->to = end;
    } else if (start >= sv->from || end >= sv->from) {
        if (start < sv->from)
            sv->from = start;
        if (end > sv->to)
            sv->to = end;
    } else
        sv->busy_ns += (uint64_t)(end - start);
}

uint64_t iot_an_busy_ns(const struct iot_an_server *sv)
{
    return sv->busy_ns + (sv->open ? (uint64_t)(sv->to - sv->from) : 0);
}

static int on_disk(struct iot_an_stats *s, struct iot_an_job *j, const struct xp_event *ev,
                   uint32_t server)
{
    struct iot_an_server *sv = server_of(s, j, server);
    if (!sv)
        return -1;
    sv->ops++;
    sv->bytes += ev->bytes;
    busy_add(sv, ev->t_start, ev->t_end);
    j->disk_ops++;
    j->disk_bytes += ev->bytes;
    return 0;
}

int iot_an_stats_event(struct iot_an_stats *s, const struct xp_event *ev, uint32_t server)
{
    if (ev->job == 0) {
        if (ev->kind == XP_DROP)
            s->unattributed_drops += ev->bytes;
        return 0;
    }
    struct iot_an_job *j = job_of(s, ev->job);
    if (!j)
        return -1;
    j->events++;
    if (ev->kind != XP_DROP) { /* a drop record's times say when it was noticed */
        if (!j->spanned || ev->t_start < j->first_ns)
            j->first_ns = ev->t_start;
        if (!j->spanned || ev->t_end > j->last_ns)
            j->last_ns = ev->t_end;
        j->spanned = 1;
    }
    switch (ev->kind) {
    case XP_MPIIO: return on_call(s, j, ev);
    case XP_DISK: return on_disk(s, j, ev, server);
    case XP_DROP: j->dropped_events += ev->bytes; return 0;
    default: return 0; /* POSIX: not in the statistics */
    }
}

static void add_sample(struct iot_an_func *f, uint64_t ops)
{
    f->samples++;
    f->ops_sum += ops;
    if (ops > f->ops_max)
        f->ops_max = ops;
    f->ops_hist[iot_an_ops_bucket(ops)]++;
}

void iot_an_stats_closed(void *stats, const struct iot_match_closed *c)
{
    struct iot_an_stats *s = stats;
    struct iot_an_job *j = job_of(s, c->job);
    struct iot_an_func *f = j && c->func ? func_of(s, j, c->func) : NULL;
    if (!j || (c->func && !f)) {
        s->failed = 1;
        return;
    }
    if (!c->func) {
        j->unmatched_disk_ops += c->own_ops; /* their CallID named no call */
        if (c->own_ops && c->callid && disk_only_add(s, j, c->callid) < 0)
            s->failed = 1;
        return;
    }
    f->disk_bytes += c->own_bytes;
    j->attr_disk_bytes += c->own_bytes;
    j->attr_disk_time_ns += c->own_time_ns;
    if (s->completion[c->func])
        return; /* only a completion was seen: no call to count per */
    add_sample(f, c->ops);
    if (c->expect_disk && c->ops == 0)
        j->unmatched_calls++;
}

void iot_an_stats_forget(struct iot_an_stats *s, uint32_t job)
{
    if (job < s->n_job && s->job[job]) {
        size_t gone = job_bytes(s->job[job]);
        s->bytes -= gone < s->bytes ? gone : s->bytes;
        free_job(s->job[job]);
        s->job[job] = NULL;
    }
}
