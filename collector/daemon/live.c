#include "live.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "analysis_quantile.h"
#include "grow.h"
#include "idlecores.h"
#include "iot_functions.h"
#include "log.h"
#include "pipeline.h"
#include "stats_report.h"
#include "timeutil.h"
#include "wire.h"

/* What the dashboard's live views keep per running job: the newest calls,
 * disk operations and pairs (the timeline) and one row per second of event
 * time (the charts).  Bounded, whatever the job's length. */
#define TL_CALLS 4096
#define TL_DISK 8192
#define TL_PAIRS 8192
#define SERIES 600
#define SERIES_SERVERS 16 /* per-server disk bytes; further servers are summed as "other" */
#define TICK_MS 250

struct tl_item {
    int64_t t_start, t_end, offset;
    uint64_t id, callid, bytes, file;
    uint32_t producer, tid, server;
    uint16_t func;
    uint8_t kind;
};

struct tl_pair {
    uint64_t call, disk;
};

struct second {
    int64_t sec; /* event time, collector clock, whole seconds */
    uint64_t calls, read_bytes, write_bytes;
    uint64_t disk_bytes[SERIES_SERVERS + 1];
    uint64_t p50_ns, p99_ns;
};

#define RING(type, n)                                                                         \
    struct {                                                                                   \
        type *v;                                                                               \
        size_t head, len;                                                                      \
    }

struct ljob {
    uint32_t job; /* in l->d.jobs */
    int finished;
    uint64_t events, calls, bytes_read, bytes_written, dropped, disk_ops, disk_bytes;
    int64_t first_ns, last_ns; /* event times, collector clock */
    int64_t last_arrival;      /* when its newest batch was stored (collector clock) */
    int64_t finished_at;       /* monotonic */
    char *final;               /* final statistics (iotrace-export --stats --format json) */
    int unsettled;             /* final, but a node's clock lacks a sample after its end */
    size_t clock_samples;      /* of its nodes, when final was computed */
    int views;                 /* rings and series allocated */
    int forgotten;             /* finished and out of memory but for this summary */
    uint32_t processes, ranks, nodes; /* counted by count_members() */
    uint32_t unaligned; /* clocks of its events (forwarding agents) without samples */
    RING(struct tl_item, TL_CALLS) calls_tl;
    RING(struct tl_item, TL_DISK) disk_tl;
    RING(struct tl_pair, TL_PAIRS) pairs_tl;
    RING(struct second, SERIES) series;
    struct iot_qhist open_q; /* call durations of the newest second */
};

struct live {
    struct live_config cfg;
    struct ingest_view *ingest;
    pthread_t thread;
    int running;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t updated;
    uint64_t update_seq;
    int stop;
    struct xp_data d;
    struct iot_pipe pipe;
    struct ljob **jobs; /* by job id */
    size_t n_jobs;
    struct iot_store_pos pos;
    uint64_t batches_read, events_read;
    int64_t newest_arrival_ns; /* recv time of the newest batch read (collector clock) */
    int64_t current_arrival;   /* of the batch being read */
    uint64_t finalized, recomputed;
    struct iot_idlecores cores; /* the live thread's own */
    int waiting;                /* for a core to spare (--analysis-yield) */
    int64_t waited_ns;
    size_t samples_checked; /* all_samples() when unsettled jobs were last looked at */
    uint64_t members_at; /* batches_read when the jobs' members were last counted */
    uint32_t *retiring;  /* retire_producers()'s list */
    size_t cap_retiring;
    uint64_t retired;    /* processes forgotten so far */
    int failed;
    char error[512];
};

/* ---- per-job state ------------------------------------------------------ */

static struct ljob *job_of(struct live *l, uint32_t job)
{
    if (job >= l->n_jobs) {
        size_t n = l->n_jobs ? l->n_jobs * 2 : 16;
        while (n <= job)
            n *= 2;
        struct ljob **v = realloc(l->jobs, n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + l->n_jobs, 0, (n - l->n_jobs) * sizeof *v);
        l->jobs = v;
        l->n_jobs = n;
    }
    if (!l->jobs[job]) {
        struct ljob *j = calloc(1, sizeof *j);
        if (!j)
            return NULL;
        j->job = job;
        j->first_ns = INT64_MAX;
        j->last_ns = INT64_MIN;
        l->jobs[job] = j;
    }
    return l->jobs[job];
}

static void free_views(struct ljob *j)
{
    free(j->calls_tl.v);
    free(j->disk_tl.v);
    free(j->pairs_tl.v);
    free(j->series.v);
    iot_qhist_free(&j->open_q);
    memset(&j->calls_tl, 0, sizeof j->calls_tl);
    memset(&j->disk_tl, 0, sizeof j->disk_tl);
    memset(&j->pairs_tl, 0, sizeof j->pairs_tl);
    memset(&j->series, 0, sizeof j->series);
    j->views = 0;
}

static int alloc_views(struct ljob *j)
{
    if (j->views)
        return 0;
    j->calls_tl.v = calloc(TL_CALLS, sizeof *j->calls_tl.v);
    j->disk_tl.v = calloc(TL_DISK, sizeof *j->disk_tl.v);
    j->pairs_tl.v = calloc(TL_PAIRS, sizeof *j->pairs_tl.v);
    j->series.v = calloc(SERIES, sizeof *j->series.v);
    iot_qhist_init(&j->open_q);
    if (!j->calls_tl.v || !j->disk_tl.v || !j->pairs_tl.v || !j->series.v) {
        free_views(j);
        return -1;
    }
    j->views = 1;
    return 0;
}

#define RING_PUSH(r, cap, item)                                                               \
    do {                                                                                       \
        (r).v[((r).head + (r).len) % (cap)] = (item);                                          \
        if ((r).len < (cap))                                                                   \
            (r).len++;                                                                         \
        else                                                                                   \
            (r).head = ((r).head + 1) % (cap);                                                 \
    } while (0)

#define RING_AT(r, cap, i) ((r).v[((r).head + (i)) % (cap)])

static void free_job(struct ljob *j)
{
    free_views(j);
    free(j->final);
    free(j);
}

/* ---- what the pipeline hands over ---------------------------------------- */

static void tally(struct ljob *j, const struct xp_event *ev)
{
    j->events++;
    if (ev->kind != XP_DROP) {
        if (ev->t_start < j->first_ns)
            j->first_ns = ev->t_start;
        if (ev->t_end > j->last_ns)
            j->last_ns = ev->t_end;
    }
    switch (ev->kind) {
    case XP_DROP:
        j->dropped += ev->bytes;
        break;
    case XP_MPIIO:
        if (iot_match_is_completion(ev->func))
            break;
        j->calls++;
        if (iot_match_is_transfer(ev->func)) {
            int dir = xp_func_direction(ev->func);
            if (dir == XP_DIR_READ)
                j->bytes_read += ev->bytes;
            else if (dir == XP_DIR_WRITE)
                j->bytes_written += ev->bytes;
        }
        break;
    case XP_DISK:
        j->disk_ops++;
        j->disk_bytes += ev->bytes;
        break;
    default:
        break;
    }
}

static int live_event(void *ctx, const struct xp_data *d, const struct xp_event *ev, char *err,
                      size_t errlen)
{
    struct live *l = ctx;
    uint32_t job = xp_event_job(d, ev);
    l->events_read++;
    if (job) {
        struct ljob *j = job_of(l, job);
        if (!j) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (j->finished) { /* more of a job thought finished: it runs again */
            j->finished = j->forgotten = 0;
            free(j->final);
            j->final = NULL;
        }
        j->last_arrival = l->current_arrival;
        tally(j, ev);
    }
    return iot_pipe_event(&l->pipe, d, ev, err, errlen);
}

static int live_batch_done(void *ctx, const struct xp_data *d, uint32_t producer,
                           uint64_t recv_ns, char *err, size_t errlen)
{
    struct live *l = ctx;
    l->batches_read++;
    l->newest_arrival_ns = (int64_t)recv_ns;
    return iot_pipe_batch_done(&l->pipe, d, producer, recv_ns, err, errlen);
}

