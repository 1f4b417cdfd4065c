/* Streaming SLOG-2 writer.  The tree is built the way slog2sdk's Java
 * writer (logformat.slog2.output.TreeTrunk / TreeNode, BufForShadows,
 * base.drawable.Shadow) builds it, step for step, so that a trace written
 * here has the same nodes, the same drawables in each node and the same
 * preview shadows as the one TraceToSlog2 writes from the same input.  Even
 * the float arithmetic of the preview weights and category ratios and the
 * iteration order of Java's HashMaps (which decide category order and the
 * summation order of the ratios) are reproduced, so the files are usually
 * byte-identical to Java's; see docs/slog2-format.md, "Writing".
 *
 * Memory: one open node per tree level (the "trunk": the current leaf and
 * its ancestors), each holding its own drawables and the finished shadow
 * buffers of its children; tree directory entries go to temporary files. */
#include "slog2_write.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fixed part of a node or shadow buffer: TimeBBox 16 + NodeID 6 + FBptr 12,
 * plus the two list counts. */
#define BUF_FIXED (34 + 4 + 4)
#define DIRENT_SIZE 34
#define MAX_I16 32767

static const int32_t preview_index[3] = {-1, -3, -2}; /* by topology: event, state, arrow */

/* ---- memory, counted so that the bound on it can be tested ---- */

struct wmem {
    size_t live, peak;
};

/* Each block carries its size in front, to keep the count exact. */
#define MEM_HDR 16

static void *m_realloc(struct wmem *m, void *q, size_t n)
{
    unsigned char *p = q ? (unsigned char *)q - MEM_HDR : NULL;
    size_t old = 0;
    if (p)
        memcpy(&old, p, sizeof old);
    unsigned char *np = realloc(p, n + MEM_HDR);
    if (!np)
        return NULL;
    memcpy(np, &n, sizeof n);
    m->live = m->live - old + n;
    if (m->live > m->peak)
        m->peak = m->live;
    return np + MEM_HDR;
}

static void *m_calloc(struct wmem *m, size_t n)
{
    void *p = m_realloc(m, NULL, n);
    if (p)
        memset(p, 0, n);
    return p;
}

static void m_free(struct wmem *m, void *q)
{
    if (!q)
        return;
    unsigned char *p = (unsigned char *)q - MEM_HDR;
    size_t n;
    memcpy(&n, p, sizeof n);
    m->live -= n;
    free(p);
}

static char *m_strdup(struct wmem *m, const char *s, size_t n)
{
    char *d = m_realloc(m, NULL, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Returns the array grown to hold need items, or p itself with *oom set. */
static void *grow_or_keep(struct wmem *m, void *p, size_t *cap, size_t need, size_t elem, int *oom)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *np = m_realloc(m, p, c * elem);
    if (!np) {
        *oom = 1;
        return p;
    }
    *cap = c;
    return np;
}

#define GROW(w, arr, cap, need) \
    ((arr) = grow_or_keep(&(w)->mem, (arr), &(cap), (need), sizeof *(arr), &(w)->oom))

/* ---- big-endian encoding into reserved space ---- */

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

static uint8_t *put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
    return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
    return p + 8;
}

/* Java writes every NaN as the canonical one (floatToIntBits). */
static uint8_t *put_f32(uint8_t *p, float f)
{
    uint32_t u = 0x7fc00000u;
    if (!isnan(f))
        memcpy(&u, &f, sizeof u);
    return put32(p, u);
}

static uint8_t *put_f64(uint8_t *p, double d)
{
    uint64_t u = 0x7ff8000000000000ull;
    if (!isnan(d))
        memcpy(&u, &d, sizeof u);
    return put64(p, u);
}

static uint8_t *put_str(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    p = put16(p, (uint16_t)n);
    memcpy(p, s, n);
    return p + n;
}

static uint8_t *put_ints(uint8_t *p, const int32_t *v, int n)
{
    for (int i = 0; i < n; i++)
        p = put32(p, (uint32_t)v[i]);
    return p;
}

/* ---- the writer's state ---- */

struct wcat {
    int32_t index, topo;
    uint32_t argb;
    int width;
    char *name;
    int n_keys, n_types, n_methods;
    char **keys;
    char *types;
    int32_t *methods;
    int used;
    uint32_t rank;   /* order of first use: stands in for Java's identity hash */
    int64_t count;   /* real primitives, from the root's shadows */
    float incl, excl; /* legend ratios, likewise */
};

/* A drawable stored in an open node; its encoding is in the node's arena. */
struct wrec {
    double t0, t1; /* time box */
    double v[2];   /* vertex times */
    double excl;   /* exclusive duration, for the preview weights */
    int32_t cat, line[2];
    uint32_t off, len;
    int32_t next; /* next record of the same shadow and category, -1 */
    uint32_t rank; /* its category's */
    uint8_t topo, nv;
};

struct wweight {
    int32_t cat;
    float incl, excl;
    int64_t count;
    int32_t head, tail; /* the node's own records behind it, -1: none */
    uint32_t rank;      /* the category's order of first use */
};

struct span {
    double t0, t1;
};

/* A preview drawable summarising the drawables of one topology and one set
 * of line IDs (Java's Shadow). */
struct shadow {
    uint8_t topo, nv;
    int from_prims; /* made from the node's own records, weights not final */
    int32_t line[2];
    uint32_t jhash; /* Java's hashCode of its key, for the HashMap order */
    double v[2];
    double t0, t1;
    int64_t nreal;
    struct wweight *w;
    size_t nw, capw;
    struct span *kids; /* boxes of child shadows merged in (states) */
    size_t nkids, capkids;
};

/* The shadows of one node incarnation (Java's BufForShadows): written into
 * the parent as the summary of that child. */
struct sbuf {
    struct iot_slog2_nodeid id;
    double t0, t1;
    int64_t off;
    int32_t size;
    struct shadow **sh; /* in insertion order */
    size_t n, cap;
    uint32_t *slot; /* lookup by key: position + 1 */
    size_t nslot;
    int64_t bytesize;
};

struct wnode {
    struct iot_slog2_nodeid id;
    double t0, t1;
    int64_t bytesize; /* BUF_FIXED + sum of (drawable + tag byte) */
    struct bytes arena;
    struct wrec *rec;
    size_t nrec, caprec;
    struct sbuf *cur;   /* shadows of the drawables added since the last write */
    struct sbuf **done; /* finished buffers waiting for the parent's write */
    size_t ndone, capdone;
};

struct iot_slog2_writer {
    struct wmem mem;
    char *path;
    FILE *f;
    int regular; /* only a regular file is removed on failure, never a device */
    int failed, oom;
    char err[640];
    int16_t nc;
    int32_t leaf_bytesize;
    int64_t off;
    int32_t max_buf;
    uint64_t ndrawables, nodes_written;
    uint32_t nused; /* categories used so far */
    double last_end;
    int64_t cat_ptr, map_ptr, dir_ptr, root_ptr;
    int32_t cat_size, map_size, dir_size, root_size;
    struct wcat *cat; /* preview categories -1, -3, -2 first, as Java inserts them */
    size_t ncat, capcat;
    uint32_t *cslot; /* index -> position + 1 */
    size_t ncslot;
    struct bytes maps; /* encoded user line-ID maps */
    int32_t nmaps;
    int32_t *lines; /* the Identity Map, sorted */
    size_t nlines, caplines;
    struct wnode **trunk; /* [0] the leaf ... [ntrunk - 1] the root */
    size_t ntrunk, captrunk;
    FILE **dir; /* tree directory entries, one spill file per depth */
    size_t ndir, capdir;
    uint64_t ndirent;
    struct bytes enc;
    uint32_t *s_idx, *s_aux, *s_tmp; /* scratch for sorting */
    size_t cap_idx, cap_aux, cap_tmp;
};

/* ---- errors ---- */

static int fail_msg(struct iot_slog2_writer *w, int fatal, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(w->err, sizeof w->err, "%s: ", w->path);
    if (n < 0 || (size_t)n >= sizeof w->err)
        n = 0; /* a path too long for the message: the reason matters more */
    va_start(ap, fmt);
    vsnprintf(w->err + n, sizeof w->err - (size_t)n, fmt, ap);
    va_end(ap);
    if (fatal)
        w->failed = 1;
    return -1;
}

static int fail_oom(struct iot_slog2_writer *w)
{
    return fail_msg(w, 1, "out of memory");
}

static int usable(struct iot_slog2_writer *w)
{
    if (!w)
        return -1;
    if (w->oom && !w->failed)
        fail_oom(w);
    return w->failed ? -1 : 0;
}

static void *reserve(struct iot_slog2_writer *w, struct bytes *b, size_t n)
{
    GROW(w, b->p, b->cap, b->len + n);
    if (w->oom)
        return NULL;
    b->len += n;
    return b->p + b->len - n;
}

static int emit(struct iot_slog2_writer *w, const void *p, size_t n, const char *what)
{
    if (fwrite(p, 1, n, w->f) != n)
        return fail_msg(w, 1, "writing %s (%zu bytes at offset %" PRId64 "): %s", what, n, w->off,
                        strerror(errno));
    w->off += (int64_t)n;
    if ((int64_t)n > w->max_buf)
        w->max_buf = (int32_t)n;
    return 0;
}

/* ---- Java's orders ---- */

/* Java compares ints by subtracting them, overflow included. */
static int jsub(int32_t a, int32_t b)
{
    int32_t d = (int32_t)((uint32_t)a - (uint32_t)b);
    return (d > 0) - (d < 0);
}

