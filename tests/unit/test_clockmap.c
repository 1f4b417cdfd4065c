/* Unit tests of the clock map (collector/clockmap.c): interpolation between
 * samples, the nearest offset outside them, one sample, unsorted input,
 * duplicate local times, monotonic mapping, error bounds and the summary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "clockmap.h"

#define T0 1700000000000000000ll /* a realistic CLOCK_REALTIME in ns */
#define SEC 1000000000ll

static void test_empty(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    iot_clockmap_finish(&m);
    assert_int_equal(iot_clockmap_offset(&m, T0), 0);
    assert_int_equal(iot_clockmap_map(&m, T0), T0);
    assert_int_equal(iot_clockmap_error_at(&m, T0), -1);
    struct iot_clock_summary s;
    iot_clockmap_summary(&m, &s);
    assert_int_equal(s.samples, 0);
    iot_clockmap_free(&m);
}

static void test_interpolation(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    assert_int_equal(iot_clockmap_add(&m, T0 + 1000, 100, 10), 0);
    assert_int_equal(iot_clockmap_add(&m, T0 + 2000, 200, 20), 0);
    assert_int_equal(iot_clockmap_add(&m, T0 + 4000, 0, 30), 0);
    iot_clockmap_finish(&m);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 1000), 100);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 1500), 150);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 2000), 200);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 3000), 100);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 3999), 1); /* 200 - 199.9, truncated */
    assert_int_equal(iot_clockmap_map(&m, T0 + 1500), T0 + 1650);
    iot_clockmap_free(&m);
}

static void test_extrapolation(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    iot_clockmap_add(&m, T0, -3 * SEC, 100);
    iot_clockmap_add(&m, T0 + 10 * SEC, -3 * SEC - 10000000, 100);
    iot_clockmap_finish(&m);
    /* Before the first and after the last sample: the nearest one's offset. */
    assert_int_equal(iot_clockmap_offset(&m, T0 - 3600 * SEC), -3 * SEC);
    assert_int_equal(iot_clockmap_offset(&m, 0), -3 * SEC);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 3600 * SEC), -3 * SEC - 10000000);
    assert_int_equal(iot_clockmap_map(&m, T0 + 20 * SEC), T0 + 17 * SEC - 10000000);
    iot_clockmap_free(&m);
}

static void test_single_sample(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    iot_clockmap_add(&m, T0, 3 * SEC, 1001);
    iot_clockmap_finish(&m);
    assert_int_equal(iot_clockmap_offset(&m, T0 - SEC), 3 * SEC);
    assert_int_equal(iot_clockmap_offset(&m, T0), 3 * SEC);
    assert_int_equal(iot_clockmap_offset(&m, T0 + SEC), 3 * SEC);
    assert_int_equal(iot_clockmap_error_at(&m, T0 + SEC), 501); /* rtt/2, rounded up */
    struct iot_clock_summary s;
    iot_clockmap_summary(&m, &s);
    assert_int_equal(s.samples, 1);
    assert_int_equal(s.offset_ns, 3 * SEC);
    assert_int_equal(s.rtt_ns, 1001);
    assert_int_equal(s.error_ns, 501);
    assert_false(s.has_drift);
    iot_clockmap_free(&m);
}

static void test_unsorted(void **state)
{
    (void)state;
    struct iot_clockmap a, b;
    iot_clockmap_init(&a);
    iot_clockmap_init(&b);
    const int64_t local[] = {5, 1, 4, 2, 3};
    for (int i = 0; i < 5; i++)
        iot_clockmap_add(&a, T0 + local[i] * SEC, local[i] * 1000, 50);
    for (int i = 1; i <= 5; i++)
        iot_clockmap_add(&b, T0 + i * SEC, i * 1000, 50);
    iot_clockmap_finish(&a);
    iot_clockmap_finish(&b);
    assert_int_equal(a.n, 5);
    for (int64_t t = T0; t < T0 + 6 * SEC; t += SEC / 7)
        assert_int_equal(iot_clockmap_offset(&a, t), iot_clockmap_offset(&b, t));
    assert_int_equal(iot_clockmap_offset(&a, T0 + 2 * SEC + SEC / 2), 2500);
    iot_clockmap_free(&a);
    iot_clockmap_free(&b);
}

