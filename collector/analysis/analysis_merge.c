#include "analysis_merge.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

enum { P_UNSEEN, P_ACTIVE, P_IDLE, P_CLOSED };

struct mg_producer {
    int64_t latest;       /* newest start time pushed */
    int64_t last_arrival; /* arrival time of the last advance that saw it push */
    uint32_t heap_pos;    /* index + 1 in pheap, 0 if not there */
    uint8_t state;
    uint8_t dirty;
};


#define KINDS 4

struct mg_item {
    struct xp_event ev;
    uint64_t seq; /* arrival order: equal start times leave in the order they came */
};

/* A queue is a list of chunks: growing it never copies what it holds, and
 * full-size chunks drained at the front are kept (up to SPARE_MAX) for
 * the back of any queue, so that a steady stream reuses the same memory
 * instead of asking the system for fresh pages.  An emptied queue keeps no
 * chunk: its first-size chunk goes to a pool of its own (up to SPARE_MAX),
 * since the live collector sees every process of every job, and each
 * empty queue kept 7 KiB for as long as the collector ran. */
#define CHUNK_FIRST 64u
/* Held events are cold by the time they leave (the live analysis holds
 * seconds of them, hundreds of megabytes): reading each queue this many
 * items ahead hides the memory's latency, which an interleaved merge of
 * many queues otherwise pays on every event. */
#define PREFETCH_AHEAD 6u
#define CHUNK_FULL 1024u
#define SPARE_MAX 64u

struct mg_chunk {
    struct mg_chunk *next;
    uint32_t head, tail, cap;
    struct mg_item v[];
};

/* A queue's place in the heap, with its front's key. */
struct mg_qent {
    int64_t t;
    uint64_t seq;
    uint32_t q;
};

struct mg_queue {
    struct mg_chunk *first, *last;
    uint32_t n;
    uint32_t qpos; /* index + 1 in qheap, 0 if empty */
};

void iot_merge_init(struct iot_merge *m, const struct iot_merge_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->watermark = m->last_out = INT64_MIN;
}

static void free_chunks(struct mg_chunk *c)
{
    while (c) {
        struct mg_chunk *next = c->next;
        free(c);
        c = next;
    }
}

void iot_merge_free(struct iot_merge *m)
{
    free(m->prod);
    free(m->pheap);
    free(m->dirty);
    for (size_t i = 0; i < m->n_queue; i++)
        free_chunks(m->queue[i].first);
    free_chunks(m->spare[0]);
    free_chunks(m->spare[1]);
    free(m->queue);
    free(m->qheap);
    free(m->strag);
    memset(m, 0, sizeof *m);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    return iot_grow(p, cap, need, size, 64);
}

static int ensure_producer(struct iot_merge *m, uint32_t id)
{
    if (id < m->n_prod)
        return 0;
    size_t cap = m->n_prod, pcap = m->n_prod;
    if (grow((void **)&m->prod, &cap, (size_t)id + 1, sizeof *m->prod) < 0 ||
        grow((void **)&m->pheap, &pcap, cap, sizeof *m->pheap) < 0)
        return -1;
    for (size_t i = m->n_prod; i < cap; i++)
        m->prod[i] = (struct mg_producer){.latest = INT64_MIN, .last_arrival = INT64_MIN};
    m->n_prod = cap;
    return 0;
}

/* ---- the producer heap (min on latest start) ---------------------------- */

static int64_t platest(const struct iot_merge *m, size_t i)
{
    return m->prod[m->pheap[i]].latest;
}

static void pplace(struct iot_merge *m, size_t i, uint32_t id)
{
    m->pheap[i] = id;
    m->prod[id].heap_pos = (uint32_t)i + 1;
}

static void psift_up(struct iot_merge *m, size_t i)
{
    uint32_t id = m->pheap[i];
    int64_t key = m->prod[id].latest;
    while (i > 0 && platest(m, (i - 1) / 2) > key) {
        pplace(m, i, m->pheap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    pplace(m, i, id);
}

static void psift_down(struct iot_merge *m, size_t i)
{
    uint32_t id = m->pheap[i];
    int64_t key = m->prod[id].latest;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->pheap_n)
            break;
        if (c + 1 < m->pheap_n && platest(m, c + 1) < platest(m, c))
            c++;
        if (platest(m, c) >= key)
            break;
        pplace(m, i, m->pheap[c]);
        i = c;
    }
    pplace(m, i, id);
}

static void premove(struct iot_merge *m, uint32_t id)
{
    size_t i = m->prod[id].heap_pos - 1;
    m->prod[id].heap_pos = 0;
    uint32_t last = m->pheap[--m->pheap_n];
    if (i == m->pheap_n)
        return;
    pplace(m, i, last);
    psift_up(m, i);
    psift_down(m, m->prod[last].heap_pos - 1);
}

