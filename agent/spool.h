/* The agent's pending store: every batch received from a producer and not
 * yet acknowledged by the collector, in arrival order.
 *
 * Arrival order is the only order the agent knows, and forwarding in that
 * order is what keeps each producer's batches in sequence.  Entries before
 * the send cursor are in flight; from the cursor on they wait for credit,
 * except those sent before an earlier one was deferred (spool_defer).
 * Acknowledgements may come in any order, so entries are also hashed by
 * (producer key, epoch, seq). */
#ifndef IOT_AGENT_SPOOL_H
#define IOT_AGENT_SPOOL_H

#include <stddef.h>
#include <stdint.h>

struct spool_entry {
    struct spool_entry *prev, *next; /* arrival order */
    struct spool_entry *hnext;       /* hash chain */
    uint64_t epoch, seq;
    uint32_t hash;
    int sent;
    unsigned sends; /* times forwarded, over all sessions */
    uint64_t seg;   /* its spool segment on disk (journal.h), 0 if none */
    uint32_t slot;  /* 1 + its slot in the journal's reserve, 0 if none */
    size_t len;
    uint8_t *data; /* the batch as received, points into this allocation */
    char key[];    /* iot_wire_producer_key() */
};

struct spool {
    struct spool_entry *head, *tail;
    struct spool_entry *cursor; /* first entry not sent in this session */
    struct spool_entry **buckets;
    size_t n_buckets;
    size_t count;     /* entries held */
    size_t in_flight; /* entries sent and not acknowledged */
    uint64_t bytes;   /* sum of entry lengths */
    uint64_t max_bytes;
    struct journal *journal; /* the copy on disk, NULL if memory only */
    /* Bytes held per local user (the uid the key ends in, "/uUID"), so that
     * one user cannot fill the store for everyone. */
    struct spool_user {
        uint32_t uid;
        uint64_t bytes;
    } *users;
    size_t n_users, cap_users;
};

enum spool_ack_result { SPOOL_ACK_UNKNOWN = -1, SPOOL_ACK_UNSENT = 0, SPOOL_ACK_IN_FLIGHT = 1 };

int spool_init(struct spool *s, uint64_t max_bytes);
void spool_free(struct spool *s);

/* True once the held bytes reach the limit (or, with a journal, its
 * segments a quarter more, as acknowledged batches in segments that hold
 * others still take room): the caller stops taking batches. */
int spool_full(const struct spool *s);

/* True once even the reserve above the limit is taken: the room kept for
 * the small batches a full agent makes of those it has no room for
 * (intake.c), so that it can keep reading from producers. */
int spool_reserve_full(const struct spool *s);

/* Appends a copy of a batch.  Returns -1 only when out of memory. */
int spool_push(struct spool *s, const char *key, uint64_t epoch, uint64_t seq,
               const void *data, size_t len);

/* The same, storing `tail` right after the batch's bytes (the forwarding
 * agent's `via`, iot_wire_via_field()), in the one copy the entry holds. */
int spool_push_tail(struct spool *s, const char *key, uint64_t epoch, uint64_t seq,
                    const void *data, size_t len, const void *tail, size_t tail_len);

/* Bytes held for the batches of local user `uid`. */
uint64_t spool_user_bytes(const struct spool *s, uint32_t uid);

/* A batch read back from spool segment `seg` or reserve slot `slot`
 * (journal.h) at start (not written again). */
int spool_restore(struct spool *s, const char *key, uint64_t epoch, uint64_t seq,
                  const void *data, size_t len, uint64_t seg, uint32_t slot);

/* The next batch to send in this session, or NULL if all are in flight. */
struct spool_entry *spool_next_unsent(const struct spool *s);
void spool_mark_sent(struct spool *s, struct spool_entry *e);

/* Removes the batch an acknowledgement names, and tells whether it was in
 * flight (so a credit comes back), waiting, or not held at all. */
enum spool_ack_result spool_ack(struct spool *s, const char *key, uint64_t epoch,
                                uint64_t seq);

/* The collector could not store the batch now (ACK DEFERRED): it is no
 * longer in flight and goes out again, in its place, when sending
 * resumes.  1 when it was in flight. */
int spool_defer(struct spool *s, const char *key, uint64_t epoch, uint64_t seq);

/* After a lost connection nothing is in flight any more: everything held is
 * sent again, from the oldest, once the next session opens. */
void spool_unsend_all(struct spool *s);

#endif
