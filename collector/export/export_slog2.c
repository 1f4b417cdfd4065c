#include "export_slog2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pipeline.h"
#include "export_colours.h"
#include "export_nest.h"
#include "grow.h"
#include "iot_functions.h"
#include "slog2_write.h"
#include "wire.h"

enum { D_STATE, D_ARROW, D_EVENT };

/* A drawable waiting until nothing can end before it any more. */
struct pending {
    int64_t end, start; /* arrow: end = the later vertex, start = send time */
    int64_t recv;       /* arrow: receive time */
    uint64_t seq;       /* keeps equal end times in creation order */
    uint64_t callid;
    int64_t offset;
    uint64_t bytes;
    int32_t cat, from, to;
    uint8_t type;
};

/* A lane: a line of its timeline; a state goes on the first lane where it
 * nests (export_nest.h). */
struct lane {
    int32_t line;
    struct xp_nest open;
};

/* A timeline: one MPI rank (every thread of the process) or one thread of a
 * storage server, with its lanes. */
struct timeline {
    uint64_t key; /* producer << 32 | tid (UINT32_MAX for a whole process) */
    struct lane *lanes;
    size_t n_lanes;
};

/* What the line-ID maps show for a line. */
struct line_info {
    int32_t node, rank, brick, thread, lane;
    uint32_t tl; /* its timeline, in run.tl */
    uint8_t used;
};

struct run {
    const struct xp_slog2_options *o;
    struct xp_slog2_result *r;
    struct xp_data *d;
    struct iot_pipe pipe;
    iot_slog2_writer *w;
    char *err;
    size_t errlen;
    int failed;
    /* timelines, found by key through open addressing */
    struct timeline *tl;
    size_t n_tl, cap_tl;
    uint32_t *tl_index;
    size_t tl_size;
    struct line_info *lines;
    size_t n_lines, cap_lines;
    int32_t *node_index;  /* per node string: its rank in name order */
    int32_t *brick_index; /* per producer: its rank among the servers, -1 */
    size_t n_node_index, n_brick_index; /* what the store held when the run began */
    uint8_t defined[XP_SLOG2_N_CATS];
    /* drawables in end-time order */
    struct pending *heap;
    size_t heap_n, heap_cap;
    uint64_t seq;
    int64_t origin, written_end;
    int origin_set, marker_done;
    char *origin_note;
};

static int fail(struct run *s, const char *fmt, const char *a)
{
    if (!s->failed)
        snprintf(s->err, s->errlen, fmt, a);
    s->failed = 1;
    return -1;
}

static int oom(struct run *s) { return fail(s, "out of memory %s", "writing the SLOG-2 file"); }

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    return iot_grow(p, cap, need, size, 64);
}

/* ---- layers ------------------------------------------------------------- */

int xp_slog2_layers(const char *list, unsigned *layers, char *err, size_t errlen)
{
    static const struct { const char *name; unsigned bit; } names[] = {
        {"mpiio", XP_LAYER_MPIIO}, {"posix", XP_LAYER_POSIX}, {"disk", XP_LAYER_DISK},
        {"arrows", XP_LAYER_ARROWS}, {"all", XP_LAYER_ALL}};
    *layers = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == len && strncmp(p, names[i].name, len) == 0)
                bit = names[i].bit;
        if (!bit) {
            snprintf(err, errlen, "unknown layer '%.*s' (layers: mpiio, posix, disk, arrows, all)",
                     (int)len, p);
            return -1;
        }
        *layers |= bit;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* ---- categories --------------------------------------------------------- */

enum { K_READ = XP_DIR_READ, K_WRITE = XP_DIR_WRITE, K_OTHER = XP_DIR_OTHER };

static const char *func_name(unsigned func)
{
    const char *name = iot_func_name(func);
    return name && name[0] ? name : "unknown";
}

static const char STATE_LABEL[] = "CallID=0x%X offset=%l bytes=%l";
static const char ARROW_LABEL[] = "CallID=0x%X";

/* Colours come from export_colours.c, which gen_colours.py writes from the
 * families of proto/functions.tsv: each category a colour of its own. */
static void set_colour(struct iot_slog2_catdef *c, uint32_t rgb)
{
    c->red = (uint8_t)(rgb >> 16);
    c->green = (uint8_t)(rgb >> 8);
    c->blue = (uint8_t)rgb;
    c->alpha = 255;
}

