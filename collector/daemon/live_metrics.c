/* The Prometheus text exposition of the daemon (docs/http-api.md,
 * /metrics): the collector's counters, the agents and the jobs. */
#include "live_int.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iot_functions.h"
#include "store.h"
#include "timeutil.h"
#include "wire.h"

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

/* A counter by outcome: stored by producer kind, duplicates, and (for
 * batches; rejected < 0 leaves it out) rejections. */
static void by_outcome(struct buf *b, const char *name, const char *help,
                       const uint64_t stored[IOT_INGEST_KINDS], uint64_t dup, int64_t rejected)
{
    family(b, name, "counter", help);
    for (int k = 0; k < IOT_INGEST_KINDS; k++)
        put(b, "%s{status=\"stored\",kind=\"%s\"} %llu\n", name, kind_names[k],
            (unsigned long long)stored[k]);
    put(b, "%s{status=\"duplicate\",kind=\"any\"} %llu\n", name, (unsigned long long)dup);
    if (rejected >= 0)
        put(b, "%s{status=\"rejected\",kind=\"any\"} %lld\n", name, (long long)rejected);
}

static void collector_metrics(struct buf *b, const struct ingest_counters *c, double free_bytes,
                              double store_bytes, int64_t started)
{
    by_outcome(b, "iotrace_collector_batches_total",
               "Batches received from agents, by outcome and producer kind.", c->batches,
               c->dup_batches, (int64_t)c->rejected);
    by_outcome(b, "iotrace_collector_events_total",
               "Events in the batches received, by outcome and producer kind.", c->events,
               c->dup_events, -1);
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
static void job_metrics(struct buf *b, struct live *l, int64_t only_uid)
{
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"iotrace_job_running", "gauge", "1 while the job runs, 0 once finished."},
        {"iotrace_job_info", "gauge",
         "1 for each job, its identity in labels (user, uid, name), to join on job_id."},
        {"iotrace_job_mpiio_calls_total", "counter", "MPI-IO calls by function."},
        {"iotrace_job_mpiio_bytes_total", "counter", "Bytes of MPI-IO calls by function and direction."},
        {"iotrace_job_disk_ops_total", "counter", "Disk operations the job caused, by server."},
        {"iotrace_job_disk_bytes_total", "counter", "Bytes of the disk operations the job caused, by server."},
        {"iotrace_job_dropped_events_total", "counter", "Events of the job lost anywhere and counted."},
        {"iotrace_job_unmatched_calls_total", "counter", "Calls expected to reach the disk whose disk operations were not seen."},
        {"iotrace_job_unmatched_disk_ops_total", "counter", "Disk operations whose call was not seen."},
        {"iotrace_job_disk_only_calls", "gauge", "Calls the disks saw and the store has no record of (died with their process, dropped, or outside their window)."},
    };
    char job[256], fn[64], sv[256];
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        family(b, fam[f].name, fam[f].type, fam[f].help);
        for (size_t i = 1; i < l->n_jobs; i++) {
            struct ljob *j = l->jobs[i];
            if (!j || j->forgotten ||
                (only_uid != LIVE_ANY_UID && xp_job_owner(&l->d, j->job) != only_uid))
                continue;
            const struct iot_an_job *st = i < l->pipe.an.stats.n_job ? l->pipe.an.stats.job[i] : NULL;
            label(xp_string(&l->d.jobs, (uint32_t)i), job, sizeof job);
            switch (f) {
            case 0:
                put(b, "%s{job_id=\"%s\"} %d\n", fam[f].name, job, !j->finished);
                break;
            case 1: {
                int64_t uid = xp_job_owner(&l->d, j->job);
                char user[64], ul[160], nl[256], uidtxt[24] = "";
                xp_user_name(uid, user, sizeof user);
                label(user, ul, sizeof ul);
                label(xp_job_name(&l->d, j->job), nl, sizeof nl);
                if (uid >= 0)
                    snprintf(uidtxt, sizeof uidtxt, "%lld", (long long)uid);
                put(b, "%s{job_id=\"%s\",user=\"%s\",uid=\"%s\",name=\"%s\"} 1\n", fam[f].name, job,
                    ul, uidtxt, nl);
                break;
            }
            case 2:
            case 3:
                for (unsigned k = 0; st && k < IOT_AN_FUNCS; k++) {
                    const struct iot_an_func *x = st->func[k];
                    if (!x || !x->count || !iot_func_name(k))
                        continue;
                    label(iot_func_name(k), fn, sizeof fn);
                    int dir = xp_func_direction(k);
                    if (f == 2)
                        put(b, "%s{job_id=\"%s\",function=\"%s\"} %llu\n", fam[f].name, job, fn,
                            (unsigned long long)x->count);
                    else
                        put(b, "%s{job_id=\"%s\",function=\"%s\",direction=\"%s\"} %llu\n",
                            fam[f].name, job, fn,
                            dir == XP_DIR_READ ? "read" : dir == XP_DIR_WRITE ? "write" : "none",
                            (unsigned long long)x->bytes);
                }
                break;
            case 4:
            case 5:
                for (size_t s = 0; st && s < st->n_server; s++) {
                    if (!st->server[s].ops)
                        continue;
                    label(xp_string(&l->pipe.names, (uint32_t)s), sv, sizeof sv);
                    put(b, "%s{job_id=\"%s\",server=\"%s\"} %llu\n", fam[f].name, job, sv,
                        (unsigned long long)(f == 4 ? st->server[s].ops : st->server[s].bytes));
                }
                break;
            case 6:
                put(b, "%s{job_id=\"%s\"} %llu\n", fam[f].name, job, (unsigned long long)j->dropped);
                break;
            case 7:
            case 8:
                put(b, "%s{job_id=\"%s\"} %llu\n", fam[f].name, job,
                    (unsigned long long)(!st ? 0 : f == 7 ? st->unmatched_calls : st->unmatched_disk_ops));
                break;
            case 9: /* a gauge: a late call takes its CallID back */
                put(b, "%s{job_id=\"%s\"} %llu\n", fam[f].name, job,
                    (unsigned long long)(!st ? 0 : st->disk_only_n + st->disk_only_more));
                break;
            }
        }
    }
}

