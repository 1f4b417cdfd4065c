/* The facility's storage servers as they are loaded now: per server (each
 * brick), the last seconds of its disk operations: operations, bytes read
 * and written, a latency histogram, and the jobs with the most bytes on it
 * (docs/http-api.md, /api/v1/servers).  Fed by the live thread with every
 * disk operation it releases, any job's or none; read by the API under the
 * same lock. */
#include "live_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats_report.h"
#include "timeutil.h"

/* Latency buckets: 4 per power of two from 1 ns, up to 2^32 ns (4.3 s;
 * slower ones count in the last): a quarter octave, 19 % wide. */
static unsigned lat_bucket(uint64_t ns)
{
    if (ns < 2)
        return 0;
    unsigned lg = 63u - (unsigned)__builtin_clzll(ns);
    unsigned sub = lg >= 2 ? (unsigned)((ns >> (lg - 2)) & 3) : (unsigned)((ns << (2 - lg)) & 3);
    unsigned b = lg * 4 + sub;
    return b < LSV_BUCKETS ? b : LSV_BUCKETS - 1;
}

/* The middle of a bucket, in ns. */
static double lat_value(unsigned b)
{
    double lo = ldexp(1.0 + (b & 3) / 4.0, (int)(b / 4));
    return lo * (1.0 + 1.0 / 8.0);
}

static struct lsv_second *second_of(struct lserver *sv, int64_t sec)
{
    struct lsv_second *s = &sv->sec[(uint64_t)sec % LSV_SECONDS];
    if (s->sec != sec) {
        if (s->sec > sec)
            return NULL; /* older than the window: its slot holds a newer second */
        memset(s, 0, sizeof *s);
        s->sec = sec;
    }
    return s;
}

int live_servers_event(struct live *l, const struct xp_event *ev, uint32_t server)
{
    if (server >= l->n_servers) {
        size_t n = l->n_servers ? l->n_servers : 16;
        while (n <= server)
            n *= 2;
        struct lserver *v = realloc(l->servers, n * sizeof *v);
        if (!v)
            return -1;
        memset(v + l->n_servers, 0, (n - l->n_servers) * sizeof *v);
        l->servers = v;
        l->n_servers = n;
    }
    struct lserver *sv = &l->servers[server];
    sv->seen = 1;
    sv->ops++;
    int dir = xp_func_direction(ev->func);
    uint64_t bytes = ev->bytes > 0 ? (uint64_t)ev->bytes : 0;
    if (dir == XP_DIR_READ) {
        sv->read_bytes += bytes;
        sv->read_ops++;
    } else if (dir == XP_DIR_WRITE) {
        sv->write_bytes += bytes;
        sv->write_ops++;
    }
    uint64_t dur = (uint64_t)(ev->t_end > ev->t_start ? ev->t_end - ev->t_start : 0);
    unsigned lb = lat_bucket(dur);
    sv->lat_total[lb]++;
    sv->lat_sum_ns += dur;
    struct lsv_second *s = second_of(sv, ev->t_start / 1000000000);
    if (!s)
        return 0;
    s->ops++;
    if (dir == XP_DIR_READ)
        s->read_bytes += bytes;
    else if (dir == XP_DIR_WRITE)
        s->write_bytes += bytes;
    s->lat[lb]++;
    /* The jobs of the second with the most bytes on this server: a few
     * places; a job that finds them taken counts in `others`. */
    if (ev->job) {
        size_t k;
        for (k = 0; k < LSV_JOBS && s->job[k] && s->job[k] != ev->job; k++)
            ;
        if (k < LSV_JOBS) {
            s->job[k] = ev->job;
            s->job_bytes[k] += bytes;
        } else {
            s->others += bytes;
        }
    }
    return 0;
}

