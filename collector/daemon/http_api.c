#include "http_api.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stats_report.h"

#define MAX_SEGMENTS 8 /* the longest path served has 6 */
#define MAX_ARGS 16    /* the API reads 3; any further ones are checked, not kept */
#define SSE_FINISHED_JOBS 50 /* an event stream's job list: the running ones and these */

/* A request target split and decoded: path segments, then query arguments.
 * The path is split before it is decoded, so that a job id with a '/' in
 * it (sent as %2F) stays one segment. */
struct target {
    char *buf; /* decoded copy of the target that the pointers below point into */
    const char *raw_path; /* as sent, for messages: raw_len bytes */
    int raw_len;
    char *seg[MAX_SEGMENTS];
    int n_seg; /* MAX_SEGMENTS + 1: more than that */
    char *key[MAX_ARGS], *val[MAX_ARGS];
    int n_args;
};

/* ---- replies ------------------------------------------------------------ */

void http_reply_free(struct http_reply *r)
{
    free(r->body);
    free(r->path);
    free(r->job);
    memset(r, 0, sizeof *r);
}

static int reply_text(struct http_reply *r, unsigned status, const char *type, char *body)
{
    if (!body)
        return -1;
    r->kind = HTTP_REPLY_BODY;
    r->status = status;
    r->type = type;
    free(r->body);
    r->body = body;
    return 0;
}

static int reply_json(struct http_reply *r, unsigned status, json_t *doc)
{
    if (!doc)
        return -1;
    char *body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return reply_text(r, status, "application/json", body);
}

int http_reply_error(struct http_reply *r, unsigned status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *o = json_object();
    if (!o)
        return -1;
    json_object_set_new(o, "error", iot_json_text(msg));
    json_object_set_new(o, "status", json_integer(status));
    return reply_json(r, status, o);
}

/* ---- the request target --------------------------------------------------- */

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes %XX in place ('+' too in a query, as forms send a space); -1 on
 * a broken escape or %00, which would cut a C string short. */
static int decode(char *s, int plus)
{
    char *out = s;
    for (; *s; s++) {
        if (*s == '%') {
            int hi = hex(s[1]), lo = hi < 0 ? -1 : hex(s[2]);
            if (lo < 0 || (hi == 0 && lo == 0))
                return -1;
            *out++ = (char)(hi << 4 | lo);
            s += 2;
        } else {
            *out++ = plus && *s == '+' ? ' ' : *s;
        }
    }
    *out = '\0';
    return 0;
}

/* Origin form ("/path?query"); the absolute form a client may send
 * ("http://host/path?query") is taken for its path and query. */
static const char *path_of(const char *target)
{
    if (target[0] == '/')
        return target;
    const char *scheme = strstr(target, "://");
    if (!scheme || strncasecmp(target, "http", 4) != 0 ||
        (scheme != target + 4 && (scheme != target + 5 || (target[4] | 0x20) != 's')))
        return NULL;
    const char *p = scheme + 3 + strcspn(scheme + 3, "/?");
    return *p == '/' ? p : *p == '?' ? p : "/";
}

/* 0, 1 for a bad target, -1 when out of memory. */
static int parse_target(const char *target, struct target *t)
{
    memset(t, 0, sizeof *t);
    const char *path = path_of(target);
    if (!path)
        return 1;
    t->raw_path = path;
    t->raw_len = (int)strcspn(path, "?");
    size_t n = strlen(path);
    t->buf = malloc(n + 2); /* + a '/' before a query that follows the authority */
    if (!t->buf)
        return -1;
    char *p = t->buf;
    if (*path == '?')
        *p++ = '/';
    memcpy(p, path, n + 1);
    char *query = strchr(t->buf, '?');
    if (query)
        *query++ = '\0';
    for (char *s = t->buf + 1, *next; s; s = next) {
        next = strchr(s, '/');
        if (next)
            *next++ = '\0';
        if (decode(s, 0) < 0)
            return 1;
        if (t->n_seg < MAX_SEGMENTS)
            t->seg[t->n_seg] = s;
        if (t->n_seg <= MAX_SEGMENTS)
            t->n_seg++;
    }
    for (char *s = query, *next; s && *s; s = next) {
        next = strchr(s, '&');
        if (next)
            *next++ = '\0';
        char *eq = strchr(s, '=');
        if (eq)
            *eq++ = '\0';
        if (decode(s, 1) < 0 || (eq && decode(eq, 1) < 0))
            return 1;
        if (t->n_args < MAX_ARGS) {
            t->key[t->n_args] = s;
            t->val[t->n_args++] = eq ? eq : s + strlen(s);
        }
    }
    return 0;
}