void xp_slog2_category(int32_t cat, struct iot_slog2_catdef *c, char *name, size_t namelen)
{
    if (cat < XP_SLOG2_CAT_READ_PATH) {
        int disk = iot_func_kind((unsigned)cat) == IOT_KIND_DISK;
        snprintf(name, namelen, "%s%s", disk ? "disk " : "", func_name((unsigned)cat));
        *c = (struct iot_slog2_catdef){.index = cat, .name = name, .topo = IOT_SLOG2_STATE,
                                       .width = 1, .label = STATE_LABEL};
        set_colour(c, xp_colour_func((unsigned)cat));
    } else if (cat == XP_SLOG2_CAT_ORIGIN) {
        *c = (struct iot_slog2_catdef){.index = cat, .name = "iotrace time 0",
                                       .topo = IOT_SLOG2_EVENT, .width = 3, .label = "%s"};
        set_colour(c, xp_colour_origin);
    } else {
        static const char *const names[] = {"Read Path", "Write Path", "Other Path"};
        int k = cat - XP_SLOG2_CAT_READ_PATH;
        *c = (struct iot_slog2_catdef){.index = cat, .name = names[k], .topo = IOT_SLOG2_ARROW,
                                       .width = 3, .label = ARROW_LABEL};
        set_colour(c, xp_colour_path[k]);
    }
}

static int define(struct run *s, int32_t cat)
{
    if (s->defined[cat])
        return 0;
    char name[64];
    struct iot_slog2_catdef c;
    xp_slog2_category(cat, &c, name, sizeof name);
    if (iot_slog2_writer_category(s->w, &c) < 0)
        return fail(s, "%s", iot_slog2_writer_error(s->w));
    s->defined[cat] = 1;
    return 0;
}

/* ---- the end-time heap -------------------------------------------------- */

static int before(const struct pending *a, const struct pending *b)
{
    return a->end < b->end || (a->end == b->end && a->seq < b->seq);
}

