#include "http.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "stats_report.h"

#define MAX_USERS 64
#define SSE_INTERVAL_MS 1000
#define SSE_FINISHED_JOBS 50 /* an event stream's job list: the running ones and these */
#define CONNECTION_TIMEOUT_S 60

struct user {
    char name[64];
    char hash[256];
};

struct http {
    struct http_config cfg;
    struct live *live;
    struct MHD_Daemon *mhd;
    struct user users[MAX_USERS];
    int n_users;
    char *tls_cert, *tls_key;
};

/* ---- responses ----------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *doc)
{
    if (!doc)
        return MHD_NO;
    char *body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!body)
        return MHD_NO;
    return send_text(c, status, "application/json", body);
}

/* Errors are JSON too: {"error": "...", "status": N}. */
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt,
                                  ...) __attribute__((format(printf, 3, 4)));

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt,
                                  ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *o = json_object();
    json_object_set_new(o, "error", iot_json_text(msg));
    json_object_set_new(o, "status", json_integer(status));
    return send_json(c, status, o);
}

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

static enum MHD_Result send_file(struct MHD_Connection *c, const char *path, const char *type)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return send_error(c, MHD_HTTP_NOT_FOUND, "no such file");
    }
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* Static files: plain names in the web root, nothing that could climb out. */
static enum MHD_Result serve_static(struct http *h, struct MHD_Connection *c, const char *url)
{
    const char *name = strcmp(url, "/") == 0 ? "index.html" : url + 1;
    if (strcmp(url, "/vendor/chart.js") == 0)
        return send_file(c, h->cfg.chart_js, "text/javascript; charset=utf-8");
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' ||
              *p == '_') || (p == name && *p == '.'))
            return send_error(c, MHD_HTTP_NOT_FOUND, "no such page: %s", url);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", h->cfg.web_root, name);
    return send_file(c, path, mime_of(name));
}

/* ---- query parameters ------------------------------------------------------ */

/* A number of seconds, or NAN when absent; -1 when malformed. */
static int seconds_arg(struct MHD_Connection *c, const char *key, double *out)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
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

/* ---- downloads --------------------------------------------------------------- */

/* iotrace-export runs as a child, so a download costs the daemon nothing
 * but a pipe; a client that goes away closes the pipe and the child ends
 * on EPIPE.  Unless waited for, it is a grandchild of ours, reaped by init. */
static int spawn_export(struct http *h, char *const argv[], int out_fd, int wait)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (!wait && fork() != 0)
            _exit(0);
        dup2(out_fd, STDOUT_FILENO);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO);
        execv(h->cfg.export_tool, argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

static enum MHD_Result download(struct http *h, struct MHD_Connection *c, const char *job,
                                const char *format)
{
    char *jsonl[] = {(char *)h->cfg.export_tool, "--store", (char *)h->cfg.store, "--job",
                     (char *)job, "--jsonl", "-", NULL};
    char *stats[] = {(char *)h->cfg.export_tool, "--store", (char *)h->cfg.store, "--job",
                     (char *)job, "--stats", NULL};
    char path[] = "/tmp/iotrace-download-XXXXXX";
    char *slog2[] = {(char *)h->cfg.export_tool, "--store", (char *)h->cfg.store, "--job",
                     (char *)job, "--slog2", path, NULL};
    char disposition[300];
    int is_slog2 = strcmp(format, "slog2") == 0;
    if (!is_slog2 && strcmp(format, "jsonl") && strcmp(format, "stats"))
        return send_error(c, MHD_HTTP_NOT_FOUND, "no download format '%s' (jsonl, stats, slog2)",
                          format);
    snprintf(disposition, sizeof disposition, "attachment; filename=\"iotrace-job.%s\"",
             is_slog2 ? "slog2" : strcmp(format, "jsonl") == 0 ? "jsonl" : "txt");
    struct MHD_Response *r = NULL;
    if (is_slog2) {
        /* The SLOG-2 writer seeks, so it writes a file first. */
        int fd = mkstemp(path);
        struct stat st;
        if (fd < 0)
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot create a file: %s",
                              strerror(errno));
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        spawn_export(h, slog2, devnull, 1);
        if (devnull >= 0)
            close(devnull);
        close(fd);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        unlink(path);
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
            if (fd >= 0)
                close(fd);
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "iotrace-export --slog2 wrote nothing for job '%s'", job);
        }
        r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
        if (!r)
            close(fd);
    } else {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "pipe: %s", strerror(errno));
        int rc = spawn_export(h, strcmp(format, "jsonl") == 0 ? jsonl : stats, p[1], 0);
        close(p[1]);
        if (rc < 0) {
            close(p[0]);
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "fork: %s", strerror(errno));
        }
        r = MHD_create_response_from_pipe(p[0]);
        if (!r)
            close(p[0]);
    }
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            is_slog2 ? "application/octet-stream"
                            : strcmp(format, "jsonl") == 0 ? "application/x-ndjson"
                                                           : "text/plain; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disposition);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* ---- Server-Sent Events -------------------------------------------------------- */