static int is(const struct target *t, int i, const char *s)
{
    return i < t->n_seg && i < MAX_SEGMENTS && strcmp(t->seg[i], s) == 0;
}

/* The first value of a query argument, or NULL. */
static const char *arg(const struct target *t, const char *key)
{
    for (int i = 0; i < t->n_args; i++)
        if (strcmp(t->key[i], key) == 0)
            return t->val[i];
    return NULL;
}

/* A number of seconds, or NAN when absent; -1 when malformed. */
static int seconds_arg(const struct target *t, const char *key, double *out)
{
    const char *v = arg(t, key);
    *out = NAN;
    if (!v)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!v[0] || *end || errno || !isfinite(x))
        return -1;
    *out = x;
    return 0;
}

/* A cursor (?since=N, a `cursor` of an earlier answer), 0 when absent; -1
 * when malformed. */
static int cursor_arg(const struct target *t, uint64_t *out)
{
    const char *v = arg(t, "since");
    *out = 0;
    if (!v)
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!isdigit((unsigned char)v[0]) || *end || errno)
        return -1;
    *out = x;
    return 0;
}

/* ---- who asks ---------------------------------------------------------------- */

static int64_t only_uid(const struct http_site *site)
{
    return site->restricted ? (int64_t)site->uid : LIVE_ANY_UID;
}

/* A job exists for this request: it is known, and the request may see all
 * jobs or this one is its user's.  Another user's job is answered exactly
 * as one that does not exist, so that its name is not confirmed. */
static int may_see(const struct http_site *site, const char *job)
{
    int known;
    int64_t owner = live_job_owner(site->live, job, &known);
    return known && (!site->restricted || owner == (int64_t)site->uid);
}

static json_t *viewer_json(const struct http_site *site)
{
    json_t *o = json_object();
    json_object_set_new(o, "user", site->user ? iot_json_text(site->user) : json_null());
    json_object_set_new(o, "uid", site->restricted ? json_integer(site->uid) : json_null());
    json_object_set_new(o, "sees",
                        json_string(site->restricted ? "the jobs of its uid"
                                    : site->user   ? "every job (admin)"
                                                   : "every job, without file paths: anonymous, "
                                                     "on loopback only (--http-users)"));
    json_object_set_new(o, "paths", json_boolean(!site->hide_paths));
    return o;
}

/* ---- routes ----------------------------------------------------------------- */

static const char *mime_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return "application/octet-stream";
    if (!strcmp(dot, ".html"))
        return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js"))
        return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css"))
        return "text/css; charset=utf-8";
    if (!strcmp(dot, ".png"))
        return "image/png";
    if (!strcmp(dot, ".svg"))
        return "image/svg+xml";
    return "application/octet-stream";
}

static int reply_file(struct http_reply *r, const char *dir, const char *name, const char *type)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    r->kind = HTTP_REPLY_FILE;
    r->status = 200;
    r->type = type;
    if (!(r->path = malloc(n)))
        return -1;
    snprintf(r->path, n, "%s%s%s", dir, *dir ? "/" : "", name);
    return 0;
}

/* Static files: plain names in the web root, nothing that could climb out. */
static int static_file(const struct http_site *site, const struct target *t,
                       struct http_reply *r)
{
    if (t->n_seg == 2 && is(t, 0, "vendor") && is(t, 1, "chart.js"))
        return reply_file(r, "", site->chart_js, "text/javascript; charset=utf-8");
    const char *name = t->n_seg == 1 ? t->seg[0] : NULL;
    if (name && !name[0])
        name = "index.html";
    for (const char *p = name; p && *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' ||
              *p == '_') || (p == name && *p == '.'))
            name = NULL;
    if (!name)
        return http_reply_error(r, 404, "no such page: %.*s", t->raw_len, t->raw_path);
    return reply_file(r, site->web_root, name, mime_of(name));
}

