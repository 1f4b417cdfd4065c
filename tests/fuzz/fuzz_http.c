/* libFuzzer target: the HTTP API (collector/daemon/http_api.c), called as
 * the daemon's server calls it for every request.  The input is a request
 * line's method and target, "GET /api/v1/jobs/x/timeline?from=1&to=2"
 * (without a space: a GET of the whole input).  The answers come from the
 * real live analysis of a small store (tests/fuzz/http-store.iots: jobs
 * jobS, jobT and "odd/job 50%&x", disk operations, clock samples, a node
 * name that is not ASCII), read by its thread before the first input.
 *
 * Besides crashes and sanitizer reports, an answer must hold together:
 * JSON that parses, an error that carries its status, a file inside the
 * web root, a download only of a job that exists. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_api.h"
#include "live_fixture.h"

#define WEB_ROOT "/nonexistent/web"
#define CHART_JS "/nonexistent/chart.js"

static struct http_site site = {.web_root = WEB_ROOT, .chart_js = CHART_JS};

static void stop(void)
{
    live_fixture_stop(site.live);
}

static void check_json(const char *text, unsigned status)
{
    json_error_t e;
    json_t *doc = json_loads(text, 0, &e);
    if (!doc) {
        fprintf(stderr, "fuzz_http: answer %u is not JSON (%s): %.200s\n", status, e.text, text);
        abort();
    }
    if (status != 200 && (!json_is_string(json_object_get(doc, "error")) ||
                          json_integer_value(json_object_get(doc, "status")) != status)) {
        fprintf(stderr, "fuzz_http: error %u without its message or status: %.200s\n", status,
                text);
        abort();
    }
    json_decref(doc);
}

static void check_file(const char *path)
{
    const char *name = path + strlen(WEB_ROOT "/");
    if (strcmp(path, CHART_JS) == 0)
        return;
    if (strncmp(path, WEB_ROOT "/", strlen(WEB_ROOT "/")) != 0 || !name[0] ||
        strchr(name, '/') || name[0] == '.') {
        fprintf(stderr, "fuzz_http: a file outside the web root: %s\n", path);
        abort();
    }
}

static void check(const struct http_reply *r)
{
    if (r->status != 200 && r->status != 400 && r->status != 404 && r->status != 405 &&
        r->status != 500)
        abort();
    switch (r->kind) {
    case HTTP_REPLY_BODY:
        if (!r->body || !r->type)
            abort();
        if (strcmp(r->type, "application/json") == 0)
            check_json(r->body, r->status);
        break;
    case HTTP_REPLY_FILE:
        check_file(r->path);
        break;
    case HTTP_REPLY_DOWNLOAD:
        if (!r->job || !live_job_known(site.live, r->job) || !r->format)
            abort();
        break;
    case HTTP_REPLY_EVENTS: {
        /* A job not known yet is waited for: its messages say null. */
        uint64_t cursor = 0;
        char *msg = http_events_message(&site, r->job, &cursor);
        size_t n = msg ? strlen(msg) : 0;
        if (n < 8 || strncmp(msg, "data: ", 6) != 0 || strcmp(msg + n - 2, "\n\n") != 0)
            abort();
        msg[n - 2] = '\0';
        check_json(msg + 6, 200);
        free(msg);
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!site.live) {
        site.live = live_fixture_start(FUZZ_HTTP_STORE, 3);
        atexit(stop);
    }
    /* What the server gets is a C string: the target ends at a NUL. */
    char *line = malloc(size + 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    const char *method = "GET", *target = line;
    char *space = strchr(line, ' ');
    if (space) {
        *space = '\0';
        method = line;
        target = space + 1;
    }
    struct http_reply r;
    if (http_route(&site, method, target, &r) < 0) {
        fprintf(stderr, "fuzz_http: http_route failed (out of memory?)\n");
        abort();
    }
    check(&r);
    http_reply_free(&r);
    free(line);
    return 0;
}
