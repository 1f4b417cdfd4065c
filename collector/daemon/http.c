#include "http.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <ctype.h>
#include <pwd.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "download.h"
#include "http_api.h"
#include "http_guard.h"
#include "log.h"
#include "timeutil.h"

#define MAX_USERS 64
#define SSE_INTERVAL_MS 1000
/* The live state changes with every batch read: a message per change would
 * send a busy page more than it can draw, and it would fall further and
 * further behind the stream.  Changes within this long are one message. */
#define SSE_MIN_GAP_MS 500
#define CONNECTION_TIMEOUT_S 60
/* What a client beyond the download bounds is told to wait, seconds. */
#define DOWNLOAD_RETRY_AFTER_S "10"

struct user {
    char name[64];
    char hash[256];
    int admin;    /* sees every job */
    uint32_t uid; /* else the jobs of this uid alone */
};

struct http {
    struct http_config cfg;
    struct live *live;
    struct http_site site;
    struct MHD_Daemon *mhd;
    struct user users[MAX_USERS];
    int n_users;
    char *tls_cert, *tls_key;
    int fd; /* the listening socket, bound by http_open */
    struct downloads *downloads;
    struct http_guard *guard;
};

/* ---- replies -------------------------------------------------------------- */

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r,
                             const char *type)
{
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Takes the body. */
static enum MHD_Result send_body(struct MHD_Connection *c, struct http_reply *r)
{
    char *body = r->body;
    r->body = NULL;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        free(body);
    return queue(c, r->status, resp, r->type);
}

/* A JSON error answer; NULL when out of memory. */
static struct MHD_Response *error_response(unsigned status, const char *msg)
{
    struct http_reply r = {0};
    if (http_reply_error(&r, status, "%s", msg) < 0)
        return NULL;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(r.body), r.body, MHD_RESPMEM_MUST_FREE);
    if (resp)
        r.body = NULL;
    http_reply_free(&r);
    return resp;
}

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
    return queue(c, status, error_response(status, msg), "application/json");
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

/* ---- downloads --------------------------------------------------------------- */

/* The client's address as text, "?" when unknown. */
static void client_address(struct MHD_Connection *c, char *out, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    snprintf(out, len, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)len);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)len);
}

/* Who a download counts against: the HTTP user where the request is
 * authenticated, else the client's address (on loopback every local user
 * shares 127.0.0.0/8, so --http-downloads is what bounds them). */
static void client_key(struct MHD_Connection *c, const char *user, char *out, size_t len)
{
    char addr[INET6_ADDRSTRLEN];
    client_address(c, addr, sizeof addr);
    if (user)
        snprintf(out, len, "user %s", user);
    else
        snprintf(out, len, "address %s", addr);
}

