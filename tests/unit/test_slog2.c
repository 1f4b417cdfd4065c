/* The SLOG-2 reader against files written by Argonne's own Java slog2sdk
 * (../shared/reference/slog2, directory given as argv[1]).
 *
 * - facts: every per-file line of FACTS.md (copied into slog2_facts.h) is
 *   rebuilt from what the reader decodes and must match character for
 *   character: header, tree, categories with colours, labels and float
 *   ratios, drawable counts, line-ID maps, per-node and per-child shadow
 *   counts, and the sample drawables as slog2print prints them;
 * - printrecur: every drawable and every preview shadow of every node, as
 *   Java's toString would print it, equals the multiset of those in the
 *   slog2printrecur dump;
 * - damage: truncation at every offset, byte flips, extreme length fields
 *   and wrong magic or version all end in an error naming the file and an
 *   offset, or in a file that reads; never a crash (run under ASan/UBSan in
 *   the sanitizer build);
 * - the checker reports invariant violations planted in valid files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <math.h>

#include "slog2_read.h"

#include "slog2_facts.h"

#define N_FACTS (sizeof facts / sizeof facts[0])

static const char *ref_dir;
static char tmp_dir[64];

/* ---- small helpers ---- */

struct sb {
    char *s;
    size_t len, cap;
};

static void sb_add(struct sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        assert_non_null(b->s);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static char *sb_take(struct sb *b)
{
    if (!b->s)
        sb_add(b, "%s", "");
    char *s = b->s;
    *b = (struct sb){0};
    return s;
}

static const char *ref_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", ref_dir, name);
    return buf;
}

static struct iot_slog2 *open_ref(const char *name)
{
    char err[512];
    struct iot_slog2 *r = iot_slog2_open(ref_path(name), err, sizeof err);
    if (!r)
        fail_msg("%s", err);
    return r;
}

static const struct iot_slog2_node *node_at(struct iot_slog2 *r, size_t i)
{
    const struct iot_slog2_node *n;
    if (iot_slog2_read_node(r, i, &n) < 0)
        fail_msg("%s", iot_slog2_error(r));
    return n;
}

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s", path);
    struct sb b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        sb_add(&b, "%.*s", (int)k, chunk);
    fclose(f);
    if (len)
        *len = b.len;
    return sb_take(&b);
}

static const char *dbl(char *buf, double v)
{
    iot_slog2_format_double(buf, 40, v);
    return buf;
}

static const char *flt(char *buf, float v)
{
    iot_slog2_format_float(buf, 40, v);
    return buf;
}

/* ---- Java's toString of categories, drawables and shadows ---- */

static void java_info_fmt(struct sb *b, const struct iot_slog2_category *c)
{
    int n = c->n_keys > c->n_types ? c->n_keys : c->n_types;
    if (!n)
        return;
    sb_add(b, "< ");
    for (int i = 0; i < n; i++) {
        if (i < c->n_keys)
            sb_add(b, "%s", c->keys[i]);
        if (i < c->n_types)
            sb_add(b, "%%%c", c->types[i]);
    }
    sb_add(b, " >");
}

static void java_category(struct sb *b, const struct iot_slog2_category *c)
{
    char a[40], x[40];
    sb_add(b, "Category[ index=%d, name=%s, topo=%s, color=(%u,%u,%u,%u,%s), isUsed=true, width=%d",
           c->index, c->name, iot_slog2_topo_name(c->topo), c->red, c->green, c->blue, c->alpha,
           c->modifiable ? "true" : "false", c->width);
    if (c->n_keys || c->n_types) {
        sb_add(b, ", info_fmt=");
        java_info_fmt(b, c);
    }
    if (c->n_methods) {
        sb_add(b, ", methods=< ");
        for (int i = 0; i < c->n_methods; i++)
            sb_add(b, "%s ", c->methods[i] == 1 ? "CONNECT_COMPOSITE_STATE" : "Unknown Method");
        sb_add(b, ">");
    }
    sb_add(b, ", vis=true, search=true, ratios=%s,%s, count=%lld ]", flt(a, c->incl_ratio),
           flt(x, c->excl_ratio), (long long)c->count);
}

static void java_infobox(struct sb *b, struct iot_slog2 *r, const struct iot_slog2_prim *p,
                         struct iot_slog2_tbox t)
{
    const struct iot_slog2_category *c = iot_slog2_category(r, p->category);
    char s[40], e[40], info[4096];
    assert_non_null(c);
    sb_add(b, "infobox[ TimeBBox(%s,%s) Category=", dbl(s, t.start), dbl(e, t.end));
    java_category(b, c);
    iot_slog2_format_info(info, sizeof info, c, p->info, p->info_len);
    sb_add(b, ": %s]", info);
}

static void java_prim(struct sb *b, struct iot_slog2 *r, const struct iot_slog2_prim *p,
                      struct iot_slog2_tbox t)
{
    char tm[40];
    sb_add(b, "Primitive[ ");
    java_infobox(b, r, p, t);
    sb_add(b, " ");
    for (uint16_t i = 0; i < p->n_vertices; i++)
        sb_add(b, "(%s, %d) ", flt(tm, (float)p->vertices[i].time), p->vertices[i].line);
    sb_add(b, "] bsize=%u", p->bytes);
}

