/* What a full agent owes the store: per producer, the events of the batches
 * it took but had no room to keep, as counts by drop reason, with the
 * newest batch's seq and running total and the file names the batches
 * carried.  An entry goes into the pending store as one small batch of
 * drop records (the producer's own identity, its newest seq and running
 * total), so readers count every event exactly, in its job: while the
 * store is full, a producer's batches cost a few dozen bytes of memory
 * each instead of a batch each, and the agent keeps reading (a producer
 * that exits meanwhile still has its last batches counted).
 *
 * An entry is put into the store when the producer's next batch is stored
 * (its drop records come first), when it has been idle for a second or
 * open for five, when the agent stops, and only while the store's reserve
 * has room. */
#ifndef IOT_AGENT_TALLY_H
#define IOT_AGENT_TALLY_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct spool;

struct tally_entry;

struct tally {
    struct tally_entry *head;
    size_t count;
    uint64_t bytes;     /* memory the entries take, roughly */
    uint64_t max_bytes; /* beyond it, nothing more is taken */
    /* With a per-user limit on the agent (--max-pending-per-user), one
     * local user's producers may take at most this much (0: no limit), so
     * that a user forging producer identities cannot fill the tally and
     * stop the agent reading for everyone. */
    uint64_t max_user_bytes;
    struct tally_user {
        uint32_t uid;
        uint64_t bytes;
    } *users;
    size_t n_users;
};

void tally_init(struct tally *t, uint64_t max_bytes);
void tally_free(struct tally *t);

/* Counts a batch (opened as b, its body decoded) under its producer `key`
 * of local user `uid` (-1: not known), with the agent's `tail` for the
 * batch it will become: its events under
 * `reason`, its own drop records under theirs, its file names kept.
 * -1 when the tally is full or memory is short: nothing was counted. */
int tally_add(struct tally *t, const char *key, int64_t uid, const iot_batch *b,
              const iot_body *body, int reason, const uint8_t *tail, size_t tail_len,
              int64_t now_mono_ns);

/* True when nothing more can be counted (the agent stops reading). */
int tally_full(const struct tally *t);

/* True when `key` has an entry (the next batch of that producer must wait
 * for it to be stored). */
int tally_has(const struct tally *t, const char *key);

/* Stores entries as batches of drop records while the store's reserve has
 * room: the one of `key` (NULL: every entry that is due at `now_mono_ns`;
 * force: every entry).  Returns the number of entries still held for
 * `key` (or in all). */
size_t tally_flush(struct tally *t, const char *key, struct spool *sp, int64_t now_mono_ns,
                   int force);

/* One batch `b` of producer `key` (its body decoded, or NULL when only its
 * envelope can be read: then its event_count is counted, with the running
 * total `made_through`, 0 if not known) as a batch of drop records under
 * `reason`, with its via and sender: a new buffer in *out,
 * ready for the store, which the caller frees.  Without keep_files the
 * file names it carried are left out (to fit a small record).  -1 when it
 * cannot be encoded or memory is short. */
int tally_drop_batch(const char *key, const iot_batch *b, const iot_body *body, int reason,
                     uint64_t made_through, int keep_files, uint8_t **out, size_t *len);

#endif
