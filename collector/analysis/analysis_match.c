#include "analysis_match.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

#include "iot_functions.h"

enum { F_USED = 1, F_CALL = 2, F_OWNER = 4, F_EXPECT = 8 };

/* One (job, CallID) in flight: one cache line. */
struct mt_entry {
    uint64_t callid;
    uint64_t own_bytes, own_time;
    int64_t expire; /* its window ends here */
    uint32_t job;
    uint32_t group; /* index + 1; when free: the next free entry + 1 */
    uint32_t own_ops;
    uint32_t wnext, wprev; /* its bucket's list, index + 1 */
    uint16_t wslot;        /* its bucket */
    uint16_t func;
    uint8_t flags;
};

/* Ranks of a collective group: a bit each for ranks below 64, an open
 * addressing set of rank + 1 for the others (groups are short-lived and
 * their ranks are looked at only while they gather). */
struct mt_group {
    uint64_t file, coll_seq; /* file: group_file() */
    int64_t expire; /* latest end of a member (or its completion) + grace */
    uint64_t low_ranks;
    uint32_t *rank_set;
    uint32_t rank_set_size, rank_set_n;
    uint32_t job;
    uint32_t ops;     /* disk operations of all members */
    uint32_t members; /* entries still referring to it; when free: next free + 1 */
    uint32_t size;    /* calls that joined */
    uint8_t indexed;  /* still findable by its key: later calls may join */
};

#define PAGE_BITS 6
#define PAGE_SLOTS (1u << PAGE_BITS)

struct mt_page {
    uint64_t hi;   /* key >> PAGE_BITS */
    uint64_t file; /* groups' pages */
    uint32_t job;
    uint32_t live; /* slots in use; when free: the next free page + 1 */
    uint32_t slot[PAGE_SLOTS];
};

/* A disk operation waiting for its call (pairs only). */
struct mt_held {
    struct xp_event ev;
    uint32_t tag;
    uint32_t next; /* index + 1 of the next in its list, or of the next free one */
};

#define RANK_SHIFT 40

/* ---- function classes ------------------------------------------------- */

enum { C_COMPLETION = 1, C_TRANSFER = 2, C_FUNCS = 128 };

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Named after what they do: MPI_Wait*, MPI_Test*, *_end complete a call;
 * MPI_File_*read* and *write* transfer data. */
static uint8_t class_by_name(unsigned func)
{
    const char *name = iot_func_kind(func) == IOT_KIND_MPIIO ? iot_func_name(func) : NULL;
    if (!name)
        return 0;
    if (strncmp(name, "MPI_Wait", 8) == 0 || strncmp(name, "MPI_Test", 8) == 0 ||
        has_suffix(name, "_end"))
        return C_COMPLETION;
    return strncmp(name, "MPI_File_", 9) == 0 && (strstr(name, "read") || strstr(name, "write"))
               ? C_TRANSFER
               : 0;
}

/* The classes by name, once, rather than string compares per event. */
static uint8_t fclass[C_FUNCS];
static pthread_once_t fclass_once = PTHREAD_ONCE_INIT;

static void classify(void)
{
    for (unsigned f = 0; f < C_FUNCS; f++)
        fclass[f] = class_by_name(f);
}

static uint8_t class_of(unsigned func)
{
    pthread_once(&fclass_once, classify);
    return func < C_FUNCS ? fclass[func] : class_by_name(func);
}

int iot_match_is_completion(unsigned func)
{
    return (class_of(func) & C_COMPLETION) != 0;
}

int iot_match_is_transfer(unsigned func)
{
    return (class_of(func) & C_TRANSFER) != 0;
}

/* ---- the paged index --------------------------------------------------- */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint64_t page_hash(uint32_t job, uint64_t file, uint64_t hi)
{
    return mix(hi ^ mix(file ^ ((uint64_t)job << 32)));
}

/* Slabs of elements found by index + 1, the free ones listed through a
 * uint32_t field of each (`link`, its offset); new elements are zeroed. */