/* A producer's latest start only grows, so it can only sink. */
static void pupdate(struct iot_merge *m, uint32_t id)
{
    struct mg_producer *p = &m->prod[id];
    if (p->heap_pos) {
        psift_down(m, p->heap_pos - 1);
        return;
    }
    pplace(m, m->pheap_n++, id);
    psift_up(m, m->pheap_n - 1);
}

/* ---- held events ---------------------------------------------------------- */

/* A producer's events of one kind arrive in start order, nearly always: each
 * (producer, kind) has a FIFO of them, and only the queues' heads compete in
 * a heap, which stays as small as the number of queues.  Pushing appends and
 * releasing takes from the front, so memory is touched in order.  The heap
 * holds each head's key itself, so that sifting compares without following
 * pointers into the queues.  An event that starts a little before the tail
 * of its queue is put in its place in the queue's last chunk; one further
 * back goes to a heap of its own; the order of release is (start, arrival)
 * all the same. */
static int key_less(int64_t ta, uint64_t sa, int64_t tb, uint64_t sb)
{
    return ta < tb || (ta == tb && sa < sb);
}

static int item_less(const struct mg_item *a, const struct mg_item *b)
{
    return key_less(a->ev.t_start, a->seq, b->ev.t_start, b->seq);
}

static int qent_less(const struct mg_qent *a, const struct mg_qent *b)
{
    return key_less(a->t, a->seq, b->t, b->seq);
}

static const struct mg_item *qfront(const struct iot_merge *m, uint32_t q)
{
    const struct mg_chunk *c = m->queue[q].first;
    return &c->v[c->head];
}

static void qplace(struct iot_merge *m, size_t i, struct mg_qent e)
{
    m->qheap[i] = e;
    m->queue[e.q].qpos = (uint32_t)i + 1;
}

static struct mg_qent qent_of(const struct iot_merge *m, uint32_t q)
{
    const struct mg_item *f = qfront(m, q);
    return (struct mg_qent){f->ev.t_start, f->seq, q};
}

static void qsift_up(struct iot_merge *m, size_t i)
{
    struct mg_qent e = m->qheap[i];
    while (i > 0 && qent_less(&e, &m->qheap[(i - 1) / 2])) {
        qplace(m, i, m->qheap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    qplace(m, i, e);
}

static void qsift_down(struct iot_merge *m, size_t i)
{
    struct mg_qent e = m->qheap[i];
    size_t n = m->qheap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && qent_less(&m->qheap[c + 1], &m->qheap[c]))
            c++;
        if (!qent_less(&m->qheap[c], &e))
            break;
        qplace(m, i, m->qheap[c]);
        i = c;
    }
    qplace(m, i, e);
}

static int ensure_queue(struct iot_merge *m, uint32_t q)
{
    if (q < m->n_queue)
        return 0;
    size_t cap = m->n_queue, hcap = m->n_queue;
    if (grow((void **)&m->queue, &cap, (size_t)q + 1, sizeof *m->queue) < 0 ||
        grow((void **)&m->qheap, &hcap, cap, sizeof *m->qheap) < 0)
        return -1;
    memset(m->queue + m->n_queue, 0, (cap - m->n_queue) * sizeof *m->queue);
    m->n_queue = cap;
    return 0;
}

/* Which pool of spare chunks takes chunks of cap items; -1: none. */
static int spare_pool(uint32_t cap)
{
    return cap == CHUNK_FIRST ? 0 : cap == CHUNK_FULL ? 1 : -1;
}

/* Room for one more item at the back of a queue. */
static int queue_room(struct iot_merge *m, struct mg_queue *x)
{
    struct mg_chunk *last = x->last;
    if (last && last->tail < last->cap)
        return 0;
    uint32_t cap = last ? (last->cap < CHUNK_FULL ? last->cap * 2 : CHUNK_FULL) : CHUNK_FIRST;
    int pool = spare_pool(cap);
    struct mg_chunk *c;
    if (pool >= 0 && m->spare[pool]) {
        c = m->spare[pool];
        m->spare[pool] = c->next;
        m->n_spare[pool]--;
    } else if ((c = malloc(sizeof *c + (size_t)cap * sizeof c->v[0]))) {
        m->chunk_items += cap;
    } else {
        return -1;
    }
    *c = (struct mg_chunk){.cap = cap};
    if (last)
        last->next = c;
    else
        x->first = c;
    x->last = c;
    return 0;
}

static void chunk_drop(struct iot_merge *m, struct mg_chunk *c)
{
    int pool = spare_pool(c->cap);
    if (pool >= 0 && m->n_spare[pool] < SPARE_MAX) {
        c->next = m->spare[pool];
        m->spare[pool] = c;
        m->n_spare[pool]++;
        return;
    }
    m->chunk_items -= c->cap;
    free(c);
}