static int client_socket(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* The job is known and the format one of jsonl, stats, slog2 (http_route). */
static enum MHD_Result download(struct http *h, struct MHD_Connection *c, const char *user,
                                const char *job, const char *format)
{
    char *jsonl[] = {(char *)h->cfg.export_tool, "--store", (char *)h->cfg.store, "--job",
                     (char *)job, "--jsonl", "-", NULL};
    char *stats[] = {(char *)h->cfg.export_tool, "--store", (char *)h->cfg.store, "--job",
                     (char *)job, "--stats", NULL};
    char path[] = "/tmp/iotrace-download-XXXXXX";
    char *slog2[] = {(char *)h->cfg.export_tool, "--store", (char *)h->cfg.store, "--job",
                     (char *)job, "--slog2", path, NULL};
    char disposition[300], key[128];
    int is_slog2 = strcmp(format, "slog2") == 0;
    snprintf(disposition, sizeof disposition, "attachment; filename=\"iotrace-job.%s\"",
             is_slog2 ? "slog2" : strcmp(format, "jsonl") == 0 ? "jsonl" : "txt");
    client_key(c, user, key, sizeof key);
    const char *why;
    struct download *dl = download_begin(h->downloads, key, &why);
    if (!dl) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: try again later", why);
        struct MHD_Response *busy = error_response(MHD_HTTP_SERVICE_UNAVAILABLE, msg);
        if (busy)
            MHD_add_response_header(busy, MHD_HTTP_HEADER_RETRY_AFTER, DOWNLOAD_RETRY_AFTER_S);
        return queue(c, MHD_HTTP_SERVICE_UNAVAILABLE, busy, "application/json");
    }
    struct MHD_Response *r = NULL;
    if (is_slog2) {
        /* The SLOG-2 writer seeks, so it writes a file first; the child's
         * slot is given back once it has. */
        int fd = mkstemp(path);
        struct stat st;
        if (fd < 0) {
            download_end(dl);
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot create a file: %s",
                              strerror(errno));
        }
        close(fd);
        int rc = download_spawn(dl, slog2, client_socket(c));
        rc = rc < 0 ? -1 : download_wait(dl);
        download_end(dl);
        fd = rc == 1 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
        unlink(path);
        if (rc == 1) /* the client left */
            return MHD_NO;
        /* A child that failed (out of --http-download-memory, say) may have
         * left half a file: never served as a whole one. */
        if (rc != 0 || fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
            if (fd >= 0)
                close(fd);
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "iotrace-export --slog2 failed for job '%s'", job);
        }
        r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
        if (!r)
            close(fd);
    } else {
        if (download_spawn(dl, strcmp(format, "jsonl") == 0 ? jsonl : stats,
                           client_socket(c)) < 0) {
            download_end(dl);
            return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "fork: %s", strerror(errno));
        }
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, download_read, dl,
                                              download_end);
        if (!r)
            download_end(dl);
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
    struct http_site site; /* as the request that opened it was answered */
    char *job;
    uint64_t seq;
    uint64_t series_cursor; /* what this stream has sent of the job's series */
    int64_t sent_ns;        /* CLOCK_MONOTONIC of the last message */
    char *buf;
    size_t len, pos;
    int first;
};

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct sse *s = cls;
    if (s->pos == s->len) {
        free(s->buf);
        s->buf = NULL;
        if (!s->first) {
            int64_t gap = SSE_MIN_GAP_MS * 1000000ll - (iot_mono_ns() - s->sent_ns);
            if (gap > 0) {
                struct timespec nap = {gap / 1000000000, gap % 1000000000};
                nanosleep(&nap, NULL);
            }
            s->seq = live_wait_update(s->live, s->seq, SSE_INTERVAL_MS - SSE_MIN_GAP_MS);
        }
        s->first = 0;
        s->sent_ns = iot_mono_ns();
        if (!(s->buf = http_events_message(&s->site, s->job, &s->series_cursor)))
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

/* Takes the job. */
static enum MHD_Result events(struct http *h, struct MHD_Connection *c, struct http_reply *r,
                              const struct http_site *site)
{
    struct sse *s = calloc(1, sizeof *s);
    if (!s)
        return MHD_NO;
    s->job = r->job;
    r->job = NULL;
    s->live = h->live;
    s->site = *site;
    s->first = 1;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, sse_read, s, sse_free);
    if (!resp) {
        sse_free(s);
        return MHD_NO;
    }
    return queue(c, MHD_HTTP_OK, resp, r->type);
}

/* ---- requests ------------------------------------------------------------------ */

static enum MHD_Result send_reply(struct http *h, struct MHD_Connection *c, const char *user,
                                  struct http_reply *r, const struct http_site *site)
{
    switch (r->kind) {
    case HTTP_REPLY_FILE:
        return send_file(c, r->path, r->type);
    case HTTP_REPLY_DOWNLOAD:
        return download(h, c, user, r->job, r->format);
    case HTTP_REPLY_EVENTS:
        return events(h, c, r, site);
    case HTTP_REPLY_BODY:
        break;
    }
    return send_body(c, r);
}

