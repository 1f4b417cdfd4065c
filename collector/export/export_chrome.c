#include "export_chrome.h"
#include "export_out.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "export_json.h"
#include "export_nest.h"
#include "export_rows.h"
#include "grow.h"
#include "iot_functions.h"
#include "pipeline.h"
#include "stats_report.h"
#include "wire.h"

/* Chrome thread ids start here, above any process id the file uses (one
 * per node and kind), so that no thread looks like a process's main
 * thread to Perfetto, which takes tid == pid for that. */
#define TID_BASE 1000u
#define NONE UINT32_MAX

enum { G_RANKS, G_PROCESSES, G_SERVER };

/* A Chrome process: a node's ranks (of one job, when every job is
 * exported), its other traced processes, or one storage server on it. */
struct group {
    uint32_t pid;
    uint32_t node, sub; /* sub: the job for G_RANKS and G_PROCESSES, the server for G_SERVER */
    uint8_t kind, named;
};

/* A Chrome thread: a rank (every thread of the process), a traced process
 * without a rank or a storage-server thread; lanes are further tracks of
 * the same one, for slices that overlap the open ones without nesting
 * (Perfetto and Catapult both expect the slices of a thread to nest). */
struct track {
    uint32_t tid, group, next; /* next: the following lane's track, NONE */
    uint32_t producer, os_tid; /* os_tid: a server thread's, NONE for a client */
    uint16_t lane;
    uint8_t named;
    struct xp_nest open; /* the slices open on it */
};

struct prod {
    uint32_t group; /* NONE until looked up */
    uint32_t main;  /* a client's track, NONE until used */
    uint32_t *threads; /* a server's: the first track of each of its threads */
    size_t n_threads, cap_threads;
};

struct run {
    const struct xp_chrome_options *o;
    struct xp_chrome_result *r;
    struct xp_data *d;
    struct iot_pipe pipe;
    FILE *f;
    struct xp_buf out;    /* what goes to f, written out a megabyte at a time */
    struct xp_rows *rows; /* scratch for the slices' arguments (export_rows.c) */
    int write_failed;
    char *err;
    size_t errlen;
    int failed;
    struct group *groups;
    size_t n_groups, cap_groups;
    struct track *tracks;
    size_t n_tracks, cap_tracks;
    struct prod *prods;
    size_t n_prods;
    int64_t origin;
    int origin_set, any_written;
    uint64_t lost_by_reason[XP_DROP_REASONS + 1]; /* the last one: reasons this build does not know */
};

static int fail(struct run *s, const char *fmt, const char *a)
{
    if (!s->failed)
        snprintf(s->err, s->errlen, fmt, a);
    s->failed = 1;
    return -1;
}

static int oom(struct run *s) { return fail(s, "out of memory %s", "writing the trace file"); }

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    return iot_grow(p, cap, need, size, 16);
}

/* ---- writing ------------------------------------------------------------ */

/* Everything goes through s->out: jansson's dumps and stdio's formatting
 * cost more per slice than the rest of the export (28 000 slices a
 * second). */
static void out_flush(struct run *s)
{
    if (xp_buf_flush(&s->out, s->f) < 0)
        s->write_failed = 1;
}

static void out(struct run *s, const char *text) { xp_buf_str(&s->out, text); }

/* A name of the program's own tables, with its length: no strlen per slice. */
struct name {
    const char *text;
    size_t len;
};
#define NAME(lit) ((struct name){"" lit, sizeof(lit) - 1})

static struct name func_name(unsigned func)
{
    struct name n;
    n.text = xp_func_name(func, &n.len);
    return n.text && n.len ? n : NAME("unknown");
}

/* A literal: its length known when compiled. */
#define OUT(s, lit) xp_buf_put(&(s)->out, "" lit, sizeof(lit) - 1)

/* Microseconds with the nanoseconds as three decimals: exact in both
 * viewers (Perfetto rounds ts * 1000 to the nearest integer). */
