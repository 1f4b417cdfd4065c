/* Throughput and memory of the analysis pipeline (collector/analysis*.c).
 *
 *   bench_analysis [-n EVENTS] [-r RANKS] [-S SERVERS] [-b BATCH] [-l LATENESS_MS]
 *                  [-g GRACE_MS] [-p RANKS_PER_NODE] [-s SERVERS_PER_NODE] [-t THREADS]
 *                  [-c] [-d STORE_DIR [-k]]
 *
 * Generates EVENTS (default 10 M) synthetic events of one job: RANKS
 * (default 16, 4 per node) issue MPI-IO calls back to back, each write with
 * one POSIX pwrite inside it (carrying its CallID) and two disk operations
 * (a replica on each of two of SERVERS servers, default 4, one node each);
 * every 16th round is a collective write of all ranks whose disk operations
 * only the aggregators (every 4th rank) issue.  Events are written on each
 * node's own clock (offsets of milliseconds) into per-producer buffers the
 * way the client library fills them (a call after the POSIX calls it made,
 * since it is recorded when it returns) and handed over BATCH (default 256)
 * at a time, interleaving producers.  -p, -s and -t change the layout:
 * ranks per node, servers per storage node, threads per server (default 4,
 * 1, 1); -c runs the servers on the ranks' nodes instead.  The tests use
 * them for small stores of a given shape (tests/integration/test_slog2_views.py).
 *
 * Without -d, in one thread: clock alignment (iot_clockmap_map), merge,
 * matching and statistics; the time of the generator alone is measured in a
 * separate run and subtracted.  Prints events/s, the events and the
 * (job, CallID) entries held at the peak, and the bytes per entry.
 *
 * With -d, the batches are first encoded (protobuf + LZ4) into a collector
 * store in STORE_DIR (untimed), then the whole `iotrace-export --stats`
 * path is timed: reading and decoding the store, alignment, merge,
 * matching, statistics and the report (to /dev/null).  The store is removed
 * unless -k is given. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "clockmap.h"
#include "events.h"
#include "stats_report.h"
#include "iot_functions.h"
#include "store.h"
#include "wire.h"

#define T0 1700000000000000000ll
#define US 1000ll
#define ROUND_NS (40 * US)
#define COLL_EVERY 16
#define BLOCK 65536u
#define FILE_ID 0xF11Eull

struct bench {
    uint64_t n;
    int ranks, servers, batch, keep;
    int per_node, per_storage, threads, converged;
    int64_t lateness, grace;
    const char *store;
};

/* One producer: its buffer of events not yet handed over. */
struct source {
    struct xp_event *v;
    size_t n;
    uint32_t id;
    int node, rank, is_server;
    uint64_t seq;
};

struct gen;
typedef int (*flush_fn)(struct gen *g, struct source *s);

struct gen {
    const struct bench *b;
    struct source *src; /* ranks, then servers */
    int n_src, n_nodes, rank_nodes;
    uint64_t emitted;
    int64_t newest; /* newest end time generated, collector clock */
    flush_fn flush;
    void *ctx;
};

static int64_t node_offset(int node)
{
    return (node + 1) * 1234567ll; /* collector clock - node clock */
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wall time, and the process's CPU time: on a shared machine the second is
 * what one core delivers. */
struct stamp {
    double wall, cpu;
};

static struct stamp now(void)
{
    return (struct stamp){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID)};
}

static struct stamp since(struct stamp t0)
{
    struct stamp t = now();
    return (struct stamp){t.wall - t0.wall, t.cpu - t0.cpu};
}

/* ---- the generator ------------------------------------------------------ */

static int gen_init(struct gen *g, const struct bench *b, flush_fn flush, void *ctx)
{
    *g = (struct gen){.b = b, .flush = flush, .ctx = ctx};
    g->n_src = b->ranks + b->servers;
    g->rank_nodes = (b->ranks + b->per_node - 1) / b->per_node;
    g->n_nodes = g->rank_nodes +
                 (b->converged ? 0 : (b->servers + b->per_storage - 1) / b->per_storage);
    if (!(g->src = calloc((size_t)g->n_src, sizeof *g->src)))
        return -1;
    for (int i = 0; i < g->n_src; i++) {
        struct source *s = &g->src[i];
        s->id = (uint32_t)i;
        s->is_server = i >= b->ranks;
        s->rank = s->is_server ? -1 : i;
        int j = i - b->ranks; /* the server's number */
        s->node = !s->is_server  ? i / b->per_node
                  : b->converged ? j % g->rank_nodes
                                 : g->rank_nodes + j / b->per_storage;
        if (!(s->v = calloc((size_t)b->batch + 1, sizeof *s->v)))
            return -1;
    }
    return 0;
}

