/* SLOG-2 as text: numbers and info values printed the way Java's slog2sdk
 * and Jumpshot print them, so that a dump can be compared with slog2print,
 * and iotrace-export --dump-slog2, one line per item. */
#include "slog2_read.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *iot_slog2_topo_name(int32_t topo)
{
    switch (topo) {
    case IOT_SLOG2_EVENT: return "Event";
    case IOT_SLOG2_STATE: return "State";
    case IOT_SLOG2_ARROW: return "Arrow";
    default: return "Unknown";
    }
}

/* The fewest significant digits that read back to the same value (as
 * Java's toString chooses them), as a digit string and a decimal exponent. */
static int shortest_digits(double v, int single, char *digits, int *exp10)
{
    char sci[48];
    int max = single ? 9 : 17;
    for (int prec = 1; prec <= max; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
        if (single ? strtof(sci, NULL) == (float)v : strtod(sci, NULL) == v)
            break;
    }
    int nd = 0;
    const char *s = sci + (sci[0] == '-');
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    *exp10 = atoi(s + 1);
    return nd;
}

/* Java prints plain decimals for 1e-3 <= |v| < 1e7, otherwise d.dddE<n>,
 * and always at least one digit after the point. */
static void java_number(char *buf, size_t len, double v, int single)
{
    char d[24];
    int e;
    if (isnan(v) || isinf(v) || v == 0) {
        snprintf(buf, len, "%s", isnan(v) ? "NaN" : isinf(v) ? (v > 0 ? "Infinity" : "-Infinity")
                                                : signbit(v) ? "-0.0" : "0.0");
        return;
    }
    int nd = shortest_digits(v, single, d, &e);
    const char *sign = v < 0 ? "-" : "";
    if (e < -3 || e >= 7)
        snprintf(buf, len, "%s%c.%sE%d", sign, d[0], nd > 1 ? d + 1 : "0", e);
    else if (e < 0)
        snprintf(buf, len, "%s0.%.*s%s", sign, -e - 1, "000", d);
    else if (nd <= e + 1)
        snprintf(buf, len, "%s%s%.*s.0", sign, d, e + 1 - nd, "0000000");
    else
        snprintf(buf, len, "%s%.*s.%s", sign, e + 1, d, d + e + 1);
}

void iot_slog2_format_double(char *buf, size_t len, double v) { java_number(buf, len, v, 0); }
void iot_slog2_format_float(char *buf, size_t len, float v) { java_number(buf, len, v, 1); }

struct text {
    char *buf;
    size_t len, pos;
};

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    if (t->pos >= t->len)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->pos, t->len - t->pos, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->pos = t->pos + (size_t)n < t->len ? t->pos + (size_t)n : t->len - 1;
}

static void put_value(struct text *t, const struct iot_slog2_value *v)
{
    char num[40];
    switch (v->type) {
    case 'x': put(t, "%" PRIx32, (uint32_t)v->u.i); break;
    case 'X': put(t, "%" PRIx64, (uint64_t)v->u.i); break;
    case 'e': iot_slog2_format_float(num, sizeof num, (float)v->u.f); put(t, "%s", num); break;
    case 'E': iot_slog2_format_double(num, sizeof num, v->u.f); put(t, "%s", num); break;
    case 's': put(t, "%.*s", (int)v->u.s.len, v->u.s.p); break;
    default: put(t, "%" PRId64, v->u.i); break;
    }
}

int iot_slog2_format_info(char *buf, size_t len, const struct iot_slog2_category *c,
                          const uint8_t *info, size_t info_len)
{
    struct iot_slog2_value vals[64];
    struct text t = {buf, len, 0};
    char why[160] = "";
    size_t used;
    int max = c->n_types < 64 ? c->n_types : 64;
    int nv = iot_slog2_decode_info(c, info, info_len, vals, max, &used, why, sizeof why);
    int missing = info_len == 0 && c->n_types > 0;
    if (len)
        buf[0] = '\0';
    int n = c->n_keys > c->n_types ? c->n_keys : c->n_types;
    for (int i = 0; i < n; i++) {
        if (i < c->n_keys)
            put(&t, "%s", c->keys[i]);
        if (i < c->n_types && missing)
            put(&t, "null");
        else if (i < c->n_types && i < max && (nv < 0 ? 0 : i < nv))
            put_value(&t, &vals[i]);
    }
    if (missing)
        put(&t, " <no info bytes>");
    else if (nv < 0)
        put(&t, " <undecodable: %s>", why);
    else if (used < info_len)
        put(&t, " <%zu extra bytes>", info_len - used);
    return missing || nv < 0 || used < info_len ? -1 : 0;
}

