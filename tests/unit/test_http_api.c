/* The HTTP API's request parsing and routing (collector/daemon/http_api.c)
 * against the live analysis of tests/fuzz/http-store.iots (jobs jobS, jobT
 * and "odd/job 50%&x"): percent-decoding after the path is split, query
 * arguments, the job list's filters, windows far outside int64_t
 * nanoseconds, static files that
 * cannot climb out of the web root, the absolute form of a target, and
 * every error status. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_api.h"
#include "live_fixture.h"

#define ODD "odd/job 50%&x"
#define ODD_PATH "odd%2Fjob%2050%25%26x"

static struct http_site site = {.web_root = "/web", .chart_js = "/js/chart.js"};

/* The reply to GET (or METHOD) TARGET, checked to have STATUS. */
static void get(const char *method, const char *target, unsigned status, struct http_reply *r)
{
    assert_int_equal(http_route(&site, method, target, r), 0);
    if (r->status != status)
        fail_msg("%s %s: status %u, expected %u (%s)", method, target, r->status, status,
                 r->body ? r->body : "");
}

/* The JSON body of a reply with STATUS; an error's message contains WANT. */
static json_t *get_json(const char *target, unsigned status, const char *want)
{
    struct http_reply r;
    get("GET", target, status, &r);
    assert_int_equal(r.kind, HTTP_REPLY_BODY);
    assert_string_equal(r.type, "application/json");
    json_t *doc = json_loads(r.body, 0, NULL);
    assert_non_null(doc);
    if (status != 200) {
        assert_int_equal(json_integer_value(json_object_get(doc, "status")), status);
        const char *msg = json_string_value(json_object_get(doc, "error"));
        if (!msg || !strstr(msg, want))
            fail_msg("%s: error '%s' lacks '%s'", target, msg ? msg : "(none)", want);
    }
    http_reply_free(&r);
    return doc;
}

static void expect_error(const char *target, unsigned status, const char *want)
{
    json_decref(get_json(target, status, want));
}

static void test_job_id_with_slash_space_percent(void **state)
{
    (void)state;
    json_t *doc = get_json("/api/v1/jobs/" ODD_PATH "/stats", 200, NULL);
    json_t *job = json_array_get(json_object_get(doc, "jobs"), 0);
    assert_string_equal(json_string_value(json_object_get(job, "job")), ODD);
    json_decref(doc);
    doc = get_json("/api/v1/jobs/" ODD_PATH "/timeline?from=0&to=10", 200, NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "job")), ODD);
    json_decref(doc);
    /* Lower-case hex, and the series. */
    json_decref(get_json("/api/v1/jobs/odd%2fjob%2050%25%26x/series", 200, NULL));
    /* Decoded before the split, the '/' would make it another path. */
    expect_error("/api/v1/jobs/odd/job%2050%25%26x/stats", 404, "no such resource");
    /* '+' is a space in a query only. */
    expect_error("/api/v1/jobs/odd%2Fjob+50%25%26x/stats", 404, "no job 'odd/job+50%&x'");

    struct http_reply r;
    get("GET", "/api/v1/jobs/" ODD_PATH "/download/slog2", 200, &r);
    assert_int_equal(r.kind, HTTP_REPLY_DOWNLOAD);
    assert_string_equal(r.job, ODD);
    assert_string_equal(r.format, "slog2");
    http_reply_free(&r);
    get("GET", "/api/v1/events?job=odd%2Fjob+50%25%26x&job=jobS", 200, &r);
    assert_int_equal(r.kind, HTTP_REPLY_EVENTS);
    assert_string_equal(r.job, ODD); /* the first of two values */
    http_reply_free(&r);
}

