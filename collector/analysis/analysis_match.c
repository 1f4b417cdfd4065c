#include "analysis_match.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

#include "iot_functions.h"

enum { F_USED = 1, F_CALL = 2, F_OWNER = 4, F_EXPECT = 8 };

/* One (job, CallID) in flight: 48 bytes. */
struct mt_entry {
    uint64_t callid;
    uint64_t own_bytes, own_time;
    int64_t expire; /* closes once the time passes this */
    uint32_t job;
    uint32_t group;   /* index + 1; when free: the next free entry + 1 */
    uint32_t own_ops;
    uint16_t func;
    uint8_t flags;
};

struct mt_group {
    uint64_t file, coll_seq, serial;
    int64_t expire; /* latest end of a member (or its completion) + grace */
    uint32_t job;
    uint32_t ops;     /* disk operations of all members */
    uint32_t members; /* entries still referring to it; when free: next free + 1 */
    uint32_t size;    /* calls that joined */
    uint8_t indexed;  /* still findable by its key: later calls may join */
};

/* The heap holds every entry exactly once, keyed by its expiry at the time
 * it was pushed; entries are only ever freed when popped, so a node never
 * outlives its entry.  A key that has grown since is found stale on pop and
 * pushed again. */
struct mt_node {
    int64_t expire;
    uint32_t entry;
};

/* A disk operation waiting for its call (pairs only). */
struct mt_held {
    struct xp_event ev;
    uint32_t tag;
    uint32_t next; /* index + 1 of the next in its list, or of the next free one */
};

#define RANK_SHIFT 40

/* ---- function classes ------------------------------------------------- */

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int iot_match_is_completion(unsigned func)
{
    const char *name = iot_func_kind(func) == IOT_KIND_MPIIO ? iot_func_name(func) : NULL;
    return name && (strncmp(name, "MPI_Wait", 8) == 0 || strncmp(name, "MPI_Test", 8) == 0 ||
                    has_suffix(name, "_end"));
}

/* Named after what they do: MPI_File_read*, MPI_File_iwrite*, ... */
int iot_match_is_transfer(unsigned func)
{
    const char *name = iot_func_kind(func) == IOT_KIND_MPIIO ? iot_func_name(func) : NULL;
    return name && strncmp(name, "MPI_File_", 9) == 0 &&
           (strstr(name, "read") || strstr(name, "write")) && !iot_match_is_completion(func);
}

int iot_match_expects_disk(const struct xp_event *call)
{
    return call->bytes > 0 && call->ret == 0 && iot_match_is_transfer(call->func);
}

enum { C_COMPLETION = 1, C_TRANSFER = 2 };

/* The classes by name, once, rather than string compares per event. */
static void classify(uint8_t *fclass)
{
    for (unsigned f = 0; f < 128; f++)
        fclass[f] = (uint8_t)((iot_match_is_completion(f) ? C_COMPLETION : 0) |
                              (iot_match_is_transfer(f) ? C_TRANSFER : 0));
}

static uint8_t class_of(const struct iot_match *m, unsigned func)
{
    return func < 128 ? m->fclass[func] : 0;
}

/* ---- hashing and open addressing -------------------------------------- */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint64_t call_hash(uint32_t job, uint64_t callid)
{
    return mix(callid ^ ((uint64_t)job * 0x9e3779b97f4a7c15ull));
}

static uint64_t group_hash(uint32_t job, uint64_t file, uint64_t seq)
{
    return mix(file ^ mix(seq ^ ((uint64_t)job << 32)));
}

static uint64_t entry_home(const struct iot_match *m, uint32_t v)
{
    const struct mt_entry *e = &m->entries[v - 1];
    return call_hash(e->job, e->callid);
}

static uint64_t group_home(const struct iot_match *m, uint32_t v)
{
    const struct mt_group *g = &m->groups[v - 1];
    return group_hash(g->job, g->file, g->coll_seq);
}

typedef uint64_t (*home_fn)(const struct iot_match *m, uint32_t v);

/* Linear probing with backward-shift deletion: no tombstones, so lookups
 * stay short however many entries come and go. */
static void slot_remove(const struct iot_match *m, uint32_t *t, size_t size, size_t i,
                        home_fn home)
{
    size_t mask = size - 1, j = i;
    for (;;) {
        t[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!t[j])
                return;
            size_t k = (size_t)home(m, t[j]) & mask;
            int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays)
                break;
        }
        t[i] = t[j];
        i = j;
    }
}

