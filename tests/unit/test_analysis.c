/* Unit tests of the analysis pipeline (collector/analysis*.c): the
 * quantile estimator's error bound, the streaming merge (order behind the
 * watermark, idle and closed producers, late events), the matcher (disk
 * operations before their call, grace expiry, collective groups,
 * completions, POSIX calls keeping a window open, the call -> disk
 * operation pairs of the SLOG-2 arrows) and the statistics, a stream of a million
 * events whose in-flight set stays small, and the live reader forgetting
 * processes (interned strings removed, slots reused, no false loss). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analysis.h"
#include "iot_functions.h"
#include "wire.h"

#define T0 1700000000000000000ll
#define US 1000ll
#define MS 1000000ll
#define SEC 1000000000ll
#define JOB 1
#define RANK(r) ((uint64_t)(r) << 40)

/* ---- events ------------------------------------------------------------ */

static struct xp_event call(uint32_t producer, uint16_t func, uint64_t callid, int64_t start,
                            int64_t dur, uint64_t bytes)
{
    return (struct xp_event){.kind = XP_MPIIO, .producer = producer, .job = JOB, .func = func,
                             .callid = callid, .file = 0xF11E, .bytes = bytes, .xfer = bytes,
                             .t_start = start, .t_end = start + dur, .offset = 0};
}

static struct xp_event coll(uint32_t producer, uint64_t callid, uint64_t seq, int64_t start,
                            int64_t dur, uint64_t bytes)
{
    struct xp_event ev = call(producer, IOT_F_MPIIO_MPI_File_write_at_all, callid, start, dur,
                              bytes);
    ev.coll_seq = seq;
    return ev;
}

static struct xp_event disk(uint32_t producer, uint64_t callid, int64_t start, int64_t dur,
                            uint64_t bytes)
{
    return (struct xp_event){.kind = XP_DISK, .producer = producer, .job = JOB,
                             .func = IOT_F_DISK_writev, .callid = callid, .file = 0xD15C,
                             .bytes = bytes, .t_start = start, .t_end = start + dur,
                             .ret = (int64_t)bytes};
}

/* ---- quantiles --------------------------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_quantile_small_values_exact(void **state)
{
    (void)state;
    struct iot_qhist h;
    iot_qhist_init(&h);
    assert_int_equal(iot_qhist_quantile(&h, 0.5), 0);
    for (uint64_t v = 1; v <= 200; v++)
        assert_int_equal(iot_qhist_add(&h, v), 0);
    assert_int_equal(iot_qhist_quantile(&h, 0.5), 100);
    assert_int_equal(iot_qhist_quantile(&h, 0.99), 198);
    assert_int_equal(iot_qhist_quantile(&h, 1.0), 200);
    assert_int_equal(iot_qhist_quantile(&h, 0.001), 1);
    iot_qhist_free(&h);
}

/* Every quantile of a log-uniform sample over 12 orders of magnitude is
 * within the documented relative error of the exact nearest-rank value. */
static void test_quantile_error_bound(void **state)
{
    (void)state;
    enum { N = 300000 };
    uint64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    struct iot_qhist h;
    iot_qhist_init(&h);
    for (size_t i = 0; i < N; i++) {
        unsigned octave = (unsigned)(next_rand() % 40);
        v[i] = (1ull << octave) + next_rand() % (1ull << octave);
        assert_int_equal(iot_qhist_add(&h, v[i]), 0);
    }
    qsort(v, N, sizeof *v, cmp_u64);
    const double ps[] = {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0};
    double bound = iot_qhist_relative_error();
    assert_true(bound < 0.004);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        size_t rank = (size_t)(ps[k] * N + 0.999999);
        uint64_t exact = v[rank - 1], got = iot_qhist_quantile(&h, ps[k]);
        double err = (double)(got > exact ? got - exact : exact - got) / (double)exact;
        assert_true(err <= bound);
    }
    assert_true(h.bytes <= IOT_QHIST_BLOCKS * 128 * sizeof(uint64_t));
    iot_qhist_free(&h);
    free(v);
}

/* ---- merge --------------------------------------------------------------- */

struct seen {
    int64_t t[64];
    uint32_t producer[64];
    size_t n;
};

static int record(void *ctx, const struct xp_event *ev)
{
    struct seen *s = ctx;
    if (s->n < 64) {
        s->t[s->n] = ev->t_start;
        s->producer[s->n] = ev->producer;
    }
    s->n++;
    return 0;
}

static void push_at(struct iot_merge *m, uint32_t producer, int64_t t)
{
    struct xp_event ev = disk(producer, 0, t, 10, 0);
    assert_int_equal(iot_merge_push(m, &ev), 0);
}

/* Producer 1 runs ahead; nothing passes producer 0's newest start minus the
 * lateness until producer 0 catches up; the output is in time order. */
static void test_merge_interleaved(void **state)
{
    (void)state;
    struct iot_merge m;
    struct iot_merge_config cfg = {.lateness_ns = 100};
    iot_merge_init(&m, &cfg);
    struct seen s = {0};
    push_at(&m, 1, T0 + 500);
    push_at(&m, 1, T0 + 1000);
    push_at(&m, 0, T0 + 300);
    push_at(&m, 0, T0 + 100);
    assert_int_equal(iot_merge_advance(&m, T0 + 10 * SEC, record, &s), 0);
    assert_int_equal(s.n, 1); /* watermark: min(300, 1000) - 100 = 200 */
    assert_int_equal(s.t[0], T0 + 100);
    push_at(&m, 0, T0 + 900);
    push_at(&m, 0, T0 + 700);
    assert_int_equal(iot_merge_advance(&m, T0 + 10 * SEC, record, &s), 0);
    assert_int_equal(s.n, 4); /* watermark 800: 300, 500, 700 */
    assert_int_equal(s.t[1], T0 + 300);
    assert_int_equal(s.t[2], T0 + 500);
    assert_int_equal(s.t[3], T0 + 700);
    assert_int_equal(m.heap_n, 2);
    assert_int_equal(iot_merge_finish(&m, record, &s), 0);
    assert_int_equal(s.n, 6);
    assert_int_equal(s.t[4], T0 + 900);
    assert_int_equal(s.t[5], T0 + 1000);
    assert_int_equal(m.late, 0);
    iot_merge_free(&m);
}

