/* The exporters' own JSON and CSV writing (export_json.c, export_rows.c)
 * against the oracles it replaced: jansson's json_dumps and printf, byte
 * for byte, over random strings (controls, quotes, valid and invalid
 * UTF-8), integers at every length and edge, and every event of two
 * committed stores; the sorter (export_sort.c) against qsort of the
 * documented order, in memory and spilled in runs of a few events; and the
 * progress line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "export_json.h"
#include "export_progress.h"
#include "export_rows.h"
#include "export_sort.h"
#include "stats_report.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static char *oracle_string(const char *s)
{
    json_t *j = iot_json_text(s);
    char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    return text;
}

static void check_string(const char *s)
{
    struct xp_buf b = {0};
    xp_buf_json_string(&b, s);
    char *want = oracle_string(s);
    assert_non_null(want);
    xp_buf_char(&b, '\0');
    if (strcmp(b.p, want) != 0)
        fail_msg("string of %zu bytes: wrote %s, jansson %s", strlen(s), b.p, want);
    free(want);
    xp_buf_free(&b);
}

static void test_strings(void **state)
{
    (void)state;
    const char *fixed[] = {"", "plain", "a\"b", "back\\slash", "\b\f\n\r\t\x01\x1f", "\x7f",
                           "caf\xc3\xa9", "\xe2\x82\xac and \xf0\x9f\x98\x80", "\xc3",
                           "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe0\x80\xaf",
                           "\xff\xfe", "ok\xc3\xa9\x80", "/path/with/slashes"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        check_string(fixed[i]);
    /* Bytes drawn to hit every class: ASCII, controls, quote and
     * backslash, continuation and lead bytes of every length. */
    static const unsigned char pool[] = {'a', 'Z', '0', ' ', '"', '\\', '/', 0x01, 0x1f, 0x7f,
                                         0x80, 0xbf, 0xc2, 0xc3, 0xdf, 0xe0, 0xe2, 0xed, 0xef,
                                         0xf0, 0xf4, 0xf5, 0xff, 0xa9, 0x82, 0xac, 0x9f};
    char s[64];
    for (int round = 0; round < 200000; round++) {
        size_t n = next_rand() % (sizeof s - 1);
        for (size_t k = 0; k < n; k++)
            s[k] = (char)pool[next_rand() % sizeof pool];
        s[n] = '\0';
        check_string(s);
    }
}

static void check_int(int64_t v)
{
    char want[32], got[32];
    snprintf(want, sizeof want, "%" PRId64, v);
    *xp_put_int(got, v) = '\0';
    if (strcmp(got, want))
        fail_msg("%s written as %s", want, got);
    if (v >= 0) {
        *xp_put_us(got, v) = '\0';
        snprintf(want, sizeof want, "%lld.%03lld", (long long)(v / 1000), (long long)(v % 1000));
        if (strcmp(got, want))
            fail_msg("%" PRId64 " ns written as %s us, not %s", v, got, want);
    }
    char hex[24];
    xp_hex(hex, (uint64_t)v);
    snprintf(want, sizeof want, "0x%llx", (unsigned long long)v);
    if (strcmp(hex, want))
        fail_msg("%s written as %s", want, hex);
}

static void test_integers(void **state)
{
    (void)state;
    int64_t p = 1;
    for (int k = 0; k < 19; k++) {
        for (int64_t d = -2; d <= 2; d++) {
            check_int(p + d);
            check_int(-(p + d));
        }
        if (k < 18)
            p *= 10;
    }
    check_int(INT64_MAX);
    check_int(INT64_MIN);
    check_int(INT64_MIN + 1);
    for (int i = 0; i < 1000000; i++) {
        uint64_t r = next_rand();
        int64_t v = (int64_t)(r >> (r & 63));
        check_int((r >> 7) & 1 && v != INT64_MIN ? -v : v);
    }
}

/* ---- every event of a store ------------------------------------------- */

struct rows_check {
    struct xp_rows *w;
    size_t n;
};

static int compare_row(void *ctx, const struct xp_data *d, const struct xp_event *ev, char *err,
                       size_t errlen)
{
    (void)err;
    (void)errlen;
    struct rows_check *c = ctx;
    json_t *o = xp_rows_json(d, ev);
    char *want = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct xp_buf b = {0};
    xp_rows_json_text(c->w, &b, d, ev);
    xp_buf_char(&b, '\0');
    if (strcmp(b.p, want))
        fail_msg("event %zu: wrote\n%s\njansson\n%s", c->n, b.p, want);
    free(want);
    xp_buf_free(&b);
    c->n++;
    return 0;
}

