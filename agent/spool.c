#include "spool.h"

#include "grow.h"
#include "journal.h"

#include <stdlib.h>
#include <string.h>

#define SPOOL_MIN_BUCKETS 1024

static uint32_t hash_id(const char *key, uint64_t epoch, uint64_t seq)
{
    /* FNV-1a: the producer key differs per process, seq per batch. */
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    for (int i = 0; i < 8; i++)
        h = (h ^ (uint8_t)(epoch >> (8 * i))) * 16777619u;
    for (int i = 0; i < 8; i++)
        h = (h ^ (uint8_t)(seq >> (8 * i))) * 16777619u;
    return h;
}

int spool_init(struct spool *s, uint64_t max_bytes)
{
    memset(s, 0, sizeof *s);
    s->n_buckets = SPOOL_MIN_BUCKETS;
    s->buckets = calloc(s->n_buckets, sizeof *s->buckets);
    s->max_bytes = max_bytes;
    return s->buckets ? 0 : -1;
}

void spool_free(struct spool *s)
{
    struct spool_entry *e = s->head;
    while (e) {
        struct spool_entry *next = e->next;
        free(e);
        e = next;
    }
    free(s->buckets);
    free(s->users);
    memset(s, 0, sizeof *s);
}

int spool_full(const struct spool *s)
{
    return s->bytes >= s->max_bytes || (s->journal && journal_at_risk(s->journal)) ||
           (s->journal && s->journal->disk_bytes >= s->max_bytes + s->max_bytes / 4);
}

int spool_reserve_full(const struct spool *s)
{
    uint64_t reserve = s->max_bytes / 8;
    return s->bytes >= s->max_bytes + reserve || (s->journal && journal_at_risk(s->journal)) ||
           (s->journal && s->journal->disk_bytes >= s->max_bytes + s->max_bytes / 4 + reserve);
}

/* Doubling keeps chains short; a failed resize just leaves them longer. */
static void grow(struct spool *s)
{
    size_t n = s->n_buckets * 2;
    struct spool_entry **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (struct spool_entry *e = s->head; e; e = e->next) {
        size_t i = e->hash & (n - 1);
        e->hnext = b[i];
        b[i] = e;
    }
    free(s->buckets);
    s->buckets = b;
    s->n_buckets = n;
}

int spool_push(struct spool *s, const char *key, uint64_t epoch, uint64_t seq,
               const void *data, size_t len)
{
    return spool_push_tail(s, key, epoch, seq, data, len, NULL, 0);
}

/* The uid a producer key ends in ("node/pid/start/uUID"), if any. */
static int key_uid(const char *key, uint32_t *uid)
{
    const char *u = strrchr(key, '/');
    if (!u || u[1] != 'u' || !u[2])
        return 0;
    char *end;
    unsigned long v = strtoul(u + 2, &end, 10);
    if (*end || v > UINT32_MAX)
        return 0;
    *uid = (uint32_t)v;
    return 1;
}

static struct spool_user *find_user(const struct spool *s, uint32_t uid)
{
    for (size_t i = 0; i < s->n_users; i++)
        if (s->users[i].uid == uid)
            return &s->users[i];
    return NULL;
}

uint64_t spool_user_bytes(const struct spool *s, uint32_t uid)
{
    const struct spool_user *u = find_user(s, uid);
    return u ? u->bytes : 0;
}

/* A failed allocation only leaves the user uncounted: the total limit
 * still holds. */
static void count_user(struct spool *s, const struct spool_entry *e, int64_t sign)
{
    uint32_t uid;
    if (!key_uid(e->key, &uid))
        return;
    struct spool_user *u = find_user(s, uid);
    if (!u) {
        if (sign < 0 || iot_grow((void **)&s->users, &s->cap_users, s->n_users + 1,
                                 sizeof *s->users, 8) < 0)
            return;
        u = &s->users[s->n_users++];
        *u = (struct spool_user){.uid = uid};
    }
    u->bytes = sign > 0 ? u->bytes + e->len : u->bytes - (e->len < u->bytes ? e->len : u->bytes);
    if (u->bytes == 0)
        *u = s->users[--s->n_users];
}

static struct spool_entry *make_entry(const char *key, uint64_t epoch, uint64_t seq,
                                      const void *data, size_t len, const void *tail,
                                      size_t tail_len)
{
    size_t klen = strlen(key) + 1;
    struct spool_entry *e = malloc(sizeof *e + klen + len + tail_len);
    if (!e)
        return NULL;
    memcpy(e->key, key, klen);
    e->data = (uint8_t *)e->key + klen;
    memcpy(e->data, data, len);
    if (tail_len)
        memcpy(e->data + len, tail, tail_len);
    e->len = len + tail_len;
    e->epoch = epoch;
    e->seq = seq;
    e->sent = 0;
    e->sends = 0;
    e->seg = 0;
    e->slot = 0;
    e->hash = hash_id(key, epoch, seq);
    return e;
}