/* Drawable.INCRE_STARTTIME_ORDER: start up, end down, then category and
 * line IDs. */
static int cmp_drawn(double a0, double a1, int32_t ac, const int32_t *al, double b0, double b1,
                     int32_t bc, const int32_t *bl)
{
    if (a0 != b0)
        return a0 < b0 ? -1 : 1;
    if (a1 != b1)
        return a1 > b1 ? -1 : 1;
    int d = jsub(ac, bc);
    if (!d)
        d = jsub(al[0], bl[0]);
    if (!d)
        d = jsub(al[1], bl[1]);
    return d;
}

typedef int (*cmp_fn)(const void *ctx, uint32_t a, uint32_t b);

static void merge_runs(uint32_t *a, uint32_t *t, size_t lo, size_t mid, size_t hi, cmp_fn cmp,
                       const void *ctx)
{
    size_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi)
        t[k++] = cmp(ctx, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < mid)
        t[k++] = a[i++];
    while (j < hi)
        t[k++] = a[j++];
    memcpy(a + lo, t + lo, (hi - lo) * sizeof *a);
}

/* Stable, as Java's Collections.sort: equal items keep their order. */
static int stable_sort(struct iot_slog2_writer *w, uint32_t *a, size_t n, cmp_fn cmp,
                       const void *ctx)
{
    GROW(w, w->s_tmp, w->cap_tmp, n);
    if (w->oom)
        return -1;
    for (size_t width = 1; width < n; width *= 2)
        for (size_t lo = 0; lo + width < n; lo += 2 * width)
            merge_runs(a, w->s_tmp, lo, lo + width, lo + 2 * width < n ? lo + 2 * width : n, cmp,
                       ctx);
    return 0;
}

/* Java 8's HashMap spreads a hash code before taking it modulo the table. */
static uint32_t spread(uint32_t h)
{
    return h ^ (h >> 16);
}

static void count_bins(unsigned char *bin, uint32_t cap, const uint32_t *h, size_t n)
{
    memset(bin, 0, cap);
    for (size_t j = 0; j < n; j++)
        bin[spread(h[j]) & (cap - 1)]++;
}

/* The table size of a Java 8 HashMap after inserting keys with hash codes
 * h[0..n-1]: 16 buckets, doubled when more than 3/4 full and, while below
 * 64, also when one bucket would get a ninth key (Java then resizes
 * instead of turning the bucket into a tree). */
static uint32_t java_capacity(const uint32_t *h, size_t n)
{
    uint32_t cap = 16;
    unsigned char bin[64] = {0};
    for (size_t i = 0; i < n && cap < 64; i++) {
        if (bin[spread(h[i]) & (cap - 1)]++ >= 8 && (cap *= 2) < 64)
            count_bins(bin, cap, h, i + 1);
        if (i + 1 > cap / 4 * 3 && (cap *= 2) < 64)
            count_bins(bin, cap, h, i + 1);
    }
    while (n > cap / 4 * 3)
        cap *= 2;
    return cap;
}

static int cmp_key(const void *ctx, uint32_t a, uint32_t b)
{
    const uint32_t *k = ctx;
    return (k[a] > k[b]) - (k[a] < k[b]);
}

/* Items 0..n-1 in Java's HashMap iteration order (bucket by bucket, in
 * insertion order within a bucket) into w->s_idx, given their hash codes
 * in insertion order in w->s_aux, which this overwrites.  Not modelled:
 * the order inside a bucket Java has turned into a tree (9 keys in one
 * bucket of a table of 64 or more). */
static int java_order_of(struct iot_slog2_writer *w, size_t n)
{
    uint32_t cap = java_capacity(w->s_aux, n);
    for (size_t i = 0; i < n; i++) {
        w->s_aux[i] = spread(w->s_aux[i]) & (cap - 1);
        w->s_idx[i] = (uint32_t)i;
    }
    return stable_sort(w, w->s_idx, n, cmp_key, w->s_aux);
}

/* ---- categories ---- */

static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

static struct wcat *find_cat(struct iot_slog2_writer *w, int32_t index)
{
    size_t mask = w->ncslot - 1;
    for (size_t i = mix32((uint32_t)index) & mask; w->cslot[i]; i = (i + 1) & mask)
        if (w->cat[w->cslot[i] - 1].index == index)
            return &w->cat[w->cslot[i] - 1];
    return NULL;
}

static void slot_put(uint32_t *slot, size_t n, int32_t index, uint32_t pos)
{
    size_t i = mix32((uint32_t)index) & (n - 1);
    while (slot[i])
        i = (i + 1) & (n - 1);
    slot[i] = pos + 1;
}

/* Enters the last category into the lookup table, which stays at most half
 * full. */
static int index_cats(struct iot_slog2_writer *w)
{
    size_t n = 16;
    while (n < 2 * (w->ncat + 1))
        n *= 2;
    if (n != w->ncslot) {
        uint32_t *slot = m_calloc(&w->mem, n * sizeof *slot);
        if (!slot)
            return w->oom = 1, -1;
        m_free(&w->mem, w->cslot);
        w->cslot = slot;
        w->ncslot = n;
        for (size_t k = 0; k + 1 < w->ncat; k++)
            slot_put(slot, n, w->cat[k].index, (uint32_t)k);
    }
    slot_put(w->cslot, w->ncslot, w->cat[w->ncat - 1].index, (uint32_t)w->ncat - 1);
    return 0;
}

static int add_key(struct iot_slog2_writer *w, struct wcat *c, const char *s, size_t n)
{
    char **k = m_realloc(&w->mem, c->keys, (size_t)(c->n_keys + 1) * sizeof *k);
    if (!k)
        return w->oom = 1, -1;
    c->keys = k;
    if (!(k[c->n_keys] = m_strdup(&w->mem, s, n)))
        return w->oom = 1, -1;
    c->n_keys++;
    return 0;
}

static int add_type(struct iot_slog2_writer *w, struct wcat *c, char t)
{
    char *p = m_realloc(&w->mem, c->types, (size_t)c->n_types + 1);
    if (!p)
        return w->oom = 1, -1;
    c->types = p;
    c->types[c->n_types++] = t;
    return 0;
}

/* Splits a label the way Java's Category.setInfoKeys does (a
 * StringTokenizer on "%" that returns the delimiters): each "%" takes the
 * first character of the next token as a value type and the rest as a key;
 * every other token is a key.  So "a=%d b=%x" has keys "a=", " b=", "". */
static int parse_label(struct iot_slog2_writer *w, struct wcat *c, const char *label)
{
    const char *p = label ? label : "";
    while (*p) {
        size_t n = strcspn(p, "%");
        if (n) {
            if (add_key(w, c, p, n) < 0)
                return -1;
            p += n;
            continue;
        }
        p++; /* the "%" */
        n = strcspn(p, "%");
        if (!n || !strchr("dhlxXeEs", *p) || c->n_types >= MAX_I16)
            return fail_msg(w, 0, "category %d: label \"%s\": '%%' must be followed by one of "
                                  "d h l x X e E s",
                            c->index, label);
        if (add_type(w, c, *p) < 0 || add_key(w, c, p + 1, n - 1) < 0)
            return -1;
        p += n;
    }
    return 0;
}

static int check_catdef(struct iot_slog2_writer *w, const struct iot_slog2_catdef *d)
{
    if (!d || !d->name)
        return fail_msg(w, 0, "category without a name");
    if (d->index < 0)
        return fail_msg(w, 0, "category %d \"%s\": indices below 0 are reserved for the "
                              "Preview_* categories", d->index, d->name);
    if (find_cat(w, d->index))
        return fail_msg(w, 0, "category %d \"%s\" is already defined", d->index, d->name);
    if (d->topo < IOT_SLOG2_EVENT || d->topo > IOT_SLOG2_ARROW)
        return fail_msg(w, 0, "category %d: unknown topology %d", d->index, d->topo);
    if (d->width < 0 || d->width > 127)
        return fail_msg(w, 0, "category %d: width %d is not in 0..127", d->index, d->width);
    if (strlen(d->name) > MAX_I16 || (d->label && strlen(d->label) > MAX_I16))
        return fail_msg(w, 0, "category %d: name or label longer than 32767 bytes", d->index);
    if (d->n_methods < 0 || d->n_methods > MAX_I16 || (d->n_methods && !d->methods))
        return fail_msg(w, 0, "category %d: bad method list", d->index);
    return 0;
}

static void free_cat(struct wmem *m, struct wcat *c)
{
    for (int i = 0; i < c->n_keys; i++)
        m_free(m, c->keys[i]);
    m_free(m, c->keys);
    m_free(m, c->types);
    m_free(m, c->methods);
    m_free(m, c->name);
}

static int fill_cat(struct iot_slog2_writer *w, struct wcat *c, const struct iot_slog2_catdef *d)
{
    *c = (struct wcat){.index = d->index, .topo = d->topo, .width = d->width};
    c->argb = (uint32_t)d->alpha << 24 | (uint32_t)d->red << 16 | (uint32_t)d->green << 8 |
              d->blue;
    if (!(c->name = m_strdup(&w->mem, d->name, strlen(d->name))))
        return w->oom = 1, -1;
    if (d->n_methods) {
        if (!(c->methods = m_realloc(&w->mem, NULL, (size_t)d->n_methods * sizeof(int32_t))))
            return w->oom = 1, -1;
        memcpy(c->methods, d->methods, (size_t)d->n_methods * sizeof(int32_t));
        c->n_methods = d->n_methods;
    }
    return parse_label(w, c, d->label);
}