static int rehash(struct iot_match *m, uint32_t **t, size_t *size, home_fn home)
{
    size_t n = *size ? *size * 2 : 1024;
    uint32_t *nt = calloc(n, sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < *size; i++) {
        if (!(*t)[i])
            continue;
        size_t j = (size_t)home(m, (*t)[i]) & (n - 1);
        while (nt[j])
            j = (j + 1) & (n - 1);
        nt[j] = (*t)[i];
    }
    free(*t);
    *t = nt;
    *size = n;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    return iot_grow(p, cap, need, size, 1024);
}

/* ---- the member set: (group serial, rank) ----------------------------- */

static uint64_t member_key(uint64_t serial, uint64_t callid)
{
    return serial << 24 | (callid >> RANK_SHIFT);
}

static size_t member_slot(const struct iot_match *m, uint64_t key)
{
    size_t mask = m->members_size - 1, i = (size_t)mix(key) & mask;
    while (m->members[i] && m->members[i] != key)
        i = (i + 1) & mask;
    return i;
}

static int member_grow(struct iot_match *m)
{
    size_t n = m->members_size ? m->members_size * 2 : 1024;
    uint64_t *old = m->members;
    size_t old_size = m->members_size;
    if (!(m->members = calloc(n, sizeof *m->members))) {
        m->members = old;
        return -1;
    }
    m->members_size = n;
    for (size_t i = 0; i < old_size; i++)
        if (old[i])
            m->members[member_slot(m, old[i])] = old[i];
    free(old);
    return 0;
}

static void member_remove(struct iot_match *m, uint64_t key)
{
    size_t mask = m->members_size - 1, i = member_slot(m, key), j = i;
    if (!m->members[i])
        return;
    m->n_members--;
    for (;;) {
        m->members[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!m->members[j])
                return;
            size_t k = (size_t)mix(m->members[j]) & mask;
            if (!(i <= j ? (i < k && k <= j) : (i < k || k <= j)))
                break;
        }
        m->members[i] = m->members[j];
        i = j;
    }
}

/* ---- setup ------------------------------------------------------------- */

int iot_match_init(struct iot_match *m, int64_t grace_ns, iot_match_sink sink, void *ctx)
{
    memset(m, 0, sizeof *m);
    m->grace_ns = grace_ns;
    m->sink = sink;
    m->ctx = ctx;
    classify(m->fclass);
    return rehash(m, &m->table, &m->table_size, entry_home) < 0 ||
                   rehash(m, &m->gtable, &m->gtable_size, group_home) < 0 || member_grow(m) < 0
               ? -1
               : 0;
}

void iot_match_free(struct iot_match *m)
{
    free(m->entries);
    free(m->table);
    free(m->heap);
    free(m->groups);
    free(m->gtable);
    free(m->members);
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
    return m->cap_entries * sizeof *m->entries + m->table_size * sizeof *m->table +
           m->heap_cap * sizeof *m->heap + m->cap_groups * sizeof *m->groups +
           m->gtable_size * sizeof *m->gtable + m->members_size * sizeof *m->members +
           (m->call ? m->cap_entries * (sizeof *m->call + 2 * sizeof(uint32_t)) : 0) +
           m->cap_held * sizeof *m->held;
}

/* ---- the expiry heap --------------------------------------------------- */

static int heap_push(struct iot_match *m, uint32_t entry, int64_t expire)
{
    if (grow((void **)&m->heap, &m->heap_cap, m->heap_n + 1, sizeof *m->heap) < 0)
        return -1;
    size_t i = m->heap_n++;
    while (i > 0 && m->heap[(i - 1) / 2].expire > expire) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = (struct mt_node){expire, entry};
    return 0;
}

static struct mt_node heap_pop(struct iot_match *m)
{
    struct mt_node top = m->heap[0], n = m->heap[--m->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->heap_n)
            break;
        if (c + 1 < m->heap_n && m->heap[c + 1].expire < m->heap[c].expire)
            c++;
        if (m->heap[c].expire >= n.expire)
            break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->heap_n)
        m->heap[i] = n;
    return top;
}

/* ---- entries ----------------------------------------------------------- */