struct sse {
    struct live *live;
    char *job;
    uint64_t seq;
    char *buf;
    size_t len, pos;
    int first;
};

static char *sse_message(struct sse *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "status", live_status_json(s->live));
    json_t *jobs = live_jobs_json(s->live, SSE_FINISHED_JOBS);
    json_object_set(o, "jobs", json_object_get(jobs, "jobs"));
    json_decref(jobs);
    json_t *nodes = live_nodes_json(s->live);
    if (nodes) {
        json_object_set(o, "nodes", json_object_get(nodes, "nodes"));
        json_decref(nodes);
    }
    if (s->job) {
        int status;
        json_t *series = live_job_series(s->live, s->job, &status);
        if (series)
            json_object_set_new(o, "series", series);
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

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct sse *s = cls;
    if (s->pos == s->len) {
        free(s->buf);
        s->buf = NULL;
        if (!s->first)
            s->seq = live_wait_update(s->live, s->seq, SSE_INTERVAL_MS);
        s->first = 0;
        if (!(s->buf = sse_message(s)))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        s->len = strlen(s->buf);
        s->pos = 0;
    }
    size_t n = s->len - s->pos < max ? s->len - s->pos : max;
    memcpy(out, s->buf + s->pos, n);
    s->pos += n;
    return (ssize_t)n;
}

static void sse_free(void *cls)
{
    struct sse *s = cls;
    free(s->buf);
    free(s->job);
    free(s);
}