static char *put_us(char *p, int64_t ns)
{
    if (ns < 0) {
        *p++ = '-';
        ns = -ns;
    }
    return xp_put_us(p, ns);
}

/* Names come from the store: not necessarily UTF-8 (as iot_json_text). */
static void put_text(struct run *s, const char *text) { xp_buf_json_string(&s->out, text); }

static void put_json(struct run *s, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    out(s, text ? text : "null");
    free(text);
    json_decref(v);
}

/* A literal at p, its length known when compiled. */
#define PUT(p, lit) (memcpy((p), "" lit, sizeof(lit) - 1), (p) += sizeof(lit) - 1)

/* An event's envelope (everything but its args and the strings of its own
 * tables) at its longest: the literals and a dozen integers of 20 digits. */
#define ENVELOPE 512

/* Room for an event of at most ENVELOPE + extra bytes besides its args,
 * its start (ph, pid, tid) written: the envelope goes into the buffer in
 * one reservation, not a dozen appends that each check for room. NULL
 * without memory (the buffer counts it as failed). */
static char *begin_event(struct run *s, char ph, uint32_t pid, uint32_t tid, size_t extra)
{
    if (s->out.len >= (1u << 20))
        out_flush(s);
    char *p = xp_buf_reserve(&s->out, ENVELOPE + extra);
    if (!p)
        return NULL;
    if (s->any_written)
        *p++ = ',';
    s->any_written = 1;
    PUT(p, "\n{\"ph\":\"");
    *p++ = ph;
    PUT(p, "\",\"pid\":");
    p = xp_put_int(p, pid);
    PUT(p, ",\"tid\":");
    return xp_put_int(p, tid);
}

static void metadata(struct run *s, const char *what, uint32_t pid, uint32_t tid, const char *name,
                     long sort_index)
{
    char *p = begin_event(s, 'M', pid, tid, 0);
    if (!p)
        return;
    xp_buf_commit(&s->out, p);
    OUT(s, ",\"name\":\"");
    out(s, what);
    OUT(s, "_name\",\"args\":{\"name\":");
    put_text(s, name);
    OUT(s, "}}");
    if (!(p = begin_event(s, 'M', pid, tid, 0)))
        return;
    xp_buf_commit(&s->out, p);
    OUT(s, ",\"name\":\"");
    out(s, what);
    OUT(s, "_sort_index\",\"args\":{\"sort_index\":");
    xp_buf_int(&s->out, sort_index);
    OUT(s, "}}");
}

/* ---- processes and threads ---------------------------------------------- */

static const char *node_name(const struct xp_data *d, uint32_t node)
{
    const char *n = xp_string(&d->nodes, node);
    return n[0] ? n : "?";
}

/* "b0" of "sn1:/bricks/b0": the node is in the process name already. */
static const char *brick_name(const struct xp_data *d, const struct group *g)
{
    const char *server = xp_string(&d->servers, g->sub), *node = xp_string(&d->nodes, g->node);
    size_t n = strlen(node);
    if (!server[0])
        return node_name(d, g->node);
    if (n && strncmp(server, node, n) == 0 && server[n] == ':' && server[n + 1])
        server += n + 1;
    const char *slash = strrchr(server, '/');
    return slash && slash[1] ? slash + 1 : server;
}

static void group_key(const struct run *s, uint32_t producer, struct group *g)
{
    const struct xp_producer *p = &s->d->producers[producer];
    int server = p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_SERVER;
    *g = (struct group){.node = p->node, .kind = server ? G_SERVER : p->rank >= 0 ? G_RANKS
                                                                                : G_PROCESSES};
    g->sub = server ? p->server : s->o->job == UINT32_MAX ? p->job : 0;
}