static char *java_drawable(struct iot_slog2 *r, const struct iot_slog2_drawable *d)
{
    struct sb b = {0};
    if (!d->composite) {
        java_prim(&b, r, &d->head, d->tbox);
        return sb_take(&b);
    }
    sb_add(&b, "Composite[ ");
    java_infobox(&b, r, &d->head, d->tbox);
    sb_add(&b, " ");
    for (uint16_t i = 0; i < d->n_prims; i++) {
        java_prim(&b, r, &d->prims[i], d->prims[i].tbox);
        sb_add(&b, " ");
    }
    sb_add(&b, "]");
    return sb_take(&b);
}

static char *java_shadow(struct iot_slog2 *r, const struct iot_slog2_shadow *s)
{
    struct sb b = {0};
    char a[40], x[40];
    java_prim(&b, r, &s->prim, s->tbox);
    sb_add(&b, " Nrobjs=%lld", (long long)s->n_real);
    for (uint32_t i = 0; i < s->n_weights; i++) {
        const struct iot_slog2_weight *w = &s->weights[i];
        const struct iot_slog2_category *c = iot_slog2_category(r, w->category);
        sb_add(&b, "\n(type=%d:%sratios=%s,%s, count=%lld)", w->category, c ? c->name : "?",
               flt(a, w->incl_ratio), flt(x, w->excl_ratio), (long long)w->count);
    }
    return sb_take(&b);
}

/* ---- what the FACTS lines are computed from ---- */

struct cat_tally {
    char key[160]; /* "name(index)" */
    long printed;
};

struct stats {
    long top[3], composites, composite_prims; /* stored, top level, by topology */
    long printed_prims, printed_topo[3], printed_composites, printed_cprims;
    struct cat_tally cats[64];
    int n_cats;
    double first, last; /* printed drawables' time range */
    struct sb per_node, shadows;
    long total_drawables, total_shadows;
    char **shadow_of; /* per directory entry: "count/Nrobjs" claimed by its parent */
    char **java;      /* every drawable as Java prints it */
    size_t n_java;
};

static void tally_category(struct stats *st, const struct iot_slog2_category *c)
{
    char key[160];
    snprintf(key, sizeof key, "%s(%d)", c->name, c->index);
    for (int i = 0; i < st->n_cats; i++)
        if (strcmp(st->cats[i].key, key) == 0) {
            st->cats[i].printed++;
            return;
        }
    assert_true(st->n_cats < 64);
    snprintf(st->cats[st->n_cats].key, sizeof st->cats[0].key, "%s", key);
    st->cats[st->n_cats++].printed = 1;
}

/* slog2printserial keeps a drawable if its start lies in some leaf's
 * half-open [start, end) box, so one starting at the root's end is left out. */
static void tally_drawable(struct stats *st, struct iot_slog2 *r,
                           const struct iot_slog2_drawable *d, double root_end)
{
    const struct iot_slog2_category *c = iot_slog2_category(r, d->head.category);
    assert_non_null(c);
    if (d->composite) {
        st->composites++;
        st->composite_prims += d->n_prims;
    } else {
        st->top[c->topo]++;
    }
    if (!(d->tbox.start < root_end))
        return;
    if (d->composite) {
        st->printed_composites++;
        st->printed_cprims += d->n_prims;
    } else {
        st->printed_prims++;
        st->printed_topo[c->topo]++;
    }
    tally_category(st, c);
    if (d->tbox.start < st->first)
        st->first = d->tbox.start;
    if (d->tbox.end > st->last)
        st->last = d->tbox.end;
}

static void tally_shadowbufs(struct stats *st, struct iot_slog2 *r, const struct iot_slog2_node *n)
{
    for (uint32_t i = 0; i < n->n_shadowbufs; i++) {
        const struct iot_slog2_shadowbuf *b = &n->shadowbufs[i];
        long child = iot_slog2_find_node(r, b->id);
        unsigned long long real = 0;
        assert_true(child > 0);
        for (uint32_t k = 0; k < b->n_nestless; k++)
            real += (unsigned long long)b->nestless[k].n_real;
        for (uint32_t k = 0; k < b->n_nestable; k++)
            real += (unsigned long long)b->nestable[k].n_real;
        struct sb t = {0};
        sb_add(&t, "%u/%llu", b->n_nestless + b->n_nestable, real);
        st->shadow_of[child] = sb_take(&t);
        st->total_shadows += b->n_nestless + b->n_nestable;
    }
}

static void gather(struct stats *st, struct iot_slog2 *r)
{
    size_t nodes = iot_slog2_n_nodes(r);
    double root_end = iot_slog2_dirent_at(r, 0)->tbox.end;
    *st = (struct stats){.first = INFINITY, .last = -INFINITY};
    st->shadow_of = calloc(nodes, sizeof *st->shadow_of);
    for (size_t i = 0; i < nodes; i++) {
        const struct iot_slog2_node *n = node_at(r, i);
        uint32_t count = n->n_nestless + n->n_nestable;
        sb_add(&st->per_node, "%sID(%d,%d):%u", i ? ", " : "", n->id.depth, (int)n->id.xpos, count);
        st->total_drawables += count;
        if (count) {
            st->java = realloc(st->java, (st->n_java + count) * sizeof *st->java);
            assert_non_null(st->java);
        }
        for (uint32_t k = 0; k < count; k++) {
            const struct iot_slog2_drawable *d =
                k < n->n_nestless ? &n->nestless[k] : &n->nestable[k - n->n_nestless];
            tally_drawable(st, r, d, root_end);
            st->java[st->n_java++] = java_drawable(r, d);
        }
        tally_shadowbufs(st, r, n);
    }
    for (size_t i = 1; i < nodes; i++) {
        const struct iot_slog2_dirent *e = iot_slog2_dirent_at(r, i);
        sb_add(&st->shadows, "%sID(%d,%d):%s", i > 1 ? ", " : "", e->id.depth, (int)e->id.xpos,
               st->shadow_of[i] ? st->shadow_of[i] : "none");
    }
}