static void gen_free(struct gen *g)
{
    for (int i = 0; i < g->n_src; i++)
        free(g->src[i].v);
    free(g->src);
}

/* Times go in on the collector's clock and are stored on the node's. */
static int add(struct gen *g, struct source *s, struct xp_event ev)
{
    if (ev.t_end > g->newest)
        g->newest = ev.t_end;
    ev.t_start -= node_offset(s->node);
    ev.t_end -= node_offset(s->node);
    ev.producer = s->id;
    ev.job = 1;
    s->v[s->n++] = ev;
    g->emitted++;
    if (s->n < (size_t)g->b->batch)
        return 0;
    int rc = g->flush(g, s);
    s->n = 0;
    return rc;
}

static struct xp_event disk_op(uint64_t callid, int64_t t, uint64_t bytes, uint32_t tid)
{
    return (struct xp_event){.kind = XP_DISK, .func = IOT_F_DISK_writev, .callid = callid,
                             .file = 0xD15C, .bytes = bytes, .ret = (int64_t)bytes,
                             .t_start = t, .t_end = t + 8 * US, .tid = tid};
}

static int replicas(struct gen *g, uint64_t callid, uint64_t key, int64_t t)
{
    int s1 = (int)(key % (uint64_t)g->b->servers), s2 = (s1 + 1) % g->b->servers;
    struct source *srv = &g->src[g->b->ranks];
    uint32_t tid = 7 + (uint32_t)(key % (uint64_t)g->b->threads);
    if (add(g, &srv[s1], disk_op(callid, t, BLOCK, tid)) < 0)
        return -1;
    return g->b->servers > 1 ? add(g, &srv[s2], disk_op(callid, t + US, BLOCK, tid)) : 0;
}

/* One call of rank r in round k: its pwrite, its disk operations, then the
 * call itself (recorded when it returns). */
static int one_call(struct gen *g, int r, uint64_t k)
{
    struct source *s = &g->src[r];
    int coll = k % COLL_EVERY == COLL_EVERY - 1, aggregator = r % g->b->per_node == 0;
    int64_t t = T0 + (int64_t)k * ROUND_NS + (r % 5) * US, dur = (20 + (int64_t)(k * r % 7)) * US;
    uint64_t callid = (uint64_t)r << 40 | (k + 1);
    if (!coll || aggregator) {
        struct xp_event px = {.kind = XP_POSIX, .func = IOT_F_POSIX_pwrite, .callid = callid,
                              .file = FILE_ID, .bytes = BLOCK, .ret = BLOCK, .t_start = t + 2 * US,
                              .t_end = t + dur - 2 * US, .tid = (uint32_t)r};
        if (add(g, s, px) < 0 || replicas(g, callid, k + (uint64_t)r, t + 5 * US) < 0)
            return -1;
    }
    struct xp_event call = {.kind = XP_MPIIO, .callid = callid, .file = FILE_ID,
                            .bytes = BLOCK, .xfer = BLOCK, .t_start = t, .t_end = t + dur,
                            .tid = (uint32_t)r, .offset = (int64_t)(k * BLOCK)};
    call.func = coll ? IOT_F_MPIIO_MPI_File_write_at_all : IOT_F_MPIIO_MPI_File_write_at;
    call.coll_seq = coll ? k / COLL_EVERY + 1 : 0;
    return add(g, s, call);
}

static int gen_run(struct gen *g)
{
    for (uint64_t k = 0; g->emitted < g->b->n; k++)
        for (int r = 0; r < g->b->ranks; r++)
            if (one_call(g, r, k) < 0)
                return -1;
    for (int i = 0; i < g->n_src; i++)
        if (g->src[i].n && g->flush(g, &g->src[i]) < 0)
            return -1;
    return 0;
}

/* ---- direct: alignment, merge, matching, statistics --------------------- */