/* ---- dump ---- */

static void put_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(out, "\\x%02x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

static void put_tbox(FILE *out, struct iot_slog2_tbox b)
{
    char s[40], e[40];
    iot_slog2_format_double(s, sizeof s, b.start);
    iot_slog2_format_double(e, sizeof e, b.end);
    fprintf(out, "TimeBBox(%s,%s)", s, e);
}

static void put_block(FILE *out, struct iot_slog2_blockptr b)
{
    fprintf(out, "FBinfo(%d @ %lld)", b.size, (long long)b.offset);
}

static void put_ratios(FILE *out, float incl, float excl)
{
    char a[40], b[40];
    iot_slog2_format_float(a, sizeof a, incl);
    iot_slog2_format_float(b, sizeof b, excl);
    fprintf(out, "ratios=%s,%s", a, b);
}

static void put_ints(FILE *out, const int32_t *v, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s%d", i ? "," : "", v[i]);
    fputc(']', out);
}

static void dump_header(FILE *out, const struct iot_slog2 *r)
{
    static const char *const names[IOT_SLOG2_N_BLOCKS] = {
        "Categories", "MethodDefs",  "LineIDMaps", "TreeRoot",
        "TreeDir",    "Annotations", "Postamble"};
    const struct iot_slog2_header *h = iot_slog2_header(r);
    fprintf(out, "header version=");
    put_quoted(out, h->version);
    fprintf(out, " size=%lld NumOfChildrenPerNode=%d TreeLeafByteSize=%d MaxTreeDepth=%d "
                 "MaxBufferByteSize=%d\n",
            (long long)iot_slog2_file_size(r), h->children_per_node, h->leaf_bytesize,
            h->max_depth, h->max_buffer_bytesize);
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++) {
        fprintf(out, "block %s ", names[i]);
        put_block(out, h->block[i]);
        fputc('\n', out);
    }
}

/* The label as Java's Category.toString shows it. */
static void put_info_fmt(FILE *out, const struct iot_slog2_category *c)
{
    char buf[2048];
    struct text t = {buf, sizeof buf, 0};
    buf[0] = '\0';
    int n = c->n_keys > c->n_types ? c->n_keys : c->n_types;
    if (n)
        put(&t, "< ");
    for (int i = 0; i < n; i++) {
        if (i < c->n_keys)
            put(&t, "%s", c->keys[i]);
        if (i < c->n_types)
            put(&t, "%%%c", c->types[i]);
    }
    if (n)
        put(&t, " >");
    put_quoted(out, buf);
}

static void dump_categories(FILE *out, const struct iot_slog2 *r)
{
    for (size_t i = 0; i < iot_slog2_n_categories(r); i++) {
        const struct iot_slog2_category *c = iot_slog2_category_at(r, i);
        fprintf(out, "category index=%d name=", c->index);
        put_quoted(out, c->name);
        fprintf(out, " topo=%s color=(%u,%u,%u,%u,%s) width=%d info_fmt=",
                iot_slog2_topo_name(c->topo), c->red, c->green, c->blue, c->alpha,
                c->modifiable ? "true" : "false", c->width);
        put_info_fmt(out, c);
        fprintf(out, " methods=");
        put_ints(out, c->methods, c->n_methods);
        fputc(' ', out);
        put_ratios(out, c->incl_ratio, c->excl_ratio);
        fprintf(out, " count=%" PRId64 "\n", c->count);
    }
}

static void dump_lineidmaps(FILE *out, const struct iot_slog2 *r)
{
    for (size_t i = 0; i < iot_slog2_n_lineidmaps(r); i++) {
        const struct iot_slog2_lineidmap *m = iot_slog2_lineidmap_at(r, i);
        fprintf(out, "lineidmap %zu title=", i + 1);
        put_quoted(out, m->title);
        fprintf(out, " columns=[");
        for (int32_t c = 0; c < m->n_columns; c++) {
            fputs(c ? "," : "", out);
            put_quoted(out, m->columns[c]);
        }
        fprintf(out, "] rows=%d methods=", m->n_rows);
        put_ints(out, m->methods, m->n_methods);
        fputc('\n', out);
        for (int32_t row = 0; row < m->n_rows; row++) {
            const int32_t *v = &m->rows[(size_t)row * ((size_t)m->n_columns + 1)];
            fprintf(out, "lineid map=%zu line=%d values=", i + 1, v[0]);
            put_ints(out, v + 1, m->n_columns);
            fputc('\n', out);
        }
    }
}