static void free_stats(struct stats *st, size_t nodes)
{
    for (size_t i = 0; i < nodes; i++)
        free(st->shadow_of[i]);
    for (size_t i = 0; i < st->n_java; i++)
        free(st->java[i]);
    free(st->shadow_of);
    free(st->java);
    free(st->per_node.s);
    free(st->shadows.s);
}

/* ---- FACTS lines ---- */

static void expect_line(const char *want, struct sb *got)
{
    char *s = sb_take(got);
    assert_string_equal(s, want);
    free(s);
}

static void check_header_line(const struct slog2_facts *f, struct iot_slog2 *r)
{
    static const char *const names[] = {"Categories", "MethodDefs", "LineIDMaps", "TreeRoot",
                                        "TreeDir", "Annotations", "Postamble"};
    const struct iot_slog2_header *h = iot_slog2_header(r);
    struct sb b = {0};
    sb_add(&b, "file size: %lld bytes", (long long)iot_slog2_file_size(r));
    expect_line(f->size, &b);
    sb_add(&b, "header: version=%s, NumOfChildrenPerNode=%d, TreeLeafByteSize=%d, "
               "MaxTreeDepth=%d, MaxBufferByteSize=%d",
           h->version, h->children_per_node, h->leaf_bytesize, h->max_depth,
           h->max_buffer_bytesize);
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++)
        sb_add(&b, ", %s=FBinfo(%d @ %lld)", names[i], h->block[i].size,
               (long long)h->block[i].offset);
    expect_line(f->header, &b);
}

static int count_leaves(struct iot_slog2 *r)
{
    int leaves = 0;
    for (size_t i = 0; i < iot_slog2_n_nodes(r); i++)
        leaves += iot_slog2_dirent_at(r, i)->id.depth == 0;
    return leaves;
}

static void check_tree_line(const struct slog2_facts *f, struct iot_slog2 *r)
{
    const struct iot_slog2_dirent *root = iot_slog2_dirent_at(r, 0);
    struct sb b = {0};
    char s[40], e[40];
    sb_add(&b, "tree: %zu TreeDir entries (nodes); MaxTreeDepth=%d; depths present=[",
           iot_slog2_n_nodes(r), iot_slog2_header(r)->max_depth);
    for (int d = 0; d <= root->id.depth; d++)
        sb_add(&b, "%s%d", d ? ", " : "", d);
    sb_add(&b, "]; leaves (depth 0)=%d; root=ID(%d,%d) TimeBBox(%s,%s)", count_leaves(r),
           root->id.depth, (int)root->id.xpos, dbl(s, root->tbox.start), dbl(e, root->tbox.end));
    expect_line(f->tree, &b);
}

static int count_real(struct iot_slog2 *r)
{
    int n = 0;
    for (size_t i = 0; i < iot_slog2_n_categories(r); i++)
        n += iot_slog2_category_at(r, i)->index >= 0;
    return n;
}

static void check_categories_line(const struct slog2_facts *f, struct iot_slog2 *r)
{
    struct sb b = {0};
    int real = count_real(r), n = (int)iot_slog2_n_categories(r);
    sb_add(&b, "categories: %d in CategoryMap (%d real + %d Preview_* shadow categories: ", n, real,
           n - real);
    const char *sep = "";
    for (int32_t idx = -1; idx >= -3; idx--) {
        const struct iot_slog2_category *c = iot_slog2_category(r, idx);
        if (c) {
            sb_add(&b, "%s%d=%s", sep, idx, c->name);
            sep = ", ";
        }
    }
    sb_add(&b, ")");
    expect_line(f->categories, &b);
}

/* A FACTS table row; the order of rows is the writer's hash order, so each
 * is matched by its index. */
static void check_category_row(const char *row, struct iot_slog2 *r)
{
    const struct iot_slog2_category *c = iot_slog2_category(r, (int32_t)atoi(row + 2));
    char a[40], x[40];
    struct sb b = {0}, fmt = {0};
    assert_non_null(c);
    java_info_fmt(&fmt, c);
    char *info = sb_take(&fmt);
    sb_add(&b, "| %d | %s | %s | (%u,%u,%u,%u,%s) | %d | %s%s%s | %s,%s | %lld |", c->index,
           c->name, iot_slog2_topo_name(c->topo), c->red, c->green, c->blue, c->alpha,
           c->modifiable ? "true" : "false", c->width, info[0] ? "`" : "", info, info[0] ? "`" : "",
           flt(a, c->incl_ratio), flt(x, c->excl_ratio), (long long)c->count);
    free(info);
    expect_line(row, &b);
    /* The ratios once more as numbers, independently of the formatting. */
    const char *ratios = strstr(row, "` | ") ? strstr(row, "` | ") + 4 : strstr(row, "|  | ") + 5;
    float incl = strtof(ratios, NULL), excl = strtof(strchr(ratios, ',') + 1, NULL);
    assert_true(isnan(incl) ? isnan(c->incl_ratio) : incl == c->incl_ratio);
    assert_true(isnan(excl) ? isnan(c->excl_ratio) : excl == c->excl_ratio);
}

