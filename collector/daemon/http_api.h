/* The HTTP API without a server: a request's method and target, exactly as
 * the client sent them (percent-encoded, query string included), parsed,
 * routed and answered from the live state (docs/http-api.md).  The daemon's
 * server (http.c) calls http_route() for every request it has let in, and
 * so does the fuzzer (tests/fuzz/fuzz_http.c): what is fuzzed is what is
 * served.  Answers that need the server (a file, a download, an event
 * stream) come back as what to do, checked and with their arguments. */
#ifndef IOT_DAEMON_HTTP_API_H
#define IOT_DAEMON_HTTP_API_H

#include <stdint.h>

#include "live.h"

struct http_site {
    struct live *live;
    const char *web_root; /* the dashboard's files */
    const char *chart_js; /* served as /vendor/chart.js */
    /* The requests cannot be told apart by user (loopback without
     * --http-users): no file paths, which would show any local user the
     * paths of every other user's jobs (docs/http-api.md, Access). */
    int hide_paths;
    /* Who asks (http.c sets it per request): with `restricted`, only the
     * jobs of `uid` exist for the request (another's is a 404, as one that
     * does not exist); without, every job (an admin, or anonymous on
     * loopback).  `user` is the HTTP user, NULL for anonymous. */
    int restricted;
    uint32_t uid;
    const char *user;
};

enum http_reply_kind {
    HTTP_REPLY_BODY,     /* `body`, of type `type` */
    HTTP_REPLY_FILE,     /* the file `path`, of type `type` (a 404 if it cannot be read) */
    HTTP_REPLY_DOWNLOAD, /* `job` in `format` (jsonl, stats or slog2), by iotrace-export */
    HTTP_REPLY_EVENTS,   /* Server-Sent Events, with `job`'s series unless it is NULL (the
                          * job may not be known yet) */
};

struct http_reply {
    enum http_reply_kind kind;
    unsigned status;
    const char *type;
    char *body, *path, *job; /* malloc'd */
    const char *format;
};

/* Fills *r, to be freed with http_reply_free(); 0, or -1 when out of memory
 * (the connection is then dropped). */
int http_route(const struct http_site *site, const char *method, const char *target,
               struct http_reply *r);
void http_reply_free(struct http_reply *r);

/* Makes *r the JSON error {"error": "...", "status": N}; 0, or -1 when out
 * of memory. */
int http_reply_error(struct http_reply *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One message of the event stream, "data: {...}\n\n", malloc'd; NULL when
 * out of memory.  With a job, *series_cursor is the stream's: 0 before its
 * first message, which has the whole series; each message moves it on and
 * has only the rows that changed since the one before. */
char *http_events_message(const struct http_site *site, const char *job,
                          uint64_t *series_cursor);

#endif