static int cmp_group(const void *a, const void *b, void *ctx)
{
    const struct xp_data *d = ctx;
    const struct group *x = a, *y = b;
    /* Node first: a node's ranks and its bricks sit together in the viewer,
     * as its timelines do in the SLOG-2 file's first view. */
    int c = strcmp(xp_string(&d->nodes, x->node), xp_string(&d->nodes, y->node));
    if (c)
        return c;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    const struct xp_strings *t = x->kind == G_SERVER ? &d->servers : &d->jobs;
    return strcmp(xp_string(t, x->sub), xp_string(t, y->sub));
}

static uint32_t find_group(const struct run *s, const struct group *key)
{
    for (size_t i = 0; i < s->n_groups; i++) {
        const struct group *g = &s->groups[i];
        if (g->kind == key->kind && g->node == key->node && g->sub == key->sub)
            return (uint32_t)i;
    }
    return NONE;
}

static struct prod *prod_of(struct run *s, uint32_t producer)
{
    if (producer >= s->n_prods) {
        size_t n = s->n_prods, cap = s->n_prods;
        if (grow((void **)&s->prods, &cap, (size_t)producer + 1, sizeof *s->prods) < 0)
            return NULL;
        for (; n < cap; n++)
            s->prods[n] = (struct prod){.group = NONE, .main = NONE};
        s->n_prods = cap;
    }
    return &s->prods[producer];
}

/* The group of a producer; one not met before gets the next pid. */
static uint32_t group_of(struct run *s, uint32_t producer)
{
    struct prod *p = prod_of(s, producer);
    if (!p)
        return NONE;
    if (p->group != NONE)
        return p->group;
    struct group key;
    group_key(s, producer, &key);
    uint32_t g = find_group(s, &key);
    if (g == NONE) {
        if (grow((void **)&s->groups, &s->cap_groups, s->n_groups + 1, sizeof *s->groups) < 0)
            return NONE;
        key.pid = (uint32_t)s->n_groups + 1;
        s->groups[s->n_groups] = key;
        g = (uint32_t)s->n_groups++;
    }
    return p->group = g;
}

static uint32_t new_track(struct run *s, uint32_t producer, uint32_t os_tid, uint16_t lane)
{
    uint32_t g = group_of(s, producer);
    if (g == NONE ||
        grow((void **)&s->tracks, &s->cap_tracks, s->n_tracks + 1, sizeof *s->tracks) < 0)
        return NONE;
    s->tracks[s->n_tracks] = (struct track){.tid = TID_BASE + (uint32_t)s->n_tracks, .group = g,
                                            .next = NONE, .producer = producer,
                                            .os_tid = os_tid, .lane = lane};
    return (uint32_t)s->n_tracks++;
}

static void name_group(struct run *s, struct group *g)
{
    char name[600];
    const char *node = node_name(s->d, g->node);
    if (g->kind == G_SERVER)
        snprintf(name, sizeof name, "node %s \u00b7 brick %s", node, brick_name(s->d, g));
    else
        snprintf(name, sizeof name, "node %s \u00b7 %s%s%s", node,
                 g->kind == G_RANKS ? "ranks" : "processes", g->sub ? " \u00b7 job " : "",
                 g->sub ? xp_string(&s->d->jobs, g->sub) : "");
    metadata(s, "process", g->pid, 0, name, (long)g->pid);
    g->named = 1;
    s->r->processes++;
}

/* Metadata goes out with a track's first event: only tracks that hold
 * something appear in the viewers. */