static int push(struct run *s, struct pending p)
{
    if (grow((void **)&s->heap, &s->heap_cap, s->heap_n + 1, sizeof *s->heap) < 0)
        return oom(s);
    p.seq = s->seq++;
    size_t i = s->heap_n++;
    while (i > 0 && before(&p, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = p;
    if (s->heap_n > s->r->held_peak)
        s->r->held_peak = s->heap_n;
    return 0;
}

static struct pending pop(struct run *s)
{
    struct pending top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_n)
            break;
        if (c + 1 < s->heap_n && before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!before(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_n)
        s->heap[i] = last;
    return top;
}

/* ---- writing ------------------------------------------------------------ */

static double seconds(const struct run *s, int64_t ns) { return (double)(ns - s->origin) / 1e9; }

static int in_window(const struct run *s, int64_t start, int64_t end)
{
    return seconds(s, end) >= s->o->from_s && seconds(s, start) <= s->o->to_s;
}

static int write_one(struct run *s, const struct pending *p)
{
    if (p->end < s->written_end) {
        s->r->late++; /* a later drawable is already in the file */
        return 0;
    }
    if (!in_window(s, p->type == D_ARROW ? (p->start < p->recv ? p->start : p->recv) : p->start,
                   p->end))
        return 0;
    struct iot_slog2_value v[3] = {{.type = 'X', .u.i = (int64_t)p->callid},
                                   {.type = 'l', .u.i = p->offset},
                                   {.type = 'l', .u.i = (int64_t)p->bytes}};
    int rc;
    if (p->type == D_STATE) {
        rc = iot_slog2_writer_state(s->w, p->cat, p->from, seconds(s, p->start),
                                    seconds(s, p->end), v, 3);
        s->r->states += rc == 0;
    } else if (p->type == D_ARROW) {
        rc = iot_slog2_writer_arrow(s->w, p->cat, p->from, seconds(s, p->start), p->to,
                                    seconds(s, p->recv), v, 1);
        s->r->arrows += rc == 0;
    } else {
        struct iot_slog2_value note = {.type = 's'};
        note.u.s.p = s->origin_note;
        note.u.s.len = (uint16_t)strlen(s->origin_note);
        rc = iot_slog2_writer_event(s->w, p->cat, p->from, seconds(s, p->start), &note, 1);
        s->r->events += rc == 0;
    }
    if (rc < 0)
        return fail(s, "%s", iot_slog2_writer_error(s->w));
    s->written_end = p->end;
    s->lines[p->from].used = 1;
    if (p->type == D_ARROW)
        s->lines[p->to].used = 1;
    return 0;
}

/* Writes what ends at or before `until`: nothing made from now on can end
 * earlier (a state ends after it starts, an arrow at its later vertex). */
static int release(struct run *s, int64_t until)
{
    while (s->heap_n && s->heap[0].end <= until) {
        struct pending p = pop(s);
        if (write_one(s, &p) < 0)
            return -1;
    }
    return 0;
}

/* ---- timelines and lanes ------------------------------------------------ */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static size_t tl_slot(const struct run *s, uint64_t key)
{
    size_t mask = s->tl_size - 1, i = (size_t)mix(key) & mask;
    while (s->tl_index[i] && s->tl[s->tl_index[i] - 1].key != key)
        i = (i + 1) & mask;
    return i;
}

static int tl_rehash(struct run *s)
{
    size_t n = s->tl_size ? s->tl_size * 2 : 256;
    uint32_t *t = calloc(n, sizeof *t);
    if (!t)
        return -1;
    free(s->tl_index);
    s->tl_index = t;
    s->tl_size = n;
    for (size_t i = 0; i < s->n_tl; i++)
        s->tl_index[tl_slot(s, s->tl[i].key)] = (uint32_t)i + 1;
    return 0;
}

static int new_line(struct run *s, const struct timeline *t, int32_t *line)
{
    if (s->n_lines >= INT32_MAX ||
        grow((void **)&s->lines, &s->cap_lines, s->n_lines + 1, sizeof *s->lines) < 0)
        return -1;
    uint32_t producer = (uint32_t)(t->key >> 32), tid = (uint32_t)t->key;
    const struct xp_producer *p = &s->d->producers[producer];
    int server = p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_SERVER;
    /* A store still being written may name nodes and servers that were
     * not there when they were numbered. */
    s->lines[s->n_lines] = (struct line_info){
        .node = p->node < s->n_node_index ? s->node_index[p->node] : -1,
        .rank = !server && p->rank >= 0 ? p->rank : -1,
        .brick = server && producer < s->n_brick_index ? s->brick_index[producer] : -1,
        .thread = tid == UINT32_MAX ? -1 : (int32_t)tid,
        .lane = (int32_t)t->n_lanes,
        .tl = (uint32_t)(t - s->tl)};
    *line = (int32_t)s->n_lines++;
    return 0;
}

static struct timeline *timeline_of(struct run *s, uint64_t key)
{
    if ((s->n_tl + 1) * 2 > s->tl_size && tl_rehash(s) < 0)
        return NULL;
    size_t i = tl_slot(s, key);
    if (s->tl_index[i])
        return &s->tl[s->tl_index[i] - 1];
    if (grow((void **)&s->tl, &s->cap_tl, s->n_tl + 1, sizeof *s->tl) < 0)
        return NULL;
    s->tl[s->n_tl] = (struct timeline){.key = key};
    s->tl_index[i] = (uint32_t)++s->n_tl;
    return &s->tl[s->n_tl - 1];
}

static int add_lane(struct run *s, struct timeline *t)
{
    size_t cap = t->n_lanes;
    if (grow((void **)&t->lanes, &cap, t->n_lanes + 1, sizeof *t->lanes) < 0)
        return -1;
    struct lane *l = &t->lanes[t->n_lanes];
    *l = (struct lane){0};
    if (new_line(s, t, &l->line) < 0)
        return -1;
    t->n_lanes++;
    return 0;
}

/* Processes run on one timeline whatever their threads; a server's
 * threads each have their own. */
static uint64_t timeline_key(const struct xp_data *d, const struct xp_event *ev)
{
    int server = d->producers[ev->producer].kind == IOTRACE__PRODUCER_KIND__PRODUCER_SERVER;
    return (uint64_t)ev->producer << 32 | (server ? ev->tid : UINT32_MAX);
}

/* The line a state [start, end] goes on (states come in start order). */
static int place(struct run *s, const struct xp_event *ev, int32_t *line)
{
    struct timeline *t = timeline_of(s, timeline_key(s->d, ev));
    if (!t)
        return -1;
    for (size_t k = 0;; k++) {
        if (k == t->n_lanes && add_lane(s, t) < 0)
            return -1;
        struct lane *l = &t->lanes[k];
        int placed = xp_nest_place(&l->open, ev->t_start, ev->t_end);
        if (placed < 0)
            return -1;
        if (placed) {
            *line = l->line;
            return 0;
        }
    }
}

/* Every MPI rank gets its timeline up front, in the order of (job, rank),
 * so that Jumpshot's identity view starts with the ranks in order; servers
 * and extra lanes follow as they appear. */
static int cmp_rank(const void *a, const void *b, void *ctx)
{
    const struct xp_data *d = ctx;
    const struct xp_producer *x = &d->producers[*(const uint32_t *)a];
    const struct xp_producer *y = &d->producers[*(const uint32_t *)b];
    int c = strcmp(xp_string(&d->jobs, x->job), xp_string(&d->jobs, y->job));
    if (c)
        return c;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if ((c = strcmp(xp_string(&d->nodes, x->node), xp_string(&d->nodes, y->node))))
        return c;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
    const char *const *names = ctx;
    return strcmp(names[*(const uint32_t *)a], names[*(const uint32_t *)b]);
}

/* Ranks of the names in sorted order (equal names share a rank). */
static int rank_names(const char **names, size_t n, int32_t *out)
{
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    qsort_r(order, n, sizeof *order, cmp_name, names);
    int32_t r = -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(names[order[i - 1]], names[order[i]]) != 0)
            r++;
        out[order[i]] = r;
    }
    free(order);
    return 0;
}

