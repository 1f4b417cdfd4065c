/* The collector's duplicate table: a floor plus a sparse set per stream. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "dedup.h"

static void test_in_order(void **state)
{
    (void)state;
    struct iot_dedup *d = iot_dedup_new();
    for (uint64_t s = 0; s < 1000; s++) {
        assert_false(iot_dedup_contains(d, "n/1/2", 7, s));
        assert_int_equal(iot_dedup_add(d, "n/1/2", 7, s), 1);
    }
    assert_int_equal(iot_dedup_floor(d, "n/1/2", 7), 1000);
    assert_int_equal(iot_dedup_pending(d), 0);
    assert_true(iot_dedup_contains(d, "n/1/2", 7, 0));
    assert_true(iot_dedup_contains(d, "n/1/2", 7, 999));
    assert_false(iot_dedup_contains(d, "n/1/2", 7, 1000));
    assert_int_equal(iot_dedup_add(d, "n/1/2", 7, 500), 0);
    iot_dedup_free(d);
}

static void test_out_of_order_and_gaps(void **state)
{
    (void)state;
    struct iot_dedup *d = iot_dedup_new();
    static const uint64_t order[] = {5, 3, 9, 0, 1, 2, 4, 8, 6, 7};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        assert_int_equal(iot_dedup_add(d, "k", 1, order[i]), 1);
    assert_int_equal(iot_dedup_floor(d, "k", 1), 10);
    assert_int_equal(iot_dedup_pending(d), 0);

    /* A gap keeps the seqs above it individually, and only those. */
    assert_int_equal(iot_dedup_add(d, "k", 1, 12), 1);
    assert_int_equal(iot_dedup_add(d, "k", 1, 15), 1);
    assert_int_equal(iot_dedup_add(d, "k", 1, 12), 0);
    assert_int_equal(iot_dedup_pending(d), 2);
    assert_true(iot_dedup_contains(d, "k", 1, 15));
    assert_false(iot_dedup_contains(d, "k", 1, 11));
    assert_false(iot_dedup_contains(d, "k", 1, 13));
    assert_int_equal(iot_dedup_add(d, "k", 1, 10), 1);
    assert_int_equal(iot_dedup_add(d, "k", 1, 11), 1);
    assert_int_equal(iot_dedup_floor(d, "k", 1), 13);
    assert_int_equal(iot_dedup_pending(d), 1);
    iot_dedup_free(d);
}

static void test_streams_are_separate(void **state)
{
    (void)state;
    struct iot_dedup *d = iot_dedup_new();
    assert_int_equal(iot_dedup_add(d, "a/1/1", 1, 0), 1);
    assert_false(iot_dedup_contains(d, "a/1/1", 2, 0));
    assert_false(iot_dedup_contains(d, "a/1/2", 1, 0));
    assert_int_equal(iot_dedup_add(d, "a/1/1", 2, 0), 1);
    assert_int_equal(iot_dedup_add(d, "a/1/2", 1, 0), 1);
    assert_int_equal(iot_dedup_streams(d), 3);
    iot_dedup_free(d);
}

static void test_many_streams(void **state)
{
    (void)state;
    struct iot_dedup *d = iot_dedup_new();
    char key[32];
    for (int p = 0; p < 5000; p++) {
        snprintf(key, sizeof key, "node%d/%d/1", p % 17, p);
        for (uint64_t s = 0; s < 20; s += 2) /* every other seq: all above the floor */
            assert_int_equal(iot_dedup_add(d, key, (uint64_t)p * 31, s + 1), 1);
    }
    assert_int_equal(iot_dedup_streams(d), 5000);
    assert_int_equal(iot_dedup_pending(d), 5000 * 10);
    for (int p = 0; p < 5000; p++) {
        snprintf(key, sizeof key, "node%d/%d/1", p % 17, p);
        for (uint64_t s = 0; s < 20; s += 2)
            assert_int_equal(iot_dedup_add(d, key, (uint64_t)p * 31, s), 1);
        assert_int_equal(iot_dedup_floor(d, key, (uint64_t)p * 31), 20);
        assert_true(iot_dedup_contains(d, key, (uint64_t)p * 31, 19));
    }
    assert_int_equal(iot_dedup_pending(d), 0);
    iot_dedup_free(d);
}

static void test_large_seq(void **state)
{
    (void)state;
    struct iot_dedup *d = iot_dedup_new();
    assert_int_equal(iot_dedup_add(d, "k", 0, UINT64_MAX - 1), 1);
    assert_true(iot_dedup_contains(d, "k", 0, UINT64_MAX - 1));
    assert_false(iot_dedup_contains(d, "k", 0, 0));
    assert_int_equal(iot_dedup_floor(d, "unknown", 0), 0);
    iot_dedup_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_out_of_order_and_gaps),
        cmocka_unit_test(test_streams_are_separate),
        cmocka_unit_test(test_many_streams),
        cmocka_unit_test(test_large_seq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
