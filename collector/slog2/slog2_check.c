/* Tree invariants of an SLOG-2 file: what a correct writer guarantees and
 * Jumpshot relies on, beyond what decoding alone can see.  One pass over the
 * nodes in directory order; per-node totals are summed over subtrees at the
 * end, so memory is a few words per tree node. */
#include "slog2_read.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPORTS 1000

struct checker {
    struct iot_slog2 *r;
    const struct iot_slog2_header *h;
    void (*report)(void *ctx, const char *msg);
    void *ctx;
    long violations;
    int64_t *subtree;    /* per directory entry: real primitives, then of the subtree */
    uint64_t *shadow_sum; /* per entry: real drawables its parent's shadows claim */
    unsigned char *listed; /* per entry: its parent has a shadow buffer for it */
    int64_t *cat_count;  /* per category position: real primitives seen */
    const struct iot_slog2_lineidmap *identity;
    char where[96]; /* prefix of node-level messages */
};

static void violation(struct checker *k, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (++k->violations > MAX_REPORTS)
        return;
    int n = snprintf(msg, sizeof msg, "%s", k->where);
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    k->report(k->ctx, msg);
}

static const char *id_text(char *buf, size_t len, struct iot_slog2_nodeid id)
{
    snprintf(buf, len, "ID(%d,%d)", id.depth, (int)id.xpos);
    return buf;
}

static int same_id(struct iot_slog2_nodeid a, struct iot_slog2_nodeid b)
{
    return a.depth == b.depth && a.xpos == b.xpos;
}

static int same_block(struct iot_slog2_blockptr a, struct iot_slog2_blockptr b)
{
    return a.offset == b.offset && a.size == b.size;
}

static int same_tbox(struct iot_slog2_tbox a, struct iot_slog2_tbox b)
{
    return a.start == b.start && a.end == b.end;
}

static int inside(struct iot_slog2_tbox in, struct iot_slog2_tbox out)
{
    return in.start >= out.start && in.end <= out.end;
}

/* Java's storage order: increasing start time, ties by decreasing end. */
static int in_order(struct iot_slog2_tbox prev, struct iot_slog2_tbox cur)
{
    return prev.start < cur.start || (prev.start == cur.start && prev.end >= cur.end);
}

static long parent_of(const struct checker *k, struct iot_slog2_nodeid id)
{
    if (k->h->children_per_node < 1)
        return -1;
    struct iot_slog2_nodeid p = {(int16_t)(id.depth + 1), id.xpos / k->h->children_per_node};
    return iot_slog2_find_node(k->r, p);
}

static void check_header(struct checker *k)
{
    const struct iot_slog2_header *h = k->h;
    const struct iot_slog2_dirent *root = iot_slog2_dirent_at(k->r, 0);
    char id[32];
    if (h->children_per_node < 2)
        violation(k, "header: NumOfChildrenPerNode %d is below 2", h->children_per_node);
    if (h->leaf_bytesize <= 0)
        violation(k, "header: TreeLeafByteSize %d is not positive", h->leaf_bytesize);
    if (root->id.xpos != 0 || root->id.depth != h->max_depth)
        violation(k, "tree directory: first entry %s is not the root ID(%d,0) of MaxTreeDepth",
                  id_text(id, sizeof id, root->id), h->max_depth);
    if (!same_block(root->block, h->block[IOT_SLOG2_TREEROOT]))
        violation(k, "header: TreeRoot FBinfo(%d @ %lld) is not the root's FBinfo(%d @ %lld)",
                  h->block[IOT_SLOG2_TREEROOT].size,
                  (long long)h->block[IOT_SLOG2_TREEROOT].offset, root->block.size,
                  (long long)root->block.offset);
}