static void name_track(struct run *s, struct track *t)
{
    struct group *g = &s->groups[t->group];
    if (!g->named)
        name_group(s, g);
    const struct xp_producer *p = &s->d->producers[t->producer];
    char name[600], lane[32] = "";
    long order;
    uint16_t l = t->lane < 63 ? t->lane : 63;
    if (t->lane)
        snprintf(lane, sizeof lane, " \u00b7 lane %u", (unsigned)t->lane);
    if (g->kind == G_SERVER) {
        snprintf(name, sizeof name, "brick %s \u00b7 thread %u%s", brick_name(s->d, g), t->os_tid,
                 lane);
        order = (long)t->os_tid * 64 + l;
    } else if (g->kind == G_RANKS) {
        snprintf(name, sizeof name, "rank %d%s", p->rank, lane);
        order = (long)p->rank * 64 + l;
    } else {
        snprintf(name, sizeof name, "pid %u%s", p->pid, lane);
        order = (long)p->pid * 64 + l;
    }
    metadata(s, "thread", g->pid, t->tid, name, order);
    t->named = 1;
    s->r->threads++;
}

/* The first track of an event's rank or server thread. */
static uint32_t timeline(struct run *s, const struct xp_event *ev)
{
    struct prod *p = prod_of(s, ev->producer);
    if (!p)
        return NONE;
    if (s->d->producers[ev->producer].kind != IOTRACE__PRODUCER_KIND__PRODUCER_SERVER) {
        if (p->main == NONE)
            p->main = new_track(s, ev->producer, NONE, 0);
        return p->main;
    }
    for (size_t i = 0; i < p->n_threads; i++)
        if (s->tracks[p->threads[i]].os_tid == ev->tid)
            return p->threads[i];
    uint32_t t = new_track(s, ev->producer, ev->tid, 0);
    p = &s->prods[ev->producer];
    if (t == NONE ||
        grow((void **)&p->threads, &p->cap_threads, p->n_threads + 1, sizeof *p->threads) < 0)
        return NONE;
    p->threads[p->n_threads++] = t;
    return t;
}

/* The track a slice [start, end] goes on (slices come in start order): the
 * first lane where it nests inside the innermost open slice. */
static uint32_t place(struct run *s, const struct xp_event *ev)
{
    uint32_t t = timeline(s, ev);
    while (t != NONE) {
        struct track *k = &s->tracks[t];
        int placed = xp_nest_place(&k->open, ev->t_start, ev->t_end);
        if (placed < 0)
            return NONE;
        if (placed)
            return t;
        if (k->next == NONE) {
            uint16_t lane = (uint16_t)(k->lane + 1);
            uint32_t os_tid = k->os_tid, next = new_track(s, ev->producer, os_tid, lane);
            s->tracks[t].next = next;
        }
        t = s->tracks[t].next;
    }
    return NONE;
}

/* Every rank's track is made up front in the order of (process, rank), so
 * that Perfetto, which orders a process's threads by tid, lists the ranks
 * in order too; processes are numbered in the order of (kind, node, job or
 * server). */