static int timeline(const struct http_site *site, const struct target *t, const char *job,
                    struct http_reply *r)
{
    double from, to;
    uint64_t since;
    int status;
    if (seconds_arg(t, "from", &from) < 0 || seconds_arg(t, "to", &to) < 0)
        return http_reply_error(r, 400, "from and to are seconds after the job's first event");
    if (!isnan(from) && !isnan(to) && from > to)
        return http_reply_error(r, 400, "from (%g) is after to (%g)", from, to);
    if (cursor_arg(t, &since) < 0)
        return http_reply_error(r, 400, "since is the cursor of an earlier answer");
    json_t *doc = live_job_timeline(site->live, job, from, to, since, &status);
    if (status == 404) {
        json_decref(doc);
        return http_reply_error(r, 404, "no job '%s'", job);
    }
    if (doc && site->hide_paths) {
        json_t *call;
        size_t i;
        json_array_foreach(json_object_get(doc, "calls"), i, call)
            json_object_set_new(call, "file", json_null());
    }
    if (doc)
        json_object_set_new(doc, "paths_hidden", json_boolean(site->hide_paths));
    return reply_json(r, 200, doc);
}

static int download(const struct http_site *site, const char *job, const char *format,
                    struct http_reply *r)
{
    static const char *const formats[] = {"jsonl", "stats", "slog2"};
    if (!live_job_known(site->live, job))
        return http_reply_error(r, 404, "no job '%s'", job);
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcmp(format, formats[i]) != 0)
            continue;
        /* JSON Lines and SLOG-2 name every file; the statistics none. */
        if (site->hide_paths && strcmp(format, "stats") != 0)
            return http_reply_error(r, 403,
                                    "the %s download has file paths, which unauthenticated "
                                    "requests do not get (--http-users, --http-show-paths)",
                                    format);
        r->kind = HTTP_REPLY_DOWNLOAD;
        r->status = 200;
        r->format = formats[i];
        return (r->job = strdup(job)) ? 0 : -1;
    }
    return http_reply_error(r, 404, "no download format '%s' (jsonl, stats, slog2)", format);
}

/* /api/v1/jobs/JOB/... : the segments after JOB are seg[first..]. */
static int job_route(const struct http_site *site, const struct target *t, const char *job,
                     int first, struct http_reply *r)
{
    int rest = t->n_seg - first, status = 200;
    if (!job[0] || rest < 1 || rest > 2)
        return http_reply_error(r, 404, "no such resource: %.*s", t->raw_len, t->raw_path);
    if (site->restricted && !may_see(site, job))
        return http_reply_error(r, 404, "no job '%s'", job);
    if (rest == 2) {
        if (!is(t, first, "download"))
            return http_reply_error(r, 404, "no such resource: %.*s", t->raw_len, t->raw_path);
        return download(site, job, t->seg[first + 1], r);
    }
    if (is(t, first, "stats")) {
        char *body = live_job_stats(site->live, job, &status);
        if (status == 404)
            return http_reply_error(r, 404, "no job '%s'", job);
        if (!body)
            return http_reply_error(r, 500, "cannot compute the statistics of job '%s'", job);
        return reply_text(r, 200, "application/json", body);
    }
    if (is(t, first, "timeline"))
        return timeline(site, t, job, r);
    if (is(t, first, "series")) {
        uint64_t since;
        if (cursor_arg(t, &since) < 0)
            return http_reply_error(r, 400, "since is the cursor of an earlier answer");
        json_t *doc = live_job_series(site->live, job, since, &status);
        return status == 404 ? http_reply_error(r, 404, "no job '%s'", job)
                             : reply_json(r, 200, doc);
    }
    return http_reply_error(r, 404, "no such resource: %.*s", t->raw_len, t->raw_path);
}

/* ?state=running|finished&limit=N */
static int jobs_list(const struct http_site *site, const struct target *t, struct http_reply *r)
{
    const char *state = arg(t, "state"), *limit = arg(t, "limit");
    unsigned states = LIVE_ALL;
    if (state && !strcmp(state, "running"))
        states = LIVE_RUNNING;
    else if (state && !strcmp(state, "finished"))
        states = LIVE_FINISHED;
    else if (state)
        return http_reply_error(r, 400, "state is running or finished");
    unsigned long long n = 0;
    if (limit) {
        char *end;
        errno = 0;
        n = strtoull(limit, &end, 10);
        if (!isdigit((unsigned char)limit[0]) || *end || errno || n == 0)
            return http_reply_error(r, 400, "limit is a number of jobs, at least 1");
    }
    return reply_json(r, 200, live_jobs_json(site->live, states, 0, (size_t)n, only_uid(site)));
}