/* Directory order is the root, then depth descending, xpos ascending. */
static void check_directory(struct checker *k)
{
    size_t n = iot_slog2_n_nodes(k->r);
    int32_t largest = 0;
    for (size_t i = 0; i < n; i++) {
        const struct iot_slog2_dirent *e = iot_slog2_dirent_at(k->r, i);
        char a[32], b[32];
        if (e->block.size > largest)
            largest = e->block.size;
        if (e->id.depth > k->h->max_depth)
            violation(k, "tree directory: %s is deeper than MaxTreeDepth %d",
                      id_text(a, sizeof a, e->id), k->h->max_depth);
        if (i > 0) {
            struct iot_slog2_nodeid p = iot_slog2_dirent_at(k->r, i - 1)->id;
            if (p.depth < e->id.depth || (p.depth == e->id.depth && p.xpos >= e->id.xpos))
                violation(k, "tree directory: %s follows %s", id_text(a, sizeof a, e->id),
                          id_text(b, sizeof b, p));
        }
        if (!(e->tbox.start <= e->tbox.end))
            violation(k, "tree directory: %s has an inverted time box",
                      id_text(a, sizeof a, e->id));
    }
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++)
        if (k->h->block[i].size > largest)
            largest = k->h->block[i].size;
    if (k->h->max_buffer_bytesize != largest)
        violation(k, "header: MaxBufferByteSize %d is not the largest block's size %d",
                  k->h->max_buffer_bytesize, largest);
}

/* Java's serial iterator walks the leaf boxes as half-open intervals, so a
 * gap between leaves would hide the drawables that start in it. */
static void check_leaves(struct checker *k)
{
    const struct iot_slog2_dirent *prev = NULL, *root = iot_slog2_dirent_at(k->r, 0);
    char a[32];
    for (size_t i = 0; i < iot_slog2_n_nodes(k->r); i++) {
        const struct iot_slog2_dirent *e = iot_slog2_dirent_at(k->r, i);
        if (e->id.depth != 0)
            continue;
        if (e->id.xpos != (prev ? prev->id.xpos + 1 : 0))
            violation(k, "tree directory: leaf %s out of sequence", id_text(a, sizeof a, e->id));
        else if (prev && prev->tbox.end != e->tbox.start)
            violation(k, "tree directory: leaf %s does not start where the previous leaf ends",
                      id_text(a, sizeof a, e->id));
        prev = e;
    }
    if (!prev)
        violation(k, "tree directory: no leaves");
    else if (prev->tbox.end != root->tbox.end)
        violation(k, "tree directory: the last leaf %s does not end with the root",
                  id_text(a, sizeof a, prev->id));
}

struct span {
    int64_t offset, end;
};

static int cmp_span(const void *a, const void *b)
{
    int64_t x = ((const struct span *)a)->offset, y = ((const struct span *)b)->offset;
    return x < y ? -1 : x > y;
}

static void check_layout(struct checker *k)
{
    size_t n = iot_slog2_n_nodes(k->r), m = 0;
    struct span *s = calloc(n + IOT_SLOG2_N_BLOCKS + 1, sizeof *s);
    if (!s)
        return;
    s[m++] = (struct span){0, IOT_SLOG2_HEADER_SIZE};
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++) {
        struct iot_slog2_blockptr b = k->h->block[i];
        if (i != IOT_SLOG2_TREEROOT && b.offset && b.size)
            s[m++] = (struct span){b.offset, b.offset + b.size};
    }
    for (size_t i = 0; i < n; i++) {
        struct iot_slog2_blockptr b = iot_slog2_dirent_at(k->r, i)->block;
        s[m++] = (struct span){b.offset, b.offset + b.size};
    }
    qsort(s, m, sizeof *s, cmp_span);
    for (size_t i = 1; i < m; i++)
        if (s[i].offset < s[i - 1].end)
            violation(k, "file layout: the block at offset %lld overlaps the one at %lld",
                      (long long)s[i].offset, (long long)s[i - 1].offset);
    free(s);
}

static void check_categories(struct checker *k)
{
    static const char *const preview[] = {"Preview_Event", "Preview_Arrow", "Preview_State"};
    static const int32_t preview_topo[] = {IOT_SLOG2_EVENT, IOT_SLOG2_ARROW, IOT_SLOG2_STATE};
    for (size_t i = 0; i < iot_slog2_n_categories(k->r); i++) {
        const struct iot_slog2_category *c = iot_slog2_category_at(k->r, i);
        if (c->index >= 0)
            continue;
        /* c->index comes from the file: -INT32_MIN does not exist, so compare before negating. */
        int p = c->index < -3 ? 3 : -c->index - 1;
        if (p > 2 || preview_topo[p] != c->topo || strcmp(c->name, preview[p]) != 0)
            violation(k, "category %d \"%s\": negative indices are reserved for Preview_Event "
                         "(-1), Preview_Arrow (-2) and Preview_State (-3)",
                      c->index, c->name);
    }
}