struct direct {
    struct iot_an an;
    struct iot_clockmap *maps;
};

static int count_only(struct gen *g, struct source *s)
{
    (void)g, (void)s;
    return 0;
}

/* A batch arrives: aligned, pushed, and the watermark advanced to its
 * arrival time, a millisecond after the newest event. */
static int to_pipeline(struct gen *g, struct source *s)
{
    struct direct *d = g->ctx;
    const struct iot_clockmap *m = &d->maps[s->node];
    for (size_t i = 0; i < s->n; i++) {
        struct xp_event ev = s->v[i];
        ev.t_start = iot_clockmap_map(m, ev.t_start);
        ev.t_end = iot_clockmap_map(m, ev.t_end);
        if (iot_an_push(&d->an, &ev) < 0)
            return -1;
    }
    return iot_an_advance(&d->an, g->newest + 1000 * US);
}

static int make_maps(struct iot_clockmap **maps, int n)
{
    if (!(*maps = calloc((size_t)n, sizeof **maps)))
        return -1;
    for (int i = 0; i < n; i++) {
        iot_clockmap_init(&(*maps)[i]);
        if (iot_clockmap_add(&(*maps)[i], T0 - 3600 * 1000000000ll, node_offset(i), 50000) < 0 ||
            iot_clockmap_add(&(*maps)[i], T0 + 3600 * 1000000000ll, node_offset(i), 60000) < 0)
            return -1;
        iot_clockmap_finish(&(*maps)[i]);
    }
    return 0;
}

static void print_memory(const struct iot_an *an, const struct iot_an_job *j, struct stamp run,
                         struct stamp gen, uint64_t n)
{
    struct iot_an_memory m;
    iot_an_memory(an, &m);
    const struct iot_an_func *w = j->func[IOT_F_MPIIO_MPI_File_write_at];
    const struct iot_an_func *c = j->func[IOT_F_MPIIO_MPI_File_write_at_all];
    printf("events %llu, generator alone %.3f s CPU: alignment, merge, matching and "
           "statistics %.3f s CPU, %.2f M events/s per core (wall %.3f s, %.2f M/s)\n",
           (unsigned long long)n, gen.cpu, run.cpu - gen.cpu, n / (run.cpu - gen.cpu) / 1e6,
           run.wall - gen.wall, n / (run.wall - gen.wall) / 1e6);
    printf("calls: %llu write_at (%.2f disk ops each), %llu write_at_all (%.2f each); "
           "unmatched calls %llu, disk ops %llu; late events %llu\n",
           (unsigned long long)(w ? w->count : 0), w ? (double)w->ops_sum / w->samples : 0,
           (unsigned long long)(c ? c->count : 0), c ? (double)c->ops_sum / c->samples : 0,
           (unsigned long long)j->unmatched_calls, (unsigned long long)j->unmatched_disk_ops,
           (unsigned long long)m.late);
    printf("held at the peak: %zu events in the merge (%zu KiB allocated, %.0f B/event), "
           "%zu (job, CallID) entries and %zu collective groups in the matcher "
           "(%zu KiB allocated, %.0f B/entry); statistics %zu KiB\n",
           m.events_peak, m.merge_bytes / 1024, (double)m.merge_bytes / m.events_peak,
           m.entries_peak, m.groups_peak, m.match_bytes / 1024,
           (double)m.match_bytes / m.entries_peak, m.stats_bytes / 1024);
}

static int run_direct(const struct bench *b)
{
    struct gen g;
    struct direct d;
    struct iot_an_config cfg = {.lateness_ns = b->lateness, .grace_ns = b->grace,
                                .idle_ns = 10000000000ll};
    struct stamp t0 = now();
    if (gen_init(&g, b, count_only, NULL) < 0 || gen_run(&g) < 0)
        return -1;
    struct stamp gen = since(t0);
    gen_free(&g);
    if (make_maps(&d.maps, g.n_nodes) < 0 || iot_an_init(&d.an, &cfg) < 0 ||
        gen_init(&g, b, to_pipeline, &d) < 0)
        return -1;
    for (int i = b->ranks; i < g.n_src; i++)
        iot_an_producer(&d.an, (uint32_t)i, (uint32_t)(i - b->ranks + 1));
    t0 = now();
    if (gen_run(&g) < 0 || iot_an_finish(&d.an) < 0)
        return -1;
    print_memory(&d.an, d.an.stats.job[1], since(t0), gen, g.emitted);
    iot_an_free(&d.an);
    for (int i = 0; i < g.n_nodes; i++)
        iot_clockmap_free(&d.maps[i]);
    free(d.maps);
    gen_free(&g);
    return 0;
}