static void close_second(struct ljob *j)
{
    if (!j->series.len)
        return;
    struct second *s = &RING_AT(j->series, SERIES, j->series.len - 1);
    s->p50_ns = iot_qhist_quantile(&j->open_q, 0.50);
    s->p99_ns = iot_qhist_quantile(&j->open_q, 0.99);
}

/* The row of an event's second; late events (an earlier second) count in
 * the newest row they can still reach, or not at all once it left. */
static struct second *second_of(struct ljob *j, int64_t t_ns)
{
    int64_t sec = t_ns / 1000000000;
    if (j->series.len) {
        struct second *last = &RING_AT(j->series, SERIES, j->series.len - 1);
        if (sec <= last->sec) {
            for (size_t i = j->series.len; i-- > 0;) {
                struct second *s = &RING_AT(j->series, SERIES, i);
                if (s->sec == sec)
                    return s;
                if (s->sec < sec)
                    return NULL;
            }
            return NULL;
        }
        close_second(j);
        iot_qhist_free(&j->open_q);
        iot_qhist_init(&j->open_q);
    }
    struct second blank = {.sec = sec};
    RING_PUSH(j->series, SERIES, blank);
    return &RING_AT(j->series, SERIES, j->series.len - 1);
}

static int on_ordered(void *ctx, const struct xp_event *ev, uint32_t *tag)
{
    (void)tag;
    struct live *l = ctx;
    if ((ev->kind != XP_MPIIO && ev->kind != XP_DISK) || !ev->job)
        return 0;
    struct ljob *j = job_of(l, ev->job);
    if (!j)
        return -1;
    if (j->forgotten) /* released by the merge after the job left memory */
        return 0;
    if (alloc_views(j) < 0)
        return -1;
    uint32_t server = ev->producer < l->pipe.an.n_server ? l->pipe.an.server[ev->producer] : 0;
    /* The offset as the exports give it: an open's or set_info's names its
     * mode and hints, and is no position (xp_event_offset). */
    struct tl_item it = {.t_start = ev->t_start, .t_end = ev->t_end,
                         .offset = xp_event_offset(ev), .id = ev->order, .callid = ev->callid,
                         .bytes = ev->bytes, .file = ev->file, .producer = ev->producer,
                         .tid = ev->tid, .server = server, .func = ev->func, .kind = ev->kind};
    struct second *s = second_of(j, ev->t_start);
    if (ev->kind == XP_MPIIO) {
        RING_PUSH(j->calls_tl, TL_CALLS, it);
        if (s && !iot_match_is_completion(ev->func)) {
            s->calls++;
            int dir = xp_func_direction(ev->func);
            if (iot_match_is_transfer(ev->func) && dir == XP_DIR_READ)
                s->read_bytes += ev->bytes;
            else if (iot_match_is_transfer(ev->func) && dir == XP_DIR_WRITE)
                s->write_bytes += ev->bytes;
            if (s == &RING_AT(j->series, SERIES, j->series.len - 1) &&
                iot_qhist_add(&j->open_q, (uint64_t)(ev->t_end - ev->t_start)) < 0)
                return -1;
        }
    } else {
        RING_PUSH(j->disk_tl, TL_DISK, it);
        if (s)
            s->disk_bytes[server < SERIES_SERVERS ? server : SERIES_SERVERS] += ev->bytes;
    }
    return 0;
}

static int on_pair(void *ctx, const struct xp_event *call, uint32_t call_tag,
                   const struct xp_event *disk, uint32_t disk_tag)
{
    (void)call_tag;
    (void)disk_tag;
    struct live *l = ctx;
    struct ljob *j = disk->job ? job_of(l, disk->job) : NULL;
    if (!j || j->forgotten)
        return 0;
    if (alloc_views(j) < 0)
        return -1;
    struct tl_pair p = {call->order, disk->order};
    RING_PUSH(j->pairs_tl, TL_PAIRS, p);
    return 0;
}

/* ---- following the store ------------------------------------------------- */

static int on_record(void *ctx, const uint8_t *batch, size_t len, uint64_t recv_ns)
{
    struct live *l = ctx;
    char err[512] = "";
    pthread_mutex_lock(&l->lock);
    l->current_arrival = (int64_t)recv_ns;
    int rc = xp_feed_batch(&l->d, batch, len, recv_ns, live_event, live_batch_done, l, err,
                           sizeof err);
    l->update_seq++;
    pthread_mutex_unlock(&l->lock);
    if (rc < 0) {
        /* One bad batch must not stop the live view; the export reports it. */
        iot_warn("live analysis: %s", err);
    }
    return 0;
}

/* How far an event time read live may lie from the same time read by the
 * export, which aligns it with samples that came later (drift over the
 * seconds between samples; 10 % clock error over 10 s stays within it). */
#define SETTLE_MARGIN_NS 1000000000LL

/* Whether every node of the job has a clock sample after its end, so that
 * the store's later samples cannot change its figures; *samples counts its
 * nodes' samples, to notice new ones. */
static int job_settled(struct live *l, uint32_t id, size_t *samples)
{
    const struct ljob *j = l->jobs[id];
    int settled = 1;
    *samples = 0;
    for (size_t i = 0; i < l->d.n_producers; i++) {
        const struct xp_producer *p = &l->d.producers[i];
        if (p->job != id)
            continue;
        const struct iot_clockmap *m = xp_node_clock(&l->d, p->clock);
        *samples += m ? m->n : 0;
        if (!iot_clockmap_settled(m, j->last_ns == INT64_MIN ? INT64_MIN
                                                            : j->last_ns + SETTLE_MARGIN_NS))
            settled = 0;
    }
    return settled;
}

/* Clock samples of all nodes: unsettled jobs are looked at again only when
 * this moved, not on every tick. */
static size_t all_samples(const struct live *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->d.n_clocks; i++)
        n += l->d.clocks[i].map.n;
    return n;
}

/* The next job whose final figures are due: idle for job_idle_ns (jobs of a
 * store read at start-up at once), or finished while a node's clock had no
 * sample after its end and that node has new samples now.  Called locked. */
static uint32_t due_job(struct live *l, int64_t now)
{
    size_t total = all_samples(l);
    int samples_came = total != l->samples_checked;
    for (size_t i = 1; i < l->n_jobs; i++) {
        struct ljob *j = l->jobs[i];
        size_t samples;
        if (!j)
            continue;
        if (!j->finished && now - j->last_arrival >= l->cfg.job_idle_ns)
            return (uint32_t)i;
        if (samples_came && j->finished && j->final && j->unsettled &&
            (job_settled(l, (uint32_t)i, &samples) || samples != j->clock_samples))
            return (uint32_t)i;
    }
    l->samples_checked = total;
    return 0;
}

/* Final figures come from the store, outside the lock, the way
 * iotrace-export computes them; they are computed again when the clock
 * samples that align the job's end arrive after it finished. */