static void check_identity(struct checker *k)
{
    size_t n = iot_slog2_n_lineidmaps(k->r);
    const struct iot_slog2_lineidmap *m = n ? iot_slog2_lineidmap_at(k->r, n - 1) : NULL;
    if (!m || strcmp(m->title, "Identity Map") != 0 || m->n_columns != 1 ||
        strcmp(m->columns[0], "LineID") != 0) {
        violation(k, "line-ID maps: the last map is not the \"Identity Map\" with one "
                     "column \"LineID\"");
        return;
    }
    for (int32_t i = 0; i < m->n_rows; i++) {
        const int32_t *row = &m->rows[2 * i];
        if (row[0] != row[1])
            violation(k, "Identity Map: line %d maps to %d", row[0], row[1]);
        if (i > 0 && row[-2] >= row[0])
            violation(k, "Identity Map: line %d follows %d", row[0], row[-2]);
    }
    k->identity = m;
}

static int known_line(const struct checker *k, int32_t line)
{
    const struct iot_slog2_lineidmap *m = k->identity;
    int32_t lo = 0, hi = m->n_rows;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (m->rows[2 * mid] == line)
            return 1;
        if (m->rows[2 * mid] < line)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static void check_info(struct checker *k, const char *what, const struct iot_slog2_category *c,
                       const struct iot_slog2_prim *p)
{
    char why[160];
    size_t used;
    if (p->info_len == 0 && c->n_types > 0) {
        violation(k, "%s: no info bytes for the %d values of category %d", what, c->n_types,
                  c->index);
        return;
    }
    if (iot_slog2_decode_info(c, p->info, p->info_len, NULL, 0, &used, why, sizeof why) < 0)
        violation(k, "%s: info does not decode by category %d: %s", what, c->index, why);
    else if (used != p->info_len)
        violation(k, "%s: %zu info bytes left over after the values of category %d",
                  what, p->info_len - used, c->index);
}

static void check_vertices(struct checker *k, const char *what, int32_t topo,
                           const struct iot_slog2_prim *p)
{
    int want = topo == IOT_SLOG2_EVENT ? 1 : 2;
    if (p->n_vertices != want)
        violation(k, "%s: %u vertices, a %s has %d", what, p->n_vertices,
                  iot_slog2_topo_name(topo), want);
    for (uint16_t i = 0; k->identity && i < p->n_vertices; i++)
        if (!known_line(k, p->vertices[i].line))
            violation(k, "%s: line ID %d is not in the Identity Map", what, p->vertices[i].line);
}

/* A real primitive, on its own or inside a composite. */
static void check_prim(struct checker *k, size_t node, const char *what,
                       const struct iot_slog2_prim *p, int want_state)
{
    const struct iot_slog2_category *c = iot_slog2_category(k->r, p->category);
    if (!c || c->index < 0) {
        violation(k, "%s: %s category %d", what, c ? "preview" : "unknown", p->category);
        return;
    }
    k->subtree[node]++;
    k->cat_count[c - iot_slog2_category_at(k->r, 0)]++;
    if (want_state >= 0 && (c->topo == IOT_SLOG2_STATE) != want_state)
        violation(k, "%s: a %s in the %s list", what, iot_slog2_topo_name(c->topo),
                  want_state ? "nestable" : "nestless");
    check_vertices(k, what, c->topo, p);
    check_info(k, what, c, p);
}

static void check_composite(struct checker *k, size_t node, const char *what,
                            const struct iot_slog2_drawable *d)
{
    const struct iot_slog2_category *c = iot_slog2_category(k->r, d->head.category);
    char sub[128];
    if (!c || c->index < 0)
        violation(k, "%s: %s category %d", what, c ? "preview" : "unknown", d->head.category);
    else
        check_info(k, what, c, &d->head);
    if (d->n_prims == 0)
        violation(k, "%s: a composite without primitives", what);
    for (uint16_t i = 0; i < d->n_prims; i++) {
        snprintf(sub, sizeof sub, "%s, primitive %u", what, i);
        check_prim(k, node, sub, &d->prims[i], -1);
        if (i > 0 && !in_order(d->prims[i - 1].tbox, d->prims[i].tbox))
            violation(k, "%s: not in increasing start-time order", sub);
    }
}

static void check_drawables(struct checker *k, size_t node, const struct iot_slog2_node *n,
                            int nestable)
{
    uint32_t count = nestable ? n->n_nestable : n->n_nestless;
    const struct iot_slog2_drawable *d = nestable ? n->nestable : n->nestless;
    char what[96];
    for (uint32_t i = 0; i < count; i++) {
        snprintf(what, sizeof what, "%s drawable %u (offset %lld)",
                 nestable ? "nestable" : "nestless", i, (long long)d[i].head.offset);
        if (!d[i].composite)
            check_prim(k, node, what, &d[i].head, nestable);
        else if (!nestable)
            violation(k, "%s: a composite in the nestless list", what);
        else
            check_composite(k, node, what, &d[i]);
        if (!inside(d[i].tbox, n->tbox))
            violation(k, "%s: outside the node's time box", what);
        if (i > 0 && !in_order(d[i - 1].tbox, d[i].tbox))
            violation(k, "%s: not in increasing start-time order", what);
    }
}

/* Unsigned: counts from a damaged file may be anything. */
static uint64_t weight_total(const struct iot_slog2_shadow *s)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < s->n_weights; i++)
        t += (uint64_t)s->weights[i].count;
    return t;
}