static void check_inventory(const struct slog2_facts *f, struct iot_slog2 *r, struct stats *st)
{
    const struct iot_slog2_header *h = iot_slog2_header(r);
    const struct iot_slog2_lineidmap *id = iot_slog2_lineidmap_at(r, iot_slog2_n_lineidmaps(r) - 1);
    const char *input = strstr(f->inventory, " | ") + 3;
    int input_len = (int)(strstr(input, " | ") - input);
    int n = (int)iot_slog2_n_categories(r), real = count_real(r);
    struct sb b = {0};
    sb_add(&b, "| %s | %.*s | %lld | %zu | %d | %d | %d | %d | %ld (%ld/%ld/%ld/%ld) | %ld | "
               "%d + %d | ",
           f->file, input_len, input, (long long)iot_slog2_file_size(r), iot_slog2_n_nodes(r),
           h->max_depth, count_leaves(r), h->children_per_node, h->leaf_bytesize,
           st->total_drawables, st->top[IOT_SLOG2_STATE], st->top[IOT_SLOG2_ARROW],
           st->top[IOT_SLOG2_EVENT], st->composites, st->printed_prims + st->printed_composites,
           real, n - real);
    for (int32_t i = 0; i < id->n_rows; i++)
        sb_add(&b, "%s%d", i ? "," : "", id->rows[2 * i]);
    sb_add(&b, " |");
    expect_line(f->inventory, &b);
}

static int cmp_tally(const void *a, const void *b)
{
    return strcmp(((const struct cat_tally *)a)->key, ((const struct cat_tally *)b)->key);
}

static void check_drawable_lines(const struct slog2_facts *f, struct stats *st)
{
    static const char *const topo[] = {"Event", "State", "Arrow"};
    static const int order[] = {IOT_SLOG2_ARROW, IOT_SLOG2_EVENT, IOT_SLOG2_STATE};
    struct sb b = {0};
    const char *sep = "";
    sb_add(&b, "real drawables printed by slog2printserial: %ld top-level (%ld Primitive: ",
           st->printed_prims + st->printed_composites, st->printed_prims);
    for (int i = 0; i < 3; i++)
        if (st->printed_topo[order[i]]) {
            sb_add(&b, "%s%s=%ld", sep, topo[order[i]], st->printed_topo[order[i]]);
            sep = ", ";
        }
    sb_add(&b, "; %ld Composite containing %ld Primitives in total)", st->printed_composites,
           st->printed_cprims);
    expect_line(f->drawables, &b);
    qsort(st->cats, (size_t)st->n_cats, sizeof st->cats[0], cmp_tally);
    sb_add(&b, "top-level drawables per category: ");
    for (int i = 0; i < st->n_cats; i++)
        sb_add(&b, "%s%s=%ld", i ? ", " : "", st->cats[i].key, st->cats[i].printed);
    expect_line(f->per_category, &b);
    const char *range = strchr(f->time_range, '[') + 1;
    assert_true(strtod(range, NULL) == st->first);
    assert_true(strtod(strchr(range, ',') + 1, NULL) == st->last);
}

static void check_map_lines(const struct slog2_facts *f, struct iot_slog2 *r)
{
    size_t n = iot_slog2_n_lineidmaps(r);
    struct sb b = {0};
    for (size_t i = 0; i < n; i++) {
        const struct iot_slog2_lineidmap *m = iot_slog2_lineidmap_at(r, i);
        sb_add(&b, "LineIDMap %zu: title=`%s`, columns=`LineID ->", i + 1, m->title);
        for (int32_t c = 0; c < m->n_columns; c++)
            sb_add(&b, " %s", m->columns[c]);
        sb_add(&b, "`, %d rows", m->n_rows);
        if (m->n_methods) {
            sb_add(&b, ", methods=< ");
            for (int k = 0; k < m->n_methods; k++)
                sb_add(&b, "%s ",
                       m->methods[k] == 1 ? "CONNECT_COMPOSITE_STATE" : "Unknown Method");
            sb_add(&b, ">");
        }
        assert_non_null(f->lineidmaps[i]);
        expect_line(f->lineidmaps[i], &b);
    }
    assert_true(n == 6 || f->lineidmaps[n] == NULL);
    const struct iot_slog2_lineidmap *id = iot_slog2_lineidmap_at(r, n - 1);
    sb_add(&b, "line IDs (Identity Map): ");
    for (int32_t i = 0; i < id->n_rows; i++)
        sb_add(&b, "%s%d", i ? ", " : "", id->rows[2 * i]);
    expect_line(f->line_ids, &b);
}