static void insert(struct spool *s, struct spool_entry *e)
{
    if (s->count >= s->n_buckets)
        grow(s);
    size_t i = e->hash & (s->n_buckets - 1);
    e->hnext = s->buckets[i];
    s->buckets[i] = e;

    e->next = NULL;
    e->prev = s->tail;
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    if (!s->cursor)
        s->cursor = e;
    s->count++;
    s->bytes += e->len;
    count_user(s, e, 1);
}

int spool_push_tail(struct spool *s, const char *key, uint64_t epoch, uint64_t seq,
                    const void *data, size_t len, const void *tail, size_t tail_len)
{
    struct spool_entry *e = make_entry(key, epoch, seq, data, len, tail, tail_len);
    if (!e)
        return -1;
    insert(s, e);
    /* A batch the disk did not take is still held, in memory only. */
    if (s->journal)
        journal_append(s->journal, e);
    return 0;
}

int spool_restore(struct spool *s, const char *key, uint64_t epoch, uint64_t seq,
                  const void *data, size_t len, uint64_t seg, uint32_t slot)
{
    struct spool_entry *e = make_entry(key, epoch, seq, data, len, NULL, 0);
    if (!e)
        return -1;
    e->seg = seg;
    e->slot = slot;
    insert(s, e);
    return 0;
}

struct spool_entry *spool_next_unsent(const struct spool *s) { return s->cursor; }

/* The cursor is the first entry not in flight; entries after it may be in
 * flight (sent before one ahead of them was deferred), and are passed. */
static void skip_sent(struct spool *s)
{
    while (s->cursor && s->cursor->sent)
        s->cursor = s->cursor->next;
}

void spool_mark_sent(struct spool *s, struct spool_entry *e)
{
    e->sent = 1;
    e->sends++;
    s->in_flight++;
    if (s->cursor == e) {
        s->cursor = e->next;
        skip_sent(s);
    }
}

static void unlink_entry(struct spool *s, struct spool_entry *e)
{
    struct spool_entry **pp = &s->buckets[e->hash & (s->n_buckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;

    if (s->cursor == e) {
        s->cursor = e->next;
        skip_sent(s);
    }
    if (e->prev)
        e->prev->next = e->next;
    else
        s->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->tail = e->prev;
    s->count--;
    s->bytes -= e->len;
    count_user(s, e, -1);
    if (s->journal)
        journal_release(s->journal, e);
    if (e->sent)
        s->in_flight--;
}

static struct spool_entry *find(const struct spool *s, const char *key, uint64_t epoch,
                                uint64_t seq)
{
    uint32_t h = hash_id(key, epoch, seq);
    struct spool_entry *e = s->buckets[h & (s->n_buckets - 1)];
    /* A producer that sent the same batch twice leaves two entries; the one
     * sent first is the one an acknowledgement is most likely about. */
    struct spool_entry *found = NULL;
    for (; e; e = e->hnext)
        if (e->hash == h && e->epoch == epoch && e->seq == seq && !strcmp(e->key, key))
            if (!found || (e->sent && !found->sent))
                found = e;
    return found;
}

enum spool_ack_result spool_ack(struct spool *s, const char *key, uint64_t epoch,
                                uint64_t seq)
{
    struct spool_entry *found = find(s, key, epoch, seq);
    if (!found)
        return SPOOL_ACK_UNKNOWN;
    enum spool_ack_result r = found->sent ? SPOOL_ACK_IN_FLIGHT : SPOOL_ACK_UNSENT;
    unlink_entry(s, found);
    free(found);
    return r;
}

int spool_defer(struct spool *s, const char *key, uint64_t epoch, uint64_t seq)
{
    struct spool_entry *e = find(s, key, epoch, seq);
    if (!e || !e->sent)
        return 0;
    e->sent = 0;
    s->in_flight--;
    /* The cursor comes back to it unless it is before it.  Walked
     * backwards: every entry before the cursor is in flight, and those
     * between the cursor and this one were sent in this session, so the
     * walk is about the credit long, not the spool. */
    struct spool_entry *p = e->prev;
    while (p && p != s->cursor)
        p = p->prev;
    if (!p)
        s->cursor = e;
    return 1;
}

void spool_unsend_all(struct spool *s)
{
    for (struct spool_entry *e = s->head; e; e = e->next)
        e->sent = 0;
    s->cursor = s->head;
    s->in_flight = 0;
}
