#include "export_sort.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the order is decided on, apart from the events: sorting these moves
 * 48 bytes an element instead of 96, and reads no producer table. */
struct key {
    int64_t t_start, t_end;
    uint64_t order;
    int64_t pid;
    uint32_t tid, node, idx;
};

struct cursor {
    off_t pos, end;        /* what is left of the run in the file */
    struct xp_event *buf;  /* read ahead */
    size_t n, i;
};

struct xp_sorter {
    const struct xp_data *d;
    size_t run;
    struct xp_event *v; /* the run being filled */
    struct key *keys;
    size_t n;
    uint64_t total;
    int fd;             /* the runs sorted so far, one after another; -1: none */
    off_t *starts;      /* where each run begins in it */
    size_t n_runs;
    /* Reading. */
    int spilled;
    size_t next;        /* the run in memory, when it is the only one */
    struct cursor *cur;
    size_t *heap, heap_n;
};

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int cmp_node(const struct xp_data *d, uint32_t a, uint32_t b)
{
    return a == b ? 0 : strcmp(xp_string(&d->nodes, a), xp_string(&d->nodes, b));
}

static int cmp_key(const void *pa, const void *pb, void *ctx)
{
    const struct key *a = pa, *b = pb;
    int c;
    if ((c = cmp_i64(a->t_start, b->t_start)) || (c = cmp_i64(a->t_end, b->t_end)) ||
        (c = cmp_node(ctx, a->node, b->node)) || (c = cmp_i64(a->pid, b->pid)) ||
        (c = cmp_i64(a->tid, b->tid)))
        return c;
    return cmp_i64((int64_t)a->order, (int64_t)b->order);
}

static struct key key_of(const struct xp_data *d, const struct xp_event *ev, uint32_t idx)
{
    const struct xp_producer *p = &d->producers[ev->producer];
    return (struct key){.t_start = ev->t_start, .t_end = ev->t_end, .order = ev->order,
                        .pid = p->pid, .tid = ev->tid, .node = p->node, .idx = idx};
}

static int cmp_events(const struct xp_data *d, const struct xp_event *a, const struct xp_event *b)
{
    struct key x = key_of(d, a, 0), y = key_of(d, b, 0);
    return cmp_key(&x, &y, (void *)d);
}

struct xp_sorter *xp_sorter_new(const struct xp_data *d, size_t run_events)
{
    struct xp_sorter *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->d = d;
    s->run = run_events ? run_events : XP_SORT_RUN;
    s->fd = -1;
    s->v = malloc(s->run * sizeof *s->v);
    s->keys = malloc(s->run * sizeof *s->keys);
    if (!s->v || !s->keys) {
        xp_sorter_free(s);
        return NULL;
    }
    return s;
}

static void sort_run(struct xp_sorter *s)
{
    for (size_t i = 0; i < s->n; i++)
        s->keys[i] = key_of(s->d, &s->v[i], (uint32_t)i);
    if (s->n)
        qsort_r(s->keys, s->n, sizeof *s->keys, cmp_key, (void *)s->d);
}

static int temp_file(void)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != ENOENT))
        return fd;
    char path[4096];
    snprintf(path, sizeof path, "%s/iotrace-export-XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path);
    return fd;
}

