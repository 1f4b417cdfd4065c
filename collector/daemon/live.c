#include "live_int.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "grow.h"
#include "log.h"
#include "stats_report.h"
#include "timeutil.h"
#include "wire.h"

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
    s->seq = ++j->view_seq;
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
    if (ev->kind == XP_DISK &&
        live_servers_event(l, ev, ev->producer < l->pipe.an.n_server ? l->pipe.an.server[ev->producer] : 0) < 0)
        return -1;
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
                         .offset = xp_event_offset(ev), .seq = ++j->view_seq, .id = ev->order,
                         .callid = ev->callid,
                         .bytes = ev->bytes, .file = ev->file, .producer = ev->producer,
                         .tid = ev->tid, .server = server, .func = ev->func, .kind = ev->kind};
    struct second *s = second_of(j, ev->t_start);
    if (s)
        s->seq = j->view_seq;
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
    struct tl_pair p = {++j->view_seq, call->order, disk->order};
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
    l->records_read++;
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
        int64_t end_at = iot_now_ns();
        int stopping = v->stopping;
        pthread_mutex_unlock(&v->lock);
        int news = end.segment != l->pos.segment || end.offset != l->pos.offset;
        if (l->cfg.yield_ns && !news) /* so that the next batch finds a recent measure */
            iot_idlecores_sample(&l->cores, PROBE_NS);
        if (!stopping && news && l->cfg.yield_ns && wait_for_core(l, v)) {
            pthread_mutex_lock(&v->lock); /* what was stored meanwhile is read too */
            end = v->durable;
            end_at = iot_now_ns();
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
        l->read_to = end;
        l->read_at_ns = end_at;
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
    l->read_at_ns = iot_now_ns(); /* nothing of the store is read yet */
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
    live_servers_free(l);
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

void live_lag(const struct live *l, const struct iot_store_pos *durable, uint64_t stored,
              struct live_lag *out)
{
    int behind = durable->segment != l->read_to.segment || durable->offset != l->read_to.offset;
    /* records_read moves during a read, read_to only after it: the count
     * is exact, the time an upper bound by one read's length. */
    out->batches = stored > l->records_read ? stored - l->records_read : 0;
    out->ns = 0;
    if (behind) {
        int64_t ns = iot_now_ns() - l->read_at_ns;
        out->ns = ns > 0 ? ns : 0;
    }
}

double live_store_free_bytes(const char *store)
{
    struct statvfs vfs;
    return statvfs(store, &vfs) == 0 ? (double)vfs.f_bavail * (double)vfs.f_frsize : NAN;
}
