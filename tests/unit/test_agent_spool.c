/* The agent's pending store: order, acknowledgement in any order, resend
 * after a lost session, byte accounting and the full mark. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "spool.h"

static void push(struct spool *s, const char *key, uint64_t seq, size_t len)
{
    char data[256];
    memset(data, (int)seq, sizeof data);
    assert_int_equal(spool_push(s, key, 7, seq, data, len), 0);
}

/* Sends everything the credit allows, returning the seqs in send order. */
static size_t send_all(struct spool *s, size_t credit, uint64_t *seqs)
{
    size_t n = 0;
    struct spool_entry *e;
    while (s->in_flight < credit && (e = spool_next_unsent(s))) {
        seqs[n++] = e->seq;
        spool_mark_sent(s, e);
    }
    return n;
}

static void test_order_and_credit(void **state)
{
    (void)state;
    struct spool s;
    assert_int_equal(spool_init(&s, 1 << 20), 0);
    for (uint64_t i = 0; i < 10; i++)
        push(&s, i % 2 ? "b/1/1" : "a/1/1", i, 100);
    assert_int_equal(s.count, 10);
    assert_int_equal(s.bytes, 1000);

    uint64_t seqs[16];
    assert_int_equal(send_all(&s, 4, seqs), 4);
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(seqs[i], i);
    assert_int_equal(s.in_flight, 4);

    /* An out-of-order ACK returns one credit; sending resumes in order. */
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 2), SPOOL_ACK_IN_FLIGHT);
    assert_int_equal(send_all(&s, 4, seqs), 1);
    assert_int_equal(seqs[0], 4);
    assert_int_equal(s.count, 9);
    assert_int_equal(s.bytes, 900);
    spool_free(&s);
}

/* A tail (the agent's `via`) is held right after the batch's bytes, in the
 * entry's one copy, and counts in the bytes held. */
static void test_push_tail(void **state)
{
    (void)state;
    struct spool s;
    assert_int_equal(spool_init(&s, 1 << 20), 0);
    assert_int_equal(spool_push_tail(&s, "a/1/1", 1, 0, "batch", 5, "+via", 4), 0);
    struct spool_entry *e = spool_next_unsent(&s);
    assert_non_null(e);
    assert_int_equal(e->len, 9);
    assert_memory_equal(e->data, "batch+via", 9);
    assert_int_equal(s.bytes, 9);
    spool_free(&s);
}

static void test_ack_lookup(void **state)
{
    (void)state;
    struct spool s;
    spool_init(&s, 1 << 20);
    push(&s, "a/1/1", 0, 10);
    push(&s, "a/1/1", 1, 10);
    /* Wrong key, epoch or seq: nothing is removed. */
    assert_int_equal(spool_ack(&s, "a/1/2", 7, 0), SPOOL_ACK_UNKNOWN);
    assert_int_equal(spool_ack(&s, "a/1/1", 8, 0), SPOOL_ACK_UNKNOWN);
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 5), SPOOL_ACK_UNKNOWN);
    assert_int_equal(s.count, 2);
    /* An ACK for a batch not (re)sent in this session still removes it. */
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 1), SPOOL_ACK_UNSENT);
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 1), SPOOL_ACK_UNKNOWN);
    assert_int_equal(s.in_flight, 0);
    assert_ptr_equal(spool_next_unsent(&s), s.head);
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 0), SPOOL_ACK_UNSENT);
    assert_null(spool_next_unsent(&s));
    assert_null(s.head);
    assert_null(s.tail);
    assert_int_equal(s.bytes, 0);
    spool_free(&s);
}

static void test_resend_after_disconnect(void **state)
{
    (void)state;
    struct spool s;
    spool_init(&s, 1 << 20);
    for (uint64_t i = 0; i < 6; i++)
        push(&s, "a/1/1", i, 10);
    uint64_t seqs[16];
    send_all(&s, 4, seqs);
    spool_ack(&s, "a/1/1", 7, 0);
    spool_ack(&s, "a/1/1", 7, 2);
    spool_unsend_all(&s);
    assert_int_equal(s.in_flight, 0);
    /* Everything not acknowledged, in the original order, sent or not. */
    assert_int_equal(send_all(&s, 64, seqs), 4);
    uint64_t want[] = {1, 3, 4, 5};
    for (int i = 0; i < 4; i++)
        assert_int_equal(seqs[i], want[i]);
    for (struct spool_entry *e = s.head; e; e = e->next)
        assert_int_equal(e->sends, e->seq == 4 || e->seq == 5 ? 1 : 2);
    spool_free(&s);
}