static void finish_jobs(struct live *l)
{
    int64_t now = iot_now_ns();
    for (;;) {
        pthread_mutex_lock(&l->lock);
        uint32_t id = due_job(l, now);
        char *name = id ? strdup(xp_string(&l->d.jobs, id)) : NULL;
        int again = id && l->jobs[id]->finished;
        /* A job that ended longer ago than figures are kept (a store read
         * at start-up) is computed only when asked for. */
        int old = name && !again && now - l->jobs[id]->last_arrival >= l->cfg.keep_ns;
        if (old) {
            l->jobs[id]->finished = 1;
            l->jobs[id]->finished_at = iot_mono_ns() - l->cfg.keep_ns;
            l->jobs[id]->unsettled = !job_settled(l, id, &l->jobs[id]->clock_samples);
        }
        pthread_mutex_unlock(&l->lock);
        if (!name)
            return;
        if (old) {
            free(name);
            continue;
        }
        char err[512] = "";
        char *final = xp_stats_json(l->cfg.store, name, l->cfg.lateness_ns, l->cfg.grace_ns,
                                    err, sizeof err);
        if (!final)
            iot_warn("job %s: cannot compute its final statistics: %s", name, err);
        pthread_mutex_lock(&l->lock);
        struct ljob *j = l->jobs[id];
        if (again ? !j->finished || !j->final : j->finished ||
                                                    now - j->last_arrival < l->cfg.job_idle_ns) {
            free(final); /* it ran again or was forgotten meanwhile */
        } else {
            if (again) {
                free(j->final);
            } else {
                close_second(j);
                j->finished = 1;
                j->finished_at = iot_mono_ns();
                l->finalized++;
                iot_info("job %s finished: %llu events, %llu MPI-IO calls, %llu disk operations, "
                         "%llu dropped", name, (unsigned long long)j->events,
                         (unsigned long long)j->calls, (unsigned long long)j->disk_ops,
                         (unsigned long long)j->dropped);
            }
            j->final = final;
            j->unsettled = !job_settled(l, id, &j->clock_samples);
            l->update_seq++;
        }
        pthread_mutex_unlock(&l->lock);
        free(name);
        if (!final)
            return;
    }
}

/* Processes the live view will not need again leave memory too (their
 * names, files and slots in the reader, the merge and the pipeline): those
 * of jobs that left it, and those without a job whose last batch came
 * job_idle_ns + keep_ns ago (when a job of theirs would have left), once
 * the merge holds nothing of them.  So the collector's
 * memory follows the processes running, not every one it ever saw.
 * Called locked. */
static size_t retire_producers(struct live *l)
{
    int64_t now = iot_now_ns();
    size_t n = 0;
    for (size_t i = 0; i < l->d.n_producers; i++) {
        const struct xp_producer *p = &l->d.producers[i];
        if (p->retired || p->kind != IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT)
            continue;
        if (p->job ? p->job >= l->n_jobs || !l->jobs[p->job] || !l->jobs[p->job]->forgotten
                   : now - (int64_t)p->last_recv_ns < l->cfg.job_idle_ns + l->cfg.keep_ns)
            continue;
        if (n == l->cap_retiring &&
            iot_grow((void **)&l->retiring, &l->cap_retiring, n + 1, sizeof *l->retiring, 64) < 0)
            break;
        if (iot_pipe_forget_producer(&l->pipe, (uint32_t)i) == 0)
            l->retiring[n++] = (uint32_t)i;
    }
    if (xp_retire_producers(&l->d, l->retiring, n) < 0)
        iot_warn("live analysis: out of memory while forgetting processes");
    l->retired += n;
    return n;
}

/* Finished jobs leave memory after keep_ns; their summary line stays.  The
 * merge may still release a job's events after that (it holds them while
 * another producer holds its watermark back, up to the idle time): they
 * make no view (on_ordered), and the statistics they start again are
 * dropped here, so that nothing of a forgotten job stays. */
static void forget_jobs(struct live *l)
{
    int64_t now = iot_mono_ns();
    int freed = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 1; i < l->n_jobs; i++) {
        struct ljob *j = l->jobs[i];
        if (j && j->forgotten)
            iot_an_stats_forget(&l->pipe.an.stats, (uint32_t)i);
        if (j && j->finished && !j->forgotten && now - j->finished_at >= l->cfg.keep_ns) {
            freed = 1;
            j->forgotten = 1;
            free_views(j);
            free(j->final);
            j->final = NULL;
            iot_an_stats_forget(&l->pipe.an.stats, (uint32_t)i);
            l->update_seq++;
        }
    }
    freed |= retire_producers(l) > 0;
    pthread_mutex_unlock(&l->lock);
    /* What the jobs and processes held is scattered among what stays: glibc
     * gives such pages back to the system only when asked. */
    if (freed)
        malloc_trim(0);
}

/* Processes, ranks and nodes of every job, in one pass over the producers
 * (a process's job and rank can be learned late, in MPI_Init): sorted
 * (job, rank) and (job, node) keys, counted per job.  Called by the live
 * thread at most once per tick, so requests never pay for it. */
static void count_members(struct live *l)
{
    if (l->members_at == l->batches_read)
        return;
    l->members_at = l->batches_read;
    size_t n = l->d.n_producers;
    uint64_t *ranks = malloc((n + 1) * sizeof *ranks), *nodes = malloc((n + 1) * sizeof *nodes);
    uint64_t *clocks = malloc((n + 1) * sizeof *clocks);
    if (!ranks || !nodes || !clocks) {
        free(ranks);
        free(nodes);
        free(clocks);
        return;
    }
    size_t nr = 0, nn = 0, nc = 0;
    /* A forgotten job keeps the counts it had: its processes are retired. */
    for (size_t i = 1; i < l->n_jobs; i++)
        if (l->jobs[i] && !l->jobs[i]->forgotten)
            l->jobs[i]->processes = l->jobs[i]->ranks = l->jobs[i]->nodes =
                l->jobs[i]->unaligned = 0;
    for (size_t i = 0; i < n; i++) {
        const struct xp_producer *p = &l->d.producers[i];
        if (!p->job || p->job >= l->n_jobs || !l->jobs[p->job] || l->jobs[p->job]->forgotten)
            continue;
        l->jobs[p->job]->processes++;
        if (p->rank >= 0)
            ranks[nr++] = (uint64_t)p->job << 32 | (uint32_t)p->rank;
        nodes[nn++] = (uint64_t)p->job << 32 | p->node;
        clocks[nc++] = (uint64_t)p->job << 32 | p->clock;
    }
    nr = xp_unique_u64(ranks, nr);
    nn = xp_unique_u64(nodes, nn);
    nc = xp_unique_u64(clocks, nc);
    for (size_t i = 0; i < nc; i++)
        if (!xp_node_clock(&l->d, (uint32_t)clocks[i]))
            l->jobs[clocks[i] >> 32]->unaligned++;
    free(clocks);
    for (size_t i = 0; i < nr; i++)
        l->jobs[ranks[i] >> 32]->ranks++;
    for (size_t i = 0; i < nn; i++)
        l->jobs[nodes[i] >> 32]->nodes++;
    free(ranks);
    free(nodes);
}

/* How often the machine's idle time is looked at, and how much of a core
 * must have been idle (or this thread's own) for the analysis to go on. */
#define PROBE_NS 100000000ll
#define SPARE_ENOUGH 0.5

static int stopping_now(struct ingest_view *v)
{
    pthread_mutex_lock(&v->lock);
    int stopping = v->stopping;
    pthread_mutex_unlock(&v->lock);
    return stopping;
}

/* On a machine with no core to spare (ranks on every core beside the
 * collector), waits until one is, or --analysis-yield has passed: what
 * there is to read stays in the store meanwhile, and is read afterwards.
 * Returns 1 if it waited. */
static int wait_for_core(struct live *l, struct ingest_view *v)
{
    double spare = iot_idlecores_sample(&l->cores, PROBE_NS);
    if (spare < 0 || spare >= SPARE_ENOUGH)
        return 0;
    int64_t start = iot_mono_ns(), now = start;
    pthread_mutex_lock(&l->lock);
    l->waiting = 1;
    pthread_mutex_unlock(&l->lock);
    while (now - start < l->cfg.yield_ns && !stopping_now(v)) {
        struct timespec nap = {0, PROBE_NS};
        nanosleep(&nap, NULL);
        now = iot_mono_ns();
        spare = iot_idlecores_sample(&l->cores, PROBE_NS);
        if (spare < 0 || spare >= SPARE_ENOUGH)
            break;
    }
    pthread_mutex_lock(&l->lock);
    l->waiting = 0;
    l->waited_ns += now - start;
    pthread_mutex_unlock(&l->lock);
    return 1;
}