/* ---- store: the whole iotrace-export --stats path ----------------------- */

/* Columns of one table, sized for a batch. */
struct columns {
    uint32_t *func, *tid, *job;
    uint64_t *callid, *file, *bytes, *xfer, *dur, *coll;
    int64_t *off, *t, *ret;
    int32_t *ret32;
    size_t n;
};

static int columns_alloc(struct columns *c, size_t n)
{
    memset(c, 0, sizeof *c);
    c->func = calloc(n, 4), c->tid = calloc(n, 4), c->job = calloc(n, 4);
    c->callid = calloc(n, 8), c->file = calloc(n, 8), c->bytes = calloc(n, 8);
    c->xfer = calloc(n, 8), c->dur = calloc(n, 8), c->coll = calloc(n, 8);
    c->off = calloc(n, 8), c->t = calloc(n, 8), c->ret = calloc(n, 8), c->ret32 = calloc(n, 4);
    return c->func && c->tid && c->job && c->callid && c->file && c->bytes && c->xfer &&
                   c->dur && c->coll && c->off && c->t && c->ret && c->ret32
               ? 0
               : -1;
}

static void columns_free(struct columns *c)
{
    free(c->func), free(c->tid), free(c->job), free(c->callid), free(c->file);
    free(c->bytes), free(c->xfer), free(c->dur), free(c->coll), free(c->off), free(c->t);
    free(c->ret), free(c->ret32);
}

static void column_add(struct columns *c, const struct xp_event *ev)
{
    size_t i = c->n++;
    c->func[i] = ev->func, c->tid[i] = ev->tid, c->job[i] = ev->job, c->callid[i] = ev->callid;
    c->file[i] = ev->file, c->bytes[i] = ev->bytes, c->xfer[i] = ev->xfer;
    c->dur[i] = (uint64_t)(ev->t_end - ev->t_start), c->coll[i] = ev->coll_seq;
    c->off[i] = ev->offset, c->t[i] = ev->t_start, c->ret[i] = ev->ret;
    c->ret32[i] = (int32_t)ev->ret;
}

struct writer {
    struct iot_store *store;
    struct columns m, p, k;
    uint64_t batches;
};

static void fill_tables(struct writer *w, iot_body *body, Iotrace__MpiioEvents *m,
                        Iotrace__PosixEvents *p, Iotrace__DiskEvents *k)
{
    struct columns *a = &w->m, *x = &w->p, *d = &w->k;
    m->n_func = m->n_tid = m->n_callid = m->n_file = m->n_offset = m->n_bytes = a->n;
    m->n_xfer = m->n_t_start = m->n_duration = m->n_ret = m->n_coll_seq = a->n;
    m->func = a->func, m->tid = a->tid, m->callid = a->callid, m->file = a->file;
    m->offset = a->off, m->bytes = a->bytes, m->xfer = a->xfer, m->t_start = a->t;
    m->duration = a->dur, m->ret = a->ret32, m->coll_seq = a->coll;
    p->n_func = p->n_tid = p->n_callid = p->n_file = p->n_offset = p->n_bytes = x->n;
    p->n_t_start = p->n_duration = p->n_ret = x->n;
    p->func = x->func, p->tid = x->tid, p->callid = x->callid, p->file = x->file;
    p->offset = x->off, p->bytes = x->bytes, p->t_start = x->t, p->duration = x->dur;
    p->ret = x->ret;
    k->n_func = k->n_tid = k->n_job = k->n_callid = k->n_file = k->n_offset = d->n;
    k->n_bytes = k->n_t_start = k->n_duration = k->n_ret = d->n;
    k->func = d->func, k->tid = d->tid, k->job = d->job, k->callid = d->callid;
    k->file = d->file, k->offset = d->off, k->bytes = d->bytes, k->t_start = d->t;
    k->duration = d->dur, k->ret = d->ret;
    body->mpiio = a->n ? m : NULL, body->posix = x->n ? p : NULL, body->disk = d->n ? k : NULL;
}