static void test_duplicate_local_times(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    iot_clockmap_add(&m, T0, 999, 5000);
    iot_clockmap_add(&m, T0, 100, 10); /* the precise one wins */
    iot_clockmap_add(&m, T0, 555, 700);
    iot_clockmap_add(&m, T0 + SEC, 200, 10);
    iot_clockmap_add(&m, T0 + SEC, 200, 10); /* an exact repeat */
    iot_clockmap_finish(&m);
    assert_int_equal(m.n, 2);
    assert_int_equal(iot_clockmap_offset(&m, T0), 100);
    assert_int_equal(iot_clockmap_offset(&m, T0 + SEC / 2), 150);
    /* Adding after finish and finishing again keeps working. */
    iot_clockmap_add(&m, T0 + 2 * SEC, 300, 10);
    iot_clockmap_finish(&m);
    assert_int_equal(m.n, 3);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 3 * SEC / 2), 250);
    iot_clockmap_free(&m);
}

static uint64_t rng_state = 88172645463325252ull;

static uint64_t next_rand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Offsets whose slope between samples lies in (-1, 1): mapped times of
 * increasing local times never go backwards, also across samples and
 * outside them, including the steepest negative slopes. */
static void test_monotonic(void **state)
{
    (void)state;
    for (int round = 0; round < 50; round++) {
        struct iot_clockmap m;
        iot_clockmap_init(&m);
        int64_t local = T0, offset = -3 * SEC;
        for (int i = 0; i < 20; i++) {
            int64_t gap = 1 + (int64_t)(next_rand() % (uint64_t)(2 * SEC));
            /* slope in [-0.999, 0.999] of the gap, sometimes the extremes */
            int64_t change = (int64_t)(next_rand() % (uint64_t)(2 * gap + 1)) - gap;
            if (i % 5 == 0)
                change = -(gap - gap / 1000 - 1);
            iot_clockmap_add(&m, local, offset, next_rand() % 100000);
            local += gap;
            offset += change;
        }
        iot_clockmap_finish(&m);
        int64_t prev = iot_clockmap_map(&m, T0 - SEC);
        for (int64_t t = T0 - SEC + 1; t < local + SEC;) {
            int64_t mapped = iot_clockmap_map(&m, t);
            assert_true(mapped >= prev);
            prev = mapped;
            t += 1 + (int64_t)(next_rand() % 3000000);
        }
        /* Step by single nanoseconds across a steep sample boundary. */
        for (size_t k = 1; k + 1 < m.n; k += 5) {
            int64_t s = m.v[k].local_ns;
            prev = iot_clockmap_map(&m, s - 50);
            for (int64_t t = s - 49; t < s + 50; t++) {
                int64_t mapped = iot_clockmap_map(&m, t);
                assert_true(mapped >= prev);
                prev = mapped;
            }
        }
        iot_clockmap_free(&m);
    }
}

/* A node clock running 1000 ppm fast, 3 s ahead: sampled once per real
 * second, the map follows the drift exactly between samples. */
static void test_drift_followed(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    for (int i = 0; i <= 10; i++) {
        int64_t real = T0 + i * SEC;
        int64_t node = real + 3 * SEC + i * 1000000; /* gains 1 ms per second */
        iot_clockmap_add(&m, node, real - node, 2000);
    }
    iot_clockmap_finish(&m);
    for (int64_t r = T0; r <= T0 + 10 * SEC; r += SEC / 10 + 12345) {
        int64_t node = 3 * SEC + r + (r - T0) / 1000;
        int64_t mapped = iot_clockmap_map(&m, node);
        assert_true(llabs(mapped - r) <= 2);
    }
    struct iot_clock_summary s;
    iot_clockmap_summary(&m, &s);
    assert_int_equal(s.samples, 11);
    assert_int_equal(s.offset_ns, -3 * SEC - 10000000);
    assert_int_equal(s.rtt_ns, 2000);
    assert_true(s.has_drift);
    assert_true(s.drift_ppm > 999.99 && s.drift_ppm < 1000.01);
    /* A constant drift adds nothing to the bound inside the span... */
    assert_int_equal(s.error_ns, 1000);
    assert_int_equal(iot_clockmap_error_at(&m, m.v[4].local_ns + 7), 1000);
    /* ...outside it the held offset falls behind by the drift. */
    int64_t after = iot_clockmap_error_at(&m, m.v[10].local_ns + 10 * SEC);
    assert_true(after >= 1000 + 9990000 && after <= 1000 + 9990000 + 100);
    int64_t before = iot_clockmap_error_at(&m, m.v[0].local_ns - SEC);
    assert_true(before >= 1000 + 999000 && before <= 1000 + 999000 + 100);
    iot_clockmap_free(&m);
}