static int append_cat(struct iot_slog2_writer *w, const struct iot_slog2_catdef *d)
{
    struct wcat c = {0};
    GROW(w, w->cat, w->capcat, w->ncat + 1);
    if (w->oom || fill_cat(w, &c, d) < 0) {
        free_cat(&w->mem, &c);
        return w->oom ? fail_oom(w) : -1;
    }
    w->cat[w->ncat++] = c;
    if (index_cats(w) < 0)
        return fail_oom(w);
    return 0;
}

int iot_slog2_writer_category(iot_slog2_writer *w, const struct iot_slog2_catdef *c)
{
    if (usable(w) < 0 || check_catdef(w, c) < 0)
        return -1;
    return append_cat(w, c);
}

/* The three categories Java's writer defines for the preview shadows. */
static int add_previews(struct iot_slog2_writer *w)
{
    static const struct iot_slog2_catdef pv[3] = {
        {-1, "Preview_Event", IOT_SLOG2_EVENT, 255, 255, 255, 191, 5, NULL, 0, NULL},
        {-3, "Preview_State", IOT_SLOG2_STATE, 255, 255, 255, 191, 5, NULL, 0, NULL},
        {-2, "Preview_Arrow", IOT_SLOG2_ARROW, 255, 255, 0, 255, 5, NULL, 0, NULL},
    };
    for (int i = 0; i < 3; i++)
        if (append_cat(w, &pv[i]) < 0)
            return -1;
    return 0;
}

/* ---- line-ID maps ---- */

static int lookup_line(const struct iot_slog2_writer *w, int32_t line, size_t *at)
{
    size_t lo = 0, hi = w->nlines;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->lines[mid] == line)
            return *at = mid, 1;
        if (w->lines[mid] < line)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return 0;
}

static int note_line(struct iot_slog2_writer *w, int32_t line)
{
    size_t at;
    if (lookup_line(w, line, &at))
        return 0;
    GROW(w, w->lines, w->caplines, w->nlines + 1);
    if (w->oom)
        return fail_oom(w);
    memmove(w->lines + at + 1, w->lines + at, (w->nlines - at) * sizeof *w->lines);
    w->lines[at] = line;
    w->nlines++;
    return 0;
}

int iot_slog2_writer_timeline(iot_slog2_writer *w, int32_t line)
{
    if (usable(w) < 0)
        return -1;
    return note_line(w, line);
}

static int cmp_row(const void *ctx, uint32_t a, uint32_t b)
{
    const struct iot_slog2_mapdef *m = ctx;
    int32_t x = m->rows[(size_t)a * (size_t)(1 + m->n_columns)];
    int32_t y = m->rows[(size_t)b * (size_t)(1 + m->n_columns)];
    return (x > y) - (x < y);
}

static int check_mapdef(struct iot_slog2_writer *w, const struct iot_slog2_mapdef *m)
{
    if (!m || !m->title || strlen(m->title) > MAX_I16)
        return fail_msg(w, 0, "line-ID map without a title, or a title over 32767 bytes");
    if (m->n_columns < 0 || m->n_rows < 0 || (m->n_columns && !m->columns) ||
        (m->n_rows && !m->rows))
        return fail_msg(w, 0, "line-ID map \"%s\": bad column or row list", m->title);
    for (int32_t i = 0; i < m->n_columns; i++)
        if (!m->columns[i] || strlen(m->columns[i]) > MAX_I16)
            return fail_msg(w, 0, "line-ID map \"%s\": column %d has no label", m->title, i);
    if (m->n_methods < 0 || m->n_methods > MAX_I16 || (m->n_methods && !m->methods))
        return fail_msg(w, 0, "line-ID map \"%s\": bad method list", m->title);
    if ((int64_t)m->n_rows * (1 + m->n_columns) > (INT32_MAX - 4096) / 4)
        return fail_msg(w, 0, "line-ID map \"%s\": too many rows", m->title);
    return 0;
}

static size_t map_size(const struct iot_slog2_mapdef *m)
{
    size_t n = 2 + strlen(m->title) + 4 + 4 + 4 * (size_t)m->n_rows * (size_t)(1 + m->n_columns);
    for (int32_t i = 0; i < m->n_columns; i++)
        n += 2 + strlen(m->columns[i]);
    return n + 2 + 4 * (size_t)m->n_methods;
}

/* Rows go out in increasing line ID (Java keeps them in a TreeMap). */
static int encode_map(struct iot_slog2_writer *w, const struct iot_slog2_mapdef *m,
                      const uint32_t *order)
{
    size_t width = (size_t)(1 + m->n_columns);
    uint8_t *p = reserve(w, &w->maps, map_size(m));
    if (!p)
        return fail_oom(w);
    p = put_str(p, m->title);
    p = put32(p, (uint32_t)m->n_columns);
    for (int32_t i = 0; i < m->n_columns; i++)
        p = put_str(p, m->columns[i]);
    p = put32(p, (uint32_t)m->n_rows);
    for (int32_t i = 0; i < m->n_rows; i++)
        p = put_ints(p, m->rows + order[i] * width, (int)width);
    p = put16(p, (uint16_t)m->n_methods);
    put_ints(p, m->methods, m->n_methods);
    w->nmaps++;
    return 0;
}

int iot_slog2_writer_lineidmap(iot_slog2_writer *w, const struct iot_slog2_mapdef *m)
{
    if (usable(w) < 0 || check_mapdef(w, m) < 0)
        return -1;
    GROW(w, w->s_idx, w->cap_idx, (size_t)m->n_rows + 1);
    if (w->oom)
        return fail_oom(w);
    for (int32_t i = 0; i < m->n_rows; i++)
        w->s_idx[i] = (uint32_t)i;
    if (stable_sort(w, w->s_idx, (size_t)m->n_rows, cmp_row, m) < 0)
        return fail_oom(w);
    for (int32_t i = 1; i < m->n_rows; i++)
        if (cmp_row(m, w->s_idx[i - 1], w->s_idx[i]) == 0)
            return fail_msg(w, 0, "line-ID map \"%s\": line ID %d appears twice", m->title,
                            m->rows[(size_t)w->s_idx[i] * (size_t)(1 + m->n_columns)]);
    return encode_map(w, m, w->s_idx);
}

/* ---- shadows (preview drawables) ---- */

static int32_t shadow_size(const struct shadow *s)
{
    return (int32_t)(8 + 12 * s->nv + 28 + 20 * s->nw);
}

/* Java's List.hashCode of [topology, line IDs...], the shadow's map key. */
static uint32_t key_hash(int topo, int nv, const int32_t *line)
{
    uint32_t h = 31u + (uint32_t)topo;
    for (int i = 0; i < nv; i++)
        h = 31u * h + (uint32_t)line[i];
    return h;
}

static size_t slot_of(const struct sbuf *b, int topo, const int32_t *line)
{
    uint32_t x = mix32((uint32_t)topo * 0x9e3779b9u ^ (uint32_t)line[0]);
    return mix32(x ^ (uint32_t)line[1]) & (b->nslot - 1);
}

static struct shadow *sbuf_find(const struct sbuf *b, int topo, const int32_t *line)
{
    if (!b->nslot)
        return NULL;
    for (size_t i = slot_of(b, topo, line); b->slot[i]; i = (i + 1) & (b->nslot - 1)) {
        struct shadow *s = b->sh[b->slot[i] - 1];
        if (s->topo == topo && s->line[0] == line[0] && s->line[1] == line[1])
            return s;
    }
    return NULL;
}

static int sbuf_rehash(struct iot_slog2_writer *w, struct sbuf *b)
{
    size_t n = b->nslot ? b->nslot * 2 : 16;
    uint32_t *slot = m_calloc(&w->mem, n * sizeof *slot);
    if (!slot)
        return w->oom = 1, -1;
    m_free(&w->mem, b->slot);
    b->slot = slot;
    b->nslot = n;
    for (size_t k = 0; k < b->n; k++) {
        size_t i = slot_of(b, b->sh[k]->topo, b->sh[k]->line);
        while (slot[i])
            i = (i + 1) & (n - 1);
        slot[i] = (uint32_t)k + 1;
    }
    return 0;
}

static void shadow_free(struct wmem *m, struct shadow *s)
{
    if (s) {
        m_free(m, s->w);
        m_free(m, s->kids);
        m_free(m, s);
    }
}

/* Takes s over, even when it fails. */
static int sbuf_insert(struct iot_slog2_writer *w, struct sbuf *b, struct shadow *s)
{
    GROW(w, b->sh, b->cap, b->n + 1);
    if (w->oom) {
        shadow_free(&w->mem, s);
        return -1;
    }
    b->sh[b->n++] = s;
    b->bytesize += shadow_size(s);
    if (2 * b->n > b->nslot)
        return sbuf_rehash(w, b);
    size_t i = slot_of(b, s->topo, s->line);
    while (b->slot[i])
        i = (i + 1) & (b->nslot - 1);
    b->slot[i] = (uint32_t)b->n;
    return 0;
}

static struct sbuf *sbuf_new(struct iot_slog2_writer *w, struct iot_slog2_nodeid id, double t0)
{
    struct sbuf *b = m_calloc(&w->mem, sizeof *b);
    if (!b) {
        w->oom = 1;
        return NULL;
    }
    b->id = id;
    b->t0 = t0;
    b->t1 = -INFINITY;
    b->bytesize = BUF_FIXED;
    return b;
}

static void sbuf_free(struct wmem *m, struct sbuf *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        shadow_free(m, b->sh[i]);
    m_free(m, b->sh);
    m_free(m, b->slot);
    m_free(m, b);
}