#define SLAB_TAKE(base, cap, head, field, idx)                                                     \
    slab_take((void **)&(base), &(cap), &(head), sizeof *(base),                                   \
              offsetof(__typeof__(*(base)), field), (idx))
#define SLAB_PUT(base, head, field, idx) ((base)[idx].field = (head), (head) = (idx) + 1)

static int slab_take(void **base, size_t *cap, uint32_t *head, size_t size, size_t link,
                     uint32_t *idx)
{
    if (!*head) {
        size_t n = *cap;
        if (iot_grow(base, &n, *cap + 1, size, 64) < 0)
            return -1;
        memset((char *)*base + *cap * size, 0, (n - *cap) * size);
        for (size_t i = n; i > *cap; i--) {
            memcpy((char *)*base + (i - 1) * size + link, head, sizeof *head);
            *head = (uint32_t)i;
        }
        *cap = n;
    }
    *idx = *head - 1;
    memcpy(head, (char *)*base + *idx * size + link, sizeof *head);
    return 0;
}

static size_t ix_slot(const struct mt_index *x, uint32_t job, uint64_t file, uint64_t hi)
{
    size_t mask = x->table_size - 1, i = (size_t)page_hash(job, file, hi) & mask;
    for (uint32_t v; (v = x->table[i]); i = (i + 1) & mask) {
        const struct mt_page *p = &x->pages[v - 1];
        if (p->hi == hi && p->file == file && p->job == job)
            break;
    }
    return i;
}

static int ix_rehash(struct mt_index *x)
{
    size_t n = x->table_size ? x->table_size * 2 : 256;
    uint32_t *nt = calloc(n, sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < x->table_size; i++) {
        uint32_t v = x->table[i];
        if (!v)
            continue;
        const struct mt_page *p = &x->pages[v - 1];
        size_t j = (size_t)page_hash(p->job, p->file, p->hi) & (n - 1);
        while (nt[j])
            j = (j + 1) & (n - 1);
        nt[j] = v;
    }
    free(x->table);
    x->table = nt;
    x->table_size = n;
    return 0;
}

/* Recently used pages, direct-mapped by key: interleaved streams (ranks,
 * calls and the POSIX calls inside them, new keys and closing ones) each
 * find theirs without the table. */
static uint32_t *ix_cached(struct mt_index *x, uint32_t job, uint64_t file, uint64_t hi)
{
    uint64_t h = (hi ^ file ^ ((uint64_t)job << 40)) * 0x9e3779b97f4a7c15ull;
    return &x->cache[h >> (64 - IOT_MATCH_PAGE_CACHE_BITS)];
}

/* The page of a key (index + 1); made if `make`.  0 when there is none, or
 * when out of memory (then `*oom` is set). */
static uint32_t ix_page(struct mt_index *x, uint32_t job, uint64_t file, uint64_t key, int make,
                        int *oom)
{
    uint64_t hi = key >> PAGE_BITS;
    uint32_t *c = ix_cached(x, job, file, hi);
    if (*c) {
        const struct mt_page *p = &x->pages[*c - 1];
        if (p->hi == hi && p->file == file && p->job == job)
            return *c;
    }
    size_t i = ix_slot(x, job, file, hi);
    if (x->table[i])
        return *c = x->table[i];
    if (!make)
        return 0;
    if ((x->n_pages + 1) * 2 > x->table_size) {
        if (ix_rehash(x) < 0) {
            *oom = 1;
            return 0;
        }
        i = ix_slot(x, job, file, hi);
    }
    uint32_t v;
    if (SLAB_TAKE(x->pages, x->cap_pages, x->free_page, live, &v) < 0) {
        *oom = 1;
        return 0;
    }
    struct mt_page *p = &x->pages[v++];
    memset(p, 0, sizeof *p);
    p->hi = hi;
    p->file = file;
    p->job = job;
    x->table[i] = v;
    x->n_pages++;
    return *c = v;
}

static uint32_t *ix_at(struct mt_index *x, uint32_t page, uint64_t key)
{
    return &x->pages[page - 1].slot[key & (PAGE_SLOTS - 1)];
}