/* A closed producer, and one silent for longer than `idle`, stop holding
 * the watermark back; an event behind the released order is still
 * delivered, counted as late. */
static void test_merge_closed_idle_late(void **state)
{
    (void)state;
    struct iot_merge m;
    struct iot_merge_config cfg = {.lateness_ns = 0, .idle_ns = SEC};
    iot_merge_init(&m, &cfg);
    struct seen s = {0};
    push_at(&m, 0, T0 + 100);
    push_at(&m, 1, T0 + 5000);
    push_at(&m, 2, T0 + 6000);
    assert_int_equal(iot_merge_advance(&m, T0, record, &s), 0); /* arrival time T0 bounds it */
    assert_int_equal(s.n, 0);
    assert_int_equal(iot_merge_advance(&m, T0 + 100 * US, record, &s), 0);
    assert_int_equal(s.n, 1); /* producer 0 holds it at 100 */
    iot_merge_close_producer(&m, 0);
    assert_int_equal(iot_merge_advance(&m, T0 + 100 * US, record, &s), 0);
    assert_int_equal(s.n, 2); /* now producer 1, at 5000 */
    push_at(&m, 2, T0 + 7000);
    assert_int_equal(iot_merge_advance(&m, T0 + 2 * SEC, record, &s), 0);
    assert_int_equal(s.n, 4); /* producer 1 silent for 2 s: only producer 2 counts */
    push_at(&m, 1, T0 + 50); /* behind everything released */
    assert_int_equal(iot_merge_advance(&m, T0 + 2 * SEC, record, &s), 0);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.t[4], T0 + 50);
    assert_int_equal(m.late, 1);
    assert_int_equal(m.max_late_ns, 7000 - 50);
    iot_merge_free(&m);
}

/* A producer whose slot goes to another must hold nothing first. */
static void test_merge_forget_producer(void **state)
{
    (void)state;
    struct iot_merge m;
    struct iot_merge_config cfg = {.lateness_ns = 0, .idle_ns = SEC};
    iot_merge_init(&m, &cfg);
    struct seen s = {0};
    push_at(&m, 0, T0 + 100);
    push_at(&m, 1, T0 + 5000);
    assert_int_equal(iot_merge_forget_producer(&m, 0), -1); /* pushed since the last advance */
    assert_int_equal(iot_merge_advance(&m, T0 + 100 * US, record, &s), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(iot_merge_forget_producer(&m, 1), -1); /* holds its event at 5000 */
    /* Producer 0 holds nothing but still bounds the watermark at 100;
     * forgotten, it no longer does. */
    assert_int_equal(iot_merge_forget_producer(&m, 0), 0);
    assert_int_equal(iot_merge_advance(&m, T0 + 100 * US, record, &s), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(iot_merge_forget_producer(&m, 1), 0);
    assert_int_equal(iot_merge_last_arrival(&m, 1), INT64_MIN);
    assert_int_equal(iot_merge_forget_producer(&m, 7), 0); /* never seen */
    push_at(&m, 0, T0 + 9000); /* its slot, another producer */
    assert_int_equal(iot_merge_advance(&m, T0 + 200 * US, record, &s), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(m.late, 0);
    iot_merge_free(&m);
}

/* Many producers and kinds, events arriving out of start order by a few
 * places (put in their place in their queue) and by many (held apart),
 * advances between pushes: every event comes out once, in order of (start,
 * arrival), none late while the lateness covers the disorder. */
struct order_check {
    int64_t last_t;
    uint64_t last_order, n;
    uint8_t *seen;
};

static int check_order(void *ctx, const struct xp_event *ev)
{
    struct order_check *c = ctx;
    if (c->n)
        assert_true(ev->t_start > c->last_t ||
                    (ev->t_start == c->last_t && ev->order > c->last_order));
    assert_false(c->seen[ev->order]);
    c->seen[ev->order] = 1;
    c->last_t = ev->t_start;
    c->last_order = ev->order;
    c->n++;
    return 0;
}

static void test_merge_disorder(void **state)
{
    (void)state;
    enum { N = 60000, PRODUCERS = 6 };
    struct iot_merge m;
    struct iot_merge_config cfg = {.lateness_ns = 2000000};
    iot_merge_init(&m, &cfg);
    struct order_check c = {.seen = calloc(N, 1)};
    assert_non_null(c.seen);
    int64_t clock[PRODUCERS] = {0}, newest = T0;
    for (uint64_t i = 0; i < N; i++) {
        uint32_t p = (uint32_t)(next_rand() % PRODUCERS);
        clock[p] += (int64_t)(next_rand() % 1000);
        uint64_t r = next_rand() % 100;
        /* mostly in order; some a few places back, some far back, ties */
        int64_t back = r < 70 ? 0 : r < 95 ? (int64_t)(next_rand() % 5000)
                                           : (int64_t)(next_rand() % 1000000);
        struct xp_event ev = disk(p, 0, T0 + clock[p] - back, 10, 0);
        if (r == 99)
            ev.t_start = T0 + clock[p]; /* equal to the tail's start */
        ev.kind = (uint8_t)(next_rand() % 3);
        ev.order = i;
        if (ev.t_start > newest)
            newest = ev.t_start;
        assert_int_equal(iot_merge_push(&m, &ev), 0);
        if (i % 97 == 0)
            assert_int_equal(iot_merge_advance(&m, newest, check_order, &c), 0);
    }
    assert_int_equal(iot_merge_finish(&m, check_order, &c), 0);
    assert_int_equal(c.n, N);
    assert_int_equal(m.late, 0);
    assert_true(m.stragglers > N / 8);
    assert_true(m.strag_cap > 0); /* some went to the heap of their own */
    free(c.seen);
    iot_merge_free(&m);
}

/* ---- matcher ------------------------------------------------------------ */

struct closed_list {
    struct iot_match_closed v[2048];
    size_t n;
};

static void collect(void *ctx, const struct iot_match_closed *c)
{
    struct closed_list *l = ctx;
    assert_true(l->n < sizeof l->v / sizeof l->v[0]);
    l->v[l->n++] = *c;
}

static void feed(struct iot_match *m, struct xp_event ev)
{
    iot_match_expire(m, ev.t_start);
    assert_int_equal(iot_match_event(m, &ev), 0);
}

static void test_match_call_then_disk(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 100 * US, collect, &l), 0);
    feed(&m, call(0, IOT_F_MPIIO_MPI_File_write_at, RANK(0) | 1, T0, 50 * US, 4096));
    feed(&m, disk(9, RANK(0) | 1, T0 + 10 * US, 5 * US, 4096));
    feed(&m, disk(8, RANK(0) | 1, T0 + 20 * US, 7 * US, 4096));
    iot_match_expire(&m, T0 + 150 * US); /* end + grace = 150 us: still open */
    assert_int_equal(l.n, 0);
    iot_match_expire(&m, T0 + 151 * US);
    assert_true(l.n <= 1); /* over; reported when its bucket is swept */
    iot_match_expire(&m, T0 + 151 * US + IOT_MATCH_BUCKET_NS);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].func, IOT_F_MPIIO_MPI_File_write_at);
    assert_int_equal(l.v[0].ops, 2);
    assert_int_equal(l.v[0].own_bytes, 8192);
    assert_int_equal(l.v[0].own_time_ns, 12 * US);
    assert_int_equal(l.v[0].expect_disk, 1);
    assert_int_equal(l.v[0].group_size, 0);
    assert_int_equal(m.n_entries, 0);
    iot_match_free(&m);
}