static uint64_t quantile(const uint32_t *lat, uint64_t n, double q)
{
    uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0;
    for (unsigned b = 0; b < LSV_BUCKETS; b++)
        if ((seen += lat[b]) >= want && want)
            return (uint64_t)lat_value(b);
    return 0;
}

static json_t *number(double v) { return json_real(v); }

json_t *live_servers_json(struct live *l, int64_t only_uid)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&l->lock);
    int64_t hi = iot_now_ns() / 1000000000 - LSV_LAG_S, lo = hi - LSV_RATE_S;
    for (size_t i = 0; i < l->n_servers; i++) {
        struct lserver *sv = &l->servers[i];
        if (!sv->seen)
            continue;
        uint32_t lat[LSV_BUCKETS] = {0};
        uint64_t ops = 0, rd = 0, wr = 0;
        uint32_t jobs[LSV_SECONDS * LSV_JOBS];
        uint64_t jbytes[LSV_SECONDS * LSV_JOBS];
        size_t nj = 0;
        for (size_t k = 0; k < LSV_SECONDS; k++) {
            const struct lsv_second *s = &sv->sec[k];
            if (!s->ops || s->sec < lo || s->sec >= hi)
                continue;
            ops += s->ops;
            rd += s->read_bytes;
            wr += s->write_bytes;
            for (unsigned b = 0; b < LSV_BUCKETS; b++)
                lat[b] += s->lat[b];
            for (size_t m = 0; m < LSV_JOBS && s->job[m]; m++) {
                size_t x;
                for (x = 0; x < nj && jobs[x] != s->job[m]; x++)
                    ;
                if (x == nj) {
                    jobs[nj] = s->job[m];
                    jbytes[nj++] = 0;
                }
                jbytes[x] += s->job_bytes[m];
            }
        }
        json_t *o = json_object();
        json_object_set_new(o, "server", iot_json_text(xp_string(&l->pipe.names, (uint32_t)i)));
        json_object_set_new(o, "ops", json_integer((json_int_t)sv->ops));
        json_object_set_new(o, "read_bytes", json_integer((json_int_t)sv->read_bytes));
        json_object_set_new(o, "write_bytes", json_integer((json_int_t)sv->write_bytes));
        json_object_set_new(o, "ops_per_s", number((double)ops / LSV_RATE_S));
        json_object_set_new(o, "read_bytes_per_s", number((double)rd / LSV_RATE_S));
        json_object_set_new(o, "write_bytes_per_s", number((double)wr / LSV_RATE_S));
        json_object_set_new(o, "p50_ns", ops ? json_integer((json_int_t)quantile(lat, ops, 0.5)) : json_null());
        json_object_set_new(o, "p99_ns", ops ? json_integer((json_int_t)quantile(lat, ops, 0.99)) : json_null());
        /* The three jobs with the most bytes on it now; a user restricted
         * to a uid sees only their own among them. */
        json_t *top = json_array();
        for (int t = 0; t < 3; t++) {
            size_t best = nj;
            for (size_t x = 0; x < nj; x++)
                if (jobs[x] && (only_uid == LIVE_ANY_UID || xp_job_owner(&l->d, jobs[x]) == only_uid) &&
                    (best == nj || jbytes[x] > jbytes[best]))
                    best = x;
            if (best == nj)
                break;
            json_t *j = json_object();
            json_object_set_new(j, "job", iot_json_text(xp_string(&l->d.jobs, jobs[best])));
            json_object_set_new(j, "bytes_per_s", number((double)jbytes[best] / LSV_RATE_S));
            json_array_append_new(top, j);
            jobs[best] = 0;
        }
        json_object_set_new(o, "top_jobs", top);
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&l->lock);
    json_t *doc = json_object();
    json_object_set_new(doc, "window_s", json_integer(LSV_RATE_S));
    json_object_set_new(doc, "servers", arr);
    return doc;
}

void live_servers_free(struct live *l)
{
    free(l->servers);
    l->servers = NULL;
    l->n_servers = 0;
}