/* Per storage server: operations and bytes by direction and a latency
 * histogram since the collector started (live_servers.c).  Its buckets are
 * powers of two of nanoseconds, from 8 us to 1 s, edges of the quarter
 * octaves the server view counts in, so that each is exact. */
static void server_metrics(struct buf *b, struct live *l)
{
    static const int powers[] = {13, 15, 17, 19, 21, 23, 25, 27, 30};
    char sv[256];
    family(b, "iotrace_server_disk_ops_total", "counter",
           "Disk operations of jobs a storage server made, by direction.");
    for (size_t i = 0; i < l->n_servers; i++) {
        const struct lserver *v = &l->servers[i];
        if (!v->seen)
            continue;
        label(xp_string(&l->pipe.names, (uint32_t)i), sv, sizeof sv);
        put(b, "iotrace_server_disk_ops_total{server=\"%s\",direction=\"read\"} %llu\n", sv,
            (unsigned long long)v->read_ops);
        put(b, "iotrace_server_disk_ops_total{server=\"%s\",direction=\"write\"} %llu\n", sv,
            (unsigned long long)v->write_ops);
        put(b, "iotrace_server_disk_ops_total{server=\"%s\",direction=\"other\"} %llu\n", sv,
            (unsigned long long)(v->ops - v->read_ops - v->write_ops));
    }
    family(b, "iotrace_server_disk_bytes_total", "counter",
           "Bytes of the disk operations of jobs a storage server made, by direction.");
    for (size_t i = 0; i < l->n_servers; i++) {
        const struct lserver *v = &l->servers[i];
        if (!v->seen)
            continue;
        label(xp_string(&l->pipe.names, (uint32_t)i), sv, sizeof sv);
        put(b, "iotrace_server_disk_bytes_total{server=\"%s\",direction=\"read\"} %llu\n", sv,
            (unsigned long long)v->read_bytes);
        put(b, "iotrace_server_disk_bytes_total{server=\"%s\",direction=\"write\"} %llu\n", sv,
            (unsigned long long)v->write_bytes);
    }
    family(b, "iotrace_server_disk_latency_seconds", "histogram",
           "Durations of the disk operations of jobs a storage server made.");
    for (size_t i = 0; i < l->n_servers; i++) {
        const struct lserver *v = &l->servers[i];
        if (!v->seen)
            continue;
        label(xp_string(&l->pipe.names, (uint32_t)i), sv, sizeof sv);
        uint64_t below = 0;
        unsigned next = 0;
        for (size_t k = 0; k < sizeof powers / sizeof powers[0]; k++) {
            for (; next < 4u * (unsigned)powers[k] && next < LSV_BUCKETS; next++)
                below += v->lat_total[next];
            put(b, "iotrace_server_disk_latency_seconds_bucket{server=\"%s\",le=\"%.9g\"} %llu\n", sv,
                ldexp(1.0, powers[k]) / 1e9, (unsigned long long)below);
        }
        put(b, "iotrace_server_disk_latency_seconds_bucket{server=\"%s\",le=\"+Inf\"} %llu\n", sv,
            (unsigned long long)v->ops);
        put(b, "iotrace_server_disk_latency_seconds_sum{server=\"%s\"} %.9f\n", sv, (double)v->lat_sum_ns / 1e9);
        put(b, "iotrace_server_disk_latency_seconds_count{server=\"%s\"} %llu\n", sv,
            (unsigned long long)v->ops);
    }
}