static void dump_treedir(FILE *out, const struct iot_slog2 *r)
{
    for (size_t i = 0; i < iot_slog2_n_nodes(r); i++) {
        const struct iot_slog2_dirent *e = iot_slog2_dirent_at(r, i);
        fprintf(out, "treedir ID(%d,%d) ", e->id.depth, (int)e->id.xpos);
        put_tbox(out, e->tbox);
        fputc(' ', out);
        put_block(out, e->block);
        fputc('\n', out);
    }
}

static void put_vertices(FILE *out, const struct iot_slog2_prim *p)
{
    char t[40];
    fputc('[', out);
    for (uint16_t i = 0; i < p->n_vertices; i++) {
        iot_slog2_format_double(t, sizeof t, p->vertices[i].time);
        fprintf(out, "%s(%s, %d)", i ? " " : "", t, p->vertices[i].line);
    }
    fputc(']', out);
}

static void put_info(FILE *out, const struct iot_slog2 *r, const struct iot_slog2_prim *p)
{
    const struct iot_slog2_category *c = iot_slog2_category(r, p->category);
    char buf[4096];
    if (!c) {
        fprintf(out, "info=<%u bytes, unknown category>", p->info_len);
        return;
    }
    iot_slog2_format_info(buf, sizeof buf, c, p->info, p->info_len);
    fprintf(out, "info=");
    put_quoted(out, buf);
}

/* "kind" says where the primitive sits: top level, or inside a composite. */
static void dump_prim(FILE *out, const struct iot_slog2 *r, const char *prefix,
                      const struct iot_slog2_prim *p)
{
    const struct iot_slog2_category *c = iot_slog2_category(r, p->category);
    fprintf(out, "%s cat=%d topo=%s ", prefix, p->category,
            c ? iot_slog2_topo_name(c->topo) : "Unknown");
    put_tbox(out, p->tbox);
    fputc(' ', out);
    put_vertices(out, p);
    fprintf(out, " bsize=%u ", p->bytes);
    put_info(out, r, p);
    fputc('\n', out);
}

static void dump_drawables(FILE *out, const struct iot_slog2 *r, const struct iot_slog2_node *n,
                           int nestable)
{
    uint32_t count = nestable ? n->n_nestable : n->n_nestless;
    const struct iot_slog2_drawable *d = nestable ? n->nestable : n->nestless;
    const char *list = nestable ? "nestable" : "nestless";
    char prefix[96];
    for (uint32_t i = 0; i < count; i++) {
        snprintf(prefix, sizeof prefix, "drawable ID(%d,%d) %s %u Primitive", n->id.depth,
                 (int)n->id.xpos, list, i);
        if (!d[i].composite) {
            dump_prim(out, r, prefix, &d[i].head);
            continue;
        }
        fprintf(out, "drawable ID(%d,%d) %s %u Composite cat=%d ", n->id.depth, (int)n->id.xpos,
                list, i, d[i].head.category);
        put_tbox(out, d[i].tbox);
        fprintf(out, " prims=%u bsize=%u ", d[i].n_prims, d[i].head.bytes);
        put_info(out, r, &d[i].head);
        fputc('\n', out);
        for (uint16_t k = 0; k < d[i].n_prims; k++) {
            snprintf(prefix, sizeof prefix, "drawable ID(%d,%d) %s %u.%u Primitive", n->id.depth,
                     (int)n->id.xpos, list, i, k);
            dump_prim(out, r, prefix, &d[i].prims[k]);
        }
    }
}

static void put_weights(FILE *out, const struct iot_slog2_shadow *s)
{
    fputc('[', out);
    for (uint32_t i = 0; i < s->n_weights; i++) {
        fprintf(out, "%s(type=%d ", i ? " " : "", s->weights[i].category);
        put_ratios(out, s->weights[i].incl_ratio, s->weights[i].excl_ratio);
        fprintf(out, ", count=%" PRId64 ")", s->weights[i].count);
    }
    fputc(']', out);
}