static enum MHD_Result events(struct http *h, struct MHD_Connection *c)
{
    const char *job = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "job");
    if (job && !live_job_known(h->live, job))
        return send_error(c, MHD_HTTP_NOT_FOUND, "no job '%s'", job);
    struct sse *s = calloc(1, sizeof *s);
    if (!s || (job && !(s->job = strdup(job)))) {
        free(s);
        return MHD_NO;
    }
    s->live = h->live;
    s->first = 1;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, sse_read, s, sse_free);
    if (!r) {
        sse_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* ---- routing ------------------------------------------------------------------ */

static enum MHD_Result job_route(struct http *h, struct MHD_Connection *c, const char *rest)
{
    char job[512];
    const char *slash = strchr(rest, '/');
    if (!slash || (size_t)(slash - rest) >= sizeof job || slash == rest)
        return send_error(c, MHD_HTTP_NOT_FOUND, "no such resource");
    memcpy(job, rest, (size_t)(slash - rest));
    job[slash - rest] = '\0';
    const char *what = slash + 1;
    int status = 200;
    if (strcmp(what, "stats") == 0) {
        char *body = live_job_stats(h->live, job, &status);
        if (status == 404)
            return send_error(c, MHD_HTTP_NOT_FOUND, "no job '%s'", job);
        if (!body)
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "cannot compute the statistics of job '%s'", job);
        return send_text(c, MHD_HTTP_OK, "application/json", body);
    }
    if (strcmp(what, "timeline") == 0) {
        double from, to;
        if (seconds_arg(c, "from", &from) < 0 || seconds_arg(c, "to", &to) < 0)
            return send_error(c, MHD_HTTP_BAD_REQUEST,
                              "from and to are seconds after the job's first event");
        if (!isnan(from) && !isnan(to) && from > to)
            return send_error(c, MHD_HTTP_BAD_REQUEST, "from (%g) is after to (%g)", from, to);
        json_t *doc = live_job_timeline(h->live, job, from, to, &status);
        return status == 404 ? send_error(c, MHD_HTTP_NOT_FOUND, "no job '%s'", job)
                             : send_json(c, MHD_HTTP_OK, doc);
    }
    if (strcmp(what, "series") == 0) {
        json_t *doc = live_job_series(h->live, job, &status);
        return status == 404 ? send_error(c, MHD_HTTP_NOT_FOUND, "no job '%s'", job)
                             : send_json(c, MHD_HTTP_OK, doc);
    }
    if (strncmp(what, "download/", 9) == 0) {
        if (!live_job_known(h->live, job))
            return send_error(c, MHD_HTTP_NOT_FOUND, "no job '%s'", job);
        return download(h, c, job, what + 9);
    }
    return send_error(c, MHD_HTTP_NOT_FOUND, "no such resource: %s", what);
}

static enum MHD_Result route(struct http *h, struct MHD_Connection *c, const char *url)
{
    if (strcmp(url, "/metrics") == 0) {
        char *body = live_metrics(h->live);
        return body ? send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body)
                    : MHD_NO;
    }
    if (strncmp(url, "/api/", 5) != 0)
        return serve_static(h, c, url);
    if (strncmp(url, "/api/v1/", 8) != 0)
        return send_error(c, MHD_HTTP_NOT_FOUND, "unknown API version (this is /api/v1/)");
    const char *p = url + 8;
    if (strcmp(p, "jobs") == 0)
        return send_json(c, MHD_HTTP_OK, live_jobs_json(h->live, 0));
    if (strcmp(p, "nodes") == 0)
        return send_json(c, MHD_HTTP_OK, live_nodes_json(h->live));
    if (strcmp(p, "status") == 0)
        return send_json(c, MHD_HTTP_OK, live_status_json(h->live));
    if (strcmp(p, "events") == 0)
        return events(h, c);
    if (strncmp(p, "jobs/", 5) == 0)
        return job_route(h, c, p + 5);
    return send_error(c, MHD_HTTP_NOT_FOUND, "no such resource: %s", url);
}