static size_t entry_slot(const struct iot_match *m, uint32_t job, uint64_t callid)
{
    size_t mask = m->table_size - 1, i = (size_t)call_hash(job, callid) & mask;
    for (uint32_t v; (v = m->table[i]); i = (i + 1) & mask) {
        const struct mt_entry *e = &m->entries[v - 1];
        if (e->callid == callid && e->job == job)
            break;
    }
    return i;
}

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
    if (m->free_entry) {
        *idx = m->free_entry - 1;
        m->free_entry = m->entries[*idx].group;
        return 0;
    }
    size_t cap = m->cap_entries;
    if (grow((void **)&m->entries, &cap, m->cap_entries + 1, sizeof *m->entries) < 0)
        return -1;
    if (m->pair && grow_pair_arrays(m, cap) < 0)
        return -1;
    for (size_t i = cap; i > m->cap_entries; i--) {
        m->entries[i - 1].group = m->free_entry;
        m->free_entry = (uint32_t)i;
    }
    m->cap_entries = cap;
    *idx = m->free_entry - 1;
    m->free_entry = m->entries[*idx].group;
    return 0;
}

/* The entry of (job, CallID), made if new; NULL when out of memory. */
static struct mt_entry *entry_for(struct iot_match *m, uint32_t job, uint64_t callid,
                                  int64_t expire)
{
    size_t i = entry_slot(m, job, callid);
    if (m->table[i])
        return &m->entries[m->table[i] - 1];
    if ((m->n_entries + 1) * 2 > m->table_size) {
        if (rehash(m, &m->table, &m->table_size, entry_home) < 0)
            return NULL;
        i = entry_slot(m, job, callid);
    }
    uint32_t idx;
    if (alloc_entry(m, &idx) < 0)
        return NULL;
    if (heap_push(m, idx, expire) < 0) {
        m->entries[idx].group = m->free_entry;
        m->free_entry = idx + 1;
        return NULL;
    }
    m->entries[idx] = (struct mt_entry){.callid = callid, .job = job, .expire = expire,
                                        .flags = F_USED};
    m->table[i] = idx + 1;
    if (m->pair)
        m->held_head[idx] = 0;
    if (++m->n_entries > m->peak_entries)
        m->peak_entries = m->n_entries;
    return &m->entries[idx];
}

static void free_entry(struct iot_match *m, uint32_t idx)
{
    struct mt_entry *e = &m->entries[idx];
    slot_remove(m, m->table, m->table_size, entry_slot(m, e->job, e->callid), entry_home);
    e->flags = 0;
    e->group = m->free_entry;
    m->free_entry = idx + 1;
    m->n_entries--;
}

/* ---- collective groups -------------------------------------------------- */

static size_t group_slot(const struct iot_match *m, uint32_t job, uint64_t file, uint64_t seq)
{
    size_t mask = m->gtable_size - 1, i = (size_t)group_hash(job, file, seq) & mask;
    for (uint32_t v; (v = m->gtable[i]); i = (i + 1) & mask) {
        const struct mt_group *g = &m->groups[v - 1];
        if (g->file == file && g->coll_seq == seq && g->job == job)
            break;
    }
    return i;
}

static int alloc_group(struct iot_match *m, uint32_t *idx)
{
    if (!m->free_group) {
        size_t cap = m->cap_groups;
        if (grow((void **)&m->groups, &cap, m->cap_groups + 1, sizeof *m->groups) < 0)
            return -1;
        for (size_t i = cap; i > m->cap_groups; i--) {
            m->groups[i - 1].members = m->free_group;
            m->free_group = (uint32_t)i;
        }
        m->cap_groups = cap;
    }
    *idx = m->free_group - 1;
    m->free_group = m->groups[*idx].members;
    return 0;
}

/* A group whose window has passed, or that already has a call of some
 * rank, takes no more calls: the next call with its key starts a new one
 * (a file handle reopened reuses sequence numbers). */
static void unindex_group(struct iot_match *m, struct mt_group *g)
{
    if (!g->indexed)
        return;
    slot_remove(m, m->gtable, m->gtable_size, group_slot(m, g->job, g->file, g->coll_seq),
                group_home);
    g->indexed = 0;
}

static struct mt_group *new_group(struct iot_match *m, uint32_t job, uint64_t file, uint64_t seq,
                                  uint32_t *idx)
{
    if ((m->n_groups + 1) * 2 > m->gtable_size &&
        rehash(m, &m->gtable, &m->gtable_size, group_home) < 0)
        return NULL;
    if (alloc_group(m, idx) < 0)
        return NULL;
    struct mt_group *g = &m->groups[*idx];
    *g = (struct mt_group){.file = file, .coll_seq = seq, .serial = ++m->next_serial,
                           .expire = INT64_MIN, .job = job, .indexed = 1};
    m->gtable[group_slot(m, job, file, seq)] = *idx + 1;
    if (++m->n_groups > m->peak_groups)
        m->peak_groups = m->n_groups;
    return g;
}