static void ix_set(struct mt_index *x, uint32_t page, uint64_t key, uint32_t v)
{
    *ix_at(x, page, key) = v;
    x->pages[page - 1].live++;
}

/* Linear probing with backward-shift deletion: no tombstones, so lookups
 * stay short however many pages come and go. */
static void ix_unlink_page(struct mt_index *x, size_t i)
{
    size_t mask = x->table_size - 1, j = i;
    for (;;) {
        x->table[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!x->table[j])
                return;
            const struct mt_page *p = &x->pages[x->table[j] - 1];
            size_t k = (size_t)page_hash(p->job, p->file, p->hi) & mask;
            if (!(i <= j ? (i < k && k <= j) : (i < k || k <= j)))
                break;
        }
        x->table[i] = x->table[j];
        i = j;
    }
}

/* Empties a key's slot; a page left empty is freed. */
static void ix_clear(struct mt_index *x, uint32_t job, uint64_t file, uint64_t key)
{
    int oom = 0;
    uint32_t v = ix_page(x, job, file, key, 0, &oom);
    if (!v || !*ix_at(x, v, key))
        return;
    *ix_at(x, v, key) = 0;
    struct mt_page *p = &x->pages[v - 1];
    if (--p->live)
        return;
    ix_unlink_page(x, ix_slot(x, job, file, p->hi));
    SLAB_PUT(x->pages, x->free_page, live, v - 1);
    x->n_pages--;
    *ix_cached(x, job, file, p->hi) = 0;
}

static size_t ix_bytes(const struct mt_index *x)
{
    return x->cap_pages * sizeof *x->pages + x->table_size * sizeof *x->table;
}

static void ix_free(struct mt_index *x)
{
    free(x->pages);
    free(x->table);
}

/* ---- setup ------------------------------------------------------------- */

int iot_match_init(struct iot_match *m, int64_t grace_ns, iot_match_sink sink, void *ctx)
{
    memset(m, 0, sizeof *m);
    m->grace_ns = grace_ns;
    m->sink = sink;
    m->ctx = ctx;
    m->now = INT64_MIN;
    if (!(m->wheel = calloc(IOT_MATCH_BUCKETS, sizeof *m->wheel)) || ix_rehash(&m->calls) < 0 ||
        ix_rehash(&m->colls) < 0) {
        iot_match_free(m);
        return -1;
    }
    return 0;
}

void iot_match_free(struct iot_match *m)
{
    for (size_t i = 0; i < m->cap_groups; i++)
        free(m->groups[i].rank_set); /* NULL in free groups */
    free(m->entries);
    ix_free(&m->calls);
    free(m->groups);
    ix_free(&m->colls);
    free(m->wheel);
    free(m->call);
    free(m->call_tag);
    free(m->held_head);
    free(m->held);
    memset(m, 0, sizeof *m);
}

void iot_match_set_pairs(struct iot_match *m, iot_match_pair_sink sink, void *ctx)
{
    m->pair = sink;
    m->pair_ctx = ctx;
}

size_t iot_match_bytes(const struct iot_match *m)
{
    return m->cap_entries * sizeof *m->entries + ix_bytes(&m->calls) +
           m->cap_groups * sizeof *m->groups + ix_bytes(&m->colls) + m->rank_set_bytes +
           IOT_MATCH_BUCKETS * sizeof *m->wheel +
           (m->call ? m->cap_entries * (sizeof *m->call + 2 * sizeof(uint32_t)) : 0) +
           m->cap_held * sizeof *m->held;
}

/* ---- the timing wheel --------------------------------------------------- */

static int64_t until_of(const struct iot_match *m, const struct mt_entry *e)
{
    int64_t until = e->expire;
    if (e->group && m->groups[e->group - 1].expire > until)
        until = m->groups[e->group - 1].expire;
    return until;
}

static void wheel_link(struct iot_match *m, uint32_t idx, int64_t until)
{
    int64_t b = until >> IOT_MATCH_BUCKET_SHIFT;
    if (!m->started) {
        m->started = 1;
        m->cursor = b;
    }
    if (b < m->cursor)
        b = m->cursor; /* swept at the next step */
    struct mt_entry *e = &m->entries[idx];
    e->wslot = (uint16_t)(b & (IOT_MATCH_BUCKETS - 1));
    e->wprev = 0;
    e->wnext = m->wheel[e->wslot];
    if (e->wnext)
        m->entries[e->wnext - 1].wprev = idx + 1;
    m->wheel[e->wslot] = idx + 1;
}

