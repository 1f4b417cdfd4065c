#include "tally.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "spool.h"
#include "timeutil.h"

#define REASONS 8               /* Drop.reason values counted apart; others join the batch's */
#define IDLE_NS 1000000000      /* a producer quiet this long has probably exited */
#define MAX_AGE_NS 5000000000LL /* what memory alone holds is at most this old */

struct tally_entry {
    struct tally_entry *next;
    uint64_t epoch, seq, made_through;
    uint64_t counts[REASONS];
    uint64_t t_first, t_last; /* CLOCK_REALTIME, for the drop records */
    int64_t opened, touched;  /* monotonic */
    uint8_t *producer;        /* the newest batch's Producer, packed */
    size_t producer_len;
    uint8_t tail[IOT_WIRE_TAIL_MAX];
    size_t tail_len;
    Iotrace__FileName *files; /* paths owned */
    size_t n_files, cap_files;
    size_t bytes;
    int64_t uid;
    char key[];
};

void tally_init(struct tally *t, uint64_t max_bytes)
{
    memset(t, 0, sizeof *t);
    t->max_bytes = max_bytes;
}

static struct tally_user *user_of(struct tally *t, int64_t uid, int add)
{
    if (uid < 0)
        return NULL;
    for (size_t i = 0; i < t->n_users; i++)
        if (t->users[i].uid == (uint32_t)uid)
            return &t->users[i];
    if (!add)
        return NULL;
    struct tally_user *v = realloc(t->users, (t->n_users + 1) * sizeof *v);
    if (!v)
        return NULL;
    t->users = v;
    v[t->n_users] = (struct tally_user){.uid = (uint32_t)uid};
    return &v[t->n_users++];
}

/* Every change of an entry's size goes through here. */
static void grow_by(struct tally *t, struct tally_entry *e, int64_t delta)
{
    e->bytes += (size_t)delta;
    t->bytes += (uint64_t)delta;
    struct tally_user *u = user_of(t, e->uid, 0);
    if (u)
        u->bytes += (uint64_t)delta;
}

static void free_entry(struct tally_entry *e)
{
    for (size_t i = 0; i < e->n_files; i++)
        free(e->files[i].path);
    free(e->files);
    free(e->producer);
    free(e);
}

void tally_free(struct tally *t)
{
    for (struct tally_entry *e = t->head, *next; e; e = next) {
        next = e->next;
        free_entry(e);
    }
    free(t->users);
    uint64_t max = t->max_bytes, max_user = t->max_user_bytes;
    tally_init(t, max);
    t->max_user_bytes = max_user;
}

static struct tally_entry *find(const struct tally *t, const char *key, uint64_t epoch)
{
    for (struct tally_entry *e = t->head; e; e = e->next)
        if (e->epoch == epoch && !strcmp(e->key, key))
            return e;
    return NULL;
}

/* Room for a batch of a new producer with a few names, at least. */
int tally_full(const struct tally *t) { return t->bytes + 4096 > t->max_bytes; }

int tally_has(const struct tally *t, const char *key)
{
    for (struct tally_entry *e = t->head; e; e = e->next)
        if (!strcmp(e->key, key))
            return 1;
    return 0;
}

static struct tally_entry *new_entry(struct tally *t, const char *key, int64_t uid,
                                     uint64_t epoch, int64_t now)
{
    size_t klen = strlen(key) + 1;
    struct tally_entry *e = calloc(1, sizeof *e + klen);
    if (!e || (uid >= 0 && !user_of(t, uid, 1))) {
        free(e);
        return NULL;
    }
    memcpy(e->key, key, klen);
    e->epoch = epoch;
    e->opened = now;
    e->uid = uid;
    struct tally_entry **end = &t->head; /* oldest first: stored in that order */
    while (*end)
        end = &(*end)->next;
    *end = e;
    t->count++;
    grow_by(t, e, (int64_t)(sizeof *e + klen));
    return e;
}