static void *run(void *arg)
{
    struct live *l = arg;
    struct ingest_view *v = l->ingest;
    pthread_setname_np(pthread_self(), "iot-live"); /* its CPU time shows in /proc */
    /* Ingest and acknowledgements never wait for this thread, which reads
     * the store: when cores are short it is the one that should wait.  Its
     * own niceness (Linux) puts it behind ingest; against other processes
     * it counts only inside one autogroup or cgroup, and did not keep it
     * off the ranks' cores even there: wait_for_core() does that. */
    if (l->cfg.nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), l->cfg.nice) < 0)
        iot_warn("cannot lower the live analysis' priority: %s", strerror(errno));
    if (l->cfg.yield_ns) {
        iot_idlecores_sample(&l->cores, PROBE_NS);
        if (l->cores.unreadable)
            iot_warn("cannot read /proc/stat: the live analysis will not wait for an idle core "
                     "(--analysis-yield)");
    }
    /* Keeps the segment being written open between reads. */
    struct iot_store_follower *store = iot_store_follow(l->cfg.store);
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&v->lock);
        while (!v->stopping && v->durable.segment == l->pos.segment &&
               v->durable.offset == l->pos.offset &&
               pthread_cond_timedwait(&v->stored, &v->lock, &until) != ETIMEDOUT)
            ;
        struct iot_store_pos end = v->durable;
        int stopping = v->stopping;
        pthread_mutex_unlock(&v->lock);
        int news = end.segment != l->pos.segment || end.offset != l->pos.offset;
        if (l->cfg.yield_ns && !news) /* so that the next batch finds a recent measure */
            iot_idlecores_sample(&l->cores, PROBE_NS);
        if (!stopping && news && l->cfg.yield_ns && wait_for_core(l, v)) {
            pthread_mutex_lock(&v->lock); /* what was stored meanwhile is read too */
            end = v->durable;
            stopping = v->stopping;
            pthread_mutex_unlock(&v->lock);
        }
        if (stopping)
            break;
        char err[512] = "";
        if (!store)
            snprintf(err, sizeof err, "out of memory");
        if (!store || (end.segment && iot_store_follow_read(store, &l->pos, &end, on_record, l,
                                                            err, sizeof err) < 0)) {
            iot_err("live analysis stopped: %s", err);
            pthread_mutex_lock(&l->lock);
            l->failed = 1;
            snprintf(l->error, sizeof l->error, "%s", err);
            pthread_mutex_unlock(&l->lock);
            break;
        }
        /* Time passes without batches too: producers that fell silent stop
         * holding the watermark back, so a job's last events reach its
         * live figures. */
        pthread_mutex_lock(&l->lock);
        if (iot_an_advance(&l->pipe.an, iot_now_ns()) < 0)
            iot_warn("live analysis: out of memory");
        count_members(l);
        pthread_mutex_unlock(&l->lock);
        finish_jobs(l);
        forget_jobs(l);
        pthread_mutex_lock(&l->lock);
        pthread_cond_broadcast(&l->updated);
        pthread_mutex_unlock(&l->lock);
    }
    iot_store_follow_close(store);
    return NULL;
}

struct live *live_start(const struct live_config *cfg, struct ingest_view *ingest, char *err,
                        size_t errlen)
{
    struct live *l = calloc(1, sizeof *l);
    if (!l || xp_data_init(&l->d) < 0) {
        free(l);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->cfg = *cfg;
    l->ingest = ingest;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->updated, NULL);
    iot_idlecores_init(&l->cores);
    struct iot_pipe_config pc = {.lateness_ns = cfg->lateness_ns, .grace_ns = cfg->grace_ns,
                                 .idle_ns = cfg->producer_idle_ns, .job = UINT32_MAX,
                                 .ordered = on_ordered, .pairs = on_pair, .ctx = l};
    if (iot_pipe_init(&l->pipe, &pc) < 0) {
        xp_data_free(&l->d);
        free(l);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int rc = pthread_create(&l->thread, NULL, run, l);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the live analysis thread: %s", strerror(rc));
        iot_pipe_free(&l->pipe);
        xp_data_free(&l->d);
        free(l);
        return NULL;
    }
    l->running = 1;
    return l;
}

void live_stop(struct live *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->ingest->lock);
    l->ingest->stopping = 1;
    pthread_cond_broadcast(&l->ingest->stored);
    pthread_mutex_unlock(&l->ingest->lock);
    if (l->running)
        pthread_join(l->thread, NULL);
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_broadcast(&l->updated);
    pthread_mutex_unlock(&l->lock);
    for (size_t i = 0; i < l->n_jobs; i++)
        if (l->jobs[i])
            free_job(l->jobs[i]);
    free(l->jobs);
    free(l->retiring);
    iot_pipe_free(&l->pipe);
    xp_data_free(&l->d);
    pthread_cond_destroy(&l->updated);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

uint64_t live_wait_update(struct live *l, uint64_t seen, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&l->lock);
    while (!l->stop && l->update_seq == seen &&
           pthread_cond_timedwait(&l->updated, &l->lock, &until) != ETIMEDOUT)
        ;
    uint64_t seq = l->update_seq;
    pthread_mutex_unlock(&l->lock);
    return seq;
}

/* ---- JSON ---------------------------------------------------------------- */