static void rows_of(const char *segment)
{
    char dir[] = "/tmp/iotrace-test-rows-XXXXXX", path[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/segment-00000001.iots", dir);
    FILE *in = fopen(segment, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    struct xp_data d;
    assert_int_equal(xp_data_init(&d), 0);
    struct rows_check c = {.w = xp_rows_open(NULL, "scratch")};
    char err[256];
    if (xp_read_store(dir, &d, compare_row, &c, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_true(c.n > 30);
    xp_rows_close(c.w);
    xp_data_free(&d);
    unlink(path);
    rmdir(dir);
}

static void test_store_rows(void **state)
{
    (void)state;
    rows_of(V2_STORE);
    rows_of(HTTP_STORE);
}

/* ---- the sorter ---------------------------------------------------------- */

static struct xp_data sort_d;

static int oracle_cmp(const void *pa, const void *pb)
{
    const struct xp_event *a = pa, *b = pb;
    const struct xp_producer *x = &sort_d.producers[a->producer], *y = &sort_d.producers[b->producer];
#define CMP(u, v) if ((u) != (v)) return (u) < (v) ? -1 : 1
    CMP(a->t_start, b->t_start);
    CMP(a->t_end, b->t_end);
    int c = strcmp(xp_string(&sort_d.nodes, x->node), xp_string(&sort_d.nodes, y->node));
    if (c)
        return c;
    CMP(x->pid, y->pid);
    CMP(a->tid, b->tid);
    CMP(a->order, b->order);
#undef CMP
    return 0;
}

static void sort_case(size_t n, size_t run)
{
    struct xp_event *v = calloc(n, sizeof *v), *want = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        /* Few distinct times, so that every tie-breaker decides some. */
        v[i].t_start = (int64_t)(next_rand() % 5);
        v[i].t_end = v[i].t_start + (int64_t)(next_rand() % 3);
        v[i].producer = (uint32_t)(next_rand() % sort_d.n_producers);
        v[i].tid = (uint32_t)(next_rand() % 3);
        v[i].order = i;
        v[i].bytes = next_rand();
    }
    memcpy(want, v, n * sizeof *v);
    qsort(want, n, sizeof *want, oracle_cmp);
    struct xp_sorter *s = xp_sorter_new(&sort_d, run);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(xp_sorter_add(s, &v[i]), 0);
    assert_int_equal(xp_sorter_finish(s), 0);
    struct xp_event ev;
    size_t got = 0;
    for (int r; (r = xp_sorter_next(s, &ev)) == 1; got++) {
        assert_true(got < n);
        if (memcmp(&ev, &want[got], sizeof ev))
            fail_msg("%zu events in runs of %zu: event %zu is #%" PRIu64 ", not #%" PRIu64, n, run,
                     got, ev.order, want[got].order);
    }
    assert_int_equal(got, n);
    assert_int_equal(xp_sorter_count(s), n);
    xp_sorter_free(s);
    free(v);
    free(want);
}

static void test_sorter(void **state)
{
    (void)state;
    assert_int_equal(xp_data_init(&sort_d), 0);
    /* Producers on nodes whose names sort otherwise than their numbers. */
    const char *nodes[] = {"n10", "n2", "n1"};
    sort_d.producers = calloc(6, sizeof *sort_d.producers);
    assert_non_null(sort_d.producers);
    sort_d.n_producers = sort_d.cap_producers = 6;
    for (uint32_t p = 0; p < 6; p++) {
        sort_d.producers[p].node = xp_intern(&sort_d.nodes, nodes[p % 3]);
        sort_d.producers[p].pid = 100 + p % 2;
    }
    sort_case(0, 0);
    sort_case(1, 0);
    sort_case(5000, 0);    /* one run, in memory */
    sort_case(5000, 7);    /* 715 runs in the file */
    sort_case(4096, 4096); /* exactly one full run */
    sort_case(4097, 4096); /* and one event more */
    xp_data_free(&sort_d);
}

/* ---- the progress line ---------------------------------------------------- */

static void test_progress(void **state)
{
    (void)state;
    char path[] = "/tmp/iotrace-test-progress-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    xp_progress_init("iotrace-export", XP_PROGRESS_ON, 0.0);
    xp_progress_phase("writing JSON Lines", 1u << 20);
    for (uint64_t i = 1; i <= (1u << 20); i++)
        xp_progress_step(i);
    xp_progress_end();
    xp_progress_init("iotrace-export", XP_PROGRESS_OFF, 0.0);
    xp_progress_phase("writing CSV", 100);
    for (uint64_t i = 1; i <= (1u << 20); i++)
        xp_progress_step(i);
    xp_progress_end();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    text[n] = '\0';
    assert_non_null(strstr(text, "iotrace-export: writing JSON Lines: "));
    assert_non_null(strstr(text, " of 1.0 M events ("));
    assert_null(strstr(text, "writing CSV"));
    /* Erased at the end: the last thing written is the erase sequence. */
    assert_string_equal(text + n - 4, "\r\033[K");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_store_rows),
        cmocka_unit_test(test_sorter),
        cmocka_unit_test(test_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