static iot_producer producer_of(const struct source *s, char *node, size_t len, char *server,
                                size_t slen)
{
    iot_producer p = IOTRACE__PRODUCER__INIT;
    snprintf(node, len, "node%d", s->node);
    server[0] = '\0';
    if (s->is_server)
        snprintf(server, slen, "node%d:/bricks/b%u", s->node, s->id);
    p.node = node, p.pid = 1000 + s->id, p.start_time_ns = 1, p.rank = s->rank;
    p.kind = s->is_server ? IOTRACE__PRODUCER_KIND__PRODUCER_SERVER
                          : IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT;
    p.job = s->is_server ? "" : "bench", p.server = server;
    return p;
}

static int append(struct writer *w, const iot_producer *p, uint64_t epoch, uint64_t seq,
                  const iot_body *body, uint64_t recv_ns)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    if (iot_wire_encode(p, epoch, seq, body, &buf, &len, err, sizeof err) < 0) {
        fprintf(stderr, "bench_analysis: %s\n", err);
        return -1;
    }
    int rc = iot_store_append(w->store, buf, len, recv_ns);
    free(buf);
    if (rc == 0 && ++w->batches % 256 == 0)
        rc = iot_store_sync(w->store);
    return rc;
}

static int to_store(struct gen *g, struct source *s)
{
    static char *jobs[] = {"", "bench"};
    struct writer *w = g->ctx;
    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    Iotrace__PosixEvents p = IOTRACE__POSIX_EVENTS__INIT;
    Iotrace__DiskEvents k = IOTRACE__DISK_EVENTS__INIT;
    iot_body body = IOTRACE__BODY__INIT;
    w->m.n = w->p.n = w->k.n = 0;
    for (size_t i = 0; i < s->n; i++)
        column_add(s->v[i].kind == XP_MPIIO ? &w->m : s->v[i].kind == XP_POSIX ? &w->p : &w->k,
                   &s->v[i]);
    fill_tables(w, &body, &m, &p, &k);
    if (s->is_server)
        body.n_jobs = 2, body.jobs = jobs;
    char node[32], server[64];
    iot_producer prod = producer_of(s, node, sizeof node, server, sizeof server);
    return append(w, &prod, 0xBE00 + s->id, s->seq++, &body, (uint64_t)(g->newest + 1000 * US));
}

/* One agent batch per node with two samples: a constant offset. */
static int write_clocks(struct writer *w, int n_nodes)
{
    for (int i = 0; i < n_nodes; i++) {
        Iotrace__ClockSync a = IOTRACE__CLOCK_SYNC__INIT, b = IOTRACE__CLOCK_SYNC__INIT;
        a.local_ns = T0 - 3600 * 1000000000ll, b.local_ns = T0 + 3600 * 1000000000ll;
        a.offset_ns = b.offset_ns = node_offset(i), a.rtt_ns = 50000, b.rtt_ns = 60000;
        a.peer = b.peer = "collector";
        Iotrace__ClockSync *clocks[] = {&a, &b};
        iot_body body = IOTRACE__BODY__INIT;
        body.n_clock = 2, body.clock = clocks;
        char node[32];
        snprintf(node, sizeof node, "node%d", i);
        iot_producer p = IOTRACE__PRODUCER__INIT;
        p.node = node, p.pid = 99, p.start_time_ns = 1, p.rank = -1, p.job = "", p.server = "";
        p.kind = IOTRACE__PRODUCER_KIND__PRODUCER_AGENT;
        if (append(w, &p, 0xA6, 0, &body, (uint64_t)T0) < 0)
            return -1;
    }
    return 0;
}

static int build_store(const struct bench *b, uint64_t *events)
{
    struct writer w = {0};
    struct gen g;
    char err[256];
    if (!(w.store = iot_store_open(b->store, 1, err, sizeof err))) {
        fprintf(stderr, "bench_analysis: %s\n", err);
        return -1;
    }
    int rc = columns_alloc(&w.m, (size_t)b->batch) | columns_alloc(&w.p, (size_t)b->batch) |
             columns_alloc(&w.k, (size_t)b->batch) | gen_init(&g, b, to_store, &w);
    if (rc == 0)
        rc = write_clocks(&w, g.n_nodes) | gen_run(&g);
    *events = g.emitted;
    if (iot_store_close(w.store) < 0)
        rc = -1;
    columns_free(&w.m), columns_free(&w.p), columns_free(&w.k);
    gen_free(&g);
    return rc;
}