static struct wweight *find_weight(struct shadow *s, int32_t cat)
{
    for (size_t i = 0; i < s->nw; i++)
        if (s->w[i].cat == cat)
            return &s->w[i];
    return NULL;
}

static struct wweight *add_weight(struct iot_slog2_writer *w, struct shadow *s, int32_t cat,
                                  uint32_t rank)
{
    GROW(w, s->w, s->capw, s->nw + 1);
    if (w->oom)
        return NULL;
    s->w[s->nw] = (struct wweight){.cat = cat, .head = -1, .tail = -1, .rank = rank};
    return &s->w[s->nw++];
}

/* Java's aveOverAllObjs: the vertex times of a shadow are the averages over
 * the real drawables it stands for. */
static double average(double a, int64_t na, double b, int64_t nb)
{
    return (a * (double)na + b * (double)nb) / (double)(na + nb);
}

/* A record joins its shadow (Shadow.mergeWithPrimitive). */
static int shadow_add_rec(struct iot_slog2_writer *w, struct shadow *s, struct wrec *rec,
                          struct wrec *all, int32_t idx)
{
    struct wweight *g = find_weight(s, rec->cat);
    if (!g && !(g = add_weight(w, s, rec->cat, rec->rank)))
        return -1;
    for (int i = 0; i < s->nv; i++)
        s->v[i] = average(s->v[i], s->nreal, rec->v[i], 1);
    if (rec->t0 < s->t0)
        s->t0 = rec->t0;
    if (rec->t1 > s->t1)
        s->t1 = rec->t1;
    s->nreal++;
    if (g->tail >= 0)
        all[g->tail].next = idx;
    else
        g->head = idx;
    g->tail = idx;
    g->count++;
    return 0;
}

static struct shadow *shadow_from_rec(struct iot_slog2_writer *w, const struct wrec *rec,
                                      int32_t idx)
{
    struct shadow *s = m_calloc(&w->mem, sizeof *s);
    if (!s || !add_weight(w, s, rec->cat, rec->rank)) {
        shadow_free(&w->mem, s);
        w->oom = 1;
        return NULL;
    }
    s->topo = rec->topo;
    s->nv = rec->nv;
    s->from_prims = 1;
    memcpy(s->line, rec->line, sizeof s->line);
    memcpy(s->v, rec->v, sizeof s->v);
    s->jhash = key_hash(rec->topo, rec->nv, rec->line);
    s->t0 = rec->t0;
    s->t1 = rec->t1;
    s->nreal = 1;
    s->w[0].head = s->w[0].tail = idx;
    s->w[0].count = 1;
    return s;
}

/* BufForShadows.add: the record's (topology, line IDs) shadow absorbs it. */
static int sbuf_add_rec(struct iot_slog2_writer *w, struct sbuf *b, struct wnode *node,
                        int32_t idx)
{
    struct wrec *rec = &node->rec[idx];
    struct shadow *s = sbuf_find(b, rec->topo, rec->line);
    if (!s) {
        s = shadow_from_rec(w, rec, idx);
        return s ? sbuf_insert(w, b, s) : -1;
    }
    b->bytesize -= shadow_size(s);
    int rc = shadow_add_rec(w, s, rec, node->rec, idx);
    b->bytesize += shadow_size(s);
    return rc;
}

/* Shadow.initializeMapOfCategoryWeights, when the node's end is known: the
 * inclusive ratio of each category among the node's own drawables. */
static void sbuf_init_weights(struct sbuf *b, const struct wnode *node)
{
    for (size_t i = 0; i < b->n; i++) {
        struct shadow *s = b->sh[i];
        double dur = s->t1 - s->t0;
        for (size_t k = 0; k < s->nw; k++) {
            float incl = 0.0f;
            for (int32_t r = s->w[k].head; r >= 0; r = node->rec[r].next)
                incl += (float)((node->rec[r].t1 - node->rec[r].t0) / dur);
            s->w[k].incl = incl;
            s->w[k].excl = 0.0f;
        }
    }
}

/* The buffer's shadows in Java's HashMap iteration order, in w->s_idx. */
static int java_order(struct iot_slog2_writer *w, const struct sbuf *b)
{
    GROW(w, w->s_idx, w->cap_idx, b->n + 1);
    GROW(w, w->s_aux, w->cap_aux, b->n + 1);
    if (w->oom)
        return -1;
    for (size_t i = 0; i < b->n; i++)
        w->s_aux[i] = b->sh[i]->jhash;
    return java_order_of(w, b->n);
}

static struct shadow *shadow_copy(struct iot_slog2_writer *w, const struct shadow *src)
{
    struct shadow *s = m_calloc(&w->mem, sizeof *s);
    if (!s)
        return w->oom = 1, NULL;
    *s = *src;
    s->from_prims = 0;
    s->w = NULL;
    s->nw = s->capw = 0;
    s->kids = NULL;
    s->nkids = s->capkids = 0;
    GROW(w, s->w, s->capw, src->nw);
    if (w->oom) {
        shadow_free(&w->mem, s);
        return NULL;
    }
    for (size_t k = 0; k < src->nw; k++)
        s->w[k] = (struct wweight){src->w[k].cat, src->w[k].incl, src->w[k].excl,
                                   src->w[k].count, -1, -1, src->w[k].rank};
    s->nw = src->nw;
    return s;
}

static void rescale(struct shadow *s, float f)
{
    for (size_t k = 0; k < s->nw; k++) {
        s->w[k].incl *= f;
        s->w[k].excl *= f;
    }
}

/* Shadow.mergeWithShadow: d absorbs a child's shadow of the same key; the
 * weights are rescaled to d's new duration. */
static int shadow_merge(struct iot_slog2_writer *w, struct shadow *d, const struct shadow *s)
{
    double old_dur = d->t1 - d->t0;
    for (int i = 0; i < d->nv; i++)
        d->v[i] = average(d->v[i], d->nreal, s->v[i], s->nreal);
    if (s->t0 < d->t0)
        d->t0 = s->t0;
    if (s->t1 > d->t1)
        d->t1 = s->t1;
    double new_dur = d->t1 - d->t0;
    d->nreal += s->nreal;
    if (old_dur != new_dur)
        rescale(d, (float)(old_dur / new_dur));
    float f = (float)((s->t1 - s->t0) / new_dur);
    for (size_t k = 0; k < s->nw; k++) {
        struct wweight *g = find_weight(d, s->w[k].cat);
        if (!g) {
            if (!(g = add_weight(w, d, s->w[k].cat, s->w[k].rank)))
                return -1;
            *g = (struct wweight){s->w[k].cat, s->w[k].incl * f, s->w[k].excl * f,
                                  s->w[k].count, -1, -1, s->w[k].rank};
            continue;
        }
        g->count += s->w[k].count;
        g->incl += s->w[k].incl * f;
        g->excl += s->w[k].excl * f;
    }
    if (!d->from_prims || d->topo != IOT_SLOG2_STATE)
        return 0;
    GROW(w, d->kids, d->capkids, d->nkids + 1);
    if (w->oom)
        return -1;
    d->kids[d->nkids++] = (struct span){s->t0, s->t1};
    return 0;
}

/* BufForShadows.mergeWith: a parent's buffer absorbs a child's, visiting
 * the child's shadows in Java's order so that new keys enter the parent's
 * map in the same order as in Java. */
static int sbuf_merge(struct iot_slog2_writer *w, struct sbuf *dst, const struct sbuf *src)
{
    if (java_order(w, src) < 0)
        return -1;
    for (size_t i = 0; i < src->n; i++) {
        const struct shadow *s = src->sh[w->s_idx[i]];
        struct shadow *d = sbuf_find(dst, s->topo, s->line);
        if (!d) {
            if (!(d = shadow_copy(w, s)) || sbuf_insert(w, dst, d) < 0)
                return -1;
            continue;
        }
        dst->bytesize -= shadow_size(d);
        int rc = shadow_merge(w, d, s);
        dst->bytesize += shadow_size(d);
        if (rc < 0)
            return -1;
    }
    if (src->t0 < dst->t0)
        dst->t0 = src->t0;
    if (src->t1 > dst->t1)
        dst->t1 = src->t1;
    return 0;
}

/* ---- exclusive durations (Shadow.setNestingExclusion) ---- */

static int cmp_rec(const void *ctx, uint32_t a, uint32_t b)
{
    const struct wrec *x = (const struct wrec *)ctx + a, *y = (const struct wrec *)ctx + b;
    return cmp_drawn(x->t0, x->t1, x->cat, x->line, y->t0, y->t1, y->cat, y->line);
}

static double overlap(double a0, double a1, double b0, double b1)
{
    if (!(a0 <= b1 && b0 <= a1))
        return 0.0;
    double d = (a1 < b1 ? a1 : b1) - (a0 < b0 ? b0 : a0);
    return d > 0.0 ? d : 0.0;
}

/* The shadow's own states in storage order, equal ones once (Java keeps
 * them in a TreeSet, which drops a drawable equal to one it holds). */
static int nesting_order(struct iot_slog2_writer *w, const struct shadow *s,
                         const struct wrec *rec, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < s->nw; i++)
        for (int32_t r = s->w[i].head; r >= 0; r = rec[r].next) {
            GROW(w, w->s_idx, w->cap_idx, k + 1);
            if (w->oom)
                return -1;
            w->s_idx[k++] = (uint32_t)r;
        }
    if (stable_sort(w, w->s_idx, k, cmp_rec, rec) < 0)
        return -1;
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || cmp_rec(rec, w->s_idx[u - 1], w->s_idx[i]) != 0)
            w->s_idx[u++] = w->s_idx[i];
    *n = u;
    return 0;
}