/* Where the drift changes, the bound grows by the slope change times a
 * quarter of the interval; with the smallest rtts it is that term alone. */
static void test_error_with_drift_change(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    iot_clockmap_add(&m, T0, 0, 0);
    iot_clockmap_add(&m, T0 + SEC, 0, 0);
    iot_clockmap_add(&m, T0 + 2 * SEC, 1000000, 0); /* slope 0 -> 1e-3 */
    iot_clockmap_finish(&m);
    /* 1e-3 * 1 s / 4 = 250 us in both intervals */
    assert_int_equal(iot_clockmap_error_at(&m, T0 + SEC / 2), 250000);
    assert_int_equal(iot_clockmap_error_at(&m, T0 + 3 * SEC / 2), 250000);
    struct iot_clock_summary s;
    iot_clockmap_summary(&m, &s);
    assert_int_equal(s.error_ns, 250000);
    iot_clockmap_free(&m);
}

/* A job's figures use the samples around its events only: the last at or
 * before its start to the first at or after its end, so samples that come
 * after a finished job do not change them. */
static void test_summary_span(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    /* Collector times T0 + k s; offsets 0, 10, 20, ... us; rtts 9, 8, ..., 1 us. */
    for (int k = 0; k < 9; k++)
        iot_clockmap_add(&m, T0 + k * SEC - k * 10000, k * 10000, (uint64_t)(9 - k) * 1000);
    iot_clockmap_finish(&m);
    struct iot_clock_summary s;
    /* Events from 2.5 s to 4.5 s: samples 2..5. */
    iot_clockmap_summary_span(&m, T0 + 5 * SEC / 2, T0 + 9 * SEC / 2, &s);
    assert_int_equal(s.samples, 4);
    assert_int_equal(s.offset_ns, 50000);
    assert_int_equal(s.rtt_ns, 4000);
    assert_int_equal(s.error_ns, 3500); /* rtt/2 of sample 2; constant drift */
    /* A bound exactly on a sample takes that sample alone at that end. */
    iot_clockmap_summary_span(&m, T0 + 2 * SEC, T0 + 4 * SEC, &s);
    assert_int_equal(s.samples, 3);
    assert_int_equal(s.offset_ns, 40000);
    /* Before the first and after the last sample: the nearest one. */
    iot_clockmap_summary_span(&m, T0 - SEC, T0 - SEC / 2, &s);
    assert_int_equal(s.samples, 1);
    assert_int_equal(s.offset_ns, 0);
    iot_clockmap_summary_span(&m, T0 + 10 * SEC, T0 + 11 * SEC, &s);
    assert_int_equal(s.samples, 1);
    assert_int_equal(s.offset_ns, 80000);
    assert_false(iot_clockmap_settled(&m, T0 + 9 * SEC));
    assert_true(iot_clockmap_settled(&m, T0 + 8 * SEC));
    /* Later samples leave the figures of the 2.5..4.5 s span alone. */
    struct iot_clock_summary before, after;
    iot_clockmap_summary_span(&m, T0 + 5 * SEC / 2, T0 + 9 * SEC / 2, &before);
    iot_clockmap_add(&m, T0 + 9 * SEC, 5 * SEC, 1);
    iot_clockmap_finish(&m);
    iot_clockmap_summary_span(&m, T0 + 5 * SEC / 2, T0 + 9 * SEC / 2, &after);
    assert_memory_equal(&before, &after, sizeof before);
    assert_true(iot_clockmap_settled(&m, T0 + 9 * SEC));
    assert_false(iot_clockmap_settled(NULL, 0));
    iot_clockmap_free(&m);
}