static int authorised(struct http *h, struct MHD_Connection *c)
{
    if (!h->n_users)
        return 1;
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(c, &pass);
    int ok = 0;
    for (int i = 0; user && pass && i < h->n_users && !ok; i++) {
        if (strcmp(user, h->users[i].name) != 0)
            continue;
        struct crypt_data cd;
        memset(&cd, 0, sizeof cd);
        const char *out = crypt_r(pass, h->users[i].hash, &cd);
        ok = out && out[0] != '*' && strcmp(out, h->users[i].hash) == 0;
    }
    MHD_free(user);
    MHD_free(pass);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload_data;
    struct http *h = cls;
    static int first_call;
    if (*state == NULL) { /* headers only so far: wait for the (empty) body */
        *state = &first_call;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a read-only API: bodies are ignored */
        return MHD_YES;
    }
    if (!authorised(h, c)) {
        const char *page = "{\"error\":\"authentication required\",\"status\":401}";
        struct MHD_Response *r = MHD_create_response_from_buffer(
            strlen(page), (void *)page, MHD_RESPMEM_PERSISTENT);
        enum MHD_Result rc = MHD_queue_basic_auth_fail_response(c, "iotrace", r);
        MHD_destroy_response(r);
        return rc;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET is served");
    return route(h, c, url);
}

/* ---- start and stop --------------------------------------------------------------- */

static int load_users(struct http *h, char *err, size_t errlen)
{
    FILE *f = fopen(h->cfg.users_file, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", h->cfg.users_file, strerror(errno));
        return -1;
    }
    char line[512];
    int n = 0, rc = 0;
    while (fgets(line, sizeof line, f) && rc == 0) {
        n++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        char *colon = strchr(line, ':');
        if (!colon || colon == line || !colon[1] || colon[1] != '$' || h->n_users == MAX_USERS ||
            (size_t)(colon - line) >= sizeof h->users[0].name ||
            strlen(colon + 1) >= sizeof h->users[0].hash) {
            snprintf(err, errlen, "%s:%d: expected USER:HASH, HASH from crypt(3) (for example "
                     "mkpasswd -m yescrypt), at most %d users", h->cfg.users_file, n, MAX_USERS);
            rc = -1;
            break;
        }
        *colon = '\0';
        memcpy(h->users[h->n_users].name, line, (size_t)(colon - line) + 1);
        memcpy(h->users[h->n_users].hash, colon + 1, strlen(colon + 1) + 1);
        h->n_users++;
    }
    fclose(f);
    if (rc == 0 && h->n_users == 0) {
        snprintf(err, errlen, "%s names no user", h->cfg.users_file);
        rc = -1;
    }
    return rc;
}

static char *slurp(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0;
    if (f) {
        buf = calloc(1, 1 << 20);
        len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
    }
    if (!buf || !len) {
        free(buf);
        snprintf(err, errlen, "cannot read %s: %s", path, f ? "empty" : strerror(errno));
        return NULL;
    }
    return buf;
}

/* ADDR:PORT, with [v6]:PORT for IPv6. */
static int parse_listen(const char *s, struct sockaddr_storage *ss, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1] || (size_t)(colon - s) >= sizeof host) {
        snprintf(err, errlen, "--http wants ADDR:PORT or off, got '%s'", s);
        return -1;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) {
        snprintf(err, errlen, "--http: bad port in '%s'", s);
        return -1;
    }
    memset(ss, 0, sizeof *ss);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        host[strlen(host) - 1] = '\0';
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1)
            return AF_INET6;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) == 1)
            return AF_INET;
    }
    snprintf(err, errlen, "--http: '%s' is not a numeric address", host);
    return -1;
}

int http_is_loopback(const char *listen)
{
    struct sockaddr_storage ss;
    char err[256];
    int family = parse_listen(listen, &ss, err, sizeof err);
    if (family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
    return 0;
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    iot_debug("http: %s", msg);
}

struct http *http_start(const struct http_config *cfg, struct live *l, char *err, size_t errlen)
{
    struct http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg = *cfg;
    h->live = l;
    struct sockaddr_storage ss;
    int family = parse_listen(cfg->listen, &ss, err, errlen);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG;
    if (family < 0 || (cfg->users_file && load_users(h, err, errlen) < 0))
        goto fail;
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (cfg->tls_cert) {
        if (!(h->tls_cert = slurp(cfg->tls_cert, err, errlen)) ||
            !(h->tls_key = slurp(cfg->tls_key, err, errlen)))
            goto fail;
        flags |= MHD_USE_TLS;
    }
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    h->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_clients,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(cfg->max_clients / 2 + 1),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
        MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
        MHD_OPTION_ARRAY, cfg->tls_cert ? tls : tls + 2, MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "cannot serve HTTP on %s (address in use, or a bad TLS key?)",
                 cfg->listen);
        goto fail;
    }
    return h;
fail:
    free(h->tls_cert);
    free(h->tls_key);
    free(h);
    return NULL;
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->mhd);
    free(h->tls_cert);
    free(h->tls_key);
    free(h);
}
