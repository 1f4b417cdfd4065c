#include "dedup.h"

#include <stdlib.h>
#include <string.h>

struct stream {
    char *key;
    uint64_t epoch;
    uint64_t hash;
    uint64_t floor;  /* every seq < floor was seen */
    uint64_t *above; /* sorted seqs > floor that were seen */
    size_t n, cap;
};

struct iot_dedup {
    struct stream **slots; /* open addressing, power-of-two size, at most half full */
    size_t size;
    size_t used;
    size_t pending;
};

static uint64_t stream_hash(const char *key, uint64_t epoch)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    for (int i = 0; i < 8; i++)
        h = (h ^ ((epoch >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h;
}

struct iot_dedup *iot_dedup_new(void)
{
    struct iot_dedup *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->size = 64;
    d->slots = calloc(d->size, sizeof *d->slots);
    if (!d->slots) {
        free(d);
        return NULL;
    }
    return d;
}

void iot_dedup_free(struct iot_dedup *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->size; i++) {
        if (d->slots[i]) {
            free(d->slots[i]->key);
            free(d->slots[i]->above);
            free(d->slots[i]);
        }
    }
    free(d->slots);
    free(d);
}

static size_t find_slot(struct stream **slots, size_t size, const char *key, uint64_t epoch,
                        uint64_t hash)
{
    size_t i = (size_t)hash & (size - 1);
    while (slots[i] && !(slots[i]->hash == hash && slots[i]->epoch == epoch &&
                         strcmp(slots[i]->key, key) == 0))
        i = (i + 1) & (size - 1);
    return i;
}

static struct stream *lookup(const struct iot_dedup *d, const char *key, uint64_t epoch)
{
    return d->slots[find_slot(d->slots, d->size, key, epoch, stream_hash(key, epoch))];
}

static int grow(struct iot_dedup *d)
{
    size_t size = d->size * 2;
    struct stream **slots = calloc(size, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < d->size; i++) {
        struct stream *s = d->slots[i];
        if (s)
            slots[find_slot(slots, size, s->key, s->epoch, s->hash)] = s;
    }
    free(d->slots);
    d->slots = slots;
    d->size = size;
    return 0;
}

static struct stream *lookup_or_add(struct iot_dedup *d, const char *key, uint64_t epoch)
{
    if ((d->used + 1) * 2 > d->size && grow(d) < 0)
        return NULL;
    uint64_t hash = stream_hash(key, epoch);
    size_t i = find_slot(d->slots, d->size, key, epoch, hash);
    if (d->slots[i])
        return d->slots[i];
    struct stream *s = calloc(1, sizeof *s);
    if (!s || !(s->key = strdup(key))) {
        free(s);
        return NULL;
    }
    s->epoch = epoch;
    s->hash = hash;
    d->slots[i] = s;
    d->used++;
    return s;
}

/* Index of the first element >= seq. */
static size_t lower_bound(const struct stream *s, uint64_t seq)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->above[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int stream_has(const struct stream *s, uint64_t seq)
{
    if (seq < s->floor)
        return 1;
    size_t i = lower_bound(s, seq);
    return i < s->n && s->above[i] == seq;
}

/* Folds the seqs that now continue the floor into it. */
static size_t advance_floor(struct stream *s)
{
    size_t k = 0;
    while (k < s->n && s->above[k] == s->floor) {
        s->floor++;
        k++;
    }
    if (k) {
        memmove(s->above, s->above + k, (s->n - k) * sizeof *s->above);
        s->n -= k;
    }
    return k;
}

static int insert_above(struct stream *s, uint64_t seq)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        uint64_t *p = realloc(s->above, cap * sizeof *p);
        if (!p)
            return -1;
        s->above = p;
        s->cap = cap;
    }
    size_t i = lower_bound(s, seq);
    memmove(s->above + i + 1, s->above + i, (s->n - i) * sizeof *s->above);
    s->above[i] = seq;
    s->n++;
    return 0;
}

int iot_dedup_contains(const struct iot_dedup *d, const char *key, uint64_t epoch, uint64_t seq)
{
    const struct stream *s = lookup(d, key, epoch);
    return s && stream_has(s, seq);
}

int iot_dedup_add(struct iot_dedup *d, const char *key, uint64_t epoch, uint64_t seq)
{
    struct stream *s = lookup_or_add(d, key, epoch);
    if (!s)
        return -1;
    if (stream_has(s, seq))
        return 0;
    if (seq == s->floor) {
        s->floor++;
        d->pending -= advance_floor(s);
        return 1;
    }
    if (insert_above(s, seq) < 0)
        return -1;
    d->pending++;
    return 1;
}

size_t iot_dedup_streams(const struct iot_dedup *d) { return d->used; }

size_t iot_dedup_pending(const struct iot_dedup *d) { return d->pending; }

uint64_t iot_dedup_floor(const struct iot_dedup *d, const char *key, uint64_t epoch)
{
    const struct stream *s = lookup(d, key, epoch);
    return s ? s->floor : 0;
}