static void straggler_push(struct iot_merge *m, const struct mg_item *it)
{
    size_t i = m->strag_n++;
    while (i > 0 && item_less(it, &m->strag[(i - 1) / 2])) {
        m->strag[i] = m->strag[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->strag[i] = *it;
}

static struct mg_item straggler_pop(struct iot_merge *m)
{
    struct mg_item top = m->strag[0], n = m->strag[--m->strag_n];
    size_t i = 0, c;
    while ((c = 2 * i + 1) < m->strag_n) {
        if (c + 1 < m->strag_n && item_less(&m->strag[c + 1], &m->strag[c]))
            c++;
        m->strag[i] = m->strag[c];
        i = c;
    }
    while (i > 0 && item_less(&n, &m->strag[(i - 1) / 2])) {
        m->strag[i] = m->strag[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    if (m->strag_n)
        m->strag[i] = n;
    return top;
}

/* How far back from a queue's tail an early event is put in its place; the
 * events a thread pool records out of order are a few places apart. */
#define INSERT_BACK 32u

/* Puts it in its place among the last items of the queue's last chunk, if
 * that is where it belongs and the chunk has room.  Never in the chunk's
 * first place: that keeps the queue's front (whose key the heap holds) and
 * leaves an item of the same chunk before it to compare with.  Returns 0 if
 * it did. */
static int insert_near_tail(struct mg_queue *x, const struct mg_item *it)
{
    struct mg_chunk *c = x->last;
    if (c->tail == c->cap)
        return -1;
    uint32_t lowest = c->head + 1;
    if (c->tail > lowest + INSERT_BACK)
        lowest = c->tail - INSERT_BACK;
    uint32_t pos = c->tail;
    while (pos > lowest && c->v[pos - 1].ev.t_start > it->ev.t_start)
        pos--;
    if (c->v[pos - 1].ev.t_start > it->ev.t_start)
        return -1;
    memmove(&c->v[pos + 1], &c->v[pos], (size_t)(c->tail - pos) * sizeof c->v[0]);
    c->v[pos] = *it;
    c->tail++;
    return 0;
}

static int hold(struct iot_merge *m, const struct xp_event *ev)
{
    uint32_t q = ev->producer * KINDS + (ev->kind < KINDS ? ev->kind : 0);
    if (ensure_queue(m, q) < 0)
        return -1;
    struct mg_queue *x = &m->queue[q];
    if (x->n && ev->t_start < x->last->v[x->last->tail - 1].ev.t_start) {
        struct mg_item it = {*ev, m->seq++};
        m->stragglers++;
        if (insert_near_tail(x, &it) == 0) {
            x->n++;
            return 0;
        }
        if (grow((void **)&m->strag, &m->strag_cap, m->strag_n + 1, sizeof *m->strag) < 0)
            return -1;
        straggler_push(m, &it);
        return 0;
    }
    if (queue_room(m, x) < 0)
        return -1;
    struct mg_item *it = &x->last->v[x->last->tail++];
    it->ev = *ev;
    it->seq = m->seq++;
    if (x->n++ == 0) {
        qplace(m, m->qheap_n++, (struct mg_qent){ev->t_start, it->seq, q});
        qsift_up(m, m->qheap_n - 1);
    }
    return 0;
}

/* Moves the earliest held event to *out if it starts at or before upto;
 * returns 0 when there is none. */
static int take(struct iot_merge *m, int64_t upto, struct xp_event *out)
{
    const struct mg_qent *top = m->qheap_n ? &m->qheap[0] : NULL;
    const struct mg_item *s = m->strag_n ? &m->strag[0] : NULL;
    if (s && (!top || key_less(s->ev.t_start, s->seq, top->t, top->seq))) {
        if (s->ev.t_start > upto)
            return 0;
        *out = straggler_pop(m).ev;
        return 1;
    }
    if (!top || top->t > upto)
        return 0;
    uint32_t q = top->q;
    struct mg_queue *x = &m->queue[q];
    struct mg_chunk *c = x->first;
    if (c->head + PREFETCH_AHEAD < c->tail) {
        const char *ahead = (const char *)&c->v[c->head + PREFETCH_AHEAD];
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + sizeof c->v[0] - 1);
    }
    *out = c->v[c->head++].ev;
    if (c->head == c->tail) { /* the queue moves on to its next chunk, if any */
        x->first = c->next;
        if (!x->first)
            x->last = NULL;
        chunk_drop(m, c);
    }
    if (--x->n) {
        m->qheap[0] = qent_of(m, q);
        qsift_down(m, 0);
        return 1;
    }
    x->qpos = 0;
    if (--m->qheap_n) {
        qplace(m, 0, m->qheap[m->qheap_n]);
        qsift_down(m, 0);
    }
    return 1;
}

static int mark_dirty(struct iot_merge *m, uint32_t id)
{
    struct mg_producer *p = &m->prod[id];
    if (p->state != P_ACTIVE)
        p->state = P_ACTIVE;
    if (p->dirty)
        return 0;
    if (grow((void **)&m->dirty, &m->cap_dirty, m->n_dirty + 1, sizeof *m->dirty) < 0)
        return -1;
    m->dirty[m->n_dirty++] = id;
    p->dirty = 1;
    return 0;
}

int iot_merge_push(struct iot_merge *m, const struct xp_event *ev)
{
    if (ensure_producer(m, ev->producer) < 0 || mark_dirty(m, ev->producer) < 0 ||
        hold(m, ev) < 0)
        return -1;
    struct mg_producer *p = &m->prod[ev->producer];
    if (ev->t_start > p->latest)
        p->latest = ev->t_start;
    m->pushed++;
    if (++m->heap_n > m->peak_held)
        m->peak_held = m->heap_n;
    return 0;
}

void iot_merge_close_producer(struct iot_merge *m, uint32_t producer)
{
    if (producer >= m->n_prod)
        return;
    if (m->prod[producer].heap_pos)
        premove(m, producer);
    m->prod[producer].state = P_CLOSED;
}

int iot_merge_forget_producer(struct iot_merge *m, uint32_t producer)
{
    if (producer >= m->n_prod)
        return 0;
    struct mg_producer *p = &m->prod[producer];
    if (p->dirty)
        return -1;
    for (size_t q = (size_t)producer * KINDS; q < (size_t)(producer + 1) * KINDS; q++)
        if (q < m->n_queue && m->queue[q].n)
            return -1;
    if (p->heap_pos)
        premove(m, producer);
    *p = (struct mg_producer){.latest = INT64_MIN, .last_arrival = INT64_MIN};
    return 0;
}

int64_t iot_merge_last_arrival(const struct iot_merge *m, uint32_t producer)
{
    return producer < m->n_prod ? m->prod[producer].last_arrival : INT64_MIN;
}

/* Producers that pushed since the last advance were alive at now_ns. */
static void settle_dirty(struct iot_merge *m, int64_t now_ns)
{
    for (size_t i = 0; i < m->n_dirty; i++) {
        struct mg_producer *p = &m->prod[m->dirty[i]];
        p->dirty = 0;
        p->last_arrival = now_ns;
        if (p->state == P_ACTIVE)
            pupdate(m, m->dirty[i]);
    }
    m->n_dirty = 0;
}

/* Only the producer at the top can hold the watermark back, so only it
 * needs checking for silence. */
static void drop_idle(struct iot_merge *m, int64_t now_ns)
{
    while (m->cfg.idle_ns > 0 && m->pheap_n) {
        uint32_t id = m->pheap[0];
        if (now_ns - m->prod[id].last_arrival <= m->cfg.idle_ns)
            break;
        premove(m, id);
        m->prod[id].state = P_IDLE;
    }
}

static int release(struct iot_merge *m, int64_t upto, iot_merge_sink sink, void *ctx)
{
    struct xp_event ev;
    while (take(m, upto, &ev)) {
        m->heap_n--;
        if (ev.t_start < m->last_out) {
            m->late++;
            if (m->last_out - ev.t_start > m->max_late_ns)
                m->max_late_ns = m->last_out - ev.t_start;
        } else
            m->last_out = ev.t_start;
        m->released++;
        int rc = sink(ctx, &ev);
        if (rc)
            return rc;
    }
    return 0;
}

int iot_merge_advance(struct iot_merge *m, int64_t now_ns, iot_merge_sink sink, void *ctx)
{
    settle_dirty(m, now_ns);
    drop_idle(m, now_ns);
    /* A producer not heard of yet (or back from silence) sends events of
     * about now: they bound the watermark like the active ones. */
    int64_t w = now_ns;
    if (m->pheap_n && platest(m, 0) < w)
        w = platest(m, 0);
    w = w > INT64_MIN + m->cfg.lateness_ns ? w - m->cfg.lateness_ns : INT64_MIN;
    if (w > m->watermark)
        m->watermark = w;
    return release(m, m->watermark, sink, ctx);
}

int iot_merge_finish(struct iot_merge *m, iot_merge_sink sink, void *ctx)
{
    settle_dirty(m, m->last_out);
    m->watermark = INT64_MAX;
    return release(m, INT64_MAX, sink, ctx);
}

size_t iot_merge_bytes(const struct iot_merge *m)
{
    size_t ring = m->chunk_items * sizeof(struct mg_item);
    return m->n_prod * (sizeof *m->prod + sizeof *m->pheap) + m->cap_dirty * sizeof *m->dirty +
           m->n_queue * (sizeof *m->queue + sizeof *m->qheap) + ring +
           m->strag_cap * sizeof(struct mg_item);
}