/* A state's exclusive time is its duration minus what the child shadows
 * of the same timeline cover, minus the exclusive time of the states
 * nested directly in it. */
static int nesting_exclusion(struct iot_slog2_writer *w, const struct shadow *s, struct wrec *rec)
{
    size_t n, depth = 0;
    if (nesting_order(w, s, rec, &n) < 0)
        return -1;
    GROW(w, w->s_aux, w->cap_aux, n + 1);
    if (w->oom)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct wrec *r = &rec[w->s_idx[i]];
        r->excl = r->t1 - r->t0;
        for (size_t k = s->nkids; k-- > 0;)
            r->excl -= overlap(r->t0, r->t1, s->kids[k].t0, s->kids[k].t1);
        while (depth) {
            struct wrec *top = &rec[w->s_aux[depth - 1]];
            if (top->t0 <= r->t0 && r->t1 <= top->t1) {
                top->excl -= r->excl;
                break;
            }
            depth--;
        }
        w->s_aux[depth++] = w->s_idx[i];
    }
    return 0;
}

/* Shadow.finalizeMapOfCategoryWeights, after the children are merged in:
 * exclusive ratios for the node's own states; the records are let go. */
static int sbuf_finalize(struct iot_slog2_writer *w, struct sbuf *b, struct wnode *node)
{
    for (size_t i = 0; i < b->n; i++) {
        struct shadow *s = b->sh[i];
        if (s->from_prims && s->topo == IOT_SLOG2_STATE) {
            if (nesting_exclusion(w, s, node->rec) < 0)
                return -1;
            double dur = s->t1 - s->t0;
            for (size_t k = 0; k < s->nw; k++) {
                float excl = 0.0f;
                for (int32_t r = s->w[k].head; r >= 0; r = node->rec[r].next)
                    excl += (float)(node->rec[r].excl / dur);
                s->w[k].excl += excl;
            }
        }
        for (size_t k = 0; k < s->nw; k++)
            s->w[k].head = s->w[k].tail = -1;
        s->from_prims = 0;
        m_free(&w->mem, s->kids);
        s->kids = NULL;
        s->nkids = s->capkids = 0;
    }
    return 0;
}

/* ---- encoding a node ---- */

static uint8_t *put_box_id_ptr(uint8_t *p, double t0, double t1, struct iot_slog2_nodeid id,
                               int64_t off, int32_t size)
{
    p = put_f64(p, t0);
    p = put_f64(p, t1);
    p = put16(p, (uint16_t)id.depth);
    p = put32(p, (uint32_t)id.xpos);
    p = put64(p, (uint64_t)off);
    return put32(p, (uint32_t)size);
}

static int cmp_incl(const struct wweight *a, const struct wweight *b)
{
    float d = a->incl - b->incl;
    return d < 0.0f ? -1 : (d == 0.0f ? 0 : 1);
}