static void check_node_lines(const struct slog2_facts *f, struct iot_slog2 *r, struct stats *st)
{
    struct sb b = {0};
    sb_add(&b,
           "slog2printrecur: %zu tree nodes; real drawables stored per node (BufForDrawables) = "
           "%s; total=%ld",
           iot_slog2_n_nodes(r), st->per_node.s, st->total_drawables);
    expect_line(f->per_node, &b);
    if (!f->shadows) {
        assert_int_equal(iot_slog2_n_nodes(r), 1);
        assert_int_equal(st->total_shadows, 0);
        return;
    }
    sb_add(&b, "shadow (Preview_*) drawables per child node, stored in its parent (BufForShadows, "
               "count/Nrobjs) = %s; total shadows=%ld",
           st->shadows.s, st->total_shadows);
    expect_line(f->shadows, &b);
}

/* The verbatim slog2print lines, less their print-order number. */
static void check_verbatim(const struct slog2_facts *f, struct stats *st)
{
    for (int i = 0; i < 8 && f->verbatim[i]; i++) {
        const char *want = strstr(f->verbatim[i], ": ") + 2;
        size_t k = 0;
        while (k < st->n_java && strcmp(st->java[k], want) != 0)
            k++;
        if (k == st->n_java)
            fail_msg("%s: no drawable prints as\n%s", f->file, want);
    }
}

static void report_violation(void *ctx, const char *msg)
{
    print_error("%s: %s\n", (const char *)ctx, msg);
}

static void test_facts(void **state)
{
    const struct slog2_facts *f = *state;
    struct iot_slog2 *r = open_ref(f->file);
    struct stats st;
    check_header_line(f, r);
    check_tree_line(f, r);
    check_categories_line(f, r);
    int rows = 0;
    for (; rows < 16 && f->cat_rows[rows]; rows++)
        check_category_row(f->cat_rows[rows], r);
    assert_int_equal(rows, iot_slog2_n_categories(r));
    gather(&st, r);
    check_inventory(f, r, &st);
    check_drawable_lines(f, &st);
    check_map_lines(f, r);
    check_node_lines(f, r, &st);
    check_verbatim(f, &st);
    assert_int_equal(iot_slog2_check(r, report_violation, (void *)f->file), 0);
    free_stats(&st, iot_slog2_n_nodes(r));
    iot_slog2_close(r);
}

/* ---- every drawable and shadow against slog2printrecur ---- */

struct lines {
    char **v;
    size_t n;
};

static void lines_add(struct lines *l, char *s)
{
    l->v = realloc(l->v, (l->n + 1) * sizeof *l->v);
    l->v[l->n++] = s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "N: ..." items of the BufForDrawables and BufForShadows sections; a
 * shadow's weights follow on lines of their own. */
static void parse_printrecur(char *text, struct lines *drawables, struct lines *shadows)
{
    struct lines *into = NULL;
    struct sb item = {0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "(type=", 6) == 0 && into == shadows) {
            sb_add(&item, "\n%s", line);
            continue;
        }
        if (item.s)
            lines_add(into, sb_take(&item));
        if (strstr(line, "BufForDrawables{"))
            into = drawables;
        else if (strstr(line, "BufForShadows{"))
            into = shadows;
        else if (strstr(line, "*** End of TreeNode"))
            into = NULL;
        else if (into && line[0] >= '1' && line[0] <= '9' && strstr(line, ": "))
            sb_add(&item, "%s", strstr(line, ": ") + 2);
    }
    if (item.s)
        lines_add(into, sb_take(&item));
}

static void compare_lines(const char *file, const char *what, struct lines *want, struct lines *got)
{
    if (want->n)
        qsort(want->v, want->n, sizeof *want->v, cmp_str);
    if (got->n)
        qsort(got->v, got->n, sizeof *got->v, cmp_str);
    for (size_t i = 0; i < want->n && i < got->n; i++)
        if (strcmp(want->v[i], got->v[i]) != 0)
            fail_msg("%s: %s differ:\njava: %s\nours: %s", file, what, want->v[i], got->v[i]);
    if (want->n != got->n)
        fail_msg("%s: %zu %s in the Java dump, %zu read", file, want->n, what, got->n);
    for (size_t i = 0; i < want->n; i++)
        free(want->v[i]);
    for (size_t i = 0; i < got->n; i++)
        free(got->v[i]);
    free(want->v);
    free(got->v);
}

static void test_printrecur(void **state)
{
    const struct slog2_facts *f = *state;
    char name[256];
    snprintf(name, sizeof name, "%.*sprintrecur.txt", (int)strlen(f->file), f->file);
    char *text = read_text(ref_path(name), NULL);
    struct lines jd = {0}, js = {0}, od = {0}, os = {0};
    parse_printrecur(text, &jd, &js);
    free(text);
    struct iot_slog2 *r = open_ref(f->file);
    for (size_t i = 0; i < iot_slog2_n_nodes(r); i++) {
        const struct iot_slog2_node *n = node_at(r, i);
        for (uint32_t k = 0; k < n->n_nestless; k++)
            lines_add(&od, java_drawable(r, &n->nestless[k]));
        for (uint32_t k = 0; k < n->n_nestable; k++)
            lines_add(&od, java_drawable(r, &n->nestable[k]));
        for (uint32_t b = 0; b < n->n_shadowbufs; b++) {
            const struct iot_slog2_shadowbuf *sb = &n->shadowbufs[b];
            for (uint32_t k = 0; k < sb->n_nestless; k++)
                lines_add(&os, java_shadow(r, &sb->nestless[k]));
            for (uint32_t k = 0; k < sb->n_nestable; k++)
                lines_add(&os, java_shadow(r, &sb->nestable[k]));
        }
    }
    iot_slog2_close(r);
    assert_true(jd.n > 0);
    compare_lines(f->file, "drawables", &jd, &od);
    compare_lines(f->file, "shadows", &js, &os);
}