static const char *server_name(const struct xp_data *d, uint32_t producer)
{
    const struct xp_producer *p = &d->producers[producer];
    const char *server = xp_string(&d->servers, p->server);
    return server[0] ? server : xp_string(&d->nodes, p->node);
}

static int is_server(const struct xp_data *d, uint32_t producer)
{
    return d->producers[producer].kind == IOTRACE__PRODUCER_KIND__PRODUCER_SERVER;
}

static int number_nodes_and_bricks(struct run *s)
{
    struct xp_data *d = s->d;
    size_t n = d->nodes.n > d->n_producers ? d->nodes.n : d->n_producers;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    s->node_index = malloc((d->nodes.n + 1) * sizeof *s->node_index);
    s->brick_index = malloc((d->n_producers + 1) * sizeof *s->brick_index);
    uint32_t *which = malloc((d->n_producers + 1) * sizeof *which);
    if (!names || !s->node_index || !s->brick_index || !which) {
        free(names);
        free(which);
        return -1;
    }
    for (size_t i = 0; i < d->nodes.n; i++)
        names[i] = d->nodes.str[i];
    s->n_node_index = d->nodes.n;
    s->n_brick_index = d->n_producers;
    int rc = rank_names(names, d->nodes.n, s->node_index);
    for (size_t i = 0; i < d->nodes.n; i++)
        s->node_index[i]--; /* "" (no node, index 0) sorts first: nodes count from 0 */
    size_t k = 0;
    for (uint32_t p = 0; p < d->n_producers; p++) {
        s->brick_index[p] = -1;
        if (is_server(d, p)) {
            which[k] = p;
            names[k++] = server_name(d, p);
        }
    }
    int32_t *r = malloc((k + 1) * sizeof *r);
    if (rc == 0 && r && rank_names(names, k, r) == 0)
        for (size_t i = 0; i < k; i++)
            s->brick_index[which[i]] = r[i];
    else
        rc = -1;
    free(r);
    free(names);
    free(which);
    return rc;
}

static int wanted_producer(const struct run *s, uint32_t p)
{
    const struct xp_producer *x = &s->d->producers[p];
    return x->kind == IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT && x->rank >= 0 &&
           (s->o->job == UINT32_MAX || x->job == s->o->job);
}

static int rank_timelines(struct run *s)
{
    uint32_t *v = malloc((s->d->n_producers + 1) * sizeof *v);
    if (!v)
        return -1;
    size_t n = 0;
    for (uint32_t p = 0; p < s->d->n_producers; p++)
        if (wanted_producer(s, p))
            v[n++] = p;
    qsort_r(v, n, sizeof *v, cmp_rank, s->d);
    for (size_t i = 0; i < n; i++) {
        struct timeline *t = timeline_of(s, (uint64_t)v[i] << 32 | UINT32_MAX);
        if (!t || (t->n_lanes == 0 && add_lane(s, t) < 0)) {
            free(v);
            return -1;
        }
    }
    free(v);
    return 0;
}

/* The popup of the time-0 marker: what the numbers of the line-ID map
 * stand for, and when time 0 is. */