/* Offsets of hours and gaps of days overflow 64-bit products. */
static void test_large_values(void **state)
{
    (void)state;
    struct iot_clockmap m;
    iot_clockmap_init(&m);
    int64_t day = 86400 * SEC;
    iot_clockmap_add(&m, T0, -7200 * SEC, 0);
    iot_clockmap_add(&m, T0 + 30 * day, 7200 * SEC, 0);
    iot_clockmap_finish(&m);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 15 * day), 0);
    assert_int_equal(iot_clockmap_offset(&m, T0 + 30 * day / 4), -3600 * SEC);
    assert_int_equal(iot_clockmap_map(&m, INT64_MAX), INT64_MAX); /* saturates */
    assert_int_equal(iot_clockmap_map(&m, INT64_MIN), INT64_MIN); /* both ways */
    assert_int_equal(iot_clockmap_map(&m, INT64_MIN + 7200 * SEC), INT64_MIN);
    assert_int_equal(iot_clockmap_map(&m, INT64_MIN + 7200 * SEC + 1), INT64_MIN + 1);
    iot_clockmap_free(&m);
}

/* The offset computed in 64 bits where the product fits, in 128 where it
 * does not: both must give what the exact formula gives, for offsets of
 * nanoseconds to hours and gaps of nanoseconds to months. */
static int64_t reference_offset(const struct iot_clockmap *m, int64_t t)
{
    if (t < m->v[0].local_ns)
        return m->v[0].offset_ns;
    size_t i = 0;
    while (i + 1 < m->n && m->v[i + 1].local_ns <= t)
        i++;
    if (i + 1 == m->n)
        return m->v[i].offset_ns;
    const struct iot_clock_sample *a = &m->v[i], *b = &m->v[i + 1];
    __int128 num = ((__int128)b->offset_ns - a->offset_ns) * ((__int128)t - a->local_ns);
    return (int64_t)(a->offset_ns + num / ((__int128)b->local_ns - a->local_ns));
}

static void test_exact_both_widths(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        struct iot_clockmap m;
        iot_clockmap_init(&m);
        int64_t local = T0 - (int64_t)(next_rand() % (uint64_t)(1000 * SEC));
        int scale_gap = (int)(next_rand() % 50), scale_off = (int)(next_rand() % 45);
        int64_t max_gap = (int64_t)1 << scale_gap, max_off = (int64_t)1 << scale_off;
        for (int i = 0; i < 8; i++) {
            int64_t off = (int64_t)(next_rand() % (uint64_t)(2 * max_off + 1)) - max_off;
            iot_clockmap_add(&m, local, off, 0);
            local += 1 + (int64_t)(next_rand() % (uint64_t)max_gap);
        }
        iot_clockmap_finish(&m);
        int64_t lo = m.v[0].local_ns - max_gap, hi = m.v[m.n - 1].local_ns + max_gap;
        /* The hint carried from time to time, and hints of any value
         * (past the end too), give the searched result. */
        size_t hint = 0;
        for (int k = 0; k < 200; k++) {
            int64_t t = lo + (int64_t)(next_rand() % (uint64_t)(hi - lo + 1));
            assert_int_equal(iot_clockmap_offset(&m, t), reference_offset(&m, t));
            assert_int_equal(iot_clockmap_offset_at(&m, &hint, t), reference_offset(&m, t));
            size_t any = (size_t)(next_rand() % (m.n + 2));
            assert_int_equal(iot_clockmap_map_at(&m, &any, t), t + reference_offset(&m, t));
        }
        for (size_t k = 0; k < m.n; k++)
            for (int64_t d = -1; d <= 1; d++)
                assert_int_equal(iot_clockmap_offset(&m, m.v[k].local_ns + d),
                                 reference_offset(&m, m.v[k].local_ns + d));
        iot_clockmap_free(&m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_interpolation),
        cmocka_unit_test(test_extrapolation),
        cmocka_unit_test(test_single_sample),
        cmocka_unit_test(test_unsorted),
        cmocka_unit_test(test_duplicate_local_times),
        cmocka_unit_test(test_monotonic),
        cmocka_unit_test(test_drift_followed),
        cmocka_unit_test(test_error_with_drift_change),
        cmocka_unit_test(test_summary_span),
        cmocka_unit_test(test_large_values),
        cmocka_unit_test(test_exact_both_widths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
