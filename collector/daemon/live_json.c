/* The JSON documents of the HTTP API (docs/http-api.md), built from the
 * live state under its lock. */
#include "live_int.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iot_functions.h"
#include "log.h"
#include "stats_report.h"
#include "timeutil.h"
#include "wire.h"

static json_t *u64(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *seconds(int64_t ns) { return json_real((double)ns / 1e9); }

static uint32_t find_job(struct live *l, const char *name)
{
    for (size_t i = 1; i < l->n_jobs; i++)
        if (l->jobs[i] && strcmp(xp_string(&l->d.jobs, (uint32_t)i), name) == 0)
            return (uint32_t)i;
    return 0;
}

/* What a running job does now: the mean over RATE_S whole seconds of its
 * series that ended RATE_LAG_S ago (events may still come for the last
 * seconds, within the merge's lateness); a finished job's is 0. */
#define RATE_S 5
#define RATE_LAG_S 2

struct rates {
    double read_bps, write_bps, calls_ps, disk_bps;
};

static struct rates current_rates(const struct ljob *j, int64_t now_s)
{
    struct rates r = {0, 0, 0, 0};
    if (j->finished || !j->series.len)
        return r;
    int64_t hi = now_s - RATE_LAG_S, lo = hi - RATE_S;
    for (size_t i = j->series.len; i-- > 0;) {
        const struct second *s = &RING_AT(j->series, SERIES, i);
        if (s->sec < lo)
            break;
        if (s->sec >= hi)
            continue;
        r.read_bps += (double)s->read_bytes;
        r.write_bps += (double)s->write_bytes;
        r.calls_ps += (double)s->calls;
        for (size_t k = 0; k <= SERIES_SERVERS; k++)
            r.disk_bps += (double)s->disk_bytes[k];
    }
    r.read_bps /= RATE_S;
    r.write_bps /= RATE_S;
    r.calls_ps /= RATE_S;
    r.disk_bps /= RATE_S;
    return r;
}

static json_t *job_summary(struct live *l, const struct ljob *j)
{
    json_t *o = json_object();
    json_object_set_new(o, "job", iot_json_text(xp_string(&l->d.jobs, j->job)));
    json_object_set_new(o, "state", json_string(j->finished ? "finished" : "running"));
    int64_t uid = xp_job_owner(&l->d, j->job);
    const char *name = xp_job_name(&l->d, j->job);
    char user[64];
    json_object_set_new(o, "uid", uid < 0 ? json_null() : json_integer(uid));
    json_object_set_new(o, "user", xp_user_name(uid, user, sizeof user)[0] ? iot_json_text(user)
                                                                         : json_null());
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
    struct rates r = current_rates(j, iot_now_ns() / 1000000000);
    json_object_set_new(o, "read_bytes_per_s", json_real(r.read_bps));
    json_object_set_new(o, "write_bytes_per_s", json_real(r.write_bps));
    json_object_set_new(o, "mpiio_calls_per_s", json_real(r.calls_ps));
    json_object_set_new(o, "disk_bytes_per_s", json_real(r.disk_bps));
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

static int visible(struct live *l, const struct ljob *j, int64_t only_uid)
{
    return only_uid == LIVE_ANY_UID || xp_job_owner(&l->d, j->job) == only_uid;
}

json_t *live_jobs_json(struct live *l, unsigned states, size_t finished_limit, size_t limit,
                       int64_t only_uid)
{
    json_t *jobs = json_array();
    size_t n = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 1; i < l->n_jobs && (states & LIVE_RUNNING) && (!limit || n < limit); i++)
        if (l->jobs[i] && !l->jobs[i]->finished && visible(l, l->jobs[i], only_uid)) {
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
        if (l->jobs[i] && l->jobs[i]->finished && visible(l, l->jobs[i], only_uid))
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

json_t *live_job_json(struct live *l, const char *job)
{
    pthread_mutex_lock(&l->lock);
    uint32_t id = find_job(l, job);
    json_t *o = id ? job_summary(l, l->jobs[id]) : json_null();
    pthread_mutex_unlock(&l->lock);
    return o;
}

int64_t live_job_owner(struct live *l, const char *job, int *known)
{
    pthread_mutex_lock(&l->lock);
    uint32_t id = find_job(l, job);
    int64_t uid = id ? xp_job_owner(&l->d, l->jobs[id]->job) : -1;
    pthread_mutex_unlock(&l->lock);
    *known = id != 0;
    return uid;
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
    static const struct {
        const char *name;
        size_t field;
    } fields[] = {
        {"received_batches", offsetof(struct xp_agent_status, received)},
        {"invalid_messages", offsetof(struct xp_agent_status, invalid)},
        {"forwarded_batches", offsetof(struct xp_agent_status, forwarded)},
        {"resent_batches", offsetof(struct xp_agent_status, resent)},
        {"acked_batches", offsetof(struct xp_agent_status, acked)},
        {"duplicate_batches", offsetof(struct xp_agent_status, duplicates)},
        {"rejected_batches", offsetof(struct xp_agent_status, rejected)},
        {"reconnects", offsetof(struct xp_agent_status, reconnects)},
        {"pending_batches", offsetof(struct xp_agent_status, pending)},
        {"pending_bytes", offsetof(struct xp_agent_status, pending_bytes)},
    };
    const char *a = (const char *)&d->clocks[node].agent;
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        json_object_set_new(o, fields[i].name, u64(*(const uint64_t *)(a + fields[i].field)));
    json_object_set_new(o, "reported_s", seconds((int64_t)d->clocks[node].agent.reported_ns));
    return o;
}

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

json_t *live_status_json(struct live *l)
{
    struct ingest_view *v = l->ingest;
    pthread_mutex_lock(&v->lock);
    struct ingest_counters c = v->count;
    int64_t started = v->started_ns;
    struct iot_store_pos durable = v->durable;
    uint64_t at_start = v->records_at_start;
    pthread_mutex_unlock(&v->lock);
    uint64_t batches = 0, events = 0;
    for (int k = 0; k < IOT_INGEST_KINDS; k++)
        batches += c.batches[k], events += c.events[k];
    struct live_lag lag;
    live_lag(l, &durable, at_start + batches, &lag);
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
    double free_bytes = live_store_free_bytes(l->cfg.store);
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
    json_object_set_new(o, "analysis_behind_batches", u64(lag.batches));
    json_object_set_new(o, "analysis_lag_s", seconds(lag.ns));
    json_object_set_new(o, "analysis_yield_s", seconds(l->cfg.yield_ns));
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

/* The items of a ring that overlap [from, to] and came after `since`. */
static json_t *window_json(struct live *l, const struct tl_item *v, size_t head, size_t len,
                           size_t cap, int64_t from, int64_t to, int64_t origin, uint64_t after)
{
    json_t *out = json_array();
    for (size_t i = 0; v && i < len; i++) {
        const struct tl_item *it = &v[(head + i) % cap];
        if (it->seq > after && in_window(it, from, to))
            json_array_append_new(out, item_json(l, it, origin));
    }
    return out;
}

/* A cursor from a client: what it has seen of the job's views.  One the
 * job never reached (from before a restart of the collector) asks for
 * everything. */
static uint64_t since_of(const struct ljob *j, uint64_t after)
{
    return after > j->view_seq ? 0 : after;
}

json_t *live_job_timeline(struct live *l, const char *job, double from_s, double to_s,
                          uint64_t after, int *status)
{
    struct ljob *j = lock_job(l, job, status);
    if (!j)
        return NULL;
    after = since_of(j, after);
    /* Times are seconds after the job's first event; without a window, the
     * last ten seconds of what the live view holds. */
    int64_t origin = j->first_ns == INT64_MAX ? 0 : j->first_ns;
    int64_t end = j->last_ns == INT64_MIN ? 0 : j->last_ns;
    int64_t from = isnan(from_s) ? at_seconds(end, -10.0) : at_seconds(origin, from_s);
    int64_t to = isnan(to_s) ? end : at_seconds(origin, to_s);
    json_t *calls = window_json(l, j->views ? j->calls_tl.v : NULL, j->calls_tl.head,
                                j->calls_tl.len, TL_CALLS, from, to, origin, after);
    json_t *disk = window_json(l, j->views ? j->disk_tl.v : NULL, j->disk_tl.head,
                               j->disk_tl.len, TL_DISK, from, to, origin, after);
    json_t *pairs = json_array();
    for (size_t i = 0; j->views && i < j->pairs_tl.len; i++) {
        const struct tl_pair *p = &RING_AT(j->pairs_tl, TL_PAIRS, i);
        if (p->seq <= after)
            continue;
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
    json_object_set_new(o, "since", u64(after));
    json_object_set_new(o, "cursor", u64(j->view_seq));
    json_object_set_new(o, "calls", calls);
    json_object_set_new(o, "disk_ops", disk);
    json_object_set_new(o, "pairs", pairs);
    pthread_mutex_unlock(&l->lock);
    return o;
}

json_t *live_job_series(struct live *l, const char *job, uint64_t after, int *status)
{
    struct ljob *j = lock_job(l, job, status);
    if (!j)
        return NULL;
    after = since_of(j, after);
    int64_t origin = j->first_ns == INT64_MAX ? 0 : j->first_ns / 1000000000;
    json_t *servers = json_array();
    for (size_t s = 1; s < l->pipe.names.n && s < SERIES_SERVERS; s++)
        json_array_append_new(servers, iot_json_text(l->pipe.names.str[s]));
    json_array_append_new(servers, json_string("other"));
    json_t *rows = json_array();
    for (size_t i = 0; j->views && i < j->series.len; i++) {
        const struct second *s = &RING_AT(j->series, SERIES, i);
        int open = i + 1 == j->series.len && !j->finished;
        if (s->seq <= after)
            continue;
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
    json_object_set_new(o, "since", u64(after));
    json_object_set_new(o, "cursor", u64(j->view_seq));
    json_object_set_new(o, "seconds", rows);
    pthread_mutex_unlock(&l->lock);
    return o;
}
