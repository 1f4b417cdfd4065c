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
 * instead of asking the system for fresh pages. */
#define CHUNK_FIRST 64u
#define CHUNK_FULL 1024u
#define SPARE_MAX 64u

struct mg_chunk {
    struct mg_chunk *next;
    uint32_t head, tail, cap;
    struct mg_item v[];
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
    free_chunks(m->spare);
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
 * releasing takes from the front, so memory is touched in order.  An event
 * that starts before the tail of its queue goes to a heap of its own; the
 * order of release is (start, arrival) all the same. */
static int item_less(const struct mg_item *a, const struct mg_item *b)
{
    return a->ev.t_start < b->ev.t_start || (a->ev.t_start == b->ev.t_start && a->seq < b->seq);
}

static const struct mg_item *qfront(const struct iot_merge *m, uint32_t q)
{
    const struct mg_chunk *c = m->queue[q].first;
    return &c->v[c->head];
}

static int qless(const struct iot_merge *m, size_t i, size_t j)
{
    return item_less(qfront(m, m->qheap[i]), qfront(m, m->qheap[j]));
}

static void qplace(struct iot_merge *m, size_t i, uint32_t q)
{
    m->qheap[i] = q;
    m->queue[q].qpos = (uint32_t)i + 1;
}

static void qsift_up(struct iot_merge *m, size_t i)
{
    uint32_t q = m->qheap[i];
    const struct mg_item *key = qfront(m, q);
    while (i > 0 && item_less(key, qfront(m, m->qheap[(i - 1) / 2]))) {
        qplace(m, i, m->qheap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    qplace(m, i, q);
}

static void qsift_down(struct iot_merge *m, size_t i)
{
    uint32_t q = m->qheap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->qheap_n)
            break;
        if (c + 1 < m->qheap_n && qless(m, c + 1, c))
            c++;
        if (!item_less(qfront(m, m->qheap[c]), qfront(m, q)))
            break;
        qplace(m, i, m->qheap[c]);
        i = c;
    }
    qplace(m, i, q);
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

/* Room for one more item at the back of a queue. */
static int queue_room(struct iot_merge *m, struct mg_queue *x)
{
    struct mg_chunk *last = x->last;
    if (last && last->tail < last->cap)
        return 0;
    uint32_t cap = last ? (last->cap < CHUNK_FULL ? last->cap * 2 : CHUNK_FULL) : CHUNK_FIRST;
    struct mg_chunk *c;
    if (cap == CHUNK_FULL && m->spare) {
        c = m->spare;
        m->spare = c->next;
        m->n_spare--;
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
    if (c->cap == CHUNK_FULL && m->n_spare < SPARE_MAX) {
        c->next = m->spare;
        m->spare = c;
        m->n_spare++;
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

static int hold(struct iot_merge *m, const struct xp_event *ev)
{
    struct mg_item it = {*ev, m->seq++};
    uint32_t q = ev->producer * KINDS + (ev->kind < KINDS ? ev->kind : 0);
    if (ensure_queue(m, q) < 0)
        return -1;
    struct mg_queue *x = &m->queue[q];
    if (x->n && ev->t_start < x->last->v[x->last->tail - 1].ev.t_start) {
        if (grow((void **)&m->strag, &m->strag_cap, m->strag_n + 1, sizeof *m->strag) < 0)
            return -1;
        straggler_push(m, &it);
        m->stragglers++;
        return 0;
    }
    if (queue_room(m, x) < 0)
        return -1;
    x->last->v[x->last->tail++] = it;
    if (x->n++ == 0) {
        qplace(m, m->qheap_n++, q);
        qsift_up(m, m->qheap_n - 1);
    }
    return 0;
}

/* The earliest held event, or NULL. */
static const struct mg_item *peek(const struct iot_merge *m)
{
    const struct mg_item *a = m->qheap_n ? qfront(m, m->qheap[0]) : NULL;
    const struct mg_item *b = m->strag_n ? &m->strag[0] : NULL;
    return !a ? b : !b ? a : item_less(b, a) ? b : a;
}

static struct xp_event take(struct iot_merge *m, const struct mg_item *it)
{
    if (m->strag_n && it == &m->strag[0])
        return straggler_pop(m).ev;
    uint32_t q = m->qheap[0];
    struct mg_queue *x = &m->queue[q];
    struct mg_chunk *c = x->first;
    struct xp_event ev = c->v[c->head++].ev;
    if (c->head == c->tail && c == x->last && c->cap == CHUNK_FIRST) {
        c->head = c->tail = 0; /* a small queue keeps its one chunk */
    } else if (c->head == c->tail) { /* the queue moves on to its next chunk */
        x->first = c->next;
        if (!x->first)
            x->last = NULL;
        chunk_drop(m, c);
    }
    if (--x->n) {
        qsift_down(m, 0);
        return ev;
    }
    x->qpos = 0;
    if (--m->qheap_n) {
        qplace(m, 0, m->qheap[m->qheap_n]);
        qsift_down(m, 0);
    }
    return ev;
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
    const struct mg_item *it;
    while ((it = peek(m)) && it->ev.t_start <= upto) {
        struct xp_event ev = take(m, it);
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