static void test_timeline_windows(void **state)
{
    (void)state;
    /* Far beyond int64_t nanoseconds: the window saturates. */
    static const char *const wide[] = {"?from=1e300", "?to=-1e300", "?from=-1e300&to=1e300",
                                       "?from=-9.3e9&to=9.3e9", "?from=1e52&to=1e53"};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        char target[128];
        snprintf(target, sizeof target, "/api/v1/jobs/jobS/timeline%s", wide[i]);
        json_t *doc = get_json(target, 200, NULL);
        assert_true(json_is_real(json_object_get(doc, "from_s")));
        assert_true(json_is_real(json_object_get(doc, "to_s")));
        json_decref(doc);
    }
    json_t *doc = get_json("/api/v1/jobs/jobS/timeline?from=0.5&to=2", 200, NULL);
    assert_true(fabs(json_real_value(json_object_get(doc, "from_s")) - 0.5) < 1e-9);
    assert_true(fabs(json_real_value(json_object_get(doc, "to_s")) - 2) < 1e-9);
    json_decref(doc);
    static const char *const bad[] = {"?from=", "?from=x", "?to=1s", "?from=inf", "?to=nan",
                                      "?from=1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char target[128];
        snprintf(target, sizeof target, "/api/v1/jobs/jobT/timeline%s", bad[i]);
        expect_error(target, 400, "seconds after the job's first event");
    }
    expect_error("/api/v1/jobs/jobT/timeline?from=2&to=1", 400, "from (2) is after to (1)");
    expect_error("/api/v1/jobs/nojob/timeline?from=1", 404, "no job 'nojob'");
}

static size_t n_jobs(const char *target)
{
    json_t *doc = get_json(target, 200, NULL);
    size_t n = json_array_size(json_object_get(doc, "jobs"));
    json_decref(doc);
    return n;
}

/* The fixture's three jobs are finished. */
static void test_job_list_filters(void **state)
{
    (void)state;
    assert_int_equal(n_jobs("/api/v1/jobs"), 3);
    assert_int_equal(n_jobs("/api/v1/jobs?state=finished"), 3);
    assert_int_equal(n_jobs("/api/v1/jobs?state=running"), 0);
    assert_int_equal(n_jobs("/api/v1/jobs?limit=2"), 2);
    assert_int_equal(n_jobs("/api/v1/jobs?state=finished&limit=1"), 1);
    assert_int_equal(n_jobs("/api/v1/jobs?limit=99"), 3);
    /* A limit of any size costs the jobs there are (fuzz.http found
     * ?limit=1628518140 asking for 13 GB; the largest overflowed calloc). */
    assert_int_equal(n_jobs("/api/v1/jobs?limit=1628518140"), 3);
    assert_int_equal(n_jobs("/api/v1/jobs?state=finished&limit=18446744073709551615"), 3);
    /* The head of the whole list, whatever the limit. */
    json_t *all = get_json("/api/v1/jobs", 200, NULL);
    for (int k = 1; k <= 3; k++) {
        char target[64];
        snprintf(target, sizeof target, "/api/v1/jobs?limit=%d", k);
        json_t *some = get_json(target, 200, NULL);
        for (int i = 0; i < k; i++)
            assert_true(json_equal(json_array_get(json_object_get(all, "jobs"), (size_t)i),
                                   json_array_get(json_object_get(some, "jobs"), (size_t)i)));
        json_decref(some);
    }
    json_decref(all);
    static const char *const bad_state[] = {"?state=", "?state=done", "?state=RUNNING"};
    for (size_t i = 0; i < sizeof bad_state / sizeof bad_state[0]; i++) {
        char target[64];
        snprintf(target, sizeof target, "/api/v1/jobs%s", bad_state[i]);
        expect_error(target, 400, "state is running or finished");
    }
    static const char *const bad_limit[] = {"?limit=", "?limit=0", "?limit=-1", "?limit=+2",
                                            "?limit=2x", "?limit=99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_limit / sizeof bad_limit[0]; i++) {
        char target[64];
        snprintf(target, sizeof target, "/api/v1/jobs%s", bad_limit[i]);
        expect_error(target, 400, "limit is a number of jobs");
    }
}