/* The disk operation comes first (the call is recorded at its end, or a
 * clock error puts the operation earlier): it is held, then taken. */
static void test_match_disk_before_call(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 100 * US, collect, &l), 0);
    feed(&m, disk(9, RANK(3) | 7, T0 + 10 * US, 5 * US, 100));
    feed(&m, call(0, IOT_F_MPIIO_MPI_File_read_at, RANK(3) | 7, T0 + 50 * US, 10 * US, 100));
    iot_match_finish(&m);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].func, IOT_F_MPIIO_MPI_File_read_at);
    assert_int_equal(l.v[0].ops, 1);
    assert_int_equal(l.v[0].own_bytes, 100);
    iot_match_free(&m);
}

/* Past the grace period a held disk operation is reported without a call
 * (func 0) and a read without disk operations as expecting one; a disk
 * operation starting after its call's window does not match either. */
static void test_match_grace_expiry(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 100 * US, collect, &l), 0);
    feed(&m, disk(9, RANK(1) | 1, T0, 5 * US, 100));
    feed(&m, call(0, IOT_F_MPIIO_MPI_File_read_at, RANK(1) | 1, T0 + 106 * US, 10 * US, 100));
    assert_int_equal(l.n, 1); /* expired at 105 us, before the call started */
    assert_int_equal(l.v[0].func, 0);
    assert_int_equal(l.v[0].own_ops, 1);
    feed(&m, disk(9, RANK(1) | 1, T0 + 217 * US, 5 * US, 100)); /* window ended at 216 us */
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[1].func, IOT_F_MPIIO_MPI_File_read_at);
    assert_int_equal(l.v[1].ops, 0);
    assert_int_equal(l.v[1].expect_disk, 1);
    feed(&m, call(0, IOT_F_MPIIO_MPI_File_sync, RANK(1) | 2, T0 + 300 * US, 10 * US, 0));
    iot_match_finish(&m);
    assert_int_equal(l.n, 4);
    assert_int_equal(l.v[2].func, 0); /* the late disk operation, alone */
    assert_int_equal(l.v[3].func, IOT_F_MPIIO_MPI_File_sync);
    assert_int_equal(l.v[3].expect_disk, 0);
    assert_int_equal(m.n_entries, 0);
    iot_match_free(&m);
}

/* Three ranks' calls of one collective; the aggregators (ranks 0 and 2)
 * issue the disk operations: every member counts all three. */