static void check_weights(struct checker *k, const char *what, const struct iot_slog2_shadow *s,
                          int32_t topo)
{
    for (uint32_t i = 0; i < s->n_weights; i++) {
        const struct iot_slog2_category *c = iot_slog2_category(k->r, s->weights[i].category);
        if (!c || c->index < 0 || c->topo != topo)
            violation(k, "%s: weight %u names category %d, not a real %s category", what, i,
                      s->weights[i].category, iot_slog2_topo_name(topo));
    }
    if (weight_total(s) != (uint64_t)s->n_real)
        violation(k, "%s: its weights count %" PRIu64 " drawables, Nrobjs is %" PRId64, what,
                  weight_total(s), s->n_real);
}

/* Returns the real drawables the shadows claim. */
static uint64_t check_shadows(struct checker *k, const struct iot_slog2_shadowbuf *b,
                             int nestable)
{
    uint32_t count = nestable ? b->n_nestable : b->n_nestless;
    const struct iot_slog2_shadow *s = nestable ? b->nestable : b->nestless;
    char what[128], id[32];
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct iot_slog2_category *c = iot_slog2_category(k->r, s[i].prim.category);
        snprintf(what, sizeof what, "shadow of %s, %s %u (offset %lld)",
                 id_text(id, sizeof id, b->id), nestable ? "nestable" : "nestless", i,
                 (long long)s[i].prim.offset);
        sum += (uint64_t)s[i].n_real;
        if (!c || c->index >= 0 || (c->topo == IOT_SLOG2_STATE) != nestable) {
            violation(k, "%s: category %d is not a Preview_* category of a %s", what,
                      s[i].prim.category, nestable ? "state" : "arrow or event");
            continue;
        }
        check_vertices(k, what, c->topo, &s[i].prim);
        check_weights(k, what, &s[i], c->topo);
        if (!inside(s[i].tbox, b->tbox))
            violation(k, "%s: outside the child's time box", what);
        if (i > 0 && !in_order(s[i - 1].tbox, s[i].tbox))
            violation(k, "%s: not in increasing start-time order", what);
    }
    return sum;
}

/* A node holds one shadow buffer per existing child, in xpos order. */
static void check_shadowbufs(struct checker *k, const struct iot_slog2_node *n)
{
    uint32_t next = 0;
    int nc = k->h->children_per_node;
    char a[32], b[32];
    for (int64_t j = 0; n->id.depth > 0 && nc > 0 && j < nc; j++) {
        int64_t xpos = (int64_t)n->id.xpos * nc + j;
        struct iot_slog2_nodeid cid = {(int16_t)(n->id.depth - 1), (int32_t)xpos};
        long child = xpos <= INT32_MAX ? iot_slog2_find_node(k->r, cid) : -1;
        if (child < 0)
            continue;
        const struct iot_slog2_dirent *e = iot_slog2_dirent_at(k->r, (size_t)child);
        const struct iot_slog2_shadowbuf *sb = next < n->n_shadowbufs ? &n->shadowbufs[next] : NULL;
        if (!sb || !same_id(sb->id, cid)) {
            violation(k, "no shadow buffer for child %s", id_text(a, sizeof a, cid));
            continue;
        }
        next++;
        if (!same_tbox(sb->tbox, e->tbox) || !same_block(sb->block, e->block))
            violation(k, "shadow buffer of %s: time box or FBinfo differ from the directory's",
                      id_text(a, sizeof a, cid));
        k->shadow_sum[child] = check_shadows(k, sb, 0) + check_shadows(k, sb, 1);
        k->listed[child] = 1;
    }
    for (; next < n->n_shadowbufs; next++)
        violation(k, "shadow buffer %u names %s, which is not a child in the directory", next,
                  id_text(b, sizeof b, n->shadowbufs[next].id));
}