static void test_bad_targets(void **state)
{
    (void)state;
    static const char *const bad[] = {"/api/v1/jobs/%zz/stats", "/api/v1/jobs/a%2/stats",
                                      "/api/v1/jobs/a%/stats", "/api/v1/jobs/a%00b/stats",
                                      "/api/v1/events?job=%00", "/api/v1/jobs?x=%g0", "*",
                                      "ftp://host/api/v1/jobs", "api/v1/jobs", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(bad[i], 400, "bad request target");
    static const char *const unknown[] = {"/api/v1/jobs/jobS", "/api/v1/jobs/jobS/",
                                          "/api/v1/jobs//stats", "/api/v1/jobs/jobS/stats/x",
                                          "/api/v1/jobs/jobS/download", "/api/v1/jobz",
                                          "/api/v1/jobs/jobS/a/b/c/d/e/f/g"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        expect_error(unknown[i], 404, "no such resource");
    expect_error("/api/v2/jobs", 404, "unknown API version");
    expect_error("/api", 404, "unknown API version");
    expect_error("/api/v1/jobs/nojob/stats", 404, "no job 'nojob'");
    expect_error("/api/v1/jobs/jobS/download/xml", 404, "no download format 'xml'");
    expect_error("/api/v1/jobs/nojob/download/jsonl", 404, "no job 'nojob'");

    struct http_reply r;
    get("POST", "/api/v1/jobs", 405, &r);
    http_reply_free(&r);
    get("HEAD", "/api/v1/jobs", 200, &r);
    http_reply_free(&r);
}

static void test_static_files(void **state)
{
    (void)state;
    static const struct {
        const char *target, *path;
    } ok[] = {{"/", "/web/index.html"}, {"/app.js?v=2", "/web/app.js"},
              {"/style.css", "/web/style.css"}, {"/vendor/chart.js", "/js/chart.js"},
              {"http://host:8080/app.js", "/web/app.js"}, {"HTTPS://host", "/web/index.html"},
              {"http://host?x=1", "/web/index.html"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct http_reply r;
        get("GET", ok[i].target, 200, &r);
        assert_int_equal(r.kind, HTTP_REPLY_FILE);
        assert_string_equal(r.path, ok[i].path);
        http_reply_free(&r);
    }
    static const char *const out[] = {"/../etc/passwd", "/%2e%2e/etc/passwd",
                                      "/%2E%2E%2Fetc%2Fpasswd", "/.hidden", "/a/b.js",
                                      "/App.js", "/vendor/other.js", "/index.html/"};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        expect_error(out[i], 404, "no such page");
}

static void test_documents(void **state)
{
    (void)state;
    json_t *doc = get_json("/api/v1/jobs", 200, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "jobs")), 3);
    json_decref(doc);
    doc = get_json("http://host/api/v1/status?x", 200, NULL);
    assert_true(json_is_integer(json_object_get(doc, "batches_stored")));
    json_decref(doc);
    json_decref(get_json("/api/v1/nodes", 200, NULL));
    struct http_reply r;
    get("GET", "/metrics", 200, &r);
    assert_non_null(strstr(r.body, "iotrace_analysis_batches_total "));
    assert_non_null(strstr(r.type, "version=0.0.4"));
    http_reply_free(&r);
    uint64_t cursor = 0;
    char *msg = http_events_message(&site, "jobS", &cursor);
    assert_non_null(msg);
    assert_memory_equal(msg, "data: {", 7);
    assert_non_null(strstr(msg, "\"series\""));
    assert_non_null(strstr(msg, "\"job\":{\"job\":\"jobS\""));
    free(msg);
}

/* The stream of a job not known yet stays open and says so (a page opened
 * on a job about to start waits for it); it used to be a 404 for good. */
static void test_events_of_unknown_job(void **state)
{
    (void)state;
    struct http_reply r;
    get("GET", "/api/v1/events?job=nojob", 200, &r);
    assert_int_equal(r.kind, HTTP_REPLY_EVENTS);
    assert_string_equal(r.job, "nojob");
    http_reply_free(&r);
    uint64_t cursor = 0;
    char *msg = http_events_message(&site, "nojob", &cursor);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "\"job\":null"));
    assert_null(strstr(msg, "\"series\""));
    assert_int_equal(cursor, 0);
    free(msg);
}

static size_t items(json_t *doc, const char *key)
{
    return json_array_size(json_object_get(doc, key));
}

/* ?since=CURSOR gives what was added after an earlier answer, not the
 * whole view again: a page following a running job fetched 2.8 MB per
 * update. */