/* A job not known yet is no error: a page opened on a job about to start
 * waits on the stream until the job's first batch is analysed. */
static int events(const struct http_site *site, const struct target *t, struct http_reply *r)
{
    const char *job = arg(t, "job");
    /* Another user's job is not waited for: for this request it never
     * comes. */
    int known = 0;
    int64_t owner = job && site->restricted ? live_job_owner(site->live, job, &known) : -1;
    if (known && owner != (int64_t)site->uid)
        return http_reply_error(r, 404, "no job '%s'", job);
    r->kind = HTTP_REPLY_EVENTS;
    r->status = 200;
    r->type = "text/event-stream";
    return job && !(r->job = strdup(job)) ? -1 : 0;
}

static int api(const struct http_site *site, const struct target *t, struct http_reply *r)
{
    if (!is(t, 1, "v1"))
        return http_reply_error(r, 404, "unknown API version (this is /api/v1/)");
    struct live *l = site->live;
    if (t->n_seg == 3) {
        if (is(t, 2, "jobs"))
            return jobs_list(site, t, r);
        if (is(t, 2, "nodes"))
            return reply_json(r, 200, live_nodes_json(l));
        if (is(t, 2, "servers"))
            return reply_json(r, 200, live_servers_json(l, only_uid(site)));
        if (is(t, 2, "status")) {
            json_t *st = live_status_json(l);
            if (st)
                json_object_set_new(st, "viewer", viewer_json(site));
            return reply_json(r, 200, st);
        }
        if (is(t, 2, "events"))
            return events(site, t, r);
    }
    if (t->n_seg > 4 && t->n_seg <= MAX_SEGMENTS && is(t, 2, "jobs"))
        return job_route(site, t, t->seg[3], 4, r);
    return http_reply_error(r, 404, "no such resource: %.*s", t->raw_len, t->raw_path);
}

int http_route(const struct http_site *site, const char *method, const char *target,
               struct http_reply *r)
{
    memset(r, 0, sizeof *r);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return http_reply_error(r, 405, "only GET is served");
    struct target t;
    int rc = parse_target(target, &t);
    if (rc > 0)
        rc = http_reply_error(r, 400, "bad request target (a broken %%-escape or %%00?)");
    else if (rc == 0 && t.n_seg == 1 && is(&t, 0, "metrics"))
        rc = reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8",
                        live_metrics(site->live, only_uid(site)));
    else if (rc == 0 && is(&t, 0, "api"))
        rc = api(site, &t, r);
    else if (rc == 0)
        rc = static_file(site, &t, r);
    free(t.buf);
    return rc;
}

/* ---- Server-Sent Events ------------------------------------------------------ */

char *http_events_message(const struct http_site *site, const char *job,
                          uint64_t *series_cursor)
{
    struct live *l = site->live;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_t *st = live_status_json(l);
    if (st)
        json_object_set_new(st, "viewer", viewer_json(site));
    json_object_set_new(o, "status", st);
    json_t *jobs = live_jobs_json(l, LIVE_ALL, SSE_FINISHED_JOBS, 0, only_uid(site));
    /* A job that is another user's is no job of this stream's (it may have
     * started after the stream did). */
    if (job && site->restricted && !may_see(site, job))
        job = NULL;
    json_object_set(o, "jobs", json_object_get(jobs, "jobs"));
    json_decref(jobs);
    json_t *servers = live_servers_json(l, only_uid(site));
    if (servers) {
        json_object_set(o, "servers", json_object_get(servers, "servers"));
        json_decref(servers);
    }
    json_t *nodes = live_nodes_json(l);
    if (nodes) {
        json_object_set(o, "nodes", json_object_get(nodes, "nodes"));
        json_decref(nodes);
    }
    if (job) {
        int status;
        json_object_set_new(o, "job", live_job_json(l, job));
        /* Each message has the rows that changed since the last one of the
         * stream, not the whole series again. */
        json_t *series = live_job_series(l, job, *series_cursor, &status);
        if (series) {
            *series_cursor = (uint64_t)json_integer_value(json_object_get(series, "cursor"));
            json_object_set_new(o, "series", series);
        }
    }
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!body)
        return NULL;
    size_t n = strlen(body) + 16;
    char *msg = malloc(n);
    if (msg)
        snprintf(msg, n, "data: %s\n\n", body);
    free(body);
    return msg;
}