static int origin_note(struct run *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -1;
    time_t sec = (time_t)(s->origin / 1000000000);
    struct tm tm;
    char when[32];
    gmtime_r(&sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f, "time 0 = %s.%09lldZ (collector clock)", when,
            (long long)(s->origin % 1000000000));
    fputs("; nodes:", f);
    for (size_t i = 0; i < s->n_node_index; i++)
        if (s->d->nodes.str[i][0])
            fprintf(f, " %d=%s", s->node_index[i], s->d->nodes.str[i]);
    int any = 0;
    for (uint32_t p = 0; p < s->n_brick_index; p++)
        if (s->brick_index[p] >= 0)
            fprintf(f, "%s %d=%s", any++ ? "" : "; bricks:", s->brick_index[p],
                    server_name(s->d, p));
    if (fclose(f) != 0) {
        free(buf);
        return -1;
    }
    if (len > 32000)
        buf[32000] = '\0'; /* a label value is at most 32767 bytes */
    s->origin_note = buf;
    return 0;
}

/* ---- events ------------------------------------------------------------- */

static int layer_of(const struct xp_event *ev)
{
    return ev->kind == XP_MPIIO ? XP_LAYER_MPIIO : ev->kind == XP_POSIX ? XP_LAYER_POSIX
                                                                      : XP_LAYER_DISK;
}

static void start_file(struct run *s, int64_t t0)
{
    s->origin = t0;
    s->origin_set = 1;
    s->written_end = INT64_MIN;
    s->r->origin_ns = t0;
}

/* The marker of time 0 goes on the first rank's timeline, or without ranks
 * on the first timeline used; either way before any drawable is written,
 * as it ends first. */
static int mark_origin(struct run *s, int32_t line)
{
    s->marker_done = 1;
    if (origin_note(s) < 0)
        return oom(s);
    if (define(s, XP_SLOG2_CAT_ORIGIN) < 0)
        return -1;
    return push(s, (struct pending){.end = s->origin, .start = s->origin,
                                    .cat = XP_SLOG2_CAT_ORIGIN, .from = line, .type = D_EVENT});
}

static int on_ordered(void *ctx, const struct xp_event *ev, uint32_t *tag)
{
    struct run *s = ctx;
    if (ev->kind == XP_DROP)
        return 0;
    if (!s->origin_set)
        start_file(s, ev->t_start);
    if (release(s, ev->t_start) < 0)
        return -1;
    unsigned layer = (unsigned)layer_of(ev);
    int for_arrows = (s->o->layers & XP_LAYER_ARROWS) && ev->kind != XP_POSIX && ev->callid;
    if ((s->o->layers & layer) || for_arrows) {
        int32_t line;
        if (place(s, ev, &line) < 0)
            return oom(s);
        *tag = (uint32_t)line;
        if (!s->marker_done && mark_origin(s, 0) < 0)
            return -1;
        if ((s->o->layers & layer) && (define(s, ev->func) < 0 ||
                                       push(s, (struct pending){.end = ev->t_end,
                                                                .start = ev->t_start,
                                                                .callid = ev->callid,
                                                                .offset = xp_event_offset(ev),
                                                                .bytes = ev->bytes,
                                                                .cat = ev->func, .from = line,
                                                                .type = D_STATE}) < 0))
            return -1;
    }
    return 0;
}

/* Arrows go from the call's start to the disk operation's start, as the
 * thesis's Slog2ToArrowSlog2 drew them; the later vertex is the arrow's end
 * time, which is never before the start of the event being processed. */
static int on_pair(void *ctx, const struct xp_event *call, uint32_t call_line,
                   const struct xp_event *disk, uint32_t disk_line)
{
    struct run *s = ctx;
    s->r->pairs++;
    if (!(s->o->layers & XP_LAYER_ARROWS) || call_line == UINT32_MAX || disk_line == UINT32_MAX)
        return 0;
    int kind = xp_func_direction(disk->func);
    int32_t cat = kind == K_READ    ? XP_SLOG2_CAT_READ_PATH
                  : kind == K_WRITE ? XP_SLOG2_CAT_WRITE_PATH
                                    : XP_SLOG2_CAT_OTHER_PATH;
    if (define(s, cat) < 0)
        return -1;
    int64_t send = call->t_start, recv = disk->t_start;
    return push(s, (struct pending){.end = send > recv ? send : recv, .start = send, .recv = recv,
                                    .callid = disk->callid, .cat = cat,
                                    .from = (int32_t)call_line, .to = (int32_t)disk_line,
                                    .type = D_ARROW});
}

/* ---- the pipeline's hooks --------------------------------------------- */

/* Nothing not yet released starts before the watermark (late events
 * aside): what ends before it is written. */
static int on_advanced(void *ctx, int64_t watermark)
{
    struct run *s = ctx;
    return s->origin_set ? release(s, watermark) : 0;
}