static int cmp_weight_rank(const struct wweight *a, const struct wweight *b)
{
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Java's Arrays.sort for short arrays: the leading run, made ascending,
 * then binary insertion.  The exact algorithm matters because the ratio
 * order calls NaN greater than anything, both ways round. */
static void java_small_sort(struct wweight *a, size_t n,
                            int (*cmp)(const struct wweight *, const struct wweight *))
{
    size_t run = 1;
    if (n < 2)
        return;
    if (cmp(&a[1], &a[0]) < 0) {
        for (run = 2; run < n && cmp(&a[run], &a[run - 1]) < 0; run++)
            ;
        for (size_t i = 0, j = run - 1; i < j; i++, j--) {
            struct wweight t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    } else {
        for (run = 2; run < n && cmp(&a[run], &a[run - 1]) >= 0; run++)
            ;
    }
    for (size_t i = run; i < n; i++) {
        struct wweight pivot = a[i];
        size_t lo = 0, hi = i;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cmp(&pivot, &a[mid]) < 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        memmove(a + lo + 1, a + lo, (i - lo) * sizeof *a);
        a[lo] = pivot;
    }
}

/* Java sorts a shadow's weights by inclusive ratio, starting from the
 * iteration order of a HashMap keyed by Category objects, that is by
 * identity hash codes, which no one can reproduce.  Starting from the order
 * in which the categories were first used instead (the order in which Java
 * asks for their hash codes) puts equal ratios in the order every
 * reference file shows. */
static void sort_weights(struct wweight *a, size_t n)
{
    java_small_sort(a, n, cmp_weight_rank);
    java_small_sort(a, n, cmp_incl);
}

static uint8_t *put_shadow(uint8_t *p, struct shadow *s)
{
    p = put32(p, (uint32_t)preview_index[s->topo]);
    p = put16(p, 0);
    p = put16(p, s->nv);
    for (int i = 0; i < s->nv; i++) {
        p = put_f64(p, s->v[i]);
        p = put32(p, (uint32_t)s->line[i]);
    }
    p = put_f64(p, s->t0);
    p = put_f64(p, s->t1);
    p = put64(p, (uint64_t)s->nreal);
    sort_weights(s->w, s->nw);
    p = put32(p, (uint32_t)s->nw);
    for (size_t k = 0; k < s->nw; k++) {
        p = put32(p, (uint32_t)s->w[k].cat);
        p = put_f32(p, s->w[k].incl);
        p = put_f32(p, s->w[k].excl);
        p = put64(p, (uint64_t)s->w[k].count);
    }
    return p;
}

static int cmp_shadow(const void *ctx, uint32_t a, uint32_t b)
{
    struct shadow *const *sh = ctx;
    const struct shadow *x = sh[a], *y = sh[b];
    int32_t xl[2] = {x->line[0], x->line[x->nv - 1]}, yl[2] = {y->line[0], y->line[y->nv - 1]};
    return cmp_drawn(x->t0, x->t1, preview_index[x->topo], xl, y->t0, y->t1,
                     preview_index[y->topo], yl);
}

/* One list of shadows (states or the rest), in storage order. */
static uint8_t *put_shadow_list(struct iot_slog2_writer *w, uint8_t *p, const struct sbuf *b,
                                int states)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        if ((b->sh[i]->topo == IOT_SLOG2_STATE) == states)
            w->s_idx[n++] = (uint32_t)i;
    if (stable_sort(w, w->s_idx, n, cmp_shadow, b->sh) < 0)
        return NULL;
    p = put32(p, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        p = put_shadow(p, b->sh[w->s_idx[i]]);
    return p;
}

static uint8_t *put_sbuf(struct iot_slog2_writer *w, uint8_t *p, const struct sbuf *b)
{
    GROW(w, w->s_idx, w->cap_idx, b->n + 1);
    if (w->oom)
        return NULL;
    p = put_box_id_ptr(p, b->t0, b->t1, b->id, b->off, b->size);
    if (!(p = put_shadow_list(w, p, b, 0)))
        return NULL;
    return put_shadow_list(w, p, b, 1);
}

static uint8_t *put_rec_list(struct iot_slog2_writer *w, uint8_t *p, const struct wnode *node,
                             int states)
{
    size_t n = 0;
    for (size_t i = 0; i < node->nrec; i++)
        if ((node->rec[i].topo == IOT_SLOG2_STATE) == states)
            w->s_idx[n++] = (uint32_t)i;
    if (stable_sort(w, w->s_idx, n, cmp_rec, node->rec) < 0)
        return NULL;
    p = put32(p, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        const struct wrec *r = &node->rec[w->s_idx[i]];
        *p++ = 0; /* a primitive, not a composite */
        memcpy(p, node->arena.p + r->off, r->len);
        p += r->len;
    }
    return p;
}

/* TreeNode.writeObject: the node, its drawables, its children's shadows. */
static int encode_node(struct iot_slog2_writer *w, const struct wnode *node,
                       const struct wnode *child, int32_t size)
{
    w->enc.len = 0;
    uint8_t *p = reserve(w, &w->enc, (size_t)size), *start = p;
    GROW(w, w->s_idx, w->cap_idx, node->nrec + 1);
    if (!p || w->oom)
        return -1;
    p = put_box_id_ptr(p, node->t0, node->t1, node->id, w->off, size);
    if (!(p = put_rec_list(w, p, node, 0)) || !(p = put_rec_list(w, p, node, 1)))
        return -1;
    p = put32(p, (uint32_t)(child ? child->ndone : 0));
    for (size_t i = 0; child && i < child->ndone; i++)
        if (!(p = put_sbuf(w, p, child->done[i])))
            return -1;
    if (p - start != size)
        return fail_msg(w, 1, "internal error: tree node ID(%d,%d) encodes to %td bytes, not %d",
                        node->id.depth, (int)node->id.xpos, p - start, (int)size);
    return 0;
}

/* ---- the tree directory, spilled per depth ---- */

static FILE *spill_file(struct iot_slog2_writer *w, int depth)
{
    while (w->ndir <= (size_t)depth) {
        GROW(w, w->dir, w->capdir, w->ndir + 1);
        if (w->oom)
            return NULL;
        w->dir[w->ndir++] = NULL;
    }
    if (w->dir[depth])
        return w->dir[depth];
    size_t n = strlen(w->path) + 32;
    char *tmpl = m_realloc(&w->mem, NULL, n);
    if (!tmpl)
        return w->oom = 1, NULL;
    snprintf(tmpl, n, "%s.treedir.XXXXXX", w->path);
    int fd = mkstemp(tmpl);
    if (fd >= 0) {
        unlink(tmpl); /* nothing to clean up however the program ends */
        w->dir[depth] = fdopen(fd, "w+b");
        if (!w->dir[depth])
            close(fd);
    }
    if (!w->dir[depth])
        fail_msg(w, 1, "creating a temporary file for the tree directory (%s): %s", tmpl,
                 strerror(errno));
    m_free(&w->mem, tmpl);
    return w->dir[depth];
}

static int dir_add(struct iot_slog2_writer *w, const struct wnode *node, int32_t size)
{
    uint8_t e[DIRENT_SIZE], *p = e;
    FILE *f = spill_file(w, node->id.depth);
    if (!f)
        return w->oom ? fail_oom(w) : -1;
    p = put16(p, (uint16_t)node->id.depth);
    p = put32(p, (uint32_t)node->id.xpos);
    p = put_f64(p, node->t0);
    p = put_f64(p, node->t1);
    p = put64(p, (uint64_t)w->off);
    put32(p, (uint32_t)size);
    if (fwrite(e, 1, sizeof e, f) != sizeof e)
        return fail_msg(w, 1, "writing the temporary tree directory: %s", strerror(errno));
    w->ndirent++;
    return 0;
}

/* ---- nodes ---- */

static struct wnode *node_new(struct iot_slog2_writer *w, struct iot_slog2_nodeid id, double t0)
{
    struct wnode *n = m_calloc(&w->mem, sizeof *n);
    if (!n || !(n->cur = sbuf_new(w, id, t0))) {
        m_free(&w->mem, n);
        w->oom = 1;
        return NULL;
    }
    n->id = id;
    n->t0 = t0;
    n->t1 = -INFINITY;
    n->bytesize = BUF_FIXED;
    return n;
}

static void release_done(struct wmem *m, struct wnode *n)
{
    for (size_t i = 0; i < n->ndone; i++)
        sbuf_free(m, n->done[i]);
    n->ndone = 0;
}

static void node_free(struct wmem *m, struct wnode *n)
{
    if (!n)
        return;
    release_done(m, n);
    m_free(m, n->done);
    sbuf_free(m, n->cur);
    m_free(m, n->rec);
    m_free(m, n->arena.p);
    m_free(m, n);
}

/* Java's getNodeByteSize: what the node will take in the file. */
static int64_t node_size(const struct wnode *node, const struct wnode *child)
{
    int64_t n = node->bytesize + 4;
    for (size_t i = 0; child && i < child->ndone; i++)
        n += child->done[i]->bytesize;
    return n;
}

/* TreeNode.finalizeLatestTime: a leaf ends with the last drawable added,
 * any other node with its child. */
static void finalize_end(struct iot_slog2_writer *w, size_t level)
{
    struct wnode *node = w->trunk[level];
    node->t1 = level ? w->trunk[level - 1]->t1 : w->last_end;
    node->cur->t1 = node->t1;
    sbuf_init_weights(node->cur, node);
}

/* The node's shadows absorb its children's and become the summary the
 * parent will store (mergeVerticalShadowBufs, shiftHorizontalShadowBuf). */
static int seal_shadows(struct iot_slog2_writer *w, struct wnode *node, struct wnode *child,
                        int32_t size)
{
    node->cur->off = w->off;
    node->cur->size = size;
    for (size_t i = 0; child && i < child->ndone; i++)
        if (sbuf_merge(w, node->cur, child->done[i]) < 0)
            return -1;
    if (sbuf_finalize(w, node->cur, node) < 0)
        return -1;
    GROW(w, node->done, node->capdone, node->ndone + 1);
    if (w->oom)
        return -1;
    node->done[node->ndone++] = node->cur;
    node->cur = NULL;
    return 0;
}

/* OutputLog.writeTreeNode, then TreeNode.empty. */
static int write_node(struct iot_slog2_writer *w, size_t level)
{
    struct wnode *node = w->trunk[level], *child = level ? w->trunk[level - 1] : NULL;
    int64_t size = node_size(node, child);
    char what[64];
    if (size > INT32_MAX)
        return fail_msg(w, 1, "tree node ID(%d,%d) would take %" PRId64 " bytes, more than a "
                              "SLOG-2 block can hold", node->id.depth, (int)node->id.xpos, size);
    if (dir_add(w, node, (int32_t)size) < 0)
        return -1;
    if (seal_shadows(w, node, child, (int32_t)size) < 0 ||
        encode_node(w, node, child, (int32_t)size) < 0)
        return w->oom ? fail_oom(w) : -1;
    snprintf(what, sizeof what, "tree node ID(%d,%d)", node->id.depth, (int)node->id.xpos);
    w->root_ptr = w->off;
    w->root_size = (int32_t)size;
    if (emit(w, w->enc.p, w->enc.len, what) < 0)
        return -1;
    w->nodes_written++;
    if (child)
        release_done(&w->mem, child);
    node->nrec = 0;
    node->arena.len = 0;
    node->bytesize = BUF_FIXED;
    return 0;
}

/* ---- the trunk: the open path from the leaf to the root ---- */

static int grow_root(struct iot_slog2_writer *w, struct iot_slog2_nodeid id, double t0)
{
    if (id.depth == INT16_MAX)
        return fail_msg(w, 1, "the tree is too deep");
    GROW(w, w->trunk, w->captrunk, w->ntrunk + 1);
    struct wnode *root = w->oom ? NULL : node_new(w, id, t0);
    if (!root)
        return fail_oom(w);
    w->trunk[w->ntrunk++] = root;
    return 0;
}

/* TreeTrunk.switchToNextBranch: the leaf is full.  It is written and
 * becomes its next sibling; each ancestor that is not the parent of the
 * renamed node below is written and renamed likewise; when the top node
 * is renamed, a new root grows above it. */
static int switch_branch(struct iot_slog2_writer *w)
{
    struct iot_slog2_nodeid next = w->trunk[0]->id;
    next.xpos++;
    for (size_t level = 0; level < w->ntrunk; level++) {
        struct wnode *node = w->trunk[level];
        if (node->id.depth == next.depth && node->id.xpos == next.xpos)
            break;
        finalize_end(w, level);
        if (write_node(w, level) < 0)
            return -1;
        double prev_t0 = node->t0;
        node->t0 = node->t1;
        node->id = next;
        if (!(node->cur = sbuf_new(w, next, node->t0)))
            return fail_oom(w);
        next.depth++;
        next.xpos /= w->nc;
        if (level + 1 == w->ntrunk)
            return grow_root(w, next, prev_t0);
    }
    return 0;
}

/* The encoding of a primitive: category, info bytes, vertices. */
struct prim {
    int32_t cat;
    uint8_t topo, nv;
    double v[2];
    int32_t line[2];
    double t0, t1;
    const struct iot_slog2_value *info;
    int n_info;
    size_t info_len;
};

static void put_info(uint8_t *p, const struct wcat *c, const struct iot_slog2_value *v)
{
    for (int i = 0; i < c->n_types; i++) {
        switch (c->types[i]) {
        case 'd': case 'x': p = put32(p, (uint32_t)v[i].u.i); break;
        case 'h': p = put16(p, (uint16_t)v[i].u.i); break;
        case 'l': case 'X': p = put64(p, (uint64_t)v[i].u.i); break;
        case 'e': p = put_f32(p, (float)v[i].u.f); break;
        case 'E': p = put_f64(p, v[i].u.f); break;
        default:
            p = put16(p, v[i].u.s.len);
            if (v[i].u.s.len)
                memcpy(p, v[i].u.s.p, v[i].u.s.len);
            p += v[i].u.s.len;
        }
    }
}

static int node_add(struct iot_slog2_writer *w, struct wnode *node, const struct prim *d,
                    const struct wcat *c)
{
    uint32_t len = (uint32_t)(8 + d->info_len + 12u * d->nv);
    if (node->bytesize + len + 1 > INT32_MAX - ((int64_t)1 << 24))
        return fail_msg(w, 1, "tree node ID(%d,%d) would exceed 2 GiB (too many long drawables "
                              "in one node)", node->id.depth, (int)node->id.xpos);
    GROW(w, node->rec, node->caprec, node->nrec + 1);
    uint8_t *p = w->oom ? NULL : reserve(w, &node->arena, len);
    if (!p)
        return fail_oom(w);
    struct wrec *r = &node->rec[node->nrec];
    *r = (struct wrec){.t0 = d->t0, .t1 = d->t1, .v = {d->v[0], d->v[1]}, .cat = d->cat,
                       .line = {d->line[0], d->line[1]}, .next = -1, .rank = c->rank,
                       .topo = d->topo, .nv = d->nv, .len = len,
                       .off = (uint32_t)(p - node->arena.p)};
    p = put32(p, (uint32_t)d->cat);
    p = put16(p, (uint16_t)d->info_len);
    put_info(p, c, d->info);
    p += d->info_len;
    p = put16(p, d->nv);
    for (int i = 0; i < d->nv; i++) {
        p = put_f64(p, d->v[i]);
        p = put32(p, (uint32_t)d->line[i]);
    }
    if (sbuf_add_rec(w, node->cur, node, (int32_t)node->nrec) < 0)
        return fail_oom(w);
    node->nrec++;
    node->bytesize += len + 1;
    return 0;
}

/* TreeTrunk.addDrawable: the drawable goes into the lowest open node that
 * starts no later than it does; if none does, into the root, whose start
 * moves back to the drawable's. */
static int trunk_add(struct iot_slog2_writer *w, const struct prim *d, struct wcat *c)
{
    struct wnode *leaf = w->trunk[0];
    /* Java would switch before the very first drawable too, and fail. */
    if (w->ndrawables && node_size(leaf, NULL) + 8 + (int64_t)d->info_len + 12 * d->nv >
                             w->leaf_bytesize && switch_branch(w) < 0)
        return -1;
    struct wnode *node = NULL;
    for (size_t i = 0; i < w->ntrunk && !node; i++)
        if (w->trunk[i]->t0 <= d->t0)
            node = w->trunk[i];
    int lowered = !node;
    if (lowered)
        node = w->trunk[w->ntrunk - 1];
    if (!c->used)
        c->rank = w->nused++;
    c->used = 1;
    if (node_add(w, node, d, c) < 0)
        return -1;
    if (lowered && d->t0 < node->t0)
        node->t0 = d->t0;
    if (lowered && d->t0 < node->cur->t0)
        node->cur->t0 = d->t0;
    w->last_end = d->t1;
    w->ndrawables++;
    for (size_t i = 0; i < 3; i++)
        if (w->cat[i].topo == d->topo)
            w->cat[i].used = 1;
    return 0;
}

/* ---- drawables ---- */

static int64_t int_value_size(struct iot_slog2_writer *w, const struct wcat *c, int i,
                              int64_t v, int64_t lo, int64_t hi, int64_t size)
{
    if (v < lo || v > hi)
        return fail_msg(w, 0, "category %d: info value %d (%" PRId64 ") does not fit '%%%c'",
                        c->index, i, v, c->types[i]);
    return size;
}

static int64_t info_value_size(struct iot_slog2_writer *w, const struct wcat *c, int i,
                               const struct iot_slog2_value *v)
{
    char t = c->types[i];
    if (v->type != t)
        return fail_msg(w, 0, "category %d: info value %d has type '%c', the label wants '%%%c'",
                        c->index, i, v->type ? v->type : '?', t);
    switch (t) {
    case 'd': return int_value_size(w, c, i, v->u.i, INT32_MIN, INT32_MAX, 4);
    case 'x': return int_value_size(w, c, i, v->u.i, INT32_MIN, UINT32_MAX, 4);
    case 'h': return int_value_size(w, c, i, v->u.i, INT16_MIN, INT16_MAX, 2);
    case 'e': return 4;
    case 'l': case 'X': case 'E': return 8;
    default:
        if (v->u.s.len && !v->u.s.p)
            return fail_msg(w, 0, "category %d: info value %d is a NULL string", c->index, i);
        return 2 + (int64_t)v->u.s.len;
    }
}

static int check_info(struct iot_slog2_writer *w, const struct wcat *c, struct prim *d)
{
    int64_t len = 0;
    if (d->n_info != c->n_types || (d->n_info && !d->info))
        return fail_msg(w, 0, "category %d \"%s\": %d info values given, its label has %d",
                        c->index, c->name, d->n_info, c->n_types);
    for (int i = 0; i < c->n_types; i++) {
        int64_t n = info_value_size(w, c, i, &d->info[i]);
        if (n < 0)
            return -1;
        len += n;
    }
    if (len > MAX_I16)
        return fail_msg(w, 0, "category %d: %" PRId64 " info bytes, more than 32767", c->index,
                        len);
    d->info_len = (size_t)len;
    return 0;
}

static struct wcat *check_drawable(struct iot_slog2_writer *w, struct prim *d)
{
    static const char *const what[] = {"an event", "a state", "an arrow"};
    struct wcat *c = d->cat >= 0 ? find_cat(w, d->cat) : NULL;
    if (!c)
        return fail_msg(w, 0, "drawable %" PRIu64 ": category %d is not defined",
                        w->ndrawables, d->cat), NULL;
    if (c->topo != d->topo)
        return fail_msg(w, 0, "drawable %" PRIu64 ": category %d \"%s\" is not for %s",
                        w->ndrawables, d->cat, c->name, what[d->topo]), NULL;
    if (!isfinite(d->t0) || !isfinite(d->t1))
        return fail_msg(w, 0, "drawable %" PRIu64 " (category %d): bad times %.17g, %.17g",
                        w->ndrawables, d->cat, d->v[0], d->v[d->nv - 1]), NULL;
    if (d->topo == IOT_SLOG2_STATE && d->v[1] < d->v[0])
        return fail_msg(w, 0, "drawable %" PRIu64 " (category %d): a state must not end (%.17g) "
                              "before it starts (%.17g)", w->ndrawables, d->cat, d->v[1],
                        d->v[0]), NULL;
    if (d->t1 < w->last_end)
        return fail_msg(w, 0, "drawable %" PRIu64 " (category %d) ends at %.17g, before the "
                              "previous one (%.17g): drawables must come in increasing end time",
                        w->ndrawables, d->cat, d->t1, w->last_end), NULL;
    return check_info(w, c, d) < 0 ? NULL : c;
}

static int add_drawable(struct iot_slog2_writer *w, struct prim *d)
{
    if (usable(w) < 0)
        return -1;
    d->t0 = d->nv > 1 && d->v[1] < d->v[0] ? d->v[1] : d->v[0];
    d->t1 = d->nv > 1 && d->v[1] > d->v[0] ? d->v[1] : d->v[0];
    struct wcat *c = check_drawable(w, d);
    if (!c || note_line(w, d->line[0]) < 0 ||
        (d->line[1] != d->line[0] && note_line(w, d->line[1]) < 0))
        return -1;
    return trunk_add(w, d, c);
}

int iot_slog2_writer_state(iot_slog2_writer *w, int32_t category, int32_t line, double start,
                           double end, const struct iot_slog2_value *info, int n_info)
{
    struct prim d = {.cat = category, .topo = IOT_SLOG2_STATE, .nv = 2, .v = {start, end},
                     .line = {line, line}, .info = info, .n_info = n_info};
    return add_drawable(w, &d);
}

int iot_slog2_writer_arrow(iot_slog2_writer *w, int32_t category, int32_t from_line, double send,
                           int32_t to_line, double recv, const struct iot_slog2_value *info,
                           int n_info)
{
    struct prim d = {.cat = category, .topo = IOT_SLOG2_ARROW, .nv = 2, .v = {send, recv},
                     .line = {from_line, to_line}, .info = info, .n_info = n_info};
    return add_drawable(w, &d);
}

int iot_slog2_writer_event(iot_slog2_writer *w, int32_t category, int32_t line, double time,
                           const struct iot_slog2_value *info, int n_info)
{
    struct prim d = {.cat = category, .topo = IOT_SLOG2_EVENT, .nv = 1, .v = {time, time},
                     .line = {line, line}, .info = info, .n_info = n_info};
    return add_drawable(w, &d);
}

/* ---- closing ---- */

/* BufForShadows.summarizeCategories on the root's own buffer: legend counts
 * and ratios, summed in Java's HashMap order (float sums depend on it). */
static int summarize(struct iot_slog2_writer *w, const struct sbuf *b)
{
    if (java_order(w, b) < 0)
        return fail_oom(w);
    for (size_t i = 0; i < b->n; i++) {
        const struct shadow *s = b->sh[w->s_idx[i]];
        float f = (float)((s->t1 - s->t0) / (b->t1 - b->t0));
        for (size_t k = 0; k < s->nw; k++) {
            struct wcat *c = find_cat(w, s->w[k].cat);
            c->count += s->w[k].count;
            c->incl += s->w[k].incl * f;
            c->excl += s->w[k].excl * f;
        }
    }
    return 0;
}

/* TreeTrunk.flushToFile: the open path, leaf first, root last. */
static int flush_trunk(struct iot_slog2_writer *w)
{
    for (size_t level = 0; level < w->ntrunk; level++) {
        finalize_end(w, level);
        if (write_node(w, level) < 0)
            return -1;
    }
    struct wnode *root = w->trunk[w->ntrunk - 1];
    return summarize(w, root->done[0]);
}

static size_t cat_size(const struct wcat *c)
{
    size_t n = 4 + 2 + strlen(c->name) + 4 + 4 + 1 + 1 + 2 + 2 + (size_t)c->n_types + 2 +
               4 * (size_t)c->n_methods + 4 + 4 + 8;
    for (int i = 0; i < c->n_keys; i++)
        n += 2 + strlen(c->keys[i]);
    return n;
}

static uint8_t *put_cat(uint8_t *p, const struct wcat *c)
{
    p = put32(p, (uint32_t)c->index);
    p = put_str(p, c->name);
    p = put32(p, (uint32_t)c->topo);
    p = put32(p, c->argb);
    *p++ = 1; /* modifiable */
    *p++ = (uint8_t)c->width;
    p = put16(p, (uint16_t)c->n_keys);
    for (int i = 0; i < c->n_keys; i++)
        p = put_str(p, c->keys[i]);
    p = put16(p, (uint16_t)c->n_types);
    if (c->n_types)
        memcpy(p, c->types, (size_t)c->n_types);
    p += c->n_types;
    p = put16(p, (uint16_t)c->n_methods);
    p = put_ints(p, c->methods, c->n_methods);
    p = put_f32(p, c->incl);
    p = put_f32(p, c->excl);
    return put64(p, (uint64_t)c->count);
}

/* The used categories, in the order Java's HashMap of all defined ones
 * (previews first) iterates after the unused ones are removed. */
static int write_categories(struct iot_slog2_writer *w)
{
    size_t n = 0, size = 4;
    GROW(w, w->s_idx, w->cap_idx, w->ncat + 1);
    GROW(w, w->s_aux, w->cap_aux, w->ncat + 1);
    if (w->oom)
        return fail_oom(w);
    for (size_t i = 0; i < w->ncat; i++)
        w->s_aux[i] = (uint32_t)w->cat[i].index; /* Integer.hashCode */
    if (java_order_of(w, w->ncat) < 0)
        return fail_oom(w);
    for (size_t i = 0; i < w->ncat; i++)
        if (w->cat[w->s_idx[i]].used) {
            w->s_idx[n++] = w->s_idx[i];
            size += cat_size(&w->cat[w->s_idx[i]]);
        }
    w->enc.len = 0;
    uint8_t *p = reserve(w, &w->enc, size);
    if (!p)
        return fail_oom(w);
    p = put32(p, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        p = put_cat(p, &w->cat[w->s_idx[i]]);
    w->cat_ptr = w->off;
    w->cat_size = (int32_t)size;
    return emit(w, w->enc.p, size, "the Categories block");
}

static int write_lineidmaps(struct iot_slog2_writer *w)
{
    size_t size = 4 + w->maps.len + 2 + 12 + 4 + 2 + 6 + 4 + 8 * w->nlines + 2;
    w->enc.len = 0;
    uint8_t *p = reserve(w, &w->enc, size);
    if (!p)
        return fail_oom(w);
    p = put32(p, (uint32_t)w->nmaps + 1);
    if (w->maps.len)
        memcpy(p, w->maps.p, w->maps.len);
    p = put_str(p + w->maps.len, "Identity Map");
    p = put32(p, 1);
    p = put_str(p, "LineID");
    p = put32(p, (uint32_t)w->nlines);
    for (size_t i = 0; i < w->nlines; i++) {
        p = put32(p, (uint32_t)w->lines[i]);
        p = put32(p, (uint32_t)w->lines[i]);
    }
    put16(p, 0);
    if (size > INT32_MAX)
        return fail_msg(w, 1, "the LineIDMaps block is too large");
    w->map_ptr = w->off;
    w->map_size = (int32_t)size;
    return emit(w, w->enc.p, size, "the LineIDMaps block");
}

static int copy_spill(struct iot_slog2_writer *w, FILE *f, uint8_t *buf, size_t len)
{
    size_t n;
    rewind(f);
    while ((n = fread(buf, 1, len, f)) > 0)
        if (fwrite(buf, 1, n, w->f) != n)
            return fail_msg(w, 1, "writing the TreeDir block at offset %" PRId64 ": %s", w->off,
                            strerror(errno));
    if (ferror(f))
        return fail_msg(w, 1, "reading the temporary tree directory: %s", strerror(errno));
    return 0;
}

/* TreeDir order: the root, then depth by depth downwards, xpos ascending,
 * which is the order each depth's nodes were written in. */
static int write_treedir(struct iot_slog2_writer *w)
{
    uint64_t size = 4 + DIRENT_SIZE * w->ndirent;
    uint8_t head[4], buf[DIRENT_SIZE * 512];
    if (size > INT32_MAX)
        return fail_msg(w, 1, "%" PRIu64 " tree nodes: the TreeDir block would be too large",
                        w->ndirent);
    put32(head, (uint32_t)w->ndirent);
    w->dir_ptr = w->off;
    if (emit(w, head, 4, "the TreeDir block") < 0)
        return -1;
    for (size_t d = w->ndir; d-- > 0;)
        if (w->dir[d] && copy_spill(w, w->dir[d], buf, sizeof buf) < 0)
            return -1;
    w->off += (int64_t)size - 4;
    w->dir_size = (int32_t)size;
    if (w->dir_size > w->max_buf)
        w->max_buf = w->dir_size;
    return 0;
}

static int write_header(struct iot_slog2_writer *w, int final)
{
    uint8_t h[IOT_SLOG2_HEADER_SIZE], *p = h;
    int64_t ptr[IOT_SLOG2_N_BLOCKS][2] = {{w->cat_ptr, w->cat_size}, {0, 0},
                                          {w->map_ptr, w->map_size}, {w->root_ptr, w->root_size},
                                          {w->dir_ptr, w->dir_size}, {0, 0}, {0, 0}};
    p = put_str(p, IOT_SLOG2_VERSION);
    p = put16(p, (uint16_t)w->nc);
    p = put32(p, (uint32_t)w->leaf_bytesize);
    p = put16(p, (uint16_t)(final ? w->trunk[w->ntrunk - 1]->id.depth : 0));
    p = put32(p, (uint32_t)w->max_buf);
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++) {
        p = put64(p, (uint64_t)(final ? ptr[i][0] : 0));
        p = put32(p, (uint32_t)(final ? ptr[i][1] : 0));
    }
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, w->f) != sizeof h)
        return fail_msg(w, 1, "writing the header: %s", strerror(errno));
    return 0;
}