static void test_match_collective_group(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 100 * US, collect, &l), 0);
    feed(&m, disk(9, RANK(2) | 5, T0 - 1 * US, 3 * US, 512)); /* before any call */
    feed(&m, coll(0, RANK(0) | 5, 4, T0, 500 * US, 1000));
    feed(&m, coll(1, RANK(1) | 5, 4, T0 + 10 * US, 490 * US, 1000));
    feed(&m, disk(9, RANK(0) | 5, T0 + 100 * US, 30 * US, 2048));
    feed(&m, coll(2, RANK(2) | 5, 4, T0 + 20 * US, 600 * US, 1000));
    feed(&m, disk(8, RANK(0) | 5, T0 + 650 * US, 30 * US, 2048)); /* inside the group's window */
    iot_match_expire(&m, T0 + 701 * US); /* rank 0's own window is over, not the group's */
    assert_int_equal(l.n, 0);
    iot_match_expire(&m, T0 + 721 * US + IOT_MATCH_BUCKET_NS);
    assert_int_equal(l.n, 3);
    uint64_t bytes = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(l.v[i].ops, 3);
        assert_int_equal(l.v[i].group_size, 3);
        assert_int_equal(l.v[i].func, IOT_F_MPIIO_MPI_File_write_at_all);
        bytes += l.v[i].own_bytes;
    }
    assert_int_equal(bytes, 512 + 2048 + 2048); /* each operation once */
    assert_int_equal(m.n_groups, 0);
    iot_match_free(&m);
}

/* The same (file, sequence number) again from a rank already in the group
 * (a reopened file handle) starts a new group. */
static void test_match_group_reuse(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, SEC, collect, &l), 0);
    feed(&m, coll(0, RANK(0) | 1, 1, T0, 10 * US, 8));
    feed(&m, coll(1, RANK(1) | 1, 1, T0 + 1 * US, 10 * US, 8));
    feed(&m, disk(9, RANK(0) | 1, T0 + 2 * US, 1 * US, 8));
    feed(&m, coll(0, RANK(0) | 9, 1, T0 + 50 * US, 10 * US, 8));
    feed(&m, coll(1, RANK(1) | 9, 1, T0 + 51 * US, 10 * US, 8));
    iot_match_finish(&m);
    assert_int_equal(l.n, 4);
    int first = 0, second = 0;
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(l.v[i].group_size, 2);
        if (l.v[i].ops == 1)
            first++;
        else if (l.v[i].ops == 0)
            second++;
    }
    assert_int_equal(first, 2);
    assert_int_equal(second, 2);
    iot_match_free(&m);
}

/* Calls with equal (file, sequence number) on handles of different
 * communicators (each rank on MPI_COMM_SELF: coll_group differs) are not
 * one collective: each counts its own disk operation.  Two ranks of one
 * communicator (the same coll_group) still are. */
static void test_match_group_communicator(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, SEC, collect, &l), 0);
    for (uint32_t r = 0; r < 4; r++) {
        struct xp_event ev = coll(r, RANK(r) | 2, 2, T0 + r * US, 10 * US, 8);
        ev.coll_group = 0x5E1F00 + r;
        feed(&m, ev);
        feed(&m, disk(9, RANK(r) | 2, T0 + r * US + 2 * US, 1 * US, 8));
    }
    for (uint32_t r = 0; r < 2; r++) {
        struct xp_event ev = coll(r, RANK(r) | 3, 3, T0 + 20 * US + r * US, 10 * US, 8);
        ev.coll_group = 0xC0FFEE;
        feed(&m, ev);
        feed(&m, disk(9, RANK(r) | 3, T0 + 22 * US + r * US, 1 * US, 8));
    }
    iot_match_finish(&m);
    assert_int_equal(l.n, 6);
    int alone = 0, paired = 0;
    for (size_t i = 0; i < 6; i++) {
        if (l.v[i].group_size == 1 && l.v[i].ops == 1)
            alone++;
        else if (l.v[i].group_size == 2 && l.v[i].ops == 2)
            paired++;
    }
    assert_int_equal(alone, 4);
    assert_int_equal(paired, 2);
    assert_int_equal(m.n_groups, 0);
    iot_match_free(&m);
}

/* A non-blocking write: the disk operation happens after the issuing call
 * returned, before MPI_Wait completes it; the Wait keeps the window open
 * and the operation counts for MPI_File_iwrite_at. */
static void test_match_completion(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 10 * US, collect, &l), 0);
    feed(&m, call(0, IOT_F_MPIIO_MPI_File_iwrite_at, RANK(0) | 3, T0, 5 * US, 64));
    struct xp_event wait = call(0, IOT_F_MPIIO_MPI_Wait, RANK(0) | 3, T0 + 10 * US, 200 * US, 64);
    feed(&m, wait);
    feed(&m, disk(9, RANK(0) | 3, T0 + 150 * US, 10 * US, 64));
    struct xp_event posix = disk(0, RANK(0) | 3, T0 + 151 * US, 1, 64);
    posix.kind = XP_POSIX;
    feed(&m, posix); /* ignored */
    iot_match_finish(&m);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].func, IOT_F_MPIIO_MPI_File_iwrite_at);
    assert_int_equal(l.v[0].ops, 1);
    assert_true(iot_match_is_completion(IOT_F_MPIIO_MPI_Wait));
    assert_true(iot_match_is_completion(IOT_F_MPIIO_MPI_File_write_all_end));
    assert_false(iot_match_is_completion(IOT_F_MPIIO_MPI_File_write_all_begin));
    assert_true(iot_match_is_transfer(IOT_F_MPIIO_MPI_File_write_all_begin));
    assert_true(iot_match_is_transfer(IOT_F_MPIIO_MPI_File_iread_at_all_c));
    assert_false(iot_match_is_transfer(IOT_F_MPIIO_MPI_File_open));
    assert_false(iot_match_is_transfer(IOT_F_MPIIO_MPI_Wait));
    iot_match_free(&m);
}