/* ---- number formatting ---- */

static void test_java_numbers(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *s;
    } d[] = {{5.0e-4, "5.0E-4"}, {0.0025, "0.0025"}, {0.002090999999381893, "0.002090999999381893"},
             {1.0e7, "1.0E7"}, {9999999.0, "9999999.0"}, {100.0, "100.0"}, {-2.5, "-2.5"},
             {0.001, "0.001"}, {59.95, "59.95"}, {0.0, "0.0"}, {1.0, "1.0"}, {123456.7, "123456.7"},
             {1.5e-10, "1.5E-10"}, {-0.0, "-0.0"}, {0.1 + 0.2, "0.30000000000000004"}};
    static const struct {
        float v;
        const char *s;
    } f[] = {{9.88872E-4f, "9.88872E-4"}, {0.2039801f, "0.2039801"}, {0.48000002f, "0.48000002"},
             {1.0f, "1.0"}, {0.001f, "0.001"}, {3.8058023f, "3.8058023"}};
    char buf[40];
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        iot_slog2_format_double(buf, sizeof buf, d[i].v);
        assert_string_equal(buf, d[i].s);
    }
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        iot_slog2_format_float(buf, sizeof buf, f[i].v);
        assert_string_equal(buf, f[i].s);
    }
    iot_slog2_format_double(buf, sizeof buf, NAN);
    assert_string_equal(buf, "NaN");
    iot_slog2_format_double(buf, sizeof buf, -INFINITY);
    assert_string_equal(buf, "-Infinity");
}

/* ---- damaged files ---- */

struct blob {
    uint8_t *p;
    size_t n;
};

static struct blob load_ref(const char *name)
{
    struct blob b;
    struct stat st;
    FILE *f = fopen(ref_path(name), "rb");
    assert_non_null(f);
    assert_int_equal(fstat(fileno(f), &st), 0);
    b.n = (size_t)st.st_size;
    b.p = malloc(b.n);
    assert_non_null(b.p);
    assert_int_equal(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

static const char *damaged_path(void)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "%s/damaged.slog2", tmp_dir);
    return buf;
}

static void write_file(const uint8_t *p, size_t n)
{
    FILE *f = fopen(damaged_path(), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void ignore(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
}

static void assert_error_names_file(const char *err)
{
    if (strncmp(err, damaged_path(), strlen(damaged_path())) != 0 || !strstr(err, ": "))
        fail_msg("unclear error: '%s'", err);
}

/* Reads everything: 0 if the file reads (with or without violations), -1
 * on an error, which must then name the file. */
static int exercise(void)
{
    char err[512];
    int rc = 0;
    struct iot_slog2 *r = iot_slog2_open(damaged_path(), err, sizeof err);
    if (!r) {
        assert_error_names_file(err);
        return -1;
    }
    for (size_t i = 0; i < iot_slog2_n_nodes(r) && rc == 0; i++) {
        const struct iot_slog2_node *n;
        if (iot_slog2_read_node(r, i, &n) < 0) {
            assert_error_names_file(iot_slog2_error(r));
            rc = -1;
        }
    }
    if (rc == 0 && iot_slog2_check(r, ignore, NULL) < 0)
        rc = -1;
    iot_slog2_close(r);
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    int drc = iot_slog2_dump(null, damaged_path(), err, sizeof err);
    fclose(null);
    assert_true((drc < 0) == (rc < 0));
    return rc;
}

static void test_truncated_every_offset(void **state)
{
    (void)state;
    struct blob b = load_ref("arrow.slog2");
    char err[512];
    for (size_t len = 0; len < b.n; len++) {
        write_file(b.p, len);
        assert_int_equal(exercise(), -1);
    }
    /* The directory is last, so a cut anywhere shows when the file opens. */
    write_file(b.p, 1030);
    assert_null(iot_slog2_open(damaged_path(), err, sizeof err));
    assert_non_null(strstr(err, "TreeDir block: 38 bytes at offset 1018 run past the end of the "
                                "file (1030 bytes)"));
    write_file(b.p, 50);
    assert_null(iot_slog2_open(damaged_path(), err, sizeof err));
    assert_non_null(strstr(err, "too short for an SLOG-2 file: 50 bytes"));
    free(b.p);
}

static void test_truncated_all_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_FACTS; i++) {
        struct blob b = load_ref(facts[i].file);
        size_t step = b.n / 97 + 1;
        for (size_t len = 0; len < b.n; len += step) {
            write_file(b.p, len);
            assert_int_equal(exercise(), -1);
        }
        write_file(b.p, b.n);
        assert_int_equal(exercise(), 0);
        free(b.p);
    }
}

/* Every byte of a small file replaced by values that make lengths and
 * counts negative, huge or off by one. */