static int write_all(int fd, const void *buf, size_t len)
{
    for (const char *p = buf; len;) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The run in memory, sorted, to the end of the file. */
static int spill(struct xp_sorter *s)
{
    if (s->fd < 0 && (s->fd = temp_file()) < 0)
        return -1;
    off_t *starts = realloc(s->starts, (s->n_runs + 2) * sizeof *starts);
    if (!starts)
        return -1;
    s->starts = starts;
    off_t at = lseek(s->fd, 0, SEEK_END);
    if (at < 0)
        return -1;
    s->starts[s->n_runs++] = at;
    sort_run(s);
    enum { CHUNK = 1024 };
    struct xp_event out[CHUNK];
    for (size_t i = 0; i < s->n;) {
        size_t k = 0;
        for (; k < CHUNK && i < s->n; k++, i++)
            out[k] = s->v[s->keys[i].idx];
        if (write_all(s->fd, out, k * sizeof *out) < 0)
            return -1;
    }
    s->starts[s->n_runs] = at + (off_t)(s->n * sizeof *s->v);
    s->n = 0;
    return 0;
}

int xp_sorter_add(struct xp_sorter *s, const struct xp_event *ev)
{
    if (s->n == s->run && spill(s) < 0)
        return -1;
    s->v[s->n++] = *ev;
    s->total++;
    return 0;
}

uint64_t xp_sorter_count(const struct xp_sorter *s) { return s->total; }

/* ---- reading ------------------------------------------------------------ */

enum { READ_AHEAD = 2048 };

static int refill(struct xp_sorter *s, struct cursor *c)
{
    c->i = c->n = 0;
    if (c->pos >= c->end)
        return 0;
    size_t want = (size_t)(c->end - c->pos);
    if (want > READ_AHEAD * sizeof *c->buf)
        want = READ_AHEAD * sizeof *c->buf;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(s->fd, (char *)c->buf + got, want - got, c->pos + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = EIO; /* the file is shorter than what was written */
            return -1;
        }
        got += (size_t)r;
    }
    c->pos += (off_t)got;
    c->n = got / sizeof *c->buf;
    return 1;
}

static int heap_less(const struct xp_sorter *s, size_t a, size_t b)
{
    const struct cursor *x = &s->cur[a], *y = &s->cur[b];
    int c = cmp_events(s->d, &x->buf[x->i], &y->buf[y->i]);
    return c < 0 || (c == 0 && a < b);
}

static void sift_down(struct xp_sorter *s, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->heap_n && heap_less(s, s->heap[l], s->heap[m]))
            m = l;
        if (r < s->heap_n && heap_less(s, s->heap[r], s->heap[m]))
            m = r;
        if (m == i)
            return;
        size_t t = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = t;
        i = m;
    }
}

int xp_sorter_finish(struct xp_sorter *s)
{
    if (s->fd < 0) { /* one run: it stays in memory */
        sort_run(s);
        s->next = 0;
        return 0;
    }
    if (s->n && spill(s) < 0)
        return -1;
    free(s->v);
    free(s->keys);
    s->v = NULL;
    s->keys = NULL;
    s->spilled = 1;
    s->cur = calloc(s->n_runs, sizeof *s->cur);
    s->heap = calloc(s->n_runs, sizeof *s->heap);
    if (!s->cur || !s->heap)
        return -1;
    for (size_t r = 0; r < s->n_runs; r++) {
        struct cursor *c = &s->cur[r];
        c->pos = s->starts[r];
        c->end = s->starts[r + 1];
        if (!(c->buf = malloc(READ_AHEAD * sizeof *c->buf)))
            return -1;
        int got = refill(s, c);
        if (got < 0)
            return -1;
        if (got)
            s->heap[s->heap_n++] = r;
    }
    for (size_t i = s->heap_n; i-- > 0;)
        sift_down(s, i);
    return 0;
}

int xp_sorter_next(struct xp_sorter *s, struct xp_event *ev)
{
    if (!s->spilled) {
        if (s->next == s->n)
            return 0;
        *ev = s->v[s->keys[s->next++].idx];
        return 1;
    }
    if (!s->heap_n)
        return 0;
    struct cursor *c = &s->cur[s->heap[0]];
    *ev = c->buf[c->i++];
    if (c->i == c->n) {
        int got = refill(s, c);
        if (got < 0)
            return -1;
        if (!got)
            s->heap[0] = s->heap[--s->heap_n];
    }
    if (s->heap_n)
        sift_down(s, 0);
    return 1;
}

void xp_sorter_free(struct xp_sorter *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    for (size_t r = 0; s->cur && r < s->n_runs; r++)
        free(s->cur[r].buf);
    free(s->cur);
    free(s->heap);
    free(s->starts);
    free(s->v);
    free(s->keys);
    free(s);
}