/* ---- the line-ID maps --------------------------------------------------- */

/* Jumpshot opens the first map of the file, labels each row of its y-axis
 * with one value of the map as a decimal integer (a map holds no strings
 * per row), and starts with only the first column unfolded: every line is
 * drawn on the row of its first value until the user expands the tree
 * (docs/slog2-format.md, "How Jumpshot shows the maps").  So the first map
 * gives each timeline one first-column value that reads as its name, with
 * its lanes folded below it: rank r is r; the t-th thread (in thread-id
 * order) of brick b is (b + 1) * base + t; a traced process without a rank
 * is negative.  Rows come in the order of these values, which keeps each
 * node's rows together as long as every node's ranks are consecutive and
 * no node runs both ranks and bricks; otherwise the node's number goes in
 * front, node * scale + that value, so that the rows still group by node. */
struct tl_row {
    uint32_t tl; /* in run.tl */
    int kind;    /* ROW_* */
    int32_t brick, node;
    uint32_t producer, tid;
    int64_t local; /* the value without the node */
};

enum { ROW_PROCESS, ROW_RANK, ROW_THREAD };

static int cmp_row(const void *a, const void *b, void *ctx)
{
    const struct tl_row *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->kind == ROW_RANK)
        return cmp_rank(&x->producer, &y->producer, ctx);
    if (x->kind == ROW_THREAD) {
        if (x->brick != y->brick)
            return x->brick < y->brick ? -1 : 1;
        if (x->tid != y->tid)
            return x->tid < y->tid ? -1 : 1;
        return x->producer < y->producer ? -1 : x->producer > y->producer;
    }
    const struct xp_data *d = ctx;
    const struct xp_producer *p = &d->producers[x->producer], *q = &d->producers[y->producer];
    int c = strcmp(xp_string(&d->nodes, p->node), xp_string(&d->nodes, q->node));
    return c ? c : p->pid < q->pid ? -1 : p->pid > q->pid;
}

struct view {
    int64_t base;  /* of the server threads' values */
    int64_t scale; /* of the node's number; 0: not used */
};

static int power_above(int64_t v, int64_t *p)
{
    while (*p <= v) {
        if (*p > INT32_MAX / 10)
            return -1;
        *p *= 10;
    }
    return 0;
}

/* Whether rows, in their order, visit every node once. */
static int grouped_by_node(const struct run *s, const struct tl_row *rows, size_t n)
{
    uint8_t *seen = calloc(s->n_node_index + 2, 1);
    int ok = seen != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        size_t k = (size_t)(rows[i].node + 1);
        if (i > 0 && rows[i].node == rows[i - 1].node)
            continue;
        ok = !seen[k];
        seen[k] = 1;
    }
    free(seen);
    return ok;
}