/* Pairs for arrows: each disk operation once with its call, whichever came
 * first, with the tags given; a completion stands in until the issuing
 * call is seen; nothing pairs after the window closed, and nothing held
 * outlives its entry. */
struct pair_list {
    struct {
        uint64_t call_start, disk_start;
        uint16_t call_func;
        uint32_t call_tag, disk_tag;
    } v[16];
    int n;
};

static int collect_pair(void *ctx, const struct xp_event *c, uint32_t ctag,
                        const struct xp_event *d, uint32_t dtag)
{
    struct pair_list *p = ctx;
    assert_true(p->n < 16);
    assert_int_equal(c->callid, d->callid);
    p->v[p->n].call_start = (uint64_t)c->t_start;
    p->v[p->n].disk_start = (uint64_t)d->t_start;
    p->v[p->n].call_func = c->func;
    p->v[p->n].call_tag = ctag;
    p->v[p->n].disk_tag = dtag;
    p->n++;
    return 0;
}

static void test_match_pairs(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    struct pair_list p = {0};
    assert_int_equal(iot_match_init(&m, 100 * US, collect, &l), 0);
    iot_match_set_pairs(&m, collect_pair, &p);
    struct xp_event ev = disk(9, RANK(0) | 1, T0, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 70), 0); /* before its call: held */
    ev = disk(8, RANK(0) | 1, T0 + 1 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 71), 0);
    assert_int_equal(p.n, 0);
    assert_int_equal(m.n_held, 2);
    ev = call(0, IOT_F_MPIIO_MPI_File_write_at, RANK(0) | 1, T0 + 2 * US, 50 * US, 20);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 5), 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(m.n_held, 0);
    ev = disk(9, RANK(0) | 1, T0 + 10 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 72), 0); /* after: paired at once */
    assert_int_equal(p.n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p.v[i].call_tag, 5);
        assert_int_equal(p.v[i].call_start, T0 + 2 * US);
    }
    assert_int_equal(p.v[0].disk_tag + p.v[1].disk_tag, 70 + 71);
    assert_int_equal(p.v[2].disk_tag, 72);

    /* Only a completion seen: it is the call; then the issuing call. */
    ev = disk(9, RANK(1) | 4, T0 + 20 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 80), 0);
    ev = call(1, IOT_F_MPIIO_MPI_Wait, RANK(1) | 4, T0 + 21 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 6), 0);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.v[3].call_func, IOT_F_MPIIO_MPI_Wait);
    ev = call(1, IOT_F_MPIIO_MPI_File_iwrite_at, RANK(1) | 4, T0 + 22 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 7), 0);
    ev = disk(9, RANK(1) | 4, T0 + 23 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 81), 0);
    assert_int_equal(p.n, 5);
    assert_int_equal(p.v[4].call_func, IOT_F_MPIIO_MPI_File_iwrite_at);
    assert_int_equal(p.v[4].call_tag, 7);

    /* Held past the window: closed unmatched, never paired, freed. */
    ev = disk(9, RANK(2) | 9, T0 + 30 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 90), 0);
    iot_match_expire(&m, T0 + 200 * US);
    ev = call(2, IOT_F_MPIIO_MPI_File_write_at, RANK(2) | 9, T0 + 200 * US, 5 * US, 10);
    assert_int_equal(iot_match_event_tagged(&m, &ev, 8), 0);
    iot_match_finish(&m);
    assert_int_equal(p.n, 5);
    assert_int_equal(m.n_held, 0);
    assert_int_equal(m.peak_held, 2);
    assert_int_equal(m.n_entries, 0);
    iot_match_free(&m);
}

/* A long call is recorded only when it returns, long after the disk
 * operations of its early writes: the POSIX calls it makes meanwhile (with
 * its CallID) keep them waiting for it; without them they are given up. */
/* Windows longer than the timing wheel's turn (4.3 s) go round it: still
 * open after several turns, closed once over; and the index's pages are
 * given back when the calls in them close. */
static void test_match_long_windows(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 10 * SEC, collect, &l), 0);
    for (uint64_t i = 1; i <= 1000; i++)
        feed(&m, call(0, IOT_F_MPIIO_MPI_File_write_at, RANK(3) | i, T0 + (int64_t)i * US, US, 8));
    assert_true(m.calls.n_pages >= 1000 / 64);
    for (int64_t t = 1; t < 10; t++)
        iot_match_expire(&m, T0 + t * SEC);
    assert_int_equal(l.n, 0);
    feed(&m, disk(9, RANK(3) | 1000, T0 + 9900 * 1000 * US, US, 8)); /* inside its window */
    iot_match_expire(&m, T0 + 10 * SEC + 2 * US); /* CallID 1's window ends here */
    assert_int_equal(l.n, 0);
    iot_match_expire(&m, T0 + 60 * SEC); /* a jump of several turns */
    assert_int_equal(l.n, 1000);
    uint32_t ops = 0;
    for (size_t i = 0; i < l.n; i++)
        ops += l.v[i].ops;
    assert_int_equal(ops, 1);
    assert_int_equal(m.n_entries, 0);
    assert_int_equal(m.calls.n_pages, 0);
    /* Out of a window by one nanosecond: a new entry. */
    feed(&m, call(0, IOT_F_MPIIO_MPI_File_read_at, RANK(3) | 5000, T0 + 70 * SEC, US, 8));
    iot_match_expire(&m, T0 + 80 * SEC + US + 1);
    feed(&m, disk(9, RANK(3) | 5000, T0 + 80 * SEC + US + 1, US, 8));
    iot_match_finish(&m);
    assert_int_equal(l.n, 1002);
    assert_int_equal(l.v[1000].ops, 0);
    assert_int_equal(l.v[1001].func, 0);
    iot_match_free(&m);
}