static void test_cursors(void **state)
{
    (void)state;
    json_t *all = get_json("/api/v1/jobs/jobS/timeline?from=0&to=1e6", 200, NULL);
    json_int_t cursor = json_integer_value(json_object_get(all, "cursor"));
    assert_true(cursor > 0);
    assert_true(items(all, "calls") > 0 && items(all, "pairs") > 0);
    assert_int_equal(json_integer_value(json_object_get(all, "since")), 0);
    char target[128];
    snprintf(target, sizeof target, "/api/v1/jobs/jobS/timeline?from=0&to=1e6&since=%lld",
             (long long)cursor);
    json_t *none = get_json(target, 200, NULL);
    assert_int_equal(items(none, "calls") + items(none, "disk_ops") + items(none, "pairs"), 0);
    assert_int_equal(json_integer_value(json_object_get(none, "cursor")), cursor);
    json_decref(none);
    /* The items after a cursor are the newest ones of the whole answer. */
    snprintf(target, sizeof target, "/api/v1/jobs/jobS/timeline?from=0&to=1e6&since=%lld",
             (long long)cursor / 2);
    json_t *half = get_json(target, 200, NULL);
    size_t n_half = items(half, "calls") + items(half, "disk_ops") + items(half, "pairs");
    size_t n_all = items(all, "calls") + items(all, "disk_ops") + items(all, "pairs");
    assert_true(n_half > 0 && n_half < n_all);
    json_decref(half);
    /* A cursor the job never reached (a restarted collector's) is a fresh start. */
    json_t *again = get_json("/api/v1/jobs/jobS/timeline?from=0&to=1e6&since=999999999", 200, NULL);
    assert_int_equal(json_integer_value(json_object_get(again, "since")), 0);
    assert_int_equal(items(again, "calls"), items(all, "calls"));
    json_decref(again);
    json_decref(all);
    expect_error("/api/v1/jobs/jobS/timeline?since=abc", 400, "since is the cursor");
    expect_error("/api/v1/jobs/jobS/timeline?since=-1", 400, "since is the cursor");
    expect_error("/api/v1/jobs/jobS/series?since=1x", 400, "since is the cursor");

    json_t *series = get_json("/api/v1/jobs/jobS/series", 200, NULL);
    assert_true(items(series, "seconds") > 0);
    snprintf(target, sizeof target, "/api/v1/jobs/jobS/series?since=%lld",
             (long long)json_integer_value(json_object_get(series, "cursor")));
    json_decref(series);
    series = get_json(target, 200, NULL);
    assert_int_equal(items(series, "seconds"), 0);
    json_decref(series);
    /* The event stream: the whole series first, then only what changed. */
    uint64_t c = 0;
    char *first = http_events_message(&site, "jobS", &c), *next;
    assert_true(c > 0);
    next = http_events_message(&site, "jobS", &c);
    assert_non_null(strstr(first, "\"seconds\":[{"));
    assert_non_null(strstr(next, "\"seconds\":[]"));
    free(first);
    free(next);
}

/* How far the analysis is behind the store, for the dashboard's banner. */
static void test_lag(void **state)
{
    (void)state;
    json_t *doc = get_json("/api/v1/status", 200, NULL);
    assert_true(json_is_integer(json_object_get(doc, "analysis_behind_batches")));
    assert_int_equal(json_integer_value(json_object_get(doc, "analysis_behind_batches")), 0);
    assert_true(json_real_value(json_object_get(doc, "analysis_lag_s")) == 0.0);
    assert_true(json_is_number(json_object_get(doc, "analysis_yield_s")));
    json_decref(doc);
    struct http_reply r;
    get("GET", "/metrics", 200, &r);
    assert_non_null(strstr(r.body, "\niotrace_analysis_lag_seconds 0.000\n"));
    assert_non_null(strstr(r.body, "\niotrace_analysis_behind_batches 0\n"));
    http_reply_free(&r);
}

static int setup(void **state)
{
    (void)state;
    site.live = live_fixture_start(HTTP_STORE, 3);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    live_fixture_stop(site.live);
    return 0;
}

/* A site that cannot tell its requests apart by user (loopback without
 * --http-users) shows no file path: the timeline's calls have a null file
 * and say paths_hidden, the downloads that name files are a 403, the
 * statistics (which name none) are served; without hide_paths the calls
 * have their paths. */