static void test_every_byte_arrow(void **state)
{
    (void)state;
    static const uint8_t values[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    struct blob b = load_ref("arrow.slog2");
    long outcomes[2] = {0, 0};
    for (size_t pos = 0; pos < b.n; pos++) {
        uint8_t keep = b.p[pos];
        for (size_t v = 0; v < sizeof values; v++) {
            b.p[pos] = values[v] ^ (v == 1 ? keep : 0);
            write_file(b.p, b.n);
            outcomes[exercise() == 0]++;
        }
        b.p[pos] = keep;
    }
    print_message("arrow.slog2 byte sweep: %ld errors, %ld files read\n", outcomes[0], outcomes[1]);
    assert_true(outcomes[0] > 0 && outcomes[1] > 0);
    free(b.p);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random damage with a fixed seed: a few bytes flipped, or a whole 16-,
 * 32- or 64-bit field overwritten. */
static void damage(uint8_t *p, size_t n)
{
    int k = 1 + (int)(rng() % 8);
    for (int i = 0; i < k; i++) {
        size_t pos = rng() % n;
        int kind = (int)(rng() % 4);
        size_t width = kind == 0 ? 1 : (size_t)1 << kind;
        uint64_t v = rng();
        for (size_t j = 0; j < width && pos + j < n; j++)
            p[pos + j] = kind == 0 ? (uint8_t)(p[pos + j] ^ (1u << (v % 8)))
                                   : (uint8_t)(v >> (8 * j));
    }
}

static void test_random_damage(void **state)
{
    (void)state;
    long outcomes[2] = {0, 0};
    for (size_t i = 0; i < N_FACTS; i++) {
        struct blob b = load_ref(facts[i].file);
        uint8_t *copy = malloc(b.n);
        for (int round = 0; round < 150; round++) {
            memcpy(copy, b.p, b.n);
            damage(copy, b.n);
            write_file(copy, b.n);
            outcomes[exercise() == 0]++;
        }
        free(copy);
        free(b.p);
    }
    print_message("random damage: %ld errors, %ld files read\n", outcomes[0], outcomes[1]);
}

static char *open_error(const uint8_t *p, size_t n)
{
    static char err[512];
    write_file(p, n);
    struct iot_slog2 *r = iot_slog2_open(damaged_path(), err, sizeof err);
    if (r)
        fail_msg("damaged file opened");
    assert_error_names_file(err);
    return err;
}

static void test_magic_and_version(void **state)
{
    (void)state;
    struct blob b = load_ref("arrow.slog2");
    char err[512];
    b.p[5] = 'X'; /* "SLOX 2.0.6" */
    assert_non_null(strstr(open_error(b.p, b.n), "not an SLOG-2 file"));
    b.p[5] = 'G';
    b.p[11] = '5'; /* "SLOG 2.0.5" */
    assert_non_null(strstr(open_error(b.p, b.n), "unsupported version \"SLOG 2.0.5\""));
    b.p[11] = '6';
    b.p[1] = 11; /* version string one byte longer */
    assert_non_null(strstr(open_error(b.p, b.n), "unsupported version"));
    b.p[1] = 10;
    assert_non_null(strstr(open_error((const uint8_t *)"", 0), "too short"));
    memset(b.p, 0, 108);
    assert_non_null(strstr(open_error(b.p, b.n), "not an SLOG-2 file"));
    assert_null(iot_slog2_open("/nonexistent/x.slog2", err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
    assert_null(iot_slog2_open(tmp_dir, err, sizeof err));
    assert_non_null(strstr(err, "not a regular file"));
    free(b.p);
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Errors inside a node name the node, the item and the offset. */
static void test_node_error_messages(void **state)
{
    (void)state;
    struct blob b = load_ref("arrow.slog2");
    struct iot_slog2 *r = open_ref("arrow.slog2");
    const struct iot_slog2_node *n = node_at(r, 0);
    size_t count_at = (size_t)n->block.offset + 34;
    const struct iot_slog2_prim *p = &n->nestless[3].head;
    size_t vcount_at = (size_t)p->offset + 6 + p->info_len;
    iot_slog2_close(r);
    char err[512];
    const struct iot_slog2_node *dummy;

    put_be(b.p + count_at, 0x7fffffff, 4);
    write_file(b.p, b.n);
    r = iot_slog2_open(damaged_path(), err, sizeof err);
    assert_non_null(r);
    assert_int_equal(iot_slog2_read_node(r, 0, &dummy), -1);
    print_message("%s\n", iot_slog2_error(r));
    assert_non_null(strstr(iot_slog2_error(r), "tree node ID(0,0): nestless drawable count "
                                               "2147483647 needs at least 19327352823 bytes "
                                               "from offset 146"));
    iot_slog2_close(r);
    put_be(b.p + count_at, 11, 4);

    put_be(b.p + vcount_at, 0x7fff, 2);
    write_file(b.p, b.n);
    r = iot_slog2_open(damaged_path(), err, sizeof err);
    assert_non_null(r);
    assert_int_equal(iot_slog2_read_node(r, 0, &dummy), -1);
    print_message("%s\n", iot_slog2_error(r));
    char want[160];
    snprintf(want, sizeof want, "nestless drawable 3: vertex count 32767 needs at least 393204 "
                                "bytes from offset %zu", vcount_at + 2);
    assert_non_null(strstr(iot_slog2_error(r), want));
    iot_slog2_close(r);
    free(b.p);
}

/* ---- the checker ---- */

struct found {
    const char *want;
    int hits;
};

static void collect(void *ctx, const char *msg)
{
    struct found *f = ctx;
    print_message("  violation: %s\n", msg);
    if (strstr(msg, f->want))
        f->hits++;
}

static void expect_violation(const struct blob *b, const char *want)
{
    char err[512];
    struct found f = {want, 0};
    write_file(b->p, b->n);
    struct iot_slog2 *r = iot_slog2_open(damaged_path(), err, sizeof err);
    if (!r)
        fail_msg("%s", err);
    assert_true(iot_slog2_check(r, collect, &f) > 0);
    if (!f.hits)
        fail_msg("no violation mentions '%s'", want);
    iot_slog2_close(r);
}

static void test_checker_finds_violations(void **state)
{
    (void)state;
    struct blob b = load_ref("three_tl_ls400.slog2");
    struct iot_slog2 *r = open_ref("three_tl_ls400.slog2");
    const struct iot_slog2_node *root = node_at(r, 0);
    const struct iot_slog2_shadow *s = &root->shadowbufs[0].nestable[0];
    size_t nreal_at = (size_t)s->prim.offset + 8 + s->prim.info_len + 12u * s->prim.n_vertices + 16;
    const struct iot_slog2_prim *p = &root->nestable[2].head;
    size_t time_at = (size_t)p->offset + 8 + p->info_len;
    size_t dir_at = (size_t)iot_slog2_header(r)->block[IOT_SLOG2_TREEDIR].offset;
    iot_slog2_close(r);
    uint8_t keep[8];

    memcpy(keep, b.p + nreal_at, 8);
    put_be(b.p + nreal_at, 5, 8);
    expect_violation(&b, "Nrobjs is 5");
    expect_violation(&b, "shadows of ID(0,0) count 12 real drawables, its subtree has 8");
    memcpy(b.p + nreal_at, keep, 8);

    memcpy(keep, b.p + time_at, 8);
    put_be(b.p + time_at, 0x4059000000000000ull, 8); /* 100.0 */
    expect_violation(&b, "outside the node's time box");
    memcpy(b.p + time_at, keep, 8);

    /* The last directory entry, ID(0,1): its end time beyond its parent's. */
    size_t end_at = dir_at + 4 + 2 * 34 + 6 + 8;
    memcpy(keep, b.p + end_at, 8);
    put_be(b.p + end_at, 0x4000000000000000ull, 8); /* 2.0 */
    expect_violation(&b, "tree node ID(0,1): time box lies outside its parent ID(1,0)'s");
    expect_violation(&b, "shadow buffer of ID(0,1): time box or FBinfo differ");
    expect_violation(&b, "the last leaf ID(0,1) does not end with the root");
    memcpy(b.p + end_at, keep, 8);
    memcpy(keep, b.p + end_at - 8, 8);
    put_be(b.p + end_at - 8, 0x3fe8000000000000ull, 8); /* start 0.75, not 0.82 */
    expect_violation(&b, "leaf ID(0,1) does not start where the previous leaf ends");
    memcpy(b.p + end_at - 8, keep, 8);

    /* Category "Idle": its count is the last field, 24 bytes after the name. */
    const uint8_t *name = memmem(b.p, b.n, "\x00\x04Idle", 6);
    assert_non_null(name);
    put_be(b.p + (name - b.p) + 6 + 24, 7, 8);
    expect_violation(&b, "category 14 \"Idle\": count 7, the tree holds 1");
    free(b.p);
}

static int make_tmp_dir(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%.40s/test_slog2.XXXXXX", base);
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state)
{
    (void)state;
    unlink(damaged_path());
    return rmdir(tmp_dir);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s REFERENCE_DIR\n", argv[0]);
        return 2;
    }
    ref_dir = argv[1];
    struct CMUnitTest facts_tests[2 * N_FACTS];
    static char names[N_FACTS][2][80];
    for (size_t i = 0; i < N_FACTS; i++) {
        snprintf(names[i][0], sizeof names[i][0], "facts %s", facts[i].file);
        snprintf(names[i][1], sizeof names[i][1], "printrecur %s", facts[i].file);
        facts_tests[2 * i] = (struct CMUnitTest){names[i][0], test_facts, NULL, NULL,
                                                 (void *)&facts[i]};
        facts_tests[2 * i + 1] = (struct CMUnitTest){names[i][1], test_printrecur, NULL, NULL,
                                                     (void *)&facts[i]};
    }
    const struct CMUnitTest damage_tests[] = {
        cmocka_unit_test(test_java_numbers),
        cmocka_unit_test(test_truncated_every_offset),
        cmocka_unit_test(test_truncated_all_files),
        cmocka_unit_test(test_every_byte_arrow),
        cmocka_unit_test(test_random_damage),
        cmocka_unit_test(test_magic_and_version),
        cmocka_unit_test(test_node_error_messages),
        cmocka_unit_test(test_checker_finds_violations),
    };
    int failed = _cmocka_run_group_tests("slog2_reference_files", facts_tests, 2 * N_FACTS, NULL,
                                         NULL);
    failed += cmocka_run_group_tests_name("slog2_damage", damage_tests, make_tmp_dir,
                                          remove_tmp_dir);
    return failed ? 1 : 0;
}