static void unlink_entry(struct tally *t, struct tally_entry *e)
{
    for (struct tally_entry **pp = &t->head; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    t->count--;
    grow_by(t, e, -(int64_t)e->bytes);
    free_entry(e);
}

static int keep_files(struct tally *t, struct tally_entry *e, const iot_body *body)
{
    if (e->n_files + body->n_files > e->cap_files) {
        size_t cap = e->cap_files ? e->cap_files : 8;
        while (cap < e->n_files + body->n_files)
            cap *= 2;
        Iotrace__FileName *v = realloc(e->files, cap * sizeof *v);
        if (!v)
            return -1;
        e->files = v;
        e->cap_files = cap;
    }
    for (size_t i = 0; i < body->n_files; i++) {
        Iotrace__FileName *f = &e->files[e->n_files];
        iotrace__file_name__init(f);
        f->id = body->files[i]->id;
        if (!(f->path = strdup(body->files[i]->path)))
            return -1;
        e->n_files++;
        grow_by(t, e, (int64_t)(sizeof *f + strlen(f->path) + 1));
    }
    return 0;
}

int tally_add(struct tally *t, const char *key, int64_t uid, const iot_batch *b,
              const iot_body *body, int reason, const uint8_t *tail, size_t tail_len,
              int64_t now)
{
    size_t names = 0;
    for (size_t i = 0; i < body->n_files; i++)
        names += sizeof(Iotrace__FileName) + strlen(body->files[i]->path) + 1;
    size_t plen = iotrace__producer__get_packed_size(b->producer);
    uint64_t need = names + plen + sizeof(struct tally_entry) + strlen(key);
    const struct tally_user *u = user_of(t, uid, 0);
    if (t->bytes + need > t->max_bytes ||
        (t->max_user_bytes && uid >= 0 && (u ? u->bytes : 0) + need > t->max_user_bytes))
        return -1;
    struct tally_entry *e = find(t, key, b->epoch);
    if (!e && !(e = new_entry(t, key, uid, b->epoch, now)))
        return -1;
    uint8_t *producer = malloc(plen ? plen : 1);
    if (!producer || keep_files(t, e, body) < 0) {
        free(producer);
        return -1; /* the names kept so far stay: harmless */
    }
    iotrace__producer__pack(b->producer, producer);
    grow_by(t, e, (int64_t)plen - (int64_t)e->producer_len);
    free(e->producer);
    e->producer = producer;
    e->producer_len = plen;
    memcpy(e->tail, tail, tail_len);
    e->tail_len = tail_len;
    e->seq = b->seq;
    e->made_through = body->made_through;
    uint64_t events = iot_wire_table_events(body);
    e->counts[reason < REASONS ? reason : 0] += events;
    uint64_t wall = (uint64_t)iot_now_ns();
    e->t_first = e->t_first ? e->t_first : wall;
    e->t_last = wall;
    for (size_t i = 0; i < body->n_drops; i++) {
        const Iotrace__Drop *d = body->drops[i];
        e->counts[(unsigned)d->reason < REASONS ? (int)d->reason : reason] += d->count;
        if (d->t_first && d->t_first < e->t_first)
            e->t_first = d->t_first;
    }
    e->touched = now;
    return 0;
}

/* The entry as a batch of drop records (without its tail), in a new
 * buffer; -1 when it cannot be encoded or memory is short. */
static int encode_entry(const struct tally_entry *e, uint8_t **out, size_t *len)
{
    Iotrace__Producer *prod = iotrace__producer__unpack(NULL, e->producer_len, e->producer);
    Iotrace__FileName **files = malloc((e->n_files ? e->n_files : 1) * sizeof *files);
    if (!prod || !files) {
        free(files);
        if (prod)
            iotrace__producer__free_unpacked(prod, NULL);
        return -1;
    }
    Iotrace__Drop drops[REASONS], *ptrs[REASONS];
    iot_body body = IOTRACE__BODY__INIT;
    for (int r = 0; r < REASONS; r++) {
        if (!e->counts[r])
            continue;
        iotrace__drop__init(&drops[body.n_drops]);
        drops[body.n_drops].reason = r;
        drops[body.n_drops].count = e->counts[r];
        drops[body.n_drops].t_first = e->t_first;
        drops[body.n_drops].t_last = e->t_last;
        ptrs[body.n_drops] = &drops[body.n_drops];
        body.n_drops++;
    }
    for (size_t i = 0; i < e->n_files; i++)
        files[i] = &e->files[i];
    body.drops = ptrs;
    body.files = files;
    body.n_files = e->n_files;
    body.made_through = e->made_through;
    char err[160];
    int rc = iot_wire_encode(prod, e->epoch, e->seq, &body, out, len, err, sizeof err);
    if (rc < 0)
        iot_warn("cannot encode the drop records of %s: %s", e->key, err);
    free(files);
    iotrace__producer__free_unpacked(prod, NULL);
    return rc;
}

static int empty_entry(const struct tally_entry *e)
{
    int empty = e->n_files == 0 && e->made_through == 0;
    for (int r = 0; r < REASONS; r++)
        empty &= e->counts[r] == 0;
    return empty;
}

/* The entry as a batch of drop records in the store; -1 (entry kept) when
 * it cannot be encoded or memory is short. */
static int store(struct tally_entry *e, struct spool *sp)
{
    if (empty_entry(e)) /* a failed first add: nothing to say */
        return 0;
    uint8_t *out = NULL;
    size_t len = 0;
    int rc = encode_entry(e, &out, &len);
    if (rc == 0)
        rc = spool_push_tail(sp, e->key, e->epoch, e->seq, out, len, e->tail, e->tail_len);
    free(out);
    return rc;
}

int tally_drop_batch(const char *key, const iot_batch *b, const iot_body *body, int reason,
                     uint64_t made_through, int keep_files, uint8_t **out, size_t *len)
{
    uint8_t tail[IOT_WIRE_TAIL_MAX];
    const char *via = b->via && b->via[0] ? b->via : NULL;
    size_t tail_len = via ? iot_wire_via_field(via, tail) : 0;
    if (b->sender)
        tail_len += iot_wire_sender_field(b->sender, tail + tail_len);
    /* Stamped again as the batch was: the collector refuses a via or a
     * sender its stamp does not cover. */
    if (via || b->sender)
        tail_len += iot_wire_stamp_field(via, b->sender, tail + tail_len);
    /* A tally of its own, for this one batch: the same drop records a full
     * agent would have made of it. */
    struct tally t;
    tally_init(&t, UINT64_MAX);
    iot_body none = IOTRACE__BODY__INIT;
    int rc = tally_add(&t, key, -1, b, body ? body : &none, reason, tail, tail_len, iot_mono_ns());
    if (rc == 0) {
        struct tally_entry *e = t.head;
        if (!body) { /* only the envelope is sound: what it says it carried */
            e->counts[reason < REASONS ? reason : 0] += b->event_count;
            e->made_through = made_through;
        }
        if (!keep_files) {
            for (size_t i = 0; i < e->n_files; i++)
                free(e->files[i].path);
            e->n_files = 0;
        }
        uint8_t *enc = NULL;
        size_t n = 0;
        rc = encode_entry(e, &enc, &n);
        uint8_t *all = rc == 0 ? realloc(enc, n + tail_len) : NULL;
        if (all) {
            memcpy(all + n, tail, tail_len);
            *out = all;
            *len = n + tail_len;
        } else {
            free(enc);
            rc = -1;
        }
    }
    tally_free(&t);
    return rc;
}

size_t tally_flush(struct tally *t, const char *key, struct spool *sp, int64_t now, int force)
{
    size_t held = 0;
    for (struct tally_entry *e = t->head, *next; e; e = next) {
        next = e->next;
        if (key && strcmp(e->key, key))
            continue;
        int due = force || key || now - e->touched >= IDLE_NS || now - e->opened >= MAX_AGE_NS;
        if (due && (force || !spool_reserve_full(sp)) && store(e, sp) == 0)
            unlink_entry(t, e);
        else
            held++;
    }
    return held;
}