static void wheel_unlink(struct iot_match *m, uint32_t idx)
{
    struct mt_entry *e = &m->entries[idx];
    if (e->wprev)
        m->entries[e->wprev - 1].wnext = e->wnext;
    else
        m->wheel[e->wslot] = e->wnext;
    if (e->wnext)
        m->entries[e->wnext - 1].wprev = e->wprev;
}

/* ---- entries ----------------------------------------------------------- */

/* The per-entry arrays of pair mode follow the entry slab's capacity. */
static int grow_pair_arrays(struct iot_match *m, size_t cap)
{
    struct xp_event *call = realloc(m->call, cap * sizeof *call);
    if (call)
        m->call = call;
    uint32_t *tag = call ? realloc(m->call_tag, cap * sizeof *tag) : NULL;
    if (tag)
        m->call_tag = tag;
    uint32_t *head = tag ? realloc(m->held_head, cap * sizeof *head) : NULL;
    if (head)
        m->held_head = head;
    return head ? 0 : -1;
}

static int alloc_entry(struct iot_match *m, uint32_t *idx)
{
    if (SLAB_TAKE(m->entries, m->cap_entries, m->free_entry, group, idx) < 0)
        return -1;
    if (m->pair && m->cap_pair < m->cap_entries) {
        if (grow_pair_arrays(m, m->cap_entries) < 0) {
            SLAB_PUT(m->entries, m->free_entry, group, *idx);
            return -1;
        }
        m->cap_pair = m->cap_entries;
    }
    return 0;
}

static void close_entry(struct iot_match *m, uint32_t idx, int linked);

/* The entry of (job, CallID), made if new (or if the one there is over);
 * NULL when out of memory. */
static struct mt_entry *entry_for(struct iot_match *m, uint32_t job, uint64_t callid,
                                  int64_t expire)
{
    int oom = 0;
    uint32_t page = ix_page(&m->calls, job, 0, callid, 1, &oom);
    if (!page)
        return NULL;
    uint32_t v = *ix_at(&m->calls, page, callid);
    if (v) {
        struct mt_entry *e = &m->entries[v - 1];
        if (until_of(m, e) >= m->now)
            return e;
        close_entry(m, v - 1, 1); /* may free the page */
        if (!(page = ix_page(&m->calls, job, 0, callid, 1, &oom)))
            return NULL;
    }
    uint32_t idx;
    if (alloc_entry(m, &idx) < 0)
        return NULL;
    m->entries[idx] =
        (struct mt_entry){.callid = callid, .job = job, .expire = expire, .flags = F_USED};
    ix_set(&m->calls, page, callid, idx + 1);
    wheel_link(m, idx, expire);
    if (m->pair)
        m->held_head[idx] = 0;
    if (++m->n_entries > m->peak_entries)
        m->peak_entries = m->n_entries;
    return &m->entries[idx];
}

static void free_entry(struct iot_match *m, uint32_t idx)
{
    struct mt_entry *e = &m->entries[idx];
    ix_clear(&m->calls, e->job, 0, e->callid);
    e->flags = 0;
    SLAB_PUT(m->entries, m->free_entry, group, idx);
    m->n_entries--;
}

/* ---- collective groups -------------------------------------------------- */

static uint32_t rank_of(uint64_t callid)
{
    return (uint32_t)(callid >> RANK_SHIFT);
}

static int has_rank(const struct mt_group *g, uint32_t rank)
{
    if (rank < 64)
        return (g->low_ranks >> rank) & 1;
    if (!g->rank_set_size)
        return 0;
    uint32_t mask = g->rank_set_size - 1, i = (uint32_t)mix(rank) & mask;
    for (; g->rank_set[i]; i = (i + 1) & mask)
        if (g->rank_set[i] == rank + 1)
            return 1;
    return 0;
}

