/* The live timeline shows each call as iotrace-export --jsonl does: its
 * offset, bytes, file and rank.  Against the live analysis of
 * tests/fuzz/v2-store.iots (tests/mpi/mpiio_mix, 2 ranks) and what that
 * store exports (tests/fuzz/v2-store.jsonl): every MPI-IO row is on
 * /api/v1/jobs/JOB/timeline with the same values.  An MPI_File_open's
 * stored offset is the id of its mode and hints (docs/client.md), which
 * the exports show as -1; the timeline once showed the id. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_api.h"
#include "live_fixture.h"

#define JOB "vm.20290.1795919625"
#define MAX_ROWS 256

struct row {
    unsigned long long callid;
    char func[64];
    json_int_t offset, bytes, rank;
    char file[256]; /* "" for none */
    int seen;
};

static struct row rows[MAX_ROWS];
static size_t n_rows;

static void fill(struct row *r, json_t *o, const char *callid_key, const char *rank_key)
{
    const char *callid = json_string_value(json_object_get(o, callid_key));
    const char *func = json_string_value(json_object_get(o, "func"));
    const char *file = json_string_value(json_object_get(o, "file"));
    assert_non_null(callid);
    assert_non_null(func);
    r->callid = strtoull(callid, NULL, 16);
    snprintf(r->func, sizeof r->func, "%s", func);
    snprintf(r->file, sizeof r->file, "%s", file ? file : "");
    r->offset = json_integer_value(json_object_get(o, "offset"));
    r->bytes = json_integer_value(json_object_get(o, "bytes"));
    r->rank = json_integer_value(json_object_get(o, rank_key));
}

/* The MPI-IO rows of the export. */
static void read_jsonl(void)
{
    FILE *f = fopen(V2_JSONL, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        if (strcmp(json_string_value(json_object_get(o, "kind")), "mpiio") == 0) {
            assert_true(n_rows < MAX_ROWS);
            fill(&rows[n_rows++], o, "callid", "mpi_rank");
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
}

static struct row *exported(const struct row *t)
{
    for (size_t i = 0; i < n_rows; i++)
        if (rows[i].callid == t->callid && strcmp(rows[i].func, t->func) == 0)
            return &rows[i];
    return NULL;
}

static void test_timeline_matches_export(void **state)
{
    (void)state;
    read_jsonl();
    struct http_site site = {.live = live_fixture_start(V2_STORE, 1)};
    struct http_reply r;
    assert_int_equal(http_route(&site, "GET", "/api/v1/jobs/" JOB "/timeline?from=0&to=1e6", &r),
                     0);
    assert_int_equal(r.status, 200);
    json_t *doc = json_loads(r.body, 0, NULL);
    assert_non_null(doc);
    json_t *calls = json_object_get(doc, "calls"), *c;
    size_t i, opens = 0;
    json_array_foreach(calls, i, c) {
        struct row t;
        fill(&t, c, "callid", "rank");
        struct row *e = exported(&t);
        if (!e)
            fail_msg("timeline call %s 0x%llx is not in the export", t.func, t.callid);
        if (t.offset != e->offset || t.bytes != e->bytes || t.rank != e->rank ||
            strcmp(t.file, e->file) != 0)
            fail_msg("%s 0x%llx: the timeline has offset %lld bytes %lld rank %lld file '%s', "
                     "the export offset %lld bytes %lld rank %lld file '%s'",
                     t.func, t.callid, (long long)t.offset, (long long)t.bytes,
                     (long long)t.rank, t.file, (long long)e->offset, (long long)e->bytes,
                     (long long)e->rank, e->file);
        assert_false(e->seen);
        e->seen = 1;
        opens += strcmp(t.func, "MPI_File_open") == 0;
    }
    for (size_t k = 0; k < n_rows; k++)
        if (!rows[k].seen)
            fail_msg("%s 0x%llx of the export is not on the timeline", rows[k].func,
                     rows[k].callid);
    assert_int_equal(opens, 2); /* one per rank, at offset -1 as checked above */
    json_decref(doc);
    http_reply_free(&r);
    live_fixture_stop(site.live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_timeline_matches_export)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