static int run_store(const struct bench *b)
{
    uint64_t events;
    struct stamp t0 = now();
    if (build_store(b, &events) < 0)
        return -1;
    printf("store of %llu events written in %.1f s\n", (unsigned long long)events,
           since(t0).wall);
    struct xp_data d;
    struct xp_stats_options o = {.store = b->store, .job = UINT32_MAX, .job_name = "",
                                 .json = 1, .lateness_ns = b->lateness, .grace_ns = b->grace};
    char err[512];
    FILE *out = fopen("/dev/null", "w");
    t0 = now();
    int rc = out && xp_data_init(&d) == 0 && xp_read_clocks(b->store, &d, err, sizeof err) == 0 &&
                     xp_stats(&d, &o, out, err, sizeof err) == 0
                 ? 0
                 : -1;
    struct stamp t = since(t0);
    if (rc < 0)
        fprintf(stderr, "bench_analysis: %s\n", err);
    else
        printf("iotrace-export --stats path (read, decode, align, merge, match, report): "
               "%.3f s CPU, %.2f M events/s per core (wall %.3f s, %.2f M/s)\n", t.cpu,
               events / t.cpu / 1e6, t.wall, events / t.wall / 1e6);
    xp_data_free(&d);
    if (out)
        fclose(out);
    return rc;
}

/* The store directory holds only the collector's files. */
static int remove_store(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char path[4096];
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

/* ---- main ----------------------------------------------------------------- */

static int parse_args(int argc, char **argv, struct bench *b)
{
    *b = (struct bench){.n = 10000000, .ranks = 16, .servers = 4, .batch = 256,
                        .lateness = 50 * 1000000ll, .grace = 50 * 1000000ll,
                        .per_node = 4, .per_storage = 1, .threads = 1};
    int c;
    while ((c = getopt(argc, argv, "n:r:S:b:l:g:p:s:t:cd:k")) != -1) {
        switch (c) {
        case 'n': b->n = strtoull(optarg, NULL, 10); break;
        case 'r': b->ranks = atoi(optarg); break;
        case 'S': b->servers = atoi(optarg); break;
        case 'b': b->batch = atoi(optarg); break;
        case 'l': b->lateness = atoll(optarg) * 1000000ll; break;
        case 'g': b->grace = atoll(optarg) * 1000000ll; break;
        case 'p': b->per_node = atoi(optarg); break;
        case 's': b->per_storage = atoi(optarg); break;
        case 't': b->threads = atoi(optarg); break;
        case 'c': b->converged = 1; break;
        case 'd': b->store = optarg; break;
        case 'k': b->keep = 1; break;
        default: return -1;
        }
    }
    return optind == argc && b->ranks > 0 && b->servers > 0 && b->batch > 0 && b->n > 0 &&
                   b->per_node > 0 && b->per_storage > 0 && b->threads > 0
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    struct bench b;
    if (parse_args(argc, argv, &b) < 0) {
        fprintf(stderr, "usage: %s [-n EVENTS] [-r RANKS] [-S SERVERS] [-b BATCH] "
                        "[-l LATENESS_MS] [-g GRACE_MS] [-p RANKS_PER_NODE] "
                        "[-s SERVERS_PER_NODE] [-t THREADS] [-c] [-d STORE_DIR [-k]]\n",
                argv[0]);
        return 2;
    }
    printf("%llu events, %d ranks, %d servers, batches of %d, lateness %lld ms, grace %lld ms\n",
           (unsigned long long)b.n, b.ranks, b.servers, b.batch, (long long)(b.lateness / 1000000),
           (long long)(b.grace / 1000000));
    int rc = b.store ? run_store(&b) : run_direct(&b);
    if (b.store && !b.keep && remove_store(b.store) < 0)
        fprintf(stderr, "bench_analysis: could not remove %s: %s\n", b.store, strerror(errno));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS %ld KiB\n", ru.ru_maxrss);
    return rc < 0 ? 1 : 0;
}