/* The first-column value of every timeline with a used line (code[tl]). */
static int timeline_codes(struct run *s, int32_t *code, struct view *v)
{
    struct tl_row *rows = malloc((s->n_tl + 1) * sizeof *rows);
    uint8_t *used = calloc(s->n_tl + 1, 1);
    if (!rows || !used) {
        free(rows);
        free(used);
        return oom(s);
    }
    for (size_t i = 0; i < s->n_lines; i++)
        used[s->lines[i].tl] |= s->lines[i].used;
    int32_t max_brick = -1, max_node = -1;
    for (size_t p = 0; p < s->n_brick_index; p++)
        max_brick = s->brick_index[p] > max_brick ? s->brick_index[p] : max_brick;
    for (size_t i = 0; i < s->n_node_index; i++)
        max_node = s->node_index[i] > max_node ? s->node_index[i] : max_node;
    size_t n = 0;
    for (size_t i = 0; i < s->n_tl; i++) {
        if (!used[i])
            continue;
        uint32_t producer = (uint32_t)(s->tl[i].key >> 32), tid = (uint32_t)s->tl[i].key;
        const struct xp_producer *p = &s->d->producers[producer];
        struct tl_row *r = &rows[n++];
        *r = (struct tl_row){.tl = (uint32_t)i, .producer = producer, .tid = tid,
                             .kind = is_server(s->d, producer) ? ROW_THREAD
                                     : p->rank >= 0           ? ROW_RANK
                                                              : ROW_PROCESS};
        /* what the store named only after the numbering goes last */
        r->brick = producer < s->n_brick_index && s->brick_index[producer] >= 0
                       ? s->brick_index[producer]
                       : max_brick + 1;
        r->node = p->node < s->n_node_index && s->node_index[p->node] >= 0
                      ? s->node_index[p->node]
                      : max_node + 1;
    }
    qsort_r(rows, n, sizeof *rows, cmp_row, s->d);

    /* Ranks keep their numbers unless two share one (an export of several
     * jobs): then they are numbered in (job, rank) order. */
    int by_rank = 1;
    size_t processes = 0, ranks = 0;
    int64_t need = 0; /* the largest rank value and thread index, to fit below base */
    for (size_t i = 0, t = 0; i < n; i++) {
        struct tl_row *r = &rows[i];
        if (r->kind == ROW_PROCESS) {
            processes++;
        } else if (r->kind == ROW_RANK) {
            int32_t rank = s->d->producers[r->producer].rank;
            by_rank &= ranks == 0 || rank > s->d->producers[rows[i - 1].producer].rank;
            r->local = rank;
            ranks++;
        } else {
            t = i > 0 && rows[i - 1].kind == ROW_THREAD && rows[i - 1].brick == r->brick ? t + 1
                                                                                        : 0;
            r->local = (int64_t)t;
        }
        need = r->local > need ? r->local : need;
    }
    if (!by_rank)
        need = (int64_t)ranks > need ? (int64_t)ranks : need;
    v->base = 1000;
    v->scale = 0;
    int rc = power_above(need, &v->base);
    for (size_t i = 0, k = 0; i < n; i++) {
        struct tl_row *r = &rows[i];
        if (r->kind == ROW_PROCESS)
            r->local = -(int64_t)(processes - i); /* processes come first */
        else if (r->kind == ROW_RANK)
            r->local = by_rank ? r->local : (int64_t)k++;
        else
            r->local += (int64_t)(r->brick + 1) * v->base;
    }
    int64_t top = n ? rows[n - 1].local : 0;
    if (rc == 0 && !grouped_by_node(s, rows, n)) {
        /* node-major: processes follow the node's threads, values stay >= 0 */
        for (size_t i = 0; i < n; i++)
            if (rows[i].kind == ROW_PROCESS)
                rows[i].local = (int64_t)(max_brick + 2) * v->base + (int64_t)i;
        top = processes ? (int64_t)(max_brick + 2) * v->base + (int64_t)processes : top;
        v->scale = 10 * v->base;
        rc = power_above(top, &v->scale);
        if (rc == 0 && (int64_t)(max_node + 2) * v->scale > INT32_MAX)
            rc = -1;
    }
    if (rc == 0 && top > INT32_MAX)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        code[rows[i].tl] = (int32_t)(rows[i].local + (int64_t)rows[i].node * v->scale);
    free(rows);
    free(used);
    return rc == 0 ? 0
                   : fail(s, "%s", "too many nodes, ranks, bricks or threads to number the rows "
                                   "of Jumpshot's first view");
}

static int write_map(struct run *s, const char *title, const char *const *columns,
                     int32_t n_columns, const int32_t *rows, int32_t n)
{
    struct iot_slog2_mapdef m = {.title = title, .n_columns = n_columns, .columns = columns,
                                 .n_rows = n, .rows = rows};
    return n == 0 || iot_slog2_writer_lineidmap(s->w, &m) == 0
               ? 0
               : fail(s, "%s", iot_slog2_writer_error(s->w));
}

/* The first map, for the eye (above), then one that gives every line all
 * it stands for, for tools and for folding by node: node, rank, brick,
 * thread id and lane.  The writer adds the Identity Map last. */