char *live_metrics(struct live *l, int64_t only_uid)
{
    struct ingest_view *v = l->ingest;
    struct ingest_agent *agents = malloc(sizeof v->agents);
    if (!agents)
        return NULL;
    pthread_mutex_lock(&v->lock);
    struct ingest_counters c = v->count;
    int64_t started = v->started_ns;
    struct iot_store_pos durable = v->durable;
    uint64_t stored = v->records_at_start;
    for (int k = 0; k < IOT_INGEST_KINDS; k++)
        stored += c.batches[k];
    size_t n = v->n_agents;
    memcpy(agents, v->agents, n * sizeof *agents);
    pthread_mutex_unlock(&v->lock);
    struct buf b = {0};
    collector_metrics(&b, &c, live_store_free_bytes(l->cfg.store), (double)iot_store_bytes(l->cfg.store),
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
    struct live_lag lag;
    live_lag(l, &durable, stored, &lag);
    family(&b, "iotrace_analysis_behind_batches", "gauge",
           "Stored batches the live analysis has not read yet.");
    put(&b, "iotrace_analysis_behind_batches %llu\n", (unsigned long long)lag.batches);
    family(&b, "iotrace_analysis_lag_seconds", "gauge",
           "How long the oldest stored batch the live analysis has not read has waited, at "
           "most; 0 when it has read everything.");
    put(&b, "iotrace_analysis_lag_seconds %.3f\n", (double)lag.ns / 1e9);
    family(&b, "iotrace_analysis_newest_batch_timestamp_seconds", "gauge",
           "When the newest batch the live analysis has read was stored, seconds since the "
           "epoch.");
    put(&b, "iotrace_analysis_newest_batch_timestamp_seconds %.3f\n",
        (double)l->newest_arrival_ns / 1e9);
    agent_metrics(&b, l, agents, n);
    job_metrics(&b, l, only_uid);
    server_metrics(&b, l);
    pthread_mutex_unlock(&l->lock);
    free(agents);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