static void test_match_posix_keeps_window(void **state)
{
    (void)state;
    struct iot_match m;
    struct closed_list l = {0};
    assert_int_equal(iot_match_init(&m, 100 * US, collect, &l), 0);
    struct xp_event posix = disk(0, RANK(0) | 7, T0 + 50 * US, 100 * US, 64);
    posix.kind = XP_POSIX;
    feed(&m, disk(9, RANK(0) | 7, T0, 10 * US, 64)); /* held until 110 us */
    feed(&m, disk(9, RANK(0) | 8, T0, 10 * US, 64)); /* its call makes no POSIX call */
    feed(&m, posix);                                 /* until 250 us */
    posix.t_start = T0 + 180 * US, posix.t_end = T0 + 230 * US;
    feed(&m, posix); /* until 330 us */
    iot_match_expire(&m, T0 + 320 * US); /* CallID 8's window is over, 7's is not */
    struct xp_event late = call(0, IOT_F_MPIIO_MPI_File_write_at_all, RANK(0) | 7, T0, 400 * US,
                                64);
    assert_int_equal(iot_match_event(&m, &late), 0); /* arrives behind the others */
    iot_match_finish(&m);
    assert_int_equal(l.n, 2);
    size_t c = l.v[0].func ? 0 : 1; /* the order of one sweep is not defined */
    assert_int_equal(l.v[1 - c].func, 0);
    assert_int_equal(l.v[1 - c].own_ops, 1);
    assert_int_equal(l.v[c].func, IOT_F_MPIIO_MPI_File_write_at_all);
    assert_int_equal(l.v[c].ops, 1);
    iot_match_free(&m);
}

/* ---- the pipeline and its statistics ----------------------------------- */

static struct iot_an_config small_windows(void)
{
    return (struct iot_an_config){.lateness_ns = 100 * US, .grace_ns = 100 * US,
                                  .idle_ns = SEC};
}

static void push(struct iot_an *an, struct xp_event ev)
{
    assert_int_equal(iot_an_push(an, &ev), 0);
}

/* Producers 0 and 1 are ranks, 8 and 9 servers (server ids 2 and 1). */
static void test_stats_small_job(void **state)
{
    (void)state;
    struct iot_an an;
    struct iot_an_config cfg = small_windows();
    assert_int_equal(iot_an_init(&an, &cfg), 0);
    assert_int_equal(iot_an_producer(&an, 8, 2), 0);
    assert_int_equal(iot_an_producer(&an, 9, 1), 0);
    push(&an, disk(9, RANK(0) | 1, T0 + 10 * US, 20 * US, 1000)); /* server 1: [10, 30) */
    push(&an, disk(9, RANK(0) | 1, T0 + 20 * US, 20 * US, 1000)); /* [20, 40): union 30 us */
    push(&an, disk(8, RANK(1) | 1, T0 + 60 * US, 10 * US, 500));
    push(&an, disk(9, 0, T0 + 300 * US, 10 * US, 7)); /* no CallID: server only */
    push(&an, disk(9, RANK(5) | 5, T0 + 400 * US, 10 * US, 3)); /* no such call */
    assert_int_equal(iot_an_advance(&an, T0), 0);
    push(&an, call(0, IOT_F_MPIIO_MPI_File_write_at, RANK(0) | 1, T0, 50 * US, 2000));
    push(&an, call(1, IOT_F_MPIIO_MPI_File_read_at, RANK(1) | 1, T0 + 55 * US, 20 * US, 500));
    push(&an, call(1, IOT_F_MPIIO_MPI_File_read_at, RANK(1) | 2, T0 + 80 * US, 40 * US, 100));
    struct xp_event drop = {.kind = XP_DROP, .producer = 1, .job = JOB, .bytes = 6,
                            .t_start = T0 + 90 * US, .t_end = T0 + 90 * US};
    push(&an, drop);
    assert_int_equal(iot_an_advance(&an, T0 + SEC), 0);
    assert_int_equal(iot_an_finish(&an), 0);

    const struct iot_an_job *j = an.stats.job[JOB];
    assert_non_null(j);
    const struct iot_an_func *w = j->func[IOT_F_MPIIO_MPI_File_write_at];
    const struct iot_an_func *r = j->func[IOT_F_MPIIO_MPI_File_read_at];
    assert_int_equal(w->count, 1);
    assert_int_equal(w->disk_bytes, 2000);
    assert_int_equal(w->ops_hist[2], 1);
    assert_int_equal(r->count, 2);
    assert_int_equal(r->bytes, 600);
    assert_int_equal(r->time_ns, 60 * US);
    assert_int_equal(r->samples, 2);
    assert_int_equal(r->ops_sum, 1);
    assert_int_equal(r->ops_hist[0], 1);
    assert_int_equal(r->ops_hist[1], 1);
    assert_int_equal(j->unmatched_calls, 1);
    assert_int_equal(j->unmatched_disk_ops, 1);
    assert_int_equal(j->dropped_events, 6);
    assert_int_equal(j->call_bytes, 2600);
    assert_int_equal(j->disk_bytes, 2510);
    assert_int_equal(j->attr_disk_bytes, 2500);
    assert_int_equal(j->attr_disk_time_ns, 50 * US);
    assert_int_equal(j->call_time_ns, 110 * US);
    assert_int_equal(j->server[1].ops, 4);
    assert_int_equal(iot_an_busy_ns(&j->server[1]), 50 * US);
    assert_int_equal(iot_an_busy_ns(&j->server[2]), 10 * US);
    assert_int_equal(an.merge.late, 0);
    iot_an_free(&an);
}

