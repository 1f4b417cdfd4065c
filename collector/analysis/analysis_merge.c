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

/* Heap nodes stay small; the events themselves do not move. */
struct mg_node {
    int64_t t;
    uint64_t seq; /* arrival order: equal start times leave in the order they came */
    uint32_t slot;
};

void iot_merge_init(struct iot_merge *m, const struct iot_merge_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->watermark = m->last_out = INT64_MIN;
}

void iot_merge_free(struct iot_merge *m)
{
    free(m->prod);
    free(m->pheap);
    free(m->dirty);
    free(m->heap);
    free(m->slab);
    free(m->free_slots);
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

/* ---- the event heap (min on start time, then arrival) ------------------- */

static int node_less(const struct mg_node *a, const struct mg_node *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(struct iot_merge *m, struct mg_node n)
{
    size_t i = m->heap_n++;
    while (i > 0 && node_less(&n, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = n;
}

/* Bottom-up: the hole left by the top sinks to a leaf along the smaller
 * children (one comparison per level), then the last node rises from there,
 * which is rarely far: about half the comparisons of the textbook pop. */
static struct mg_node heap_pop(struct iot_merge *m)
{
    struct mg_node top = m->heap[0], n = m->heap[--m->heap_n];
    size_t i = 0, c;
    while ((c = 2 * i + 1) < m->heap_n) {
        if (c + 1 < m->heap_n && node_less(&m->heap[c + 1], &m->heap[c]))
            c++;
        m->heap[i] = m->heap[c];
        i = c;
    }
    while (i > 0 && node_less(&n, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    if (m->heap_n)
        m->heap[i] = n;
    return top;
}

static int take_slot(struct iot_merge *m, uint32_t *slot)
{
    if (m->n_free == 0) {
        size_t old = m->slab_cap, cap = old, fcap = old;
        if (grow((void **)&m->slab, &cap, old + 1, sizeof *m->slab) < 0 ||
            grow((void **)&m->free_slots, &fcap, cap, sizeof *m->free_slots) < 0)
            return -1;
        m->slab_cap = cap;
        for (size_t i = cap; i > old; i--)
            m->free_slots[m->n_free++] = (uint32_t)(i - 1);
    }
    *slot = m->free_slots[--m->n_free];
    return 0;
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
    uint32_t slot;
    size_t cap = m->heap_cap;
    if (ensure_producer(m, ev->producer) < 0 || mark_dirty(m, ev->producer) < 0 ||
        grow((void **)&m->heap, &cap, m->heap_n + 1, sizeof *m->heap) < 0 ||
        take_slot(m, &slot) < 0)
        return -1;
    m->heap_cap = cap;
    m->slab[slot] = *ev;
    heap_push(m, (struct mg_node){ev->t_start, m->seq++, slot});
    struct mg_producer *p = &m->prod[ev->producer];
    if (ev->t_start > p->latest)
        p->latest = ev->t_start;
    m->pushed++;
    if (m->heap_n > m->peak_held)
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
    while (m->heap_n && m->heap[0].t <= upto) {
        struct mg_node n = heap_pop(m);
        struct xp_event ev = m->slab[n.slot];
        m->free_slots[m->n_free++] = n.slot;
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
    return m->n_prod * (sizeof *m->prod + sizeof *m->pheap) + m->cap_dirty * sizeof *m->dirty +
           m->heap_cap * sizeof *m->heap +
           m->slab_cap * (sizeof *m->slab + sizeof *m->free_slots);
}