static void test_hidden_paths(void **state)
{
    (void)state;
    json_t *doc = get_json("/api/v1/jobs/jobS/timeline?from=0&to=1e6", 200, NULL);
    json_t *c;
    size_t i, with_path = 0;
    assert_true(json_is_false(json_object_get(doc, "paths_hidden")));
    json_array_foreach(json_object_get(doc, "calls"), i, c)
        with_path += json_is_string(json_object_get(c, "file"));
    assert_true(with_path > 0);
    json_decref(doc);

    site.hide_paths = 1;
    doc = get_json("/api/v1/jobs/jobS/timeline?from=0&to=1e6", 200, NULL);
    assert_true(json_is_true(json_object_get(doc, "paths_hidden")));
    assert_true(json_array_size(json_object_get(doc, "calls")) > 0);
    json_array_foreach(json_object_get(doc, "calls"), i, c)
        assert_true(json_is_null(json_object_get(c, "file")));
    json_decref(doc);
    expect_error("/api/v1/jobs/jobS/download/jsonl", 403, "file paths");
    expect_error("/api/v1/jobs/jobS/download/slog2", 403, "file paths");
    struct http_reply r;
    get("GET", "/api/v1/jobs/jobS/download/stats", 200, &r);
    assert_int_equal(r.kind, HTTP_REPLY_DOWNLOAD);
    http_reply_free(&r);
    site.hide_paths = 0;
}

/* A user restricted to a uid sees only that uid's jobs: here none (the
 * store's jobs belong to no known uid), and each of them is a 404 naming
 * nothing more than the request did, on every route, as a job that does
 * not exist; an admin sees them all. */
static void test_own_jobs_only(void **state)
{
    (void)state;
    site.restricted = 1;
    site.uid = 65534;
    site.user = "bob";
    json_t *doc = get_json("/api/v1/jobs", 200, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "jobs")), 0);
    json_decref(doc);
    static const char *const routes[] = {"stats", "timeline", "series", "download/stats",
                                         "download/jsonl"};
    char target[128];
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        snprintf(target, sizeof target, "/api/v1/jobs/jobS/%s", routes[i]);
        expect_error(target, 404, "no job 'jobS'");
        snprintf(target, sizeof target, "/api/v1/jobs/nosuchjob/%s", routes[i]);
        expect_error(target, 404, "no job 'nosuchjob'");
    }
    expect_error("/api/v1/events?job=jobS", 404, "no job 'jobS'");
    uint64_t cursor = 0;
    char *msg = http_events_message(&site, "jobS", &cursor);
    assert_non_null(msg);
    assert_null(strstr(msg, "jobS"));
    free(msg);
    struct http_reply r;
    get("GET", "/metrics", 200, &r);
    assert_null(strstr(r.body, "job_id=\"jobS\""));
    assert_non_null(strstr(r.body, "iotrace_analysis_events_total"));
    http_reply_free(&r);
    doc = get_json("/api/v1/status", 200, NULL);
    json_t *v = json_object_get(doc, "viewer");
    assert_string_equal(json_string_value(json_object_get(v, "user")), "bob");
    assert_int_equal(json_integer_value(json_object_get(v, "uid")), 65534);
    json_decref(doc);

    site.restricted = 0;
    site.user = "admin";
    doc = get_json("/api/v1/jobs", 200, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "jobs")), 3);
    json_decref(doc);
    get("GET", "/metrics", 200, &r);
    assert_non_null(strstr(r.body, "job_id=\"jobS\""));
    http_reply_free(&r);
    doc = get_json("/api/v1/status", 200, NULL);
    assert_true(json_is_null(json_object_get(json_object_get(doc, "viewer"), "uid")));
    json_decref(doc);
    site.user = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_id_with_slash_space_percent),
        cmocka_unit_test(test_timeline_windows),
        cmocka_unit_test(test_events_of_unknown_job),
        cmocka_unit_test(test_cursors),
        cmocka_unit_test(test_lag),
        cmocka_unit_test(test_job_list_filters),
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_static_files),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_hidden_paths),
        cmocka_unit_test(test_own_jobs_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