/* The group this call joins: the open one of its key, unless this rank is
 * already in it. */
static struct mt_group *group_for(struct iot_match *m, const struct xp_event *ev, uint32_t *idx)
{
    size_t i = group_slot(m, ev->job, ev->file, ev->coll_seq);
    if (m->gtable[i]) {
        struct mt_group *g = &m->groups[m->gtable[i] - 1];
        if (!m->members[member_slot(m, member_key(g->serial, ev->callid))]) {
            *idx = m->gtable[i] - 1;
            return g;
        }
        unindex_group(m, g);
    }
    return new_group(m, ev->job, ev->file, ev->coll_seq, idx);
}

static int join_group(struct iot_match *m, struct mt_entry *e, const struct xp_event *ev)
{
    if ((m->n_members + 1) * 2 > m->members_size && member_grow(m) < 0)
        return -1;
    uint32_t gi;
    struct mt_group *g = group_for(m, ev, &gi);
    if (!g)
        return -1;
    m->members[member_slot(m, member_key(g->serial, ev->callid))] =
        member_key(g->serial, ev->callid);
    m->n_members++;
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
    member_remove(m, member_key(g->serial, e->callid));
    if (--g->members == 0) {
        g->members = m->free_group;
        m->free_group = gi + 1;
        m->n_groups--;
    }
}

/* ---- events ------------------------------------------------------------- */

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
        m->held[h - 1].next = m->free_held;
        m->free_held = h;
        m->n_held--;
        h = next;
    }
    m->held_head[idx] = 0;
}

static int hold(struct iot_match *m, uint32_t idx, const struct xp_event *ev, uint32_t tag)
{
    if (!m->free_held) {
        size_t cap = m->cap_held;
        if (grow((void **)&m->held, &cap, m->cap_held + 1, sizeof *m->held) < 0)
            return -1;
        for (size_t i = cap; i > m->cap_held; i--) {
            m->held[i - 1].next = m->free_held;
            m->free_held = (uint32_t)i;
        }
        m->cap_held = cap;
    }
    uint32_t h = m->free_held;
    struct mt_held *n = &m->held[h - 1];
    m->free_held = n->next;
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
    uint8_t cls = class_of(m, ev->func);
    if (cls & C_COMPLETION) {
        if (e->flags & F_CALL)
            return 0;
        e->func = ev->func;
        e->flags |= F_CALL;
        return m->pair ? set_call(m, idx, ev, tag) : 0;
    }
    if (e->flags & F_OWNER)
        return 0; /* the same CallID twice: only the first call counts */
    int expect = (cls & C_TRANSFER) && ev->bytes > 0 && ev->ret == 0; /* iot_match_expects_disk */
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
        .job = e->job, .func = (e->flags & F_CALL) ? e->func : 0,
        .expect_disk = (e->flags & F_EXPECT) != 0, .ops = g ? g->ops : e->own_ops,
        .own_ops = e->own_ops, .own_bytes = e->own_bytes, .own_time_ns = e->own_time,
        .group_size = g ? g->size : 0};
    m->sink(m->ctx, &c);
}

static void close_entry(struct iot_match *m, uint32_t idx)
{
    struct mt_entry *e = &m->entries[idx];
    report(m, e);
    if (m->pair)
        free_held(m, idx); /* unmatched: counted by the report, not kept */
    if (e->group)
        leave_group(m, e);
    free_entry(m, idx);
}

void iot_match_expire(struct iot_match *m, int64_t now_ns)
{
    while (m->heap_n && m->heap[0].expire < now_ns) {
        struct mt_node n = heap_pop(m);
        struct mt_entry *e = &m->entries[n.entry];
        int64_t until = e->expire;
        if (e->group && m->groups[e->group - 1].expire > until)
            until = m->groups[e->group - 1].expire;
        /* Re-pushing reuses the node just popped: it cannot fail. */
        if (until >= now_ns)
            heap_push(m, n.entry, until);
        else
            close_entry(m, n.entry);
    }
}

void iot_match_finish(struct iot_match *m)
{
    iot_match_expire(m, INT64_MAX);
}