static int cmp_rank(const void *a, const void *b, void *ctx)
{
    const struct run *s = ctx;
    const struct xp_producer *x = &s->d->producers[*(const uint32_t *)a];
    const struct xp_producer *y = &s->d->producers[*(const uint32_t *)b];
    uint32_t gx = s->prods[*(const uint32_t *)a].group, gy = s->prods[*(const uint32_t *)b].group;
    if (gx != gy)
        return s->groups[gx].pid < s->groups[gy].pid ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int number_groups(struct run *s)
{
    const struct xp_data *d = s->d;
    for (uint32_t p = 0; p < d->n_producers; p++)
        if (group_of(s, p) == NONE)
            return -1;
    if (s->n_groups) /* none without an array, which qsort_r may not be given */
        qsort_r(s->groups, s->n_groups, sizeof *s->groups, cmp_group, (void *)d);
    for (size_t i = 0; i < s->n_groups; i++)
        s->groups[i].pid = (uint32_t)i + 1;
    uint32_t *ranks = malloc((d->n_producers + 1) * sizeof *ranks);
    if (!ranks)
        return -1;
    size_t n = 0;
    for (uint32_t p = 0; p < d->n_producers; p++) {
        struct group key;
        group_key(s, p, &key);
        s->prods[p].group = find_group(s, &key);
        const struct xp_producer *x = &d->producers[p];
        if (key.kind == G_RANKS && (s->o->job == UINT32_MAX || x->job == s->o->job))
            ranks[n++] = p;
    }
    qsort_r(ranks, n, sizeof *ranks, cmp_rank, s);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if ((s->prods[ranks[i]].main = new_track(s, ranks[i], NONE, 0)) == NONE)
            rc = -1;
    free(ranks);
    return rc;
}

/* ---- events ------------------------------------------------------------- */

static double seconds(const struct run *s, int64_t ns) { return (double)(ns - s->origin) / 1e9; }

static int in_window(const struct run *s, int64_t start, int64_t end)
{
    return seconds(s, end) >= s->o->from_s && seconds(s, start) <= s->o->to_s;
}

static struct name category(const struct xp_event *ev)
{
    return ev->kind == XP_MPIIO ? NAME("mpiio") : ev->kind == XP_POSIX ? NAME("posix") : NAME("disk");
}

static int write_slice(struct run *s, const struct xp_event *ev, uint32_t t)
{
    struct track *k = &s->tracks[t];
    if (!k->named)
        name_track(s, k);
    struct name func = func_name(ev->func), cat = category(ev);
    char *p = begin_event(s, 'X', s->groups[k->group].pid, k->tid, func.len);
    if (!p)
        return 0; /* the buffer counts it: the run fails at the next write */
    PUT(p, ",\"ts\":");
    p = put_us(p, ev->t_start - s->origin);
    PUT(p, ",\"dur\":");
    p = put_us(p, ev->t_end > ev->t_start ? ev->t_end - ev->t_start : 0);
    PUT(p, ",\"cat\":\"");
    memcpy(p, cat.text, cat.len);
    p += cat.len;
    /* The function table's names are plain ASCII: no escaping to do. */
    PUT(p, "\",\"name\":\"");
    memcpy(p, func.text, func.len);
    p += func.len;
    PUT(p, "\",\"args\":");
    xp_buf_commit(&s->out, p);
    xp_rows_json_text(s->rows, &s->out, s->d, ev);
    xp_buf_char(&s->out, '}');
    s->r->slices++;
    return 0;
}

/* A drop record: an instant on the track of its rank or server thread,
 * so that a gap in the slices shows why. */
static int write_drop(struct run *s, const struct xp_event *ev)
{
    size_t n_reasons = sizeof xp_drop_reasons / sizeof *xp_drop_reasons;
    const char *reason = ev->func < n_reasons ? xp_drop_reasons[ev->func] : "unknown";
    s->lost_by_reason[ev->func < n_reasons ? ev->func : n_reasons] += ev->bytes;
    s->r->lost += ev->bytes;
    if (!in_window(s, ev->t_start, ev->t_end))
        return 0;
    uint32_t t = timeline(s, ev);
    if (t == NONE)
        return oom(s);
    struct track *k = &s->tracks[t];
    if (!k->named)
        name_track(s, k);
    /* (the reasons' names are the program's own: plain ASCII) */
    char *p = begin_event(s, 'i', s->groups[k->group].pid, k->tid, strlen(reason));
    if (!p)
        return 0;
    PUT(p, ",\"s\":\"t\",\"ts\":");
    p = put_us(p, ev->t_start - s->origin);
    PUT(p, ",\"cat\":\"drop\",\"name\":\"lost ");
    p = xp_put_int(p, (int64_t)ev->bytes);
    if (ev->bytes == 1)
        PUT(p, " event (");
    else
        PUT(p, " events (");
    p = stpcpy(p, reason);
    PUT(p, ")\",\"args\":");
    xp_buf_commit(&s->out, p);
    xp_rows_json_text(s->rows, &s->out, s->d, ev);
    xp_buf_char(&s->out, '}');
    s->r->instants++;
    return 0;
}

static int on_ordered(void *ctx, const struct xp_event *ev, uint32_t *tag)
{
    struct run *s = ctx;
    if (s->write_failed || ferror(s->f)) /* a full disk: stop reading rather than at the end */
        return fail(s, "cannot write the trace file: %s", strerror(errno ? errno : EIO));
    if (!s->origin_set) {
        s->origin = ev->t_start;
        s->origin_set = 1;
        s->r->origin_ns = ev->t_start;
    }
    if (ev->kind == XP_DROP)
        return write_drop(s, ev);
    if (!in_window(s, ev->t_start, ev->t_end))
        return 0;
    uint32_t t = place(s, ev);
    if (t == NONE)
        return oom(s);
    *tag = t;
    return write_slice(s, ev, t);
}

/* A flow's end binds to the innermost slice open at its time on its
 * thread: Perfetto's flow tracker does so, and the trace-event format
 * documents it for "s" and for "f" with "bp":"e" (Catapult's rule).  A nanosecond into the slice keeps it off the slice's start,
 * where a child starting at the same time, or an equal-time sort order,
 * could pick another slice. */
static int64_t inside(const struct xp_event *ev)
{
    return ev->t_end - ev->t_start >= 2 ? ev->t_start + 1 : ev->t_start;
}

static void flow_end(struct run *s, char ph, uint32_t t, int64_t at, uint64_t id,
                     struct name name)
{
    const struct track *k = &s->tracks[t];
    char *p = begin_event(s, ph, s->groups[k->group].pid, k->tid, name.len);
    if (!p)
        return;
    PUT(p, ",\"ts\":");
    p = put_us(p, at - s->origin);
    PUT(p, ",\"id\":");
    p = xp_put_int(p, (int64_t)id);
    PUT(p, ",\"cat\":\"flow\",\"name\":\"");
    memcpy(p, name.text, name.len);
    p += name.len;
    if (ph == 'f')
        PUT(p, "\",\"bp\":\"e\"}");
    else
        PUT(p, "\"}");
    xp_buf_commit(&s->out, p);
}

/* Flows are the v1 pair "s" (binds to the enclosing slice) and "f" with
 * "bp":"e" (binds to the enclosing slice, not the next one), with an id
 * per pair: both viewers draw them, and unlike the v2 bind_id/flow_out
 * fields of X events they need not be known when the slices are written,
 * while a call can fan out to any number of disk operations.  Both ends
 * come after their slices in the file, which neither viewer minds: they
 * sort by time (Perfetto) or bind flows after all slices are read
 * (Catapult). */
static int on_pair(void *ctx, const struct xp_event *call, uint32_t call_track,
                   const struct xp_event *disk, uint32_t disk_track)
{
    struct run *s = ctx;
    s->r->pairs++;
    if (call_track == NONE || disk_track == NONE)
        return 0; /* outside the window */
    int kind = xp_func_direction(disk->func);
    struct name name = kind == XP_DIR_READ    ? NAME("Read Path")
                       : kind == XP_DIR_WRITE ? NAME("Write Path")
                                              : NAME("Other Path");
    uint64_t id = ++s->r->flows;
    flow_end(s, 's', call_track, inside(call), id, name);
    flow_end(s, 'f', disk_track, inside(disk), id, name);
    return 0;
}

/* ---- the whole run ------------------------------------------------------ */

static void write_trailer(struct run *s)
{
    time_t sec = (time_t)(s->origin / 1000000000);
    struct tm tm;
    char when[64];
    gmtime_r(&sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    size_t len = strlen(when);
    snprintf(when + len, sizeof when - len, ".%09lldZ", (long long)(s->origin % 1000000000));
    json_t *m = json_object(), *lost = json_object();
    json_object_set_new(m, "generator", json_string("iotrace-export --chrome"));
    json_object_set_new(m, "job", s->o->job == UINT32_MAX ? json_null()
                                                           : iot_json_text(s->o->job_name));
    json_object_set_new(m, "time0", json_string(when));
    json_object_set_new(m, "time0_ns", json_integer(s->origin));
    json_object_set_new(m, "clock", json_string(s->d->align ? "collector" : "each node's own"));
    json_object_set_new(m, "slices", json_integer((json_int_t)s->r->slices));
    json_object_set_new(m, "flows", json_integer((json_int_t)s->r->flows));
    json_object_set_new(m, "pairs", json_integer((json_int_t)s->r->pairs));
    json_object_set_new(m, "lost_events", json_integer((json_int_t)s->r->lost));
    size_t n_reasons = sizeof xp_drop_reasons / sizeof *xp_drop_reasons;
    for (size_t i = 0; i <= n_reasons; i++)
        if (s->lost_by_reason[i])
            json_object_set_new(lost, i < n_reasons ? xp_drop_reasons[i] : "unknown",
                                json_integer((json_int_t)s->lost_by_reason[i]));
    json_object_set_new(m, "lost_by_reason", lost);
    OUT(s, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":");
    put_json(s, m);
    OUT(s, "}\n");
}

static void free_run(struct run *s)
{
    iot_pipe_free(&s->pipe);
    for (size_t i = 0; i < s->n_tracks; i++)
        free(s->tracks[i].open.open);
    for (size_t i = 0; i < s->n_prods; i++)
        free(s->prods[i].threads);
    free(s->tracks);
    free(s->prods);
    free(s->groups);
}

static int close_file(struct run *s, int rc)
{
    out_flush(s);
    xp_buf_free(&s->out);
    int bad = s->write_failed || ferror(s->f), to_stdout = s->f == stdout;
    if (xp_output_close(s->f) != 0 || bad)
        rc = rc < 0 ? rc
                    : fail(s, "cannot write the trace file: %s", strerror(errno ? errno : EIO));
    s->f = NULL;
    /* Standard output has no size to tell (a pipe), nor is it ours to remove. */
    s->r->file_bytes = -1;
    struct stat sb;
    if (rc == 0 && !to_stdout && stat(s->o->path, &sb) == 0)
        s->r->file_bytes = (int64_t)sb.st_size;
    if (rc < 0 && !to_stdout)
        unlink(s->o->path);
    return rc;
}

int xp_chrome(struct xp_data *d, const struct xp_chrome_options *o, struct xp_chrome_result *r,
              char *err, size_t errlen)
{
    struct run s = {.o = o, .r = r, .d = d, .err = err, .errlen = errlen};
    *r = (struct xp_chrome_result){0};
    struct iot_pipe_config pc = {.lateness_ns = o->lateness_ns, .grace_ns = o->grace_ns,
                                 .idle_ns = IOT_AN_DEFAULT_IDLE_NS, .job = o->job, .drawing = 1,
                                 .ordered = on_ordered, .pairs = on_pair, .ctx = &s};
    if (iot_pipe_init(&s.pipe, &pc) < 0 || number_groups(&s) < 0) {
        free_run(&s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!(s.f = xp_output_open(o->path))) {
        snprintf(err, errlen, "cannot create %s: %s", xp_output_name(o->path), strerror(errno));
        free_run(&s);
        return -1;
    }
    if (!(s.rows = xp_rows_open(NULL, "scratch"))) {
        snprintf(err, errlen, "out of memory");
        xp_output_close(s.f);
        free_run(&s);
        return -1;
    }
    OUT(&s, "{\"traceEvents\":[");
    int rc = iot_pipe_run_store(&s.pipe, o->store, d, err, errlen);
    if (rc == 0 && !s.origin_set && o->job != UINT32_MAX)
        rc = fail(&s, "job '%s' has no events in the store", o->job_name);
    if (rc == 0)
        write_trailer(&s);
    rc = close_file(&s, rc);
    xp_rows_close(s.rows);
    free_run(&s);
    return rc;
}