static json_t *u64(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *seconds(int64_t ns) { return json_real((double)ns / 1e9); }

static uint32_t find_job(struct live *l, const char *name)
{
    for (size_t i = 1; i < l->n_jobs; i++)
        if (l->jobs[i] && strcmp(xp_string(&l->d.jobs, (uint32_t)i), name) == 0)
            return (uint32_t)i;
    return 0;
}

static json_t *job_summary(struct live *l, const struct ljob *j)
{
    json_t *o = json_object();
    json_object_set_new(o, "job", iot_json_text(xp_string(&l->d.jobs, j->job)));
    json_object_set_new(o, "state", json_string(j->finished ? "finished" : "running"));
    int64_t uid = xp_job_owner(&l->d, j->job);
    const char *name = xp_job_name(&l->d, j->job);
    json_object_set_new(o, "uid", uid < 0 ? json_null() : json_integer(uid));
    json_object_set_new(o, "name", name[0] ? iot_json_text(name) : json_null());
    json_object_set_new(o, "processes", u64(j->processes));
    json_object_set_new(o, "ranks", u64(j->ranks));
    json_object_set_new(o, "nodes", u64(j->nodes));
    json_object_set_new(o, "nodes_without_clock", u64(j->unaligned));
    json_object_set_new(o, "first_s", j->first_ns == INT64_MAX ? json_null() : seconds(j->first_ns));
    json_object_set_new(o, "last_s", j->last_ns == INT64_MIN ? json_null() : seconds(j->last_ns));
    json_object_set_new(o, "events", u64(j->events));
    json_object_set_new(o, "mpiio_calls", u64(j->calls));
    json_object_set_new(o, "bytes_read", u64(j->bytes_read));
    json_object_set_new(o, "bytes_written", u64(j->bytes_written));
    json_object_set_new(o, "disk_ops", u64(j->disk_ops));
    json_object_set_new(o, "disk_bytes", u64(j->disk_bytes));
    json_object_set_new(o, "dropped_events", u64(j->dropped));
    json_object_set_new(o, "final_stats_in_memory", json_boolean(j->final != NULL));
    json_object_set_new(o, "clock_settled", json_boolean(j->finished && !j->unsettled));
    return o;
}

/* Latest first; ties by job id, so that every request gives the same order. */
static int more_recent(const struct ljob *x, const struct ljob *y)
{
    return x->last_arrival != y->last_arrival ? x->last_arrival > y->last_arrival
                                              : x->job < y->job;
}

static int by_recent(const void *a, const void *b)
{
    const struct ljob *x = *(const struct ljob *const *)a, *y = *(const struct ljob *const *)b;
    return more_recent(x, y) ? -1 : more_recent(y, x);
}

/* Keeps the k latest of the jobs offered in h[0..*n), a heap whose root is
 * the least recent kept: a collector of months knows many thousands of
 * finished jobs, and the dashboard's event stream asks for 50 of them every
 * second, so they are not all sorted each time. */
static void keep_latest(struct ljob **h, size_t *n, size_t k, struct ljob *j)
{
    size_t i;
    if (*n < k) {
        for (i = (*n)++; i > 0 && more_recent(h[(i - 1) / 2], j); i = (i - 1) / 2)
            h[i] = h[(i - 1) / 2];
        h[i] = j;
        return;
    }
    if (!more_recent(j, h[0]))
        return;
    for (i = 0;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && more_recent(h[c], h[c + 1]))
            c++;
        if (!more_recent(j, h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = j;
}

json_t *live_jobs_json(struct live *l, unsigned states, size_t finished_limit, size_t limit)
{
    json_t *jobs = json_array();
    size_t n = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 1; i < l->n_jobs && (states & LIVE_RUNNING) && (!limit || n < limit); i++)
        if (l->jobs[i] && !l->jobs[i]->finished) {
            json_array_append_new(jobs, job_summary(l, l->jobs[i]));
            n++;
        }
    /* Finished jobs after the running ones, the latest first. */
    size_t k = limit ? limit - n : l->n_jobs;
    if (finished_limit && finished_limit < k)
        k = finished_limit;
    /* The limit comes from the query string and can be any size: the heap
     * never needs more places than there are jobs. */
    if (k > l->n_jobs)
        k = l->n_jobs;
    struct ljob **done = NULL;
    if ((states & LIVE_FINISHED) && k && !(done = calloc(k, sizeof *done))) {
        /* An answer without the finished jobs would pass for a true one. */
        pthread_mutex_unlock(&l->lock);
        json_decref(jobs);
        return NULL;
    }
    size_t n_done = 0;
    for (size_t i = 1; done && i < l->n_jobs; i++)
        if (l->jobs[i] && l->jobs[i]->finished)
            keep_latest(done, &n_done, k, l->jobs[i]);
    if (n_done)
        qsort(done, n_done, sizeof *done, by_recent);
    for (size_t i = 0; i < n_done; i++)
        json_array_append_new(jobs, job_summary(l, done[i]));
    free(done);
    pthread_mutex_unlock(&l->lock);
    json_t *o = json_object();
    json_object_set_new(o, "jobs", jobs);
    return o;
}

int live_job_known(struct live *l, const char *job)
{
    pthread_mutex_lock(&l->lock);
    int known = find_job(l, job) != 0;
    pthread_mutex_unlock(&l->lock);
    return known;
}

static json_t *clock_json(const struct xp_data *d, uint32_t node)
{
    const struct iot_clockmap *m = xp_node_clock(d, node);
    json_t *c = json_object();
    struct iot_clock_summary cs;
    if (m)
        iot_clockmap_summary(m, &cs);
    json_object_set_new(c, "samples", u64(m ? cs.samples : 0));
    json_object_set_new(c, "offset_s", m ? seconds(cs.offset_ns) : json_null());
    json_object_set_new(c, "error_s", m ? seconds(cs.error_ns) : json_null());
    json_object_set_new(c, "rtt_s", m ? seconds((int64_t)cs.rtt_ns) : json_null());
    json_object_set_new(c, "drift_ppm", m && cs.has_drift ? json_real(cs.drift_ppm) : json_null());
    return c;
}

/* What the agent last reported of itself (null before its first clock
 * batch, or from an agent too old to report). */
static json_t *agent_json(const struct xp_data *d, uint32_t node)
{
    if (node >= d->n_clocks || !d->clocks[node].agent.known)
        return json_null();
    const struct xp_agent_status *a = &d->clocks[node].agent;
    json_t *o = json_object();
    json_object_set_new(o, "received_batches", u64(a->received));
    json_object_set_new(o, "invalid_messages", u64(a->invalid));
    json_object_set_new(o, "forwarded_batches", u64(a->forwarded));
    json_object_set_new(o, "resent_batches", u64(a->resent));
    json_object_set_new(o, "acked_batches", u64(a->acked));
    json_object_set_new(o, "duplicate_batches", u64(a->duplicates));
    json_object_set_new(o, "rejected_batches", u64(a->rejected));
    json_object_set_new(o, "reconnects", u64(a->reconnects));
    json_object_set_new(o, "pending_batches", u64(a->pending));
    json_object_set_new(o, "pending_bytes", u64(a->pending_bytes));
    return o;
}

/* An agent counts as connected while it was heard from (a batch or a clock
 * exchange) within this long; agents exchange clocks every few seconds. */
#define CONNECTED_NS (30ll * 1000000000)

json_t *live_nodes_json(struct live *l)
{
    struct ingest_view *v = l->ingest;
    size_t n;
    struct ingest_agent *agents = malloc(sizeof v->agents);
    if (!agents)
        return NULL;
    pthread_mutex_lock(&v->lock);
    n = v->n_agents;
    memcpy(agents, v->agents, n * sizeof *agents);
    pthread_mutex_unlock(&v->lock);
    int64_t now = iot_now_ns();
    json_t *nodes = json_array();
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < n; i++) {
        const struct ingest_agent *a = &agents[i];
        json_t *o = json_object();
        json_object_set_new(o, "node", iot_json_text(a->node));
        json_object_set_new(o, "connected", json_boolean(now - a->last_seen_ns < CONNECTED_NS));
        json_object_set_new(o, "first_seen_s", seconds(a->first_seen_ns));
        json_object_set_new(o, "last_seen_s", seconds(a->last_seen_ns));
        json_object_set_new(o, "sessions", u64(a->sessions));
        json_object_set_new(o, "batches", u64(a->batches));
        json_object_set_new(o, "events", u64(a->events));
        uint32_t node = UINT32_MAX;
        for (size_t k = 0; k < l->d.nodes.n && node == UINT32_MAX; k++)
            if (strcmp(l->d.nodes.str[k], a->node) == 0)
                node = (uint32_t)k;
        json_object_set_new(o, "clock", clock_json(&l->d, node));
        json_object_set_new(o, "agent", agent_json(&l->d, node));
        json_array_append_new(nodes, o);
    }
    pthread_mutex_unlock(&l->lock);
    free(agents);
    json_t *o = json_object();
    json_object_set_new(o, "nodes", nodes);
    return o;
}

static double store_free_bytes(const char *store)
{
    struct statvfs vfs;
    return statvfs(store, &vfs) == 0 ? (double)vfs.f_bavail * (double)vfs.f_frsize : NAN;
}

json_t *live_status_json(struct live *l)
{
    struct ingest_view *v = l->ingest;
    pthread_mutex_lock(&v->lock);
    struct ingest_counters c = v->count;
    int64_t started = v->started_ns;
    pthread_mutex_unlock(&v->lock);
    uint64_t batches = 0, events = 0;
    for (int k = 0; k < IOT_INGEST_KINDS; k++)
        batches += c.batches[k], events += c.events[k];
    json_t *o = json_object();
    json_object_set_new(o, "version", json_string(IOTRACE_VERSION));
    json_object_set_new(o, "time_s", seconds(iot_now_ns()));
    json_object_set_new(o, "started_s", seconds(started));
    json_object_set_new(o, "batches_stored", u64(batches));
    json_object_set_new(o, "events_stored", u64(events));
    json_object_set_new(o, "bytes_stored", u64(c.bytes_stored));
    json_object_set_new(o, "duplicate_batches", u64(c.dup_batches));
    json_object_set_new(o, "rejected_batches", u64(c.rejected));
    json_object_set_new(o, "malformed_messages", u64(c.malformed));
    json_object_set_new(o, "auth_refused", u64(c.auth_refused));
    double free_bytes = store_free_bytes(l->cfg.store);
    int64_t store_bytes = iot_store_bytes(l->cfg.store);
    json_object_set_new(o, "store_bytes", store_bytes < 0 ? json_null() : json_integer(store_bytes));
    json_object_set_new(o, "store_free_bytes", isnan(free_bytes) ? json_null() : json_real(free_bytes));
    json_object_set_new(o, "store_full", json_boolean(c.store_full));
    json_object_set_new(o, "store_full_since_s",
                        c.store_full ? seconds(c.store_full_since_ns) : json_null());
    json_object_set_new(o, "deferred_batches", u64(c.deferred));
    pthread_mutex_lock(&l->lock);
    size_t running = 0, finished = 0;
    for (size_t i = 1; i < l->n_jobs; i++)
        if (l->jobs[i])
            *(l->jobs[i]->finished ? &finished : &running) += 1;
    size_t views = 0, with_views = 0;
    for (size_t i = 1; i < l->n_jobs; i++)
        if (l->jobs[i] && l->jobs[i]->views) {
            with_views++;
            views += TL_CALLS * sizeof(struct tl_item) + TL_DISK * sizeof(struct tl_item) +
                     TL_PAIRS * sizeof(struct tl_pair) + SERIES * sizeof(struct second) +
                     l->jobs[i]->open_q.bytes;
        }
    struct iot_an_memory am;
    iot_an_memory(&l->pipe.an, &am);
    json_object_set_new(o, "analysis_bytes",
                        u64(am.merge_bytes + am.match_bytes + am.stats_bytes));
    json_object_set_new(o, "analysis_events_held", u64(am.events_held));
    json_object_set_new(o, "job_views", u64(with_views));
    json_object_set_new(o, "analysis_producers", u64(xp_producers_in_use(&l->d)));
    json_object_set_new(o, "analysis_producer_slots", u64(l->d.n_producers));
    json_object_set_new(o, "analysis_producers_retired", u64(l->retired));
    json_object_set_new(o, "job_view_bytes", u64(views));
    json_object_set_new(o, "jobs_running", u64(running));
    json_object_set_new(o, "jobs_finished", u64(finished));
    json_object_set_new(o, "analysis_batches", u64(l->batches_read));
    json_object_set_new(o, "analysis_events", u64(l->events_read));
    json_object_set_new(o, "analysis_waiting", json_boolean(l->waiting));
    json_object_set_new(o, "analysis_wait_s", seconds(l->waited_ns));
    json_object_set_new(o, "analysis_error", l->failed ? iot_json_text(l->error) : json_null());
    pthread_mutex_unlock(&l->lock);
    return o;
}

char *live_job_stats(struct live *l, const char *job, int *status)
{
    pthread_mutex_lock(&l->lock);
    uint32_t id = find_job(l, job);
    char *out = NULL;
    int from_store = 0;
    *status = 200;
    if (!id)
        *status = 404;
    else if (l->jobs[id]->final)
        out = strdup(l->jobs[id]->final);
    else if (l->jobs[id]->finished)
        from_store = 1;
    else
        out = iot_report_stats_json(&l->d, &l->pipe, id);
    pthread_mutex_unlock(&l->lock);
    if (from_store) {
        char err[512] = "";
        out = xp_stats_json(l->cfg.store, job, l->cfg.lateness_ns, l->cfg.grace_ns, err,
                            sizeof err);
        if (!out)
            iot_warn("job %s: cannot recompute its statistics: %s", job, err);
        pthread_mutex_lock(&l->lock);
        l->recomputed++;
        pthread_mutex_unlock(&l->lock);
    }
    if (*status == 200 && !out)
        *status = 500;
    return out;
}

/* Event times are the producers' and a window is the client's: neither can
 * be trusted to stay within int64_t once shifted, so the sums saturate and
 * the differences are taken in double when they would not fit. */
static int64_t at_seconds(int64_t origin, double s)
{
    double ns = s * 1e9;
    int64_t d = ns >= 0x1p63 ? INT64_MAX : ns <= -0x1p63 ? INT64_MIN : (int64_t)ns, t;
    if (__builtin_add_overflow(origin, d, &t))
        return d > 0 ? INT64_MAX : INT64_MIN;
    return t;
}

static json_t *since(int64_t origin, int64_t t)
{
    int64_t d;
    if (__builtin_sub_overflow(t, origin, &d))
        return json_real(((double)t - (double)origin) / 1e9);
    return json_real((double)d / 1e9);
}

static json_t *item_json(struct live *l, const struct tl_item *it, int64_t origin)
{
    const struct xp_producer *p = &l->d.producers[it->producer];
    json_t *o = json_object();
    char callid[24];
    snprintf(callid, sizeof callid, "0x%llX", (unsigned long long)it->callid);
    json_object_set_new(o, "id", u64(it->id));
    json_object_set_new(o, "func", iot_json_text(iot_func_name(it->func) ? iot_func_name(it->func) : "?"));
    json_object_set_new(o, "callid", json_string(callid));
    json_object_set_new(o, "start_s", since(origin, it->t_start));
    json_object_set_new(o, "end_s", since(origin, it->t_end));
    json_object_set_new(o, "offset", json_integer(it->offset));
    json_object_set_new(o, "bytes", u64(it->bytes));
    json_object_set_new(o, "node", iot_json_text(xp_string(&l->d.nodes, p->node)));
    json_object_set_new(o, "tid", u64(it->tid));
    if (it->kind == XP_MPIIO) {
        const char *path = xp_file_path(&l->d, it->producer, it->file);
        json_object_set_new(o, "rank", json_integer(p->rank));
        json_object_set_new(o, "file", path ? iot_json_text(path) : json_null());
    } else {
        json_object_set_new(o, "server", iot_json_text(xp_string(&l->pipe.names, it->server)));
    }
    return o;
}

static int in_window(const struct tl_item *it, int64_t from, int64_t to)
{
    return it->t_end >= from && it->t_start <= to;
}

/* Takes the lock and returns the job (status 200), or returns NULL with
 * status 404 and the lock released. */
static struct ljob *lock_job(struct live *l, const char *job, int *status)
{
    pthread_mutex_lock(&l->lock);
    uint32_t id = find_job(l, job);
    if (!id) {
        pthread_mutex_unlock(&l->lock);
        *status = 404;
        return NULL;
    }
    *status = 200;
    return l->jobs[id];
}

/* The items of a ring that overlap [from, to]. */
static json_t *window_json(struct live *l, const struct tl_item *v, size_t head, size_t len,
                           size_t cap, int64_t from, int64_t to, int64_t origin)
{
    json_t *out = json_array();
    for (size_t i = 0; v && i < len; i++) {
        const struct tl_item *it = &v[(head + i) % cap];
        if (in_window(it, from, to))
            json_array_append_new(out, item_json(l, it, origin));
    }
    return out;
}

json_t *live_job_timeline(struct live *l, const char *job, double from_s, double to_s,
                          int *status)
{
    struct ljob *j = lock_job(l, job, status);
    if (!j)
        return NULL;
    /* Times are seconds after the job's first event; without a window, the
     * last ten seconds of what the live view holds. */
    int64_t origin = j->first_ns == INT64_MAX ? 0 : j->first_ns;
    int64_t end = j->last_ns == INT64_MIN ? 0 : j->last_ns;
    int64_t from = isnan(from_s) ? at_seconds(end, -10.0) : at_seconds(origin, from_s);
    int64_t to = isnan(to_s) ? end : at_seconds(origin, to_s);
    json_t *calls = window_json(l, j->views ? j->calls_tl.v : NULL, j->calls_tl.head,
                                j->calls_tl.len, TL_CALLS, from, to, origin);
    json_t *disk = window_json(l, j->views ? j->disk_tl.v : NULL, j->disk_tl.head,
                               j->disk_tl.len, TL_DISK, from, to, origin);
    json_t *pairs = json_array();
    for (size_t i = 0; j->views && i < j->pairs_tl.len; i++) {
        const struct tl_pair *p = &RING_AT(j->pairs_tl, TL_PAIRS, i);
        json_t *o = json_object();
        json_object_set_new(o, "call", u64(p->call));
        json_object_set_new(o, "disk", u64(p->disk));
        json_array_append_new(pairs, o);
    }
    json_t *o = json_object();
    json_object_set_new(o, "job", iot_json_text(job));
    json_object_set_new(o, "state", json_string(j->finished ? "finished" : "running"));
    int64_t uid = xp_job_owner(&l->d, j->job);
    const char *name = xp_job_name(&l->d, j->job);
    json_object_set_new(o, "uid", uid < 0 ? json_null() : json_integer(uid));
    json_object_set_new(o, "name", name[0] ? iot_json_text(name) : json_null());
    json_object_set_new(o, "origin_s", seconds(origin));
    json_object_set_new(o, "from_s", since(origin, from));
    json_object_set_new(o, "to_s", since(origin, to));
    json_object_set_new(o, "held", json_boolean(j->views));
    json_object_set_new(o, "calls", calls);
    json_object_set_new(o, "disk_ops", disk);
    json_object_set_new(o, "pairs", pairs);
    pthread_mutex_unlock(&l->lock);
    return o;
}

json_t *live_job_series(struct live *l, const char *job, int *status)
{
    struct ljob *j = lock_job(l, job, status);
    if (!j)
        return NULL;
    int64_t origin = j->first_ns == INT64_MAX ? 0 : j->first_ns / 1000000000;
    json_t *servers = json_array();
    for (size_t s = 1; s < l->pipe.names.n && s < SERIES_SERVERS; s++)
        json_array_append_new(servers, iot_json_text(l->pipe.names.str[s]));
    json_array_append_new(servers, json_string("other"));
    json_t *rows = json_array();
    for (size_t i = 0; j->views && i < j->series.len; i++) {
        const struct second *s = &RING_AT(j->series, SERIES, i);
        int open = i + 1 == j->series.len && !j->finished;
        json_t *r = json_object();
        json_object_set_new(r, "t", json_integer(s->sec - origin));
        json_object_set_new(r, "calls", u64(s->calls));
        json_object_set_new(r, "read_bytes", u64(s->read_bytes));
        json_object_set_new(r, "write_bytes", u64(s->write_bytes));
        json_t *disk = json_array();
        for (size_t k = 1; k < l->pipe.names.n && k < SERIES_SERVERS; k++)
            json_array_append_new(disk, u64(s->disk_bytes[k]));
        json_array_append_new(disk, u64(s->disk_bytes[SERIES_SERVERS] + s->disk_bytes[0]));
        json_object_set_new(r, "disk_bytes", disk);
        json_object_set_new(r, "p50_ns", u64(open ? iot_qhist_quantile(&j->open_q, 0.5) : s->p50_ns));
        json_object_set_new(r, "p99_ns", u64(open ? iot_qhist_quantile(&j->open_q, 0.99) : s->p99_ns));
        json_array_append_new(rows, r);
    }
    json_t *o = json_object();
    json_object_set_new(o, "job", iot_json_text(job));
    json_object_set_new(o, "origin_s", json_integer(origin));
    json_object_set_new(o, "servers", servers);
    json_object_set_new(o, "seconds", rows);
    pthread_mutex_unlock(&l->lock);
    return o;
}

/* ---- Prometheus ------------------------------------------------------------ */

struct buf {
    char *p;
    size_t n, cap;
    int failed;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct buf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        /* The first call has no buffer yet: NULL + 0 is undefined too. */
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* Label values are escaped as the text format asks: \\, \" and \n. */
static const char *label(const char *s, char *out, size_t len)
{
    size_t n = 0;
    for (; *s && n + 3 < len; s++) {
        if (*s == '\\' || *s == '"')
            out[n++] = '\\', out[n++] = *s;
        else if (*s == '\n')
            out[n++] = '\\', out[n++] = 'n';
        else
            out[n++] = *s;
    }
    out[n] = '\0';
    return out;
}

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const char *const kind_names[IOT_INGEST_KINDS] = {"unknown", "client", "server",
                                                         "agent"};

static void collector_metrics(struct buf *b, const struct ingest_counters *c, double free_bytes,
                              double store_bytes, int64_t started)
{
    family(b, "iotrace_collector_batches_total", "counter",
           "Batches received from agents, by outcome and producer kind.");
    for (int k = 0; k < IOT_INGEST_KINDS; k++)
        put(b, "iotrace_collector_batches_total{status=\"stored\",kind=\"%s\"} %llu\n",
            kind_names[k], (unsigned long long)c->batches[k]);
    put(b, "iotrace_collector_batches_total{status=\"duplicate\",kind=\"any\"} %llu\n",
        (unsigned long long)c->dup_batches);
    put(b, "iotrace_collector_batches_total{status=\"rejected\",kind=\"any\"} %llu\n",
        (unsigned long long)c->rejected);
    family(b, "iotrace_collector_events_total", "counter",
           "Events in the batches received, by outcome and producer kind.");
    for (int k = 0; k < IOT_INGEST_KINDS; k++)
        put(b, "iotrace_collector_events_total{status=\"stored\",kind=\"%s\"} %llu\n",
            kind_names[k], (unsigned long long)c->events[k]);
    put(b, "iotrace_collector_events_total{status=\"duplicate\",kind=\"any\"} %llu\n",
        (unsigned long long)c->dup_events);
    /* One value each; the text format spells an unknown one NaN. */
    const struct {
        const char *name, *type, *help, *fmt;
        double v;
    } scalar[] = {
        {"iotrace_collector_malformed_messages_total", "counter",
         "Messages that were not valid protocol messages.", "%.0f", (double)c->malformed},
        {"iotrace_collector_auth_refused_total", "counter",
         "Connections refused by CURVE authentication (a key not in --curve-clients).", "%.0f",
         (double)c->auth_refused},
        {"iotrace_collector_stored_bytes_total", "counter",
         "Batch bytes appended to the store and synced.", "%.0f", (double)c->bytes_stored},
        {"iotrace_collector_acks_total", "counter", "Acknowledgements sent to agents.", "%.0f",
         (double)c->acks},
        {"iotrace_collector_group_commits_total", "counter",
         "Group commits made durable with one fdatasync.", "%.0f", (double)c->syncs},
        {"iotrace_collector_store_free_bytes", "gauge",
         "Free space of the file system holding the store.", "%.0f", free_bytes},
        {"iotrace_collector_store_full", "gauge",
         "1 while the store has no room: batches are not acknowledged (agents keep them).",
         "%.0f", (double)c->store_full},
        {"iotrace_collector_deferred_batches_total", "counter",
         "Batches not acknowledged for want of room in the store (agents send them again).",
         "%.0f", (double)c->deferred},
        {"iotrace_collector_store_size_bytes", "gauge", "Bytes in the store's segment files.",
         "%.0f", store_bytes},
        {"iotrace_collector_start_time_seconds", "gauge",
         "When the collector started, seconds since the epoch.", "%.3f", (double)started / 1e9},
    };
    for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) {
        family(b, scalar[i].name, scalar[i].type, scalar[i].help);
        char value[64];
        if (isnan(scalar[i].v))
            snprintf(value, sizeof value, "NaN");
        else
            snprintf(value, sizeof value, scalar[i].fmt, scalar[i].v);
        put(b, "%s %s\n", scalar[i].name, value);
    }
}

static void agent_metrics(struct buf *b, struct live *l, const struct ingest_agent *agents,
                          size_t n)
{
    char name[IOT_INGEST_NODE_MAX * 2 + 4];
    int64_t now = iot_now_ns();
    family(b, "iotrace_agent_connected", "gauge",
           "1 while the node's agent was heard from in the last 30 seconds.");
    for (size_t i = 0; i < n; i++)
        put(b, "iotrace_agent_connected{node=\"%s\"} %d\n", label(agents[i].node, name, sizeof name),
            now - agents[i].last_seen_ns < CONNECTED_NS);
    family(b, "iotrace_agent_last_seen_timestamp_seconds", "gauge",
           "When the node's agent was last heard from, seconds since the epoch.");
    for (size_t i = 0; i < n; i++)
        put(b, "iotrace_agent_last_seen_timestamp_seconds{node=\"%s\"} %.3f\n",
            label(agents[i].node, name, sizeof name), (double)agents[i].last_seen_ns / 1e9);
    family(b, "iotrace_agent_batches_total", "counter", "Batches stored from the node's agent.");
    for (size_t i = 0; i < n; i++)
        put(b, "iotrace_agent_batches_total{node=\"%s\"} %llu\n",
            label(agents[i].node, name, sizeof name), (unsigned long long)agents[i].batches);
    family(b, "iotrace_agent_clock_offset_seconds", "gauge",
           "Collector clock minus the node's clock, last sample.");
    struct buf err = {0};
    family(&err, "iotrace_agent_clock_error_seconds", "gauge",
           "Bound on the error of the node's aligned times.");
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < l->d.nodes.n; k++) {
            const struct iot_clockmap *m;
            if (strcmp(l->d.nodes.str[k], agents[i].node) != 0 ||
                !(m = xp_node_clock(&l->d, (uint32_t)k)))
                continue;
            struct iot_clock_summary cs;
            iot_clockmap_summary(m, &cs);
            label(agents[i].node, name, sizeof name);
            put(b, "iotrace_agent_clock_offset_seconds{node=\"%s\"} %.9f\n", name,
                (double)cs.offset_ns / 1e9);
            put(&err, "iotrace_agent_clock_error_seconds{node=\"%s\"} %.9f\n", name,
                (double)cs.error_ns / 1e9);
        }
    }
    if (err.p)
        put(b, "%s", err.p);
    free(err.p);
    static const struct {
        const char *name, *type, *help;
        size_t field;
    } fam[] = {
        {"iotrace_agent_pending_batches", "gauge",
         "Batches the agent holds that the collector has not acknowledged.",
         offsetof(struct xp_agent_status, pending)},
        {"iotrace_agent_pending_bytes", "gauge", "Bytes of those batches.",
         offsetof(struct xp_agent_status, pending_bytes)},
        {"iotrace_agent_resent_batches_total", "counter",
         "Batches the agent sent again after a reconnect.",
         offsetof(struct xp_agent_status, resent)},
        {"iotrace_agent_invalid_messages_total", "counter",
         "Messages from local producers the agent refused.",
         offsetof(struct xp_agent_status, invalid)},
        {"iotrace_agent_rejected_batches_total", "counter",
         "Batches the collector refused from the agent.",
         offsetof(struct xp_agent_status, rejected)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        family(b, fam[f].name, fam[f].type, fam[f].help);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < l->d.nodes.n && k < l->d.n_clocks; k++) {
                const struct xp_agent_status *a = &l->d.clocks[k].agent;
                if (!a->known || strcmp(l->d.nodes.str[k], agents[i].node) != 0)
                    continue;
                put(b, "%s{node=\"%s\"} %llu\n", fam[f].name,
                    label(agents[i].node, name, sizeof name),
                    (unsigned long long)*(const uint64_t *)((const char *)a + fam[f].field));
            }
    }
}