/* Whether the request may be served; *user is the HTTP user it
 * authenticated as (an entry of the password file), or NULL without one. */
static int authorised(struct http *h, struct MHD_Connection *c, const struct user **user_out)
{
    *user_out = NULL;
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
        if (ok)
            *user_out = &h->users[i];
    }
    MHD_free(user);
    MHD_free(pass);
    return ok;
}

/* The request target as the client sent it: libmicrohttpd hands the
 * request handler a decoded path, in which a job id's %2F is a '/' like
 * any other, so the API takes the target from here and decodes it itself
 * (http_route).  Freed when the request completes. */
struct request {
    int started;
    char target[];
};

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    size_t n = strlen(uri) + 1;
    struct request *q = malloc(sizeof *q + n);
    if (q) {
        q->started = 0;
        memcpy(q->target, uri, n);
    }
    return q;
}

static struct guarded *guarded_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    struct http *h = cls;
    free(*state);
    *state = NULL;
    /* Kept alive: the time to the next complete request counts from here. */
    struct guarded *g = guarded_of(c);
    if (g && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        http_guard_waiting(h->guard, g);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        char addr[INET6_ADDRSTRLEN];
        client_address(c, addr, sizeof addr);
        *socket_context = http_guard_open(h->guard, client_socket(c), addr);
    } else if (*socket_context) {
        http_guard_close(h->guard, *socket_context);
        *socket_context = NULL;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **state)
{
    (void)url;
    (void)version;
    (void)upload_data;
    struct http *h = cls;
    struct request *q = *state;
    if (!q) /* out of memory when the request line came */
        return MHD_NO;
    if (!q->started) { /* headers only so far: wait for the (empty) body */
        q->started = 1;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a read-only API: bodies are ignored */
        return MHD_YES;
    }
    /* The whole request is in, body included: a body sent a byte a second
     * counts against the request timeout like a header. */
    struct guarded *g = guarded_of(c);
    if (g)
        http_guard_request(h->guard, g);
    const struct user *user;
    if (!authorised(h, c, &user)) {
        const char *page = "{\"error\":\"authentication required\",\"status\":401}";
        struct MHD_Response *r = MHD_create_response_from_buffer(
            strlen(page), (void *)page, MHD_RESPMEM_PERSISTENT);
        enum MHD_Result rc = MHD_queue_basic_auth_fail_response(c, "iotrace", r);
        MHD_destroy_response(r);
        return rc;
    }
    /* The site as this user sees it (http_api.h, "Who asks"). */
    struct http_site site = h->site;
    if (user) {
        site.user = user->name;
        site.restricted = !user->admin;
        site.uid = user->uid;
    }
    struct http_reply r;
    if (http_route(&site, method, q->target, &r) < 0) {
        http_reply_free(&r);
        return MHD_NO;
    }
    enum MHD_Result rc = send_reply(h, c, user ? user->name : NULL, &r, &site);
    http_reply_free(&r);
    return rc;
}

/* ---- start and stop --------------------------------------------------------------- */

/* The third field: "admin" (every job), a uid, or, when there is none, the
 * uid of the local account of the same name: an HTTP user sees the jobs of
 * one uid unless the file makes it an admin. */