static void test_ops_buckets(void **state)
{
    (void)state;
    const uint64_t ops[] = {0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 1000000};
    const unsigned want[] = {0, 1, 2, 3, 3, 4, 4, 5, 5, 6, 6};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        assert_int_equal(iot_an_ops_bucket(ops[i]), want[i]);
}

/* A million events (330 k calls, each with two disk operations on two of
 * four servers, and a completion record every tenth call), from 8 ranks and
 * 4 servers in batches that interleave: every call is matched, and the
 * entries and events held stay at what is in flight, independent of the
 * length of the stream. */
static void test_bounded_memory(void **state)
{
    (void)state;
    enum { RANKS = 8, SERVERS = 4, PER_BATCH = 64, CALLS = 330000 };
    struct iot_an an;
    struct iot_an_config cfg = {.lateness_ns = 200 * US, .grace_ns = 100 * US, .idle_ns = SEC};
    assert_int_equal(iot_an_init(&an, &cfg), 0);
    for (uint32_t s = 0; s < SERVERS; s++)
        assert_int_equal(iot_an_producer(&an, RANKS + s, s + 1), 0);
    uint64_t events = 0, completions = 0;
    for (uint64_t c = 0; c < CALLS; c += PER_BATCH) {
        for (uint64_t i = c; i < c + PER_BATCH && i < CALLS; i++) {
            uint32_t rank = (uint32_t)(i % RANKS);
            int64_t t = T0 + (int64_t)i * 2 * US;
            uint64_t id = RANK(rank) | (i / RANKS + 1);
            push(&an, disk(RANKS + (uint32_t)(i % SERVERS), id, t + 5 * US, 3 * US, 4096));
            push(&an, disk(RANKS + (uint32_t)((i + 1) % SERVERS), id, t + 6 * US, 3 * US, 4096));
            push(&an, call(rank, IOT_F_MPIIO_MPI_File_write_at, id, t, 10 * US, 4096));
            events += 3;
            if (i % 10 == 0) {
                push(&an, call(rank, IOT_F_MPIIO_MPI_Wait, id, t + 10 * US, 1 * US, 4096));
                events++, completions++;
            }
        }
        assert_int_equal(iot_an_advance(&an, T0 + (int64_t)(c + PER_BATCH) * 2 * US), 0);
    }
    assert_int_equal(iot_an_finish(&an), 0);
    assert_true(events >= 1000000);
    struct iot_an_memory mem;
    iot_an_memory(&an, &mem);
    assert_int_equal(mem.pushed, events);
    assert_int_equal(mem.entries_held, 0);
    assert_int_equal(mem.events_held, 0);
    /* In flight: about (lateness + grace + duration) / 2 us = 155 calls. */
    assert_true(mem.entries_peak < 1000);
    assert_true(mem.events_peak < 2000);
    assert_true(mem.match_bytes < 256 * 1024);
    const struct iot_an_job *j = an.stats.job[JOB];
    assert_int_equal(j->func[IOT_F_MPIIO_MPI_File_write_at]->samples, CALLS);
    assert_int_equal(j->func[IOT_F_MPIIO_MPI_File_write_at]->ops_hist[2], CALLS);
    assert_int_equal(j->func[IOT_F_MPIIO_MPI_Wait]->count, completions);
    assert_int_equal(j->unmatched_calls, 0);
    assert_int_equal(j->unmatched_disk_ops, 0);
    assert_int_equal(j->disk_ops, 2 * CALLS);
    assert_int_equal(an.merge.late, 0);
    iot_an_free(&an);
}

/* ---- forgetting processes (events.c) ------------------------------------ */

/* Removing strings from a table without tombstones: whatever else is in
 * it, over wrap-arounds and clusters, stays found under its index. */
static void test_unintern(void **state)
{
    (void)state;
    struct xp_strings t = {0};
    enum { N = 6000 };
    char buf[32];
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "producer-%d", i);
        assert_int_equal(xp_intern(&t, buf), i);
    }
    for (int i = 0; i < N; i++)
        if (next_rand() % 3 == 0)
            xp_unintern(&t, (uint32_t)i);
    xp_unintern(&t, N + 5); /* out of range: nothing */
    size_t next = N;
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "producer-%d", i);
        if (xp_string(&t, (uint32_t)i)[0]) {
            assert_string_equal(xp_string(&t, (uint32_t)i), buf);
            assert_int_equal(xp_intern(&t, buf), i);
        } else {
            assert_int_equal(xp_intern(&t, buf), next++); /* found no more: a new index */
        }
    }
    assert_true(next > N + N / 4);
    xp_strings_free(&t);
}

static char buf_job[32];

struct fed {
    uint64_t events, drops, dropped;
};

static int count_fed(void *ctx, const struct xp_data *d, const struct xp_event *ev, char *err,
                     size_t errlen)
{
    (void)d, (void)err, (void)errlen;
    struct fed *f = ctx;
    f->events++;
    if (ev->kind == XP_DROP) {
        f->drops++;
        f->dropped += ev->bytes;
    }
    return 0;
}

/* Batch `seq` of process `pid` (two MPI-IO events, a file name), made
 * through (seq + 1) * 2 events. */