/* Per-job series: calls and bytes by function and direction, disk
 * operations and bytes by server, drops, unmatched.  A finished job's
 * series leave with its figures (keep time). */
static void job_metrics(struct buf *b, struct live *l)
{
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"iotrace_job_running", "gauge", "1 while the job runs, 0 once finished."},
        {"iotrace_job_mpiio_calls_total", "counter", "MPI-IO calls by function."},
        {"iotrace_job_mpiio_bytes_total", "counter", "Bytes of MPI-IO calls by function and direction."},
        {"iotrace_job_disk_ops_total", "counter", "Disk operations the job caused, by server."},
        {"iotrace_job_disk_bytes_total", "counter", "Bytes of the disk operations the job caused, by server."},
        {"iotrace_job_dropped_events_total", "counter", "Events of the job lost anywhere and counted."},
        {"iotrace_job_unmatched_calls_total", "counter", "Calls expected to reach the disk whose disk operations were not seen."},
        {"iotrace_job_unmatched_disk_ops_total", "counter", "Disk operations whose call was not seen."},
    };
    char job[256], fn[64], sv[256];
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        family(b, fam[f].name, fam[f].type, fam[f].help);
        for (size_t i = 1; i < l->n_jobs; i++) {
            struct ljob *j = l->jobs[i];
            if (!j || j->forgotten)
                continue;
            const struct iot_an_job *st = i < l->pipe.an.stats.n_job ? l->pipe.an.stats.job[i] : NULL;
            label(xp_string(&l->d.jobs, (uint32_t)i), job, sizeof job);
            switch (f) {
            case 0:
                put(b, "%s{job_id=\"%s\"} %d\n", fam[f].name, job, !j->finished);
                break;
            case 1:
            case 2:
                for (unsigned k = 0; st && k < IOT_AN_FUNCS; k++) {
                    const struct iot_an_func *x = st->func[k];
                    if (!x || !x->count || !iot_func_name(k))
                        continue;
                    label(iot_func_name(k), fn, sizeof fn);
                    int dir = xp_func_direction(k);
                    if (f == 1)
                        put(b, "%s{job_id=\"%s\",function=\"%s\"} %llu\n", fam[f].name, job, fn,
                            (unsigned long long)x->count);
                    else
                        put(b, "%s{job_id=\"%s\",function=\"%s\",direction=\"%s\"} %llu\n",
                            fam[f].name, job, fn,
                            dir == XP_DIR_READ ? "read" : dir == XP_DIR_WRITE ? "write" : "none",
                            (unsigned long long)x->bytes);
                }
                break;
            case 3:
            case 4:
                for (size_t s = 0; st && s < st->n_server; s++) {
                    if (!st->server[s].ops)
                        continue;
                    label(xp_string(&l->pipe.names, (uint32_t)s), sv, sizeof sv);
                    put(b, "%s{job_id=\"%s\",server=\"%s\"} %llu\n", fam[f].name, job, sv,
                        (unsigned long long)(f == 3 ? st->server[s].ops : st->server[s].bytes));
                }
                break;
            case 5:
                put(b, "%s{job_id=\"%s\"} %llu\n", fam[f].name, job, (unsigned long long)j->dropped);
                break;
            case 6:
            case 7:
                put(b, "%s{job_id=\"%s\"} %llu\n", fam[f].name, job,
                    (unsigned long long)(!st ? 0 : f == 6 ? st->unmatched_calls : st->unmatched_disk_ops));
                break;
            }
        }
    }
}