static void check_node_place(struct checker *k, size_t i, const struct iot_slog2_node *n)
{
    const struct iot_slog2_dirent *e = iot_slog2_dirent_at(k->r, i);
    char a[32];
    if (!same_id(n->id, e->id) || !same_tbox(n->tbox, e->tbox) || !same_block(n->block, e->block))
        violation(k, "ID, time box or FBinfo differ from the directory entry's");
    if (i == 0)
        return;
    long p = parent_of(k, e->id);
    if (p < 0)
        violation(k, "its parent is not in the directory");
    else if (!inside(e->tbox, iot_slog2_dirent_at(k->r, (size_t)p)->tbox))
        violation(k, "time box lies outside its parent %s's",
                  id_text(a, sizeof a, iot_slog2_dirent_at(k->r, (size_t)p)->id));
}

static int check_node(struct checker *k, size_t i)
{
    const struct iot_slog2_node *n;
    char id[32];
    snprintf(k->where, sizeof k->where, "tree node %s: ",
             id_text(id, sizeof id, iot_slog2_dirent_at(k->r, i)->id));
    if (iot_slog2_read_node(k->r, i, &n) < 0)
        return -1;
    check_node_place(k, i, n);
    check_drawables(k, i, n, 0);
    check_drawables(k, i, n, 1);
    check_shadowbufs(k, n);
    k->where[0] = '\0';
    return 0;
}

/* Children sit after their parents in directory order, so a backward pass
 * sums subtrees bottom-up. */
static void check_subtrees(struct checker *k)
{
    size_t n = iot_slog2_n_nodes(k->r);
    char id[32];
    for (size_t i = n; i-- > 1;) {
        long p = parent_of(k, iot_slog2_dirent_at(k->r, i)->id);
        if (p >= 0 && (size_t)p < i)
            k->subtree[p] += k->subtree[i];
    }
    for (size_t i = 1; i < n; i++) {
        id_text(id, sizeof id, iot_slog2_dirent_at(k->r, i)->id);
        if (k->listed[i] && k->shadow_sum[i] != (uint64_t)k->subtree[i])
            violation(k, "shadows of %s count %" PRIu64 " real drawables, its subtree has %" PRId64,
                      id, k->shadow_sum[i], k->subtree[i]);
    }
}

static void check_counts(struct checker *k)
{
    for (size_t i = 0; i < iot_slog2_n_categories(k->r); i++) {
        const struct iot_slog2_category *c = iot_slog2_category_at(k->r, i);
        if (c->index >= 0 && c->count != k->cat_count[i])
            violation(k, "category %d \"%s\": count %" PRId64 ", the tree holds %" PRId64, c->index,
                      c->name, c->count, k->cat_count[i]);
    }
}

long iot_slog2_check(struct iot_slog2 *r, void (*report)(void *ctx, const char *msg), void *ctx)
{
    size_t n = iot_slog2_n_nodes(r);
    struct checker k = {.r = r, .h = iot_slog2_header(r), .report = report, .ctx = ctx};
    long rc = -1;
    k.subtree = calloc(n, sizeof *k.subtree);
    k.shadow_sum = calloc(n, sizeof *k.shadow_sum);
    k.listed = calloc(n, 1);
    k.cat_count = calloc(iot_slog2_n_categories(r) + 1, sizeof *k.cat_count);
    if (!k.subtree || !k.shadow_sum || !k.listed || !k.cat_count)
        goto out;
    check_header(&k);
    check_directory(&k);
    check_leaves(&k);
    check_layout(&k);
    check_categories(&k);
    check_identity(&k);
    for (size_t i = 0; i < n; i++)
        if (check_node(&k, i) < 0)
            goto out;
    check_subtrees(&k);
    check_counts(&k);
    if (k.violations > MAX_REPORTS) {
        char msg[96];
        snprintf(msg, sizeof msg, "... %ld more violations not shown", k.violations - MAX_REPORTS);
        report(ctx, msg);
    }
    rc = k.violations;
out:
    free(k.subtree);
    free(k.shadow_sum);
    free(k.listed);
    free(k.cat_count);
    return rc;
}