static void feed_batch(struct xp_data *d, struct fed *f, uint32_t pid, uint64_t seq)
{
    uint32_t func[] = {IOT_F_MPIIO_MPI_File_write_at, IOT_F_MPIIO_MPI_File_write_at};
    uint32_t tid[] = {pid, pid};
    uint64_t callid[] = {seq * 2 + 1, seq * 2 + 2}, file[] = {0xF11E, 0xF11E};
    uint64_t bytes[] = {8, 8}, dur[] = {100, 100}, zero[] = {0, 0};
    int64_t off[] = {0, 8}, t[] = {T0 + (int64_t)seq * MS, T0 + (int64_t)seq * MS + 500};
    int32_t ret[] = {0, 0};
    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    m.n_func = m.n_tid = m.n_callid = m.n_file = m.n_offset = m.n_bytes = m.n_xfer = 2;
    m.n_t_start = m.n_duration = m.n_ret = m.n_coll_seq = 2;
    m.func = func, m.tid = tid, m.callid = callid, m.file = file, m.offset = off;
    m.bytes = bytes, m.xfer = bytes, m.t_start = t, m.duration = dur, m.ret = ret;
    m.coll_seq = zero;
    char path[64];
    snprintf(path, sizeof path, "/data/of-%u", pid);
    Iotrace__FileName fn = IOTRACE__FILE_NAME__INIT;
    fn.id = 0xF11E;
    fn.path = path;
    Iotrace__FileName *files[] = {&fn};
    iot_body body = IOTRACE__BODY__INIT;
    body.n_files = 1, body.files = files, body.mpiio = &m;
    body.made_through = (seq + 1) * 2;
    iot_producer p = IOTRACE__PRODUCER__INIT;
    p.node = "n1";
    p.pid = pid;
    p.start_time_ns = 1000 + pid;
    p.kind = IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT;
    snprintf(buf_job, sizeof buf_job, "job-%u", pid);
    p.job = buf_job;
    p.rank = 0;
    p.server = "";
    uint8_t *out;
    size_t len;
    char err[256];
    assert_int_equal(iot_wire_encode(&p, 7, seq, &body, &out, &len, err, sizeof err), 0);
    assert_int_equal(xp_feed_batch(d, out, len, (uint64_t)T0, count_fed, NULL, f, err,
                                   sizeof err), 0);
    free(out);
}

static uint32_t slot_of(const struct xp_data *d, uint32_t pid)
{
    for (uint32_t i = 0; i < d->n_producers; i++)
        if (!d->producers[i].retired && d->producers[i].pid == pid)
            return i;
    fail_msg("no producer of pid %u", pid);
    return UINT32_MAX;
}

static void test_retire_producers(void **state)
{
    (void)state;
    struct xp_data d;
    struct fed f = {0};
    assert_int_equal(xp_data_init(&d), 0);
    for (uint32_t pid = 1; pid <= 3; pid++)
        for (uint64_t seq = 0; seq < 2; seq++)
            feed_batch(&d, &f, pid, seq);
    assert_int_equal(d.n_producers, 3);
    uint32_t gone[] = {slot_of(&d, 1), slot_of(&d, 2)}, three = slot_of(&d, 3);
    assert_int_equal(xp_retire_producers(&d, gone, 2), 0);
    assert_int_equal(xp_producers_in_use(&d), 1);
    assert_null(xp_file_path(&d, gone[0], 0xF11E));
    assert_string_equal(xp_file_path(&d, three, 0xF11E), "/data/of-3");

    feed_batch(&d, &f, 3, 2); /* still found under its slot */
    assert_int_equal(slot_of(&d, 3), three);
    feed_batch(&d, &f, 4, 0); /* a new process takes a freed slot */
    uint32_t four = slot_of(&d, 4);
    assert_true(four == gone[0] || four == gone[1]);
    assert_string_equal(xp_file_path(&d, four, 0xF11E), "/data/of-4");
    assert_int_equal(d.n_producers, 3);

    /* A retired process heard of again: what it made before was read, so
     * its running total is no loss. */
    feed_batch(&d, &f, 1, 2);
    assert_int_equal(d.n_producers, 3);
    assert_int_equal(xp_producers_in_use(&d), 3);
    assert_int_equal(f.drops, 0);
    assert_int_equal(d.lost_events, 0);
    /* A process never seen whose first batch is its third: two batches
     * were lost on the way, and that is reported. */
    feed_batch(&d, &f, 9, 2);
    assert_int_equal(d.n_producers, 4);
    assert_int_equal(f.drops, 1);
    assert_int_equal(f.dropped, 4);
    assert_int_equal(d.lost_events, 4);
    xp_data_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_small_values_exact),
        cmocka_unit_test(test_quantile_error_bound),
        cmocka_unit_test(test_merge_interleaved),
        cmocka_unit_test(test_merge_closed_idle_late),
        cmocka_unit_test(test_merge_disorder),
        cmocka_unit_test(test_merge_forget_producer),
        cmocka_unit_test(test_match_call_then_disk),
        cmocka_unit_test(test_match_disk_before_call),
        cmocka_unit_test(test_match_grace_expiry),
        cmocka_unit_test(test_match_collective_group),
        cmocka_unit_test(test_match_group_reuse),
        cmocka_unit_test(test_match_group_communicator),
        cmocka_unit_test(test_match_completion),
        cmocka_unit_test(test_match_long_windows),
        cmocka_unit_test(test_match_posix_keeps_window),
        cmocka_unit_test(test_match_pairs),
        cmocka_unit_test(test_stats_small_job),
        cmocka_unit_test(test_ops_buckets),
        cmocka_unit_test(test_bounded_memory),
        cmocka_unit_test(test_unintern),
        cmocka_unit_test(test_retire_producers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