static int add_rank(struct iot_match *m, struct mt_group *g, uint32_t rank)
{
    if (rank < 64) {
        g->low_ranks |= 1ull << rank;
        return 0;
    }
    if ((g->rank_set_n + 1) * 2 > g->rank_set_size) {
        uint32_t n = g->rank_set_size ? g->rank_set_size * 2 : 16;
        uint32_t *set = calloc(n, sizeof *set);
        if (!set)
            return -1;
        for (uint32_t i = 0; i < g->rank_set_size; i++) {
            uint32_t r = g->rank_set[i];
            if (!r)
                continue;
            uint32_t j = (uint32_t)mix(r - 1) & (n - 1);
            while (set[j])
                j = (j + 1) & (n - 1);
            set[j] = r;
        }
        free(g->rank_set);
        m->rank_set_bytes += (n - g->rank_set_size) * sizeof *set;
        g->rank_set = set;
        g->rank_set_size = n;
    }
    uint32_t mask = g->rank_set_size - 1, i = (uint32_t)mix(rank) & mask;
    while (g->rank_set[i])
        i = (i + 1) & mask;
    g->rank_set[i] = rank + 1;
    g->rank_set_n++;
    return 0;
}

/* A group whose window has passed, or that already has a call of some
 * rank, takes no more calls: the next call with its key starts a new one
 * (a file handle reopened reuses sequence numbers). */
static void unindex_group(struct iot_match *m, struct mt_group *g)
{
    if (!g->indexed)
        return;
    ix_clear(&m->colls, g->job, g->file, g->coll_seq);
    g->indexed = 0;
}

/* A collective's calls are those of one communicator's members on one
 * handle: the same file, sequence number and communicator (coll_group, 0
 * for all of MPI_COMM_WORLD and in older stores).  The communicator goes
 * into the file part of the key, so that ranks each on MPI_COMM_SELF,
 * whose calls share file and numbers, never meet. */
static uint64_t group_file(const struct xp_event *ev)
{
    return ev->coll_group ? mix(ev->file ^ mix(ev->coll_group)) : ev->file;
}

/* The group this call joins: the open one of its key, unless its window
 * has passed or this rank is already in it. */
static struct mt_group *group_for(struct iot_match *m, const struct xp_event *ev, uint32_t *idx)
{
    int oom = 0;
    uint64_t file = group_file(ev);
    uint32_t page = ix_page(&m->colls, ev->job, file, ev->coll_seq, 1, &oom);
    if (!page)
        return NULL;
    uint32_t v = *ix_at(&m->colls, page, ev->coll_seq);
    if (v) {
        struct mt_group *g = &m->groups[v - 1];
        if (g->expire >= m->now && !has_rank(g, rank_of(ev->callid))) {
            *idx = v - 1;
            return g;
        }
        unindex_group(m, g); /* may free the page */
        if (!(page = ix_page(&m->colls, ev->job, file, ev->coll_seq, 1, &oom)))
            return NULL;
    }
    if (SLAB_TAKE(m->groups, m->cap_groups, m->free_group, members, idx) < 0)
        return NULL;
    struct mt_group *g = &m->groups[*idx];
    *g = (struct mt_group){.file = file, .coll_seq = ev->coll_seq, .expire = INT64_MIN,
                           .job = ev->job, .indexed = 1};
    ix_set(&m->colls, page, ev->coll_seq, *idx + 1);
    if (++m->n_groups > m->peak_groups)
        m->peak_groups = m->n_groups;
    return g;
}

static int join_group(struct iot_match *m, struct mt_entry *e, const struct xp_event *ev)
{
    uint32_t gi;
    struct mt_group *g = group_for(m, ev, &gi);
    if (!g || add_rank(m, g, rank_of(ev->callid)) < 0)
        return -1; /* a group just made stays empty and indexed: the next call takes
                      it */
    g->members++;
    g->size++;
    g->ops += e->own_ops;
    if (e->expire > g->expire)
        g->expire = e->expire;
    e->group = gi + 1;
    return 0;
}