static int finish(struct iot_slog2_writer *w)
{
    if (usable(w) < 0)
        return -1;
    if (!w->ndrawables)
        return fail_msg(w, 1, "no drawables: a SLOG-2 file needs at least one");
    if (flush_trunk(w) < 0 || write_categories(w) < 0 || write_lineidmaps(w) < 0 ||
        write_treedir(w) < 0 || write_header(w, 1) < 0)
        return -1;
    if (fflush(w->f) != 0)
        return fail_msg(w, 1, "writing: %s", strerror(errno));
    return 0;
}

static void free_writer(struct iot_slog2_writer *w)
{
    struct wmem *m = &w->mem;
    for (size_t i = 0; i < w->ntrunk; i++)
        node_free(m, w->trunk[i]);
    for (size_t i = 0; i < w->ndir; i++)
        if (w->dir[i])
            fclose(w->dir[i]);
    for (size_t i = 0; i < w->ncat; i++)
        free_cat(m, &w->cat[i]);
    void *arrays[] = {w->trunk, w->dir, w->cat, w->cslot, w->maps.p, w->lines,
                      w->enc.p, w->s_idx, w->s_aux, w->s_tmp};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        m_free(m, arrays[i]);
    free(w->path);
    free(w);
}

int iot_slog2_writer_close(iot_slog2_writer *w, char *err, size_t errlen)
{
    if (!w)
        return -1;
    int rc = finish(w);
    if (fclose(w->f) != 0 && rc == 0)
        rc = fail_msg(w, 1, "closing: %s", strerror(errno));
    if (rc < 0) {
        if (w->regular)
            unlink(w->path);
        if (err && errlen)
            snprintf(err, errlen, "%s", w->err);
    }
    free_writer(w);
    return rc;
}