static void dump_shadows(FILE *out, const struct iot_slog2_node *n,
                         const struct iot_slog2_shadowbuf *b, int nestable)
{
    uint32_t count = nestable ? b->n_nestable : b->n_nestless;
    const struct iot_slog2_shadow *s = nestable ? b->nestable : b->nestless;
    for (uint32_t i = 0; i < count; i++) {
        fprintf(out, "shadow ID(%d,%d) child=ID(%d,%d) %s %u cat=%d ", n->id.depth,
                (int)n->id.xpos, b->id.depth, (int)b->id.xpos, nestable ? "nestable" : "nestless",
                i, s[i].prim.category);
        put_tbox(out, s[i].tbox);
        fputc(' ', out);
        put_vertices(out, &s[i].prim);
        fprintf(out, " bsize=%u Nrobjs=%" PRId64 " weights=", s[i].prim.bytes, s[i].n_real);
        put_weights(out, &s[i]);
        fputc('\n', out);
    }
}

/* Unsigned: counts from a damaged file may be anything. */
static uint64_t buf_real(const struct iot_slog2_shadowbuf *b)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < b->n_nestless; i++)
        t += (uint64_t)b->nestless[i].n_real;
    for (uint32_t i = 0; i < b->n_nestable; i++)
        t += (uint64_t)b->nestable[i].n_real;
    return t;
}

static void dump_node(FILE *out, const struct iot_slog2 *r, const struct iot_slog2_node *n)
{
    fprintf(out, "node ID(%d,%d) ", n->id.depth, (int)n->id.xpos);
    put_tbox(out, n->tbox);
    fputc(' ', out);
    put_block(out, n->block);
    fprintf(out, " nestless=%u nestable=%u shadowbufs=%u\n", n->n_nestless, n->n_nestable,
            n->n_shadowbufs);
    dump_drawables(out, r, n, 0);
    dump_drawables(out, r, n, 1);
    for (uint32_t i = 0; i < n->n_shadowbufs; i++) {
        const struct iot_slog2_shadowbuf *b = &n->shadowbufs[i];
        fprintf(out, "shadowbuf ID(%d,%d) child=ID(%d,%d) ", n->id.depth, (int)n->id.xpos,
                b->id.depth, (int)b->id.xpos);
        put_tbox(out, b->tbox);
        fputc(' ', out);
        put_block(out, b->block);
        fprintf(out, " nestless=%u nestable=%u Nrobjs=%" PRIu64 "\n", b->n_nestless,
                b->n_nestable, buf_real(b));
        dump_shadows(out, n, b, 0);
        dump_shadows(out, n, b, 1);
    }
}

struct totals {
    uint64_t drawables, composites, prims, shadows;
};

static void count_node(struct totals *t, const struct iot_slog2_node *n)
{
    t->drawables += (uint64_t)n->n_nestless + n->n_nestable;
    for (uint32_t i = 0; i < n->n_nestless + n->n_nestable; i++) {
        const struct iot_slog2_drawable *d =
            i < n->n_nestless ? &n->nestless[i] : &n->nestable[i - n->n_nestless];
        t->composites += (uint64_t)d->composite;
        t->prims += d->composite ? d->n_prims : 1u;
    }
    for (uint32_t i = 0; i < n->n_shadowbufs; i++)
        t->shadows += (uint64_t)n->shadowbufs[i].n_nestless + n->shadowbufs[i].n_nestable;
}

static void print_violation(void *ctx, const char *msg) { fprintf(ctx, "violation %s\n", msg); }

int iot_slog2_dump(FILE *out, const char *path, char *err, size_t errlen)
{
    struct iot_slog2 *r = iot_slog2_open(path, err, errlen);
    struct totals t = {0};
    if (!r)
        return -1;
    dump_header(out, r);
    dump_categories(out, r);
    dump_lineidmaps(out, r);
    dump_treedir(out, r);
    for (size_t i = 0; i < iot_slog2_n_nodes(r); i++) {
        const struct iot_slog2_node *n;
        if (iot_slog2_read_node(r, i, &n) < 0) {
            snprintf(err, errlen, "%s", iot_slog2_error(r));
            iot_slog2_close(r);
            return -1;
        }
        dump_node(out, r, n);
        count_node(&t, n);
    }
    long v = iot_slog2_check(r, print_violation, out);
    if (v < 0)
        snprintf(err, errlen, "%s", iot_slog2_error(r));
    else
        fprintf(out, "summary nodes=%zu drawables=%" PRIu64 " composites=%" PRIu64
                     " primitives=%" PRIu64 " shadows=%" PRIu64 " violations=%ld\n",
                iot_slog2_n_nodes(r), t.drawables, t.composites, t.prims, t.shadows, v);
    iot_slog2_close(r);
    return v < 0 ? -1 : v > 0;
}