static void leave_group(struct iot_match *m, struct mt_entry *e)
{
    uint32_t gi = e->group - 1;
    struct mt_group *g = &m->groups[gi];
    unindex_group(m, g);
    if (--g->members == 0) {
        m->rank_set_bytes -= g->rank_set_size * sizeof *g->rank_set;
        free(g->rank_set);
        *g = (struct mt_group){0};
        SLAB_PUT(m->groups, m->free_group, members, gi);
        m->n_groups--;
    }
}

static void extend(struct iot_match *m, struct mt_entry *e, int64_t expire)
{
    if (expire > e->expire)
        e->expire = expire;
    if (e->group && expire > m->groups[e->group - 1].expire)
        m->groups[e->group - 1].expire = expire;
}

/* ---- pairs ------------------------------------------------------------- */

static void free_held(struct iot_match *m, uint32_t idx)
{
    uint32_t h = m->held_head[idx];
    while (h) {
        uint32_t next = m->held[h - 1].next;
        SLAB_PUT(m->held, m->free_held, next, h - 1);
        m->n_held--;
        h = next;
    }
    m->held_head[idx] = 0;
}

static int hold(struct iot_match *m, uint32_t idx, const struct xp_event *ev, uint32_t tag)
{
    uint32_t h;
    if (SLAB_TAKE(m->held, m->cap_held, m->free_held, next, &h) < 0)
        return -1;
    struct mt_held *n = &m->held[h++];
    *n = (struct mt_held){.ev = *ev, .tag = tag, .next = m->held_head[idx]};
    m->held_head[idx] = h;
    if (++m->n_held > m->peak_held)
        m->peak_held = m->n_held;
    return 0;
}

/* The call is known now: the disk operations that came before it pair up. */
static int set_call(struct iot_match *m, uint32_t idx, const struct xp_event *ev, uint32_t tag)
{
    m->call[idx] = *ev;
    m->call_tag[idx] = tag;
    int rc = 0;
    for (uint32_t h = m->held_head[idx]; h && rc == 0; h = m->held[h - 1].next)
        rc = m->pair(m->pair_ctx, &m->call[idx], tag, &m->held[h - 1].ev, m->held[h - 1].tag);
    free_held(m, idx);
    return rc ? -1 : 0;
}

/* ---- events ------------------------------------------------------------- */

static int on_call(struct iot_match *m, const struct xp_event *ev, uint32_t tag)
{
    int64_t expire = ev->t_end + m->grace_ns;
    struct mt_entry *e = entry_for(m, ev->job, ev->callid, expire);
    if (!e)
        return -1;
    uint32_t idx = (uint32_t)(e - m->entries);
    extend(m, e, expire);
    uint8_t cls = class_of(ev->func);
    if (cls & C_COMPLETION) {
        if (e->flags & F_CALL)
            return 0;
        e->func = ev->func;
        e->flags |= F_CALL;
        return m->pair ? set_call(m, idx, ev, tag) : 0;
    }
    if (e->flags & F_OWNER)
        return 0; /* the same CallID twice: only the first call counts */
    int expect = (cls & C_TRANSFER) && ev->bytes > 0 && ev->ret == 0;
    int first = !(e->flags & F_CALL);
    e->flags |= F_CALL | F_OWNER | (expect ? F_EXPECT : 0);
    e->func = ev->func;
    if (ev->coll_seq && ev->file && join_group(m, e, ev) < 0)
        return -1;
    /* A completion seen first has already taken the disk operations held
     * until then; later ones pair with the issuing call. */
    if (m->pair && first)
        return set_call(m, idx, ev, tag);
    if (m->pair) {
        m->call[idx] = *ev;
        m->call_tag[idx] = tag;
    }
    return 0;
}