void iot_slog2_writer_abort(iot_slog2_writer *w)
{
    if (!w)
        return;
    fclose(w->f);
    if (w->regular)
        unlink(w->path);
    free_writer(w);
}

const char *iot_slog2_writer_error(const iot_slog2_writer *w)
{
    return w ? w->err : "no writer";
}

void iot_slog2_writer_stats(const iot_slog2_writer *w, struct iot_slog2_writer_stats *st)
{
    *st = (struct iot_slog2_writer_stats){
        .drawables = w->ndrawables, .nodes_written = w->nodes_written,
        .depth = w->trunk[w->ntrunk - 1]->id.depth, .file_bytes = w->off,
        .live_bytes = w->mem.live, .peak_bytes = w->mem.peak};
}

/* ---- opening ---- */

static int set_options(struct iot_slog2_writer *w, const struct iot_slog2_options *opt,
                       char *err, size_t errlen)
{
    w->leaf_bytesize = opt && opt->leaf_bytesize ? opt->leaf_bytesize
                                                 : IOT_SLOG2_DEFAULT_LEAF_BYTESIZE;
    w->nc = opt && opt->children_per_node ? opt->children_per_node : IOT_SLOG2_DEFAULT_CHILDREN;
    if (w->leaf_bytesize < IOT_SLOG2_MIN_LEAF_BYTESIZE || w->nc < 2) {
        snprintf(err, errlen, "%s: leaf byte size %d (at least %d) or children per node %d "
                              "(at least 2) out of range", w->path, (int)w->leaf_bytesize,
                 IOT_SLOG2_MIN_LEAF_BYTESIZE, w->nc);
        return -1;
    }
    return 0;
}

static int start_tree(struct iot_slog2_writer *w)
{
    GROW(w, w->trunk, w->captrunk, 4);
    struct wnode *leaf = w->oom ? NULL : node_new(w, (struct iot_slog2_nodeid){0, 0}, INFINITY);
    if (!leaf)
        return -1;
    w->trunk[w->ntrunk++] = leaf;
    return 0;
}

iot_slog2_writer *iot_slog2_writer_open(const char *path, const struct iot_slog2_options *opt,
                                        char *err, size_t errlen)
{
    struct iot_slog2_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path ? path : ""))) {
        snprintf(err, errlen, "%s: out of memory", path ? path : "(null)");
        free(w);
        return NULL;
    }
    w->mem.live = w->mem.peak = sizeof *w + strlen(w->path) + 1;
    w->last_end = -INFINITY;
    if (set_options(w, opt, err, errlen) < 0) {
        free_writer(w);
        return NULL;
    }
    if (!(w->f = fopen(w->path, "wb"))) {
        snprintf(err, errlen, "%s: cannot create: %s", w->path, strerror(errno));
        free_writer(w);
        return NULL;
    }
    struct stat st;
    w->regular = fstat(fileno(w->f), &st) == 0 && S_ISREG(st.st_mode);
    w->off = IOT_SLOG2_HEADER_SIZE;
    if (add_previews(w) < 0 || start_tree(w) < 0 || write_header(w, 0) < 0) {
        snprintf(err, errlen, "%s", w->oom && !w->failed ? "out of memory" : w->err);
        iot_slog2_writer_abort(w);
        return NULL;
    }
    return w;
}