/* DEFERRED: the batch is held again and goes out before every batch not
 * yet sent, in its place; those in flight after it are not sent twice,
 * and deferring what is not in flight changes nothing. */
static void test_defer(void **state)
{
    (void)state;
    struct spool s;
    spool_init(&s, 1 << 20);
    for (uint64_t i = 0; i < 8; i++)
        push(&s, "a/1/1", i, 10);
    uint64_t seqs[16];
    assert_int_equal(send_all(&s, 4, seqs), 4); /* 0..3 in flight */
    assert_int_equal(spool_defer(&s, "a/1/1", 7, 2), 1);
    assert_int_equal(spool_defer(&s, "a/1/1", 7, 1), 1);
    assert_int_equal(spool_defer(&s, "a/1/1", 7, 1), 0); /* twice: no longer in flight */
    assert_int_equal(spool_defer(&s, "a/1/1", 7, 6), 0); /* never sent */
    assert_int_equal(spool_defer(&s, "a/1/1", 7, 99), 0);
    assert_int_equal(s.in_flight, 2);
    assert_int_equal(send_all(&s, 6, seqs), 4);
    uint64_t want[] = {1, 2, 4, 5};
    for (int i = 0; i < 4; i++)
        assert_int_equal(seqs[i], want[i]);
    /* Acknowledged in flight, the cursor passes over the ones still out. */
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 1), SPOOL_ACK_IN_FLIGHT);
    assert_int_equal(spool_defer(&s, "a/1/1", 7, 5), 1);
    assert_int_equal(send_all(&s, 8, seqs), 3);
    uint64_t then[] = {5, 6, 7};
    for (int i = 0; i < 3; i++)
        assert_int_equal(seqs[i], then[i]);
    assert_null(spool_next_unsent(&s));
    assert_int_equal(s.in_flight, 7);
    spool_free(&s);
}

static void test_full_mark(void **state)
{
    (void)state;
    struct spool s;
    spool_init(&s, 250);
    push(&s, "a/1/1", 0, 100);
    push(&s, "a/1/1", 1, 100);
    assert_false(spool_full(&s));
    push(&s, "a/1/1", 2, 100);
    assert_true(spool_full(&s));
    spool_ack(&s, "a/1/1", 7, 1);
    assert_false(spool_full(&s));
    spool_free(&s);
}

/* Enough entries to resize the hash table several times, acknowledged in
 * reverse, which walks every chain. */
static void test_many(void **state)
{
    (void)state;
    struct spool s;
    spool_init(&s, UINT64_MAX);
    const uint64_t n = 20000;
    for (uint64_t i = 0; i < n; i++)
        push(&s, i % 3 ? "node/2/99" : "node/1/99", i, 8);
    for (uint64_t i = n; i-- > 0;)
        assert_int_not_equal(spool_ack(&s, i % 3 ? "node/2/99" : "node/1/99", 7, i),
                             SPOOL_ACK_UNKNOWN);
    assert_int_equal(s.count, 0);
    assert_int_equal(s.bytes, 0);
    spool_free(&s);
}

/* A producer that sent a batch twice: each ACK removes one copy, the one in
 * flight first. */
static void test_same_batch_twice(void **state)
{
    (void)state;
    struct spool s;
    spool_init(&s, 1 << 20);
    push(&s, "a/1/1", 0, 10);
    push(&s, "a/1/1", 0, 10);
    uint64_t seqs[4];
    assert_int_equal(send_all(&s, 1, seqs), 1);
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 0), SPOOL_ACK_IN_FLIGHT);
    assert_int_equal(spool_ack(&s, "a/1/1", 7, 0), SPOOL_ACK_UNSENT);
    assert_int_equal(s.count, 0);
    spool_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_credit),
        cmocka_unit_test(test_push_tail),
        cmocka_unit_test(test_ack_lookup),
        cmocka_unit_test(test_resend_after_disconnect),
        cmocka_unit_test(test_defer),
        cmocka_unit_test(test_full_mark),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_same_batch_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