static int on_disk(struct iot_match *m, const struct xp_event *ev, uint32_t tag)
{
    int64_t expire = ev->t_end + m->grace_ns;
    struct mt_entry *e = entry_for(m, ev->job, ev->callid, expire);
    if (!e)
        return -1;
    uint32_t idx = (uint32_t)(e - m->entries);
    if (m->pair) {
        int rc = (e->flags & F_CALL)
                     ? m->pair(m->pair_ctx, &m->call[idx], m->call_tag[idx], ev, tag)
                     : hold(m, idx, ev, tag);
        if (rc)
            return -1;
    }
    e->own_ops++;
    e->own_bytes += ev->bytes;
    e->own_time += (uint64_t)(ev->t_end - ev->t_start);
    if (e->group)
        m->groups[e->group - 1].ops++;
    if (!(e->flags & F_CALL) && expire > e->expire)
        e->expire = expire; /* held for a call that has not come yet */
    return 0;
}

/* A POSIX call carrying a CallID runs inside that MPI-IO call, which the
 * client records only when it returns: until then its POSIX calls are the
 * sign that it is still running.  They keep the entry of a call not yet
 * seen open, so that the disk operations of a long collective's early
 * writes wait for it. */
static int on_posix(struct iot_match *m, const struct xp_event *ev)
{
    int64_t expire = ev->t_end + m->grace_ns;
    struct mt_entry *e = entry_for(m, ev->job, ev->callid, expire);
    if (!e)
        return -1;
    if (!(e->flags & F_CALL) && expire > e->expire)
        e->expire = expire;
    return 0;
}

int iot_match_event_tagged(struct iot_match *m, const struct xp_event *ev, uint32_t tag)
{
    if (ev->job == 0 || ev->callid == 0)
        return 0;
    if (ev->kind == XP_MPIIO)
        return on_call(m, ev, tag);
    if (ev->kind == XP_DISK)
        return on_disk(m, ev, tag);
    if (ev->kind == XP_POSIX)
        return on_posix(m, ev);
    return 0;
}

int iot_match_event(struct iot_match *m, const struct xp_event *ev)
{
    return iot_match_event_tagged(m, ev, 0);
}

/* ---- closing ------------------------------------------------------------ */

static void report(struct iot_match *m, const struct mt_entry *e)
{
    const struct mt_group *g = e->group ? &m->groups[e->group - 1] : NULL;
    struct iot_match_closed c = {
        .callid = e->callid, .job = e->job, .func = (e->flags & F_CALL) ? e->func : 0,
        .expect_disk = (e->flags & F_EXPECT) != 0, .ops = g ? g->ops : e->own_ops,
        .own_ops = e->own_ops, .own_bytes = e->own_bytes, .own_time_ns = e->own_time,
        .group_size = g ? g->size : 0};
    m->sink(m->ctx, &c);
}

static void close_entry(struct iot_match *m, uint32_t idx, int linked)
{
    struct mt_entry *e = &m->entries[idx];
    if (linked)
        wheel_unlink(m, idx);
    report(m, e);
    if (m->pair)
        free_held(m, idx); /* unmatched: counted by the report, not kept */
    if (e->group)
        leave_group(m, e);
    free_entry(m, idx);
}

void iot_match_expire(struct iot_match *m, int64_t now_ns)
{
    if (now_ns <= m->now)
        return;
    m->now = now_ns;
    int64_t target = now_ns >> IOT_MATCH_BUCKET_SHIFT; /* earlier buckets end by now_ns */
    if (!m->started || target <= m->cursor)
        return;
    /* A jump of a whole turn or more sweeps every bucket once. */
    int64_t n = target - m->cursor < IOT_MATCH_BUCKETS ? target - m->cursor : IOT_MATCH_BUCKETS;
    for (int64_t k = 0; k < n; k++) {
        uint32_t slot = (uint32_t)((m->cursor + k) & (IOT_MATCH_BUCKETS - 1));
        uint32_t v = m->wheel[slot];
        m->wheel[slot] = 0;
        while (v) {
            uint32_t idx = v - 1;
            v = m->entries[idx].wnext;
            int64_t until = until_of(m, &m->entries[idx]);
            if (until < now_ns)
                close_entry(m, idx, 0);
            else
                wheel_link(m, idx, until); /* extended, or a turn or more ahead */
        }
    }
    m->cursor = target;
}

void iot_match_finish(struct iot_match *m)
{
    iot_match_expire(m, INT64_MAX);
}