char *live_metrics(struct live *l)
{
    struct ingest_view *v = l->ingest;
    struct ingest_agent *agents = malloc(sizeof v->agents);
    if (!agents)
        return NULL;
    pthread_mutex_lock(&v->lock);
    struct ingest_counters c = v->count;
    int64_t started = v->started_ns;
    size_t n = v->n_agents;
    memcpy(agents, v->agents, n * sizeof *agents);
    pthread_mutex_unlock(&v->lock);
    struct buf b = {0};
    collector_metrics(&b, &c, store_free_bytes(l->cfg.store), (double)iot_store_bytes(l->cfg.store),
                      started);
    pthread_mutex_lock(&l->lock);
    family(&b, "iotrace_analysis_batches_total", "counter", "Stored batches the live analysis has read.");
    put(&b, "iotrace_analysis_batches_total %llu\n", (unsigned long long)l->batches_read);
    family(&b, "iotrace_analysis_events_total", "counter", "Events the live analysis has read.");
    put(&b, "iotrace_analysis_events_total %llu\n", (unsigned long long)l->events_read);
    family(&b, "iotrace_analysis_wait_seconds_total", "counter",
           "Time the live analysis waited for a core to spare (--analysis-yield).");
    put(&b, "iotrace_analysis_wait_seconds_total %.3f\n", (double)l->waited_ns / 1e9);
    family(&b, "iotrace_analysis_waiting", "gauge",
           "1 while the live analysis waits for a core to spare.");
    put(&b, "iotrace_analysis_waiting %d\n", l->waiting);
    family(&b, "iotrace_analysis_newest_batch_timestamp_seconds", "gauge",
           "When the newest batch the live analysis has read was stored, seconds since the "
           "epoch.");
    put(&b, "iotrace_analysis_newest_batch_timestamp_seconds %.3f\n",
        (double)l->newest_arrival_ns / 1e9);
    agent_metrics(&b, l, agents, n);
    job_metrics(&b, l);
    pthread_mutex_unlock(&l->lock);
    free(agents);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