static int user_role(struct user *u, const char *role)
{
    if (role && !strcmp(role, "admin")) {
        u->admin = 1;
        return 0;
    }
    if (role && *role) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(role, &end, 10);
        if (!isdigit((unsigned char)role[0]) || *end || errno || v > UINT32_MAX - 1)
            return -1;
        u->uid = (uint32_t)v;
        return 0;
    }
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwnam_r(u->name, &pw, buf, sizeof buf, &found) != 0 || !found)
        return -1;
    u->uid = (uint32_t)found->pw_uid;
    return 0;
}

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
        char *role = colon ? strchr(colon + 1, ':') : NULL;
        if (role)
            *role++ = '\0';
        if (!colon || colon == line || !colon[1] || colon[1] != '$' || h->n_users == MAX_USERS ||
            (size_t)(colon - line) >= sizeof h->users[0].name ||
            strlen(colon + 1) >= sizeof h->users[0].hash) {
            snprintf(err, errlen, "%s:%d: expected USER:HASH[:UID|admin], HASH from crypt(3) (for "
                     "example mkpasswd -m yescrypt), at most %d users", h->cfg.users_file, n,
                     MAX_USERS);
            rc = -1;
            break;
        }
        *colon = '\0';
        struct user *u = &h->users[h->n_users];
        memcpy(u->name, line, (size_t)(colon - line) + 1);
        memcpy(u->hash, colon + 1, strlen(colon + 1) + 1);
        if (user_role(u, role) < 0) {
            snprintf(err, errlen, "%s:%d: user '%s' %s", h->cfg.users_file, n, u->name,
                     role && *role ? "has a role that is neither a uid nor 'admin'"
                                   : "has no local account: give the uid whose jobs it may see, "
                                     "or admin, as a third field (USER:HASH:UID)");
            rc = -1;
            break;
        }
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

struct http *http_open(const struct http_config *cfg, char *err, size_t errlen)
{
    struct http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg = *cfg;
    h->fd = -1;
    if (!(h->downloads = downloads_new(cfg->max_downloads, cfg->max_downloads_per_client,
                                       cfg->download_memory))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    struct sockaddr_storage ss;
    int family = parse_listen(cfg->listen, &ss, err, errlen);
    if (family < 0 || (cfg->users_file && load_users(h, err, errlen) < 0))
        goto fail;
    if (cfg->tls_cert && (!(h->tls_cert = slurp(cfg->tls_cert, err, errlen)) ||
                          !(h->tls_key = slurp(cfg->tls_key, err, errlen))))
        goto fail;
    /* Bound here, not by libmicrohttpd once the analysis runs: an address in
     * use must stop the collector before it has made or changed its store. */
    int one = 1;
    socklen_t alen = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    h->fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (h->fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(h->fd, (struct sockaddr *)&ss, alen) < 0 || listen(h->fd, 64) < 0) {
        snprintf(err, errlen, "cannot serve HTTP on %s: %s", cfg->listen, strerror(errno));
        goto fail;
    }
    return h;
fail:
    http_stop(h);
    return NULL;
}

int http_serve(struct http *h, struct live *l, char *err, size_t errlen)
{
    h->live = l;
    /* Only a password file tells requests apart by user; until then no
     * request sees file paths unless the host's users may see each other's. */
    h->site = (struct http_site){.live = l, .web_root = h->cfg.web_root, .chart_js = h->cfg.chart_js,
                                 .hide_paths = !h->n_users && !h->cfg.show_paths};
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | (h->tls_cert ? MHD_USE_TLS : 0);
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    /* Half of the connections for clients still sending their request:
     * the others stay for those that sent theirs. */
    if (!(h->guard = http_guard_start(h->cfg.max_clients / 2 > 0 ? h->cfg.max_clients / 2 : 1,
                                      (int64_t)h->cfg.request_timeout_s * 1000000000))) {
        snprintf(err, errlen, "cannot start a thread");
        return -1;
    }
    h->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, h->fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->cfg.max_clients,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(h->cfg.max_clients / 2 + 1),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
        MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_ARRAY, h->tls_cert ? tls : tls + 2, MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "cannot serve HTTP on %s (a bad TLS certificate or key?)",
                 h->cfg.listen);
        return -1;
    }
    return 0;
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    downloads_stopping(h->downloads); /* their readers give up, so the threads end */
    if (h->mhd)
        MHD_stop_daemon(h->mhd); /* closes the listening socket too */
    else if (h->fd >= 0)
        close(h->fd);
    http_guard_stop(h->guard); /* after libmicrohttpd: every connection is closed */
    downloads_free(h->downloads);
    free(h->tls_cert);
    free(h->tls_key);
    free(h);
}