static int write_maps(struct run *s)
{
    static const char *const detail[] = {"node", "rank", "brick", "thread", "lane"};
    enum { W = 6 };
    int32_t *rows = malloc((s->n_lines + 1) * W * sizeof *rows);
    int32_t *code = malloc((s->n_tl + 1) * sizeof *code);
    struct view v = {.base = 1000};
    if (!rows || !code) {
        free(rows);
        free(code);
        return oom(s);
    }
    int rc = timeline_codes(s, code, &v);
    int32_t n = 0;
    for (size_t i = 0; rc == 0 && i < s->n_lines; i++) {
        const struct line_info *l = &s->lines[i];
        if (!l->used)
            continue;
        int32_t *row = rows + (size_t)n++ * 3;
        row[0] = (int32_t)i;
        row[1] = code[l->tl];
        row[2] = l->lane;
    }
    /* The title is the view menu's entry and the timeline window's title,
     * the column label is shown under the y-axis and in every popup: they
     * say how to read the numbers. */
    char title[160], first[96];
    long long b = (long long)v.base, m = (long long)v.scale;
    if (m) {
        snprintf(title, sizeof title,
                 "iotrace: %lld*node + (rank r, or %lld*(b+1)+t for brick b thread t)", m, b);
        snprintf(first, sizeof first, "%lld*node + (rank, or %lld*(brick+1)+thread)", m, b);
    } else {
        snprintf(title, sizeof title, "iotrace: rank r, brick b thread t = %lld*(b+1)+t", b);
        snprintf(first, sizeof first, "rank, or %lld*(brick+1)+thread", b);
    }
    const char *const columns[] = {first, "lane"};
    if (rc == 0)
        rc = write_map(s, title, columns, 2, rows, n);
    n = 0;
    for (size_t i = 0; rc == 0 && i < s->n_lines; i++) {
        const struct line_info *l = &s->lines[i];
        if (!l->used)
            continue;
        int32_t *row = rows + (size_t)n++ * W;
        row[0] = (int32_t)i;
        row[1] = l->node;
        row[2] = l->rank;
        row[3] = l->brick;
        row[4] = l->thread;
        row[5] = l->lane;
    }
    if (rc == 0)
        rc = write_map(s, "iotrace: node, rank or brick, thread, lane", detail, W - 1, rows, n);
    free(rows);
    free(code);
    s->r->lines = (uint32_t)n;
    return rc;
}

/* ---- the whole run ------------------------------------------------------ */

static void free_run(struct run *s)
{
    iot_pipe_free(&s->pipe);
    for (size_t i = 0; i < s->n_tl; i++) {
        for (size_t k = 0; k < s->tl[i].n_lanes; k++)
            free(s->tl[i].lanes[k].open.open);
        free(s->tl[i].lanes);
    }
    free(s->tl);
    free(s->tl_index);
    free(s->lines);
    free(s->node_index);
    free(s->brick_index);
    free(s->heap);
    free(s->origin_note);
}

static int close_file(struct run *s)
{
    struct iot_slog2_writer_stats st;
    iot_slog2_writer_stats(s->w, &st);
    s->r->depth = st.depth;
    s->r->nodes_written = st.nodes_written + (uint64_t)st.depth + 1; /* + the open path */
    s->r->writer_peak_bytes = st.peak_bytes;
    char why[512];
    int rc = iot_slog2_writer_close(s->w, why, sizeof why);
    s->w = NULL;
    if (rc < 0)
        return fail(s, "%s", why);
    struct stat sb;
    if (stat(s->o->path, &sb) == 0)
        s->r->file_bytes = (int64_t)sb.st_size;
    return 0;
}

int xp_slog2(struct xp_data *d, const struct xp_slog2_options *o, struct xp_slog2_result *r,
             char *err, size_t errlen)
{
    struct run s = {.o = o, .r = r, .d = d, .err = err, .errlen = errlen};
    *r = (struct xp_slog2_result){0};
    struct iot_pipe_config pc = {.lateness_ns = o->lateness_ns, .grace_ns = o->grace_ns,
                                 .idle_ns = IOT_AN_DEFAULT_IDLE_NS, .job = o->job, .drawing = 1,
                                 .ordered = on_ordered, .pairs = on_pair,
                                 .advanced = on_advanced, .ctx = &s};
    struct iot_slog2_options wo = {.leaf_bytesize = o->leaf_bytesize,
                                   .children_per_node = o->children};
    if (iot_pipe_init(&s.pipe, &pc) < 0 || number_nodes_and_bricks(&s) < 0 ||
        rank_timelines(&s) < 0) {
        free_run(&s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!(s.w = iot_slog2_writer_open(o->path, &wo, err, errlen))) {
        free_run(&s);
        return -1;
    }
    int rc = iot_pipe_run_store(&s.pipe, o->store, d, err, errlen);
    if (rc == 0 && s.origin_set)
        rc = release(&s, INT64_MAX);
    if (rc == 0 && r->states + r->arrows == 0)
        rc = o->job != UINT32_MAX && !s.origin_set
                 ? fail(&s, "job '%s' has no events in the store", o->job_name)
                 : fail(&s, "nothing to draw%s", s.origin_set ? " in the time window and layers chosen" : "");
    if (rc == 0)
        rc = write_maps(&s);
    if (rc == 0)
        rc = close_file(&s);
    if (s.w)
        iot_slog2_writer_abort(s.w);
    free_run(&s);
    return rc;
}
