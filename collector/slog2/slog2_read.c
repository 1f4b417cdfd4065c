/* SLOG-2 2.0.6 reader: file access, block parsing and node decoding.  The
 * layout is in docs/slog2-format.md.
 *
 * Every block is read whole into one buffer and parsed by a cursor that
 * refuses to move past the block's end.  Counts are compared with the bytes
 * left before anything is allocated for them, so a corrupt count cannot ask
 * for more memory than a small multiple of the block, and the block itself
 * was checked against the file size when the header was read. */
#include "slog2_read.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUFHEAD_BYTES 34  /* time box, node ID, block pointer */
#define DIRENT_BYTES 34   /* node ID, time box, block pointer */
#define PRIM_MIN_BYTES 8  /* category, info length, vertex count */
#define VERTEX_BYTES 12
#define WEIGHT_BYTES 20
#define SHADOW_EXTRA_BYTES 28 /* time box, real-drawable count, weight count */
#define CATEGORY_MIN_BYTES 38
#define LINEIDMAP_MIN_BYTES 12
#define NODE_MIN_BYTES (BUFHEAD_BYTES + 12)
#define CHUNK_BYTES 65536

static const char *const block_names[IOT_SLOG2_N_BLOCKS] = {
    "Categories", "MethodDefs", "LineIDMaps", "TreeRoot", "TreeDir", "Annotations", "Postamble"};

/* Decoded nodes live in chunks that never move, so pointers handed out stay
 * valid while later parts of the same node are decoded. */
struct chunk {
    struct chunk *next;
    size_t cap, used;
    max_align_t data[];
};

struct arena {
    struct chunk *head, *cur;
};

struct cat_key {
    int32_t index;
    size_t pos;
};

struct iot_slog2 {
    int fd;
    char *path;
    int64_t size;
    struct iot_slog2_header hdr;
    struct iot_slog2_category *cats;
    size_t n_cats;
    struct cat_key *cat_keys; /* sorted by index */
    struct iot_slog2_lineidmap *maps;
    size_t n_maps;
    struct iot_slog2_dirent *dir;
    size_t n_dir;
    size_t *dir_keys; /* entry positions sorted by (depth, xpos) */
    uint8_t *buf;
    size_t buf_cap;
    struct arena arena;
    struct iot_slog2_node node;
    char err[512];
};

/* Where a failure happened is only formatted when one does. */
struct cur {
    struct iot_slog2 *r;
    const uint8_t *p;
    size_t len, pos;
    int64_t base; /* file offset of p[0] */
    const char *block;
    struct iot_slog2_nodeid node;
    int in_node;
    const char *item, *sub;
    long item_no, sub_no;
};

static void *arena_alloc(struct arena *a, size_t n)
{
    size_t unit = sizeof(max_align_t);
    n = n ? (n + unit - 1) / unit * unit : unit;
    for (struct chunk *c = a->cur; c; c = c->next) {
        if (c->cap - c->used >= n) {
            a->cur = c;
            void *p = (char *)c->data + c->used;
            c->used += n;
            return p;
        }
    }
    size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
    struct chunk *c = malloc(sizeof *c + cap);
    if (!c)
        return NULL;
    c->next = NULL;
    c->cap = cap;
    c->used = n;
    struct chunk **tail = &a->head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
    a->cur = c;
    return c->data;
}

static void arena_reset(struct arena *a)
{
    for (struct chunk *c = a->head; c; c = c->next)
        c->used = 0;
    a->cur = a->head;
}

static void arena_free(struct arena *a)
{
    while (a->head) {
        struct chunk *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->cur = NULL;
}

static int fail(struct iot_slog2 *r, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, sizeof r->err, "%s: %s", r->path, msg);
    return -1;
}

static int cfail(struct cur *c, const char *fmt, ...)
{
    char msg[300], where[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int n = c->in_node ? snprintf(where, sizeof where, "tree node ID(%d,%d)", c->node.depth,
                                  (int)c->node.xpos)
                       : snprintf(where, sizeof where, "%s block", c->block);
    if (c->item && n < (int)sizeof where)
        n += snprintf(where + n, sizeof where - n, ", %s %ld", c->item, c->item_no);
    if (c->sub && n < (int)sizeof where)
        snprintf(where + n, sizeof where - n, ", %s %ld", c->sub, c->sub_no);
    return fail(c->r, "%s: %s", where, msg);
}

static long long at(const struct cur *c) { return (long long)(c->base + (int64_t)c->pos); }

static int need(struct cur *c, size_t n, const char *what)
{
    if (c->len - c->pos >= n)
        return 0;
    return cfail(c, "truncated: %s (%zu bytes) at offset %lld runs past the block's end at %lld",
                 what, n, at(c), (long long)(c->base + (int64_t)c->len));
}

static uint64_t take(struct cur *c, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | c->p[c->pos++];
    return v;
}

static int get_u8(struct cur *c, const char *what, uint8_t *v)
{
    if (need(c, 1, what))
        return -1;
    *v = (uint8_t)take(c, 1);
    return 0;
}

static int get_i16(struct cur *c, const char *what, int16_t *v)
{
    if (need(c, 2, what))
        return -1;
    *v = (int16_t)(uint16_t)take(c, 2);
    return 0;
}

static int get_i32(struct cur *c, const char *what, int32_t *v)
{
    if (need(c, 4, what))
        return -1;
    *v = (int32_t)(uint32_t)take(c, 4);
    return 0;
}

static int get_i64(struct cur *c, const char *what, int64_t *v)
{
    if (need(c, 8, what))
        return -1;
    *v = (int64_t)take(c, 8);
    return 0;
}

static int get_f32(struct cur *c, const char *what, float *v)
{
    if (need(c, 4, what))
        return -1;
    uint32_t u = (uint32_t)take(c, 4);
    memcpy(v, &u, sizeof *v);
    return 0;
}

static int get_f64(struct cur *c, const char *what, double *v)
{
    if (need(c, 8, what))
        return -1;
    uint64_t u = take(c, 8);
    memcpy(v, &u, sizeof *v);
    return 0;
}

/* A count is believed only if its items, at their smallest, fit in what
 * is left of the block. */
static int check_count(struct cur *c, const char *what, long long n, size_t min_each)
{
    long long off = at(c);
    if (n < 0)
        return cfail(c, "negative %s %lld before offset %lld", what, n, off);
    if (min_each && (unsigned long long)n > (c->len - c->pos) / min_each)
        return cfail(c,
                     "%s %lld needs at least %llu bytes from offset %lld, the block has %zu left",
                     what, n, (unsigned long long)n * min_each, off, c->len - c->pos);
    return 0;
}

static int get_count32(struct cur *c, const char *what, size_t min_each, uint32_t *n)
{
    int32_t v;
    if (get_i32(c, what, &v) || check_count(c, what, v, min_each))
        return -1;
    *n = (uint32_t)v;
    return 0;
}

static int get_count16(struct cur *c, const char *what, size_t min_each, uint16_t *n)
{
    int16_t v;
    if (get_i16(c, what, &v) || check_count(c, what, v, min_each))
        return -1;
    *n = (uint16_t)v;
    return 0;
}

/* Raw bytes with an int16 length in front, left in the block. */
static int get_bytes(struct cur *c, const char *what, const uint8_t **p, uint16_t *len)
{
    int16_t v;
    if (get_i16(c, what, &v))
        return -1;
    if (v < 0)
        return cfail(c, "negative %s length %d before offset %lld", what, v, at(c));
    if ((size_t)v > c->len - c->pos)
        return cfail(c, "%s length %d exceeds the %zu bytes left in the block at offset %lld",
                     what, v, c->len - c->pos, at(c));
    *len = (uint16_t)v;
    *p = c->p + c->pos;
    c->pos += *len;
    return 0;
}

static int get_str(struct cur *c, const char *what, char **out)
{
    const uint8_t *p;
    uint16_t len;
    if (get_bytes(c, what, &p, &len))
        return -1;
    char *s = malloc((size_t)len + 1);
    if (!s)
        return cfail(c, "out of memory for %s", what);
    memcpy(s, p, len);
    s[len] = '\0';
    *out = s;
    return 0;
}

/* Arrays of counted things: the count was checked against the block. */
static void *cat_alloc(struct cur *c, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        cfail(c, "out of memory for %zu items", n);
    return p;
}

static void *node_alloc(struct cur *c, size_t n, size_t size)
{
    void *p = arena_alloc(&c->r->arena, n * size);
    if (!p)
        cfail(c, "out of memory for %zu items", n);
    return p;
}

static int finish(struct cur *c)
{
    c->item = c->sub = NULL;
    if (c->pos == c->len)
        return 0;
    return cfail(c, "%zu unused bytes at offset %lld before the block's end", c->len - c->pos,
                 at(c));
}

static int read_at(struct iot_slog2 *r, int64_t off, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(r->fd, (char *)buf + done, n - done, (off_t)(off + (int64_t)done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return fail(r, "read error at offset %lld: %s", (long long)(off + (int64_t)done),
                        strerror(errno));
        if (k == 0)
            return fail(r, "file ends at offset %lld, expected %zu more bytes",
                        (long long)(off + (int64_t)done), n - done);
        done += (size_t)k;
    }
    return 0;
}

/* Reads a block checked by check_blocks or read_treedir. */
static int load(struct iot_slog2 *r, struct iot_slog2_blockptr b, struct cur *c)
{
    size_t n = (size_t)b.size;
    if (n > r->buf_cap) {
        uint8_t *p = realloc(r->buf, n);
        if (!p)
            return fail(r, "out of memory for a %zu-byte block", n);
        r->buf = p;
        r->buf_cap = n;
    }
    if (read_at(r, b.offset, r->buf, n))
        return -1;
    *c = (struct cur){.r = r, .p = r->buf, .len = n, .base = b.offset};
    return 0;
}

static int open_file(struct iot_slog2 *r)
{
    r->fd = open(r->path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0)
        return fail(r, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(r->fd, &st) < 0)
        return fail(r, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(r, "not a regular file");
    r->size = (int64_t)st.st_size;
    if (r->size < IOT_SLOG2_HEADER_SIZE)
        return fail(r, "too short for an SLOG-2 file: %lld bytes, the header alone has %d",
                    (long long)r->size, IOT_SLOG2_HEADER_SIZE);
    return 0;
}

/* The version string is the file's magic number. */
static int read_version(struct cur *c, struct iot_slog2_header *h)
{
    int16_t len;
    if (get_i16(c, "version length", &len))
        return -1;
    const uint8_t *p = c->p + c->pos; /* the header block has 106 bytes left */
    size_t want = strlen(IOT_SLOG2_VERSION);
    if (memcmp(p, "SLOG 2", 6) != 0)
        return cfail(c, "not an SLOG-2 file: it does not start with the string \"SLOG 2\"");
    size_t n = len > 0 && (size_t)len < sizeof h->version ? (size_t)len : sizeof h->version - 1;
    for (size_t i = 0; i < n; i++)
        h->version[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    h->version[n] = '\0';
    if ((size_t)len != want || memcmp(p, IOT_SLOG2_VERSION, want) != 0)
        return cfail(c, "unsupported version \"%s\" (string length %d at offset 0), this reader "
                        "reads \"%s\"",
                     h->version, len, IOT_SLOG2_VERSION);
    c->pos += want;
    return 0;
}

static int read_header(struct iot_slog2 *r)
{
    struct cur c;
    struct iot_slog2_header *h = &r->hdr;
    if (load(r, (struct iot_slog2_blockptr){0, IOT_SLOG2_HEADER_SIZE}, &c))
        return -1;
    c.block = "header";
    if (read_version(&c, h) || get_i16(&c, "NumOfChildrenPerNode", &h->children_per_node) ||
        get_i32(&c, "TreeLeafByteSize", &h->leaf_bytesize) ||
        get_i16(&c, "MaxTreeDepth", &h->max_depth) ||
        get_i32(&c, "MaxBufferByteSize", &h->max_buffer_bytesize))
        return -1;
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++)
        if (get_i64(&c, "block offset", &h->block[i].offset) ||
            get_i32(&c, "block size", &h->block[i].size))
            return -1;
    return finish(&c);
}

/* Java's readers treat offset 0 or a size of 0 as "no block". */
static int block_absent(struct iot_slog2_blockptr b) { return b.offset == 0 || b.size == 0; }

static int check_block(struct iot_slog2 *r, const char *what, struct iot_slog2_blockptr b,
                       int32_t min_size)
{
    if (b.size < min_size)
        return fail(r, "%s block at offset %lld: size %d is below the minimum %d", what,
                    (long long)b.offset, b.size, min_size);
    if (b.offset < IOT_SLOG2_HEADER_SIZE)
        return fail(r, "%s block: offset %lld lies inside the %d-byte header", what,
                    (long long)b.offset, IOT_SLOG2_HEADER_SIZE);
    if (b.offset > r->size || b.size > r->size - b.offset)
        return fail(r,
                    "%s block: %d bytes at offset %lld run past the end of the file (%lld bytes)",
                    what, b.size, (long long)b.offset, (long long)r->size);
    if (b.size > r->hdr.max_buffer_bytesize)
        return fail(r, "%s block at offset %lld: size %d exceeds the header's MaxBufferByteSize %d",
                    what, (long long)b.offset, b.size, r->hdr.max_buffer_bytesize);
    return 0;
}

static int check_blocks(struct iot_slog2 *r)
{
    static const int32_t min_size[IOT_SLOG2_N_BLOCKS] = {4, 0, 4, NODE_MIN_BYTES, 4, 0, 0};
    for (int i = 0; i < IOT_SLOG2_N_BLOCKS; i++) {
        struct iot_slog2_blockptr b = r->hdr.block[i];
        if (block_absent(b)) {
            if (min_size[i])
                return fail(r, "header: the %s block is missing (FBinfo(%d @ %lld))",
                            block_names[i], b.size, (long long)b.offset);
            continue;
        }
        if (check_block(r, block_names[i], b, min_size[i] ? min_size[i] : 1))
            return -1;
    }
    return 0;
}

static int valid_type(uint8_t t) { return t && strchr("dhlxXeEs", t) != NULL; }

static int read_keys(struct cur *c, int *n, char ***out)
{
    uint16_t k;
    if (get_count16(c, "info key count", 2, &k) || !(*out = cat_alloc(c, k, sizeof **out)))
        return -1;
    *n = k;
    for (uint16_t i = 0; i < k; i++)
        if (get_str(c, "info key", &(*out)[i]))
            return -1;
    return 0;
}

static int read_methods(struct cur *c, int *n, int32_t **out)
{
    uint16_t k;
    if (get_count16(c, "method count", 4, &k) || !(*out = cat_alloc(c, k, sizeof **out)))
        return -1;
    *n = k;
    for (uint16_t i = 0; i < k; i++)
        if (get_i32(c, "method id", &(*out)[i]))
            return -1;
    return 0;
}

static int read_types(struct cur *c, struct iot_slog2_category *cat)
{
    uint16_t k;
    if (get_count16(c, "info type count", 1, &k) || !(cat->types = cat_alloc(c, k + 1u, 1)))
        return -1;
    cat->n_types = k;
    for (uint16_t i = 0; i < k; i++) {
        uint8_t t;
        if (get_u8(c, "info type", &t))
            return -1;
        if (!valid_type(t))
            return cfail(c, "unknown info type 0x%02x at offset %lld", t, at(c) - 1);
        cat->types[i] = (char)t;
    }
    return 0;
}

static int read_colour(struct cur *c, struct iot_slog2_category *cat)
{
    int32_t argb;
    uint8_t mod, width;
    if (get_i32(c, "colour", &argb) || get_u8(c, "colour modifiable flag", &mod) ||
        get_u8(c, "width", &width))
        return -1;
    uint32_t u = (uint32_t)argb;
    cat->alpha = (uint8_t)(u >> 24);
    cat->red = (uint8_t)(u >> 16);
    cat->green = (uint8_t)(u >> 8);
    cat->blue = (uint8_t)u;
    cat->modifiable = mod != 0;
    cat->width = (int8_t)width;
    return 0;
}

static int read_category(struct cur *c, struct iot_slog2_category *cat)
{
    if (get_i32(c, "category index", &cat->index) || get_str(c, "category name", &cat->name) ||
        get_i32(c, "topology", &cat->topo))
        return -1;
    if (cat->topo < IOT_SLOG2_EVENT || cat->topo > IOT_SLOG2_ARROW)
        return cfail(c, "unknown topology %d before offset %lld", cat->topo, at(c));
    return read_colour(c, cat) || read_keys(c, &cat->n_keys, &cat->keys) ||
                   read_types(c, cat) || read_methods(c, &cat->n_methods, &cat->methods) ||
                   get_f32(c, "inclusive ratio", &cat->incl_ratio) ||
                   get_f32(c, "exclusive ratio", &cat->excl_ratio) ||
                   get_i64(c, "drawable count", &cat->count)
               ? -1
               : 0;
}

static int cmp_cat_key(const void *a, const void *b)
{
    int32_t x = ((const struct cat_key *)a)->index, y = ((const struct cat_key *)b)->index;
    return x < y ? -1 : x > y;
}

static int index_categories(struct iot_slog2 *r)
{
    r->cat_keys = calloc(r->n_cats ? r->n_cats : 1, sizeof *r->cat_keys);
    if (!r->cat_keys)
        return fail(r, "out of memory");
    for (size_t i = 0; i < r->n_cats; i++)
        r->cat_keys[i] = (struct cat_key){r->cats[i].index, i};
    qsort(r->cat_keys, r->n_cats, sizeof *r->cat_keys, cmp_cat_key);
    for (size_t i = 1; i < r->n_cats; i++)
        if (r->cat_keys[i].index == r->cat_keys[i - 1].index)
            return fail(r, "Categories block: two categories with index %d",
                        r->cat_keys[i].index);
    return 0;
}

static int read_categories(struct iot_slog2 *r)
{
    struct cur c;
    uint32_t n;
    if (load(r, r->hdr.block[IOT_SLOG2_CATEGORIES], &c))
        return -1;
    c.block = "Categories";
    if (get_count32(&c, "category count", CATEGORY_MIN_BYTES, &n) ||
        !(r->cats = cat_alloc(&c, n, sizeof *r->cats)))
        return -1;
    c.item = "category";
    for (uint32_t i = 0; i < n; i++) {
        c.item_no = (long)i;
        r->n_cats = i + 1;
        if (read_category(&c, &r->cats[i]))
            return -1;
    }
    return finish(&c) || index_categories(r);
}

static int read_rows(struct cur *c, struct iot_slog2_lineidmap *m)
{
    uint32_t n;
    size_t width = (size_t)m->n_columns + 1;
    if (width > (c->len - c->pos) / 4)
        return cfail(c, "%d columns do not fit in the block at offset %lld", m->n_columns, at(c));
    if (get_count32(c, "row count", 4 * width, &n) || !(m->rows = cat_alloc(c, n * width, 4)))
        return -1;
    m->n_rows = (int32_t)n;
    for (size_t i = 0; i < n * width; i++)
        if (get_i32(c, "row value", &m->rows[i]))
            return -1;
    return 0;
}

static int read_lineidmap(struct cur *c, struct iot_slog2_lineidmap *m)
{
    uint32_t ncol;
    if (get_str(c, "map title", &m->title) || get_count32(c, "column count", 2, &ncol) ||
        !(m->columns = cat_alloc(c, ncol, sizeof *m->columns)))
        return -1;
    m->n_columns = (int32_t)ncol;
    for (uint32_t i = 0; i < ncol; i++)
        if (get_str(c, "column label", &m->columns[i]))
            return -1;
    return read_rows(c, m) || read_methods(c, &m->n_methods, &m->methods) ? -1 : 0;
}

static int read_lineidmaps(struct iot_slog2 *r)
{
    struct cur c;
    uint32_t n;
    if (load(r, r->hdr.block[IOT_SLOG2_LINEIDMAPS], &c))
        return -1;
    c.block = "LineIDMaps";
    if (get_count32(&c, "map count", LINEIDMAP_MIN_BYTES, &n) ||
        !(r->maps = cat_alloc(&c, n, sizeof *r->maps)))
        return -1;
    c.item = "map";
    for (uint32_t i = 0; i < n; i++) {
        c.item_no = (long)i + 1;
        r->n_maps = i + 1;
        if (read_lineidmap(&c, &r->maps[i]))
            return -1;
    }
    return finish(&c);
}

static int get_tbox(struct cur *c, struct iot_slog2_tbox *t)
{
    return get_f64(c, "start time", &t->start) || get_f64(c, "end time", &t->end) ? -1 : 0;
}

static int get_nodeid(struct cur *c, struct iot_slog2_nodeid *id)
{
    return get_i16(c, "node depth", &id->depth) || get_i32(c, "node xpos", &id->xpos) ? -1 : 0;
}

static int get_blockptr(struct cur *c, struct iot_slog2_blockptr *b)
{
    return get_i64(c, "block offset", &b->offset) || get_i32(c, "block size", &b->size) ? -1 : 0;
}

static int cmp_id(struct iot_slog2_nodeid a, struct iot_slog2_nodeid b)
{
    if (a.depth != b.depth)
        return a.depth < b.depth ? -1 : 1;
    return a.xpos < b.xpos ? -1 : a.xpos > b.xpos;
}

static const struct iot_slog2 *sort_reader; /* qsort has no context argument */

static int cmp_dir_key(const void *a, const void *b)
{
    return cmp_id(sort_reader->dir[*(const size_t *)a].id, sort_reader->dir[*(const size_t *)b].id);
}

static int index_treedir(struct iot_slog2 *r)
{
    r->dir_keys = calloc(r->n_dir ? r->n_dir : 1, sizeof *r->dir_keys);
    if (!r->dir_keys)
        return fail(r, "out of memory");
    for (size_t i = 0; i < r->n_dir; i++)
        r->dir_keys[i] = i;
    sort_reader = r;
    qsort(r->dir_keys, r->n_dir, sizeof *r->dir_keys, cmp_dir_key);
    for (size_t i = 1; i < r->n_dir; i++) {
        struct iot_slog2_nodeid id = r->dir[r->dir_keys[i]].id;
        if (cmp_id(id, r->dir[r->dir_keys[i - 1]].id) == 0)
            return fail(r, "TreeDir block: two entries for node ID(%d,%d)", id.depth, (int)id.xpos);
    }
    return 0;
}

static int read_dirent(struct cur *c, struct iot_slog2_dirent *e)
{
    if (get_nodeid(c, &e->id) || get_tbox(c, &e->tbox) || get_blockptr(c, &e->block))
        return -1;
    if (e->id.depth < 0 || e->id.xpos < 0)
        return cfail(c, "invalid node ID(%d,%d)", e->id.depth, (int)e->id.xpos);
    char what[48];
    snprintf(what, sizeof what, "tree node ID(%d,%d)", e->id.depth, (int)e->id.xpos);
    return check_block(c->r, what, e->block, NODE_MIN_BYTES);
}

static int read_treedir(struct iot_slog2 *r)
{
    struct cur c;
    uint32_t n;
    if (load(r, r->hdr.block[IOT_SLOG2_TREEDIR], &c))
        return -1;
    c.block = "TreeDir";
    if (get_count32(&c, "entry count", DIRENT_BYTES, &n) ||
        !(r->dir = cat_alloc(&c, n, sizeof *r->dir)))
        return -1;
    if (n == 0)
        return cfail(&c, "no tree nodes");
    c.item = "entry";
    for (uint32_t i = 0; i < n; i++) {
        c.item_no = (long)i;
        if (read_dirent(&c, &r->dir[i]))
            return -1;
    }
    r->n_dir = n;
    return finish(&c) || index_treedir(r);
}

struct iot_slog2 *iot_slog2_open(const char *path, char *err, size_t errlen)
{
    struct iot_slog2 *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        snprintf(err, errlen, "%s: out of memory", path);
        free(r);
        return NULL;
    }
    r->fd = -1;
    if (open_file(r) || read_header(r) || check_blocks(r) || read_categories(r) ||
        read_lineidmaps(r) || read_treedir(r)) {
        snprintf(err, errlen, "%s", r->err);
        iot_slog2_close(r);
        return NULL;
    }
    return r;
}

static void free_strings(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void iot_slog2_close(struct iot_slog2 *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_cats; i++) {
        free(r->cats[i].name);
        free_strings(r->cats[i].keys, r->cats[i].n_keys);
        free(r->cats[i].types);
        free(r->cats[i].methods);
    }
    for (size_t i = 0; i < r->n_maps; i++) {
        free(r->maps[i].title);
        free_strings(r->maps[i].columns, r->maps[i].n_columns);
        free(r->maps[i].rows);
        free(r->maps[i].methods);
    }
    free(r->cats);
    free(r->cat_keys);
    free(r->maps);
    free(r->dir);
    free(r->dir_keys);
    free(r->buf);
    arena_free(&r->arena);
    if (r->fd >= 0)
        close(r->fd);
    free(r->path);
    free(r);
}

/* ---- tree nodes ---- */

static int read_prim(struct cur *c, struct iot_slog2_prim *p, int with_vertices)
{
    size_t start = c->pos;
    p->offset = at(c);
    if (get_i32(c, "category index", &p->category) ||
        get_bytes(c, "info", &p->info, &p->info_len))
        return -1;
    p->tbox = (struct iot_slog2_tbox){INFINITY, -INFINITY};
    if (with_vertices) {
        struct iot_slog2_vertex *v;
        if (get_count16(c, "vertex count", VERTEX_BYTES, &p->n_vertices) ||
            !(v = node_alloc(c, p->n_vertices, sizeof *v)))
            return -1;
        for (uint16_t i = 0; i < p->n_vertices; i++) {
            if (get_f64(c, "vertex time", &v[i].time) || get_i32(c, "vertex line ID", &v[i].line))
                return -1;
            if (v[i].time < p->tbox.start)
                p->tbox.start = v[i].time;
            if (v[i].time > p->tbox.end)
                p->tbox.end = v[i].time;
        }
        p->vertices = v;
    }
    p->bytes = (uint32_t)(c->pos - start);
    return 0;
}

static int read_composite(struct cur *c, struct iot_slog2_drawable *d)
{
    struct iot_slog2_prim *prims;
    size_t start = c->pos;
    if (read_prim(c, &d->head, 0) ||
        get_count16(c, "primitive count", PRIM_MIN_BYTES, &d->n_prims) ||
        !(prims = node_alloc(c, d->n_prims, sizeof *prims)))
        return -1;
    d->tbox = d->head.tbox;
    c->sub = "primitive";
    for (uint16_t i = 0; i < d->n_prims; i++) {
        c->sub_no = i;
        if (read_prim(c, &prims[i], 1))
            return -1;
        if (prims[i].tbox.start < d->tbox.start)
            d->tbox.start = prims[i].tbox.start;
        if (prims[i].tbox.end > d->tbox.end)
            d->tbox.end = prims[i].tbox.end;
    }
    c->sub = NULL;
    d->prims = prims;
    d->head.bytes = (uint32_t)(c->pos - start);
    return 0;
}

static int read_drawable(struct cur *c, struct iot_slog2_drawable *d)
{
    uint8_t tag;
    if (get_u8(c, "drawable tag", &tag))
        return -1;
    if (tag > 1)
        return cfail(c, "unknown drawable tag %u at offset %lld (0: primitive, 1: composite)",
                     tag, at(c) - 1);
    d->composite = tag;
    if (tag)
        return read_composite(c, d);
    if (read_prim(c, &d->head, 1))
        return -1;
    d->tbox = d->head.tbox;
    return 0;
}

static int read_drawables(struct cur *c, int nestable, uint32_t *n,
                          const struct iot_slog2_drawable **out)
{
    struct iot_slog2_drawable *d;
    const char *count = nestable ? "nestable drawable count" : "nestless drawable count";
    if (get_count32(c, count, 1 + PRIM_MIN_BYTES, n) || !(d = node_alloc(c, *n, sizeof *d)))
        return -1;
    c->item = nestable ? "nestable drawable" : "nestless drawable";
    for (uint32_t i = 0; i < *n; i++) {
        c->item_no = (long)i;
        if (read_drawable(c, &d[i]))
            return -1;
    }
    c->item = NULL;
    *out = d;
    return 0;
}

static int read_shadow(struct cur *c, struct iot_slog2_shadow *s)
{
    struct iot_slog2_weight *w;
    if (read_prim(c, &s->prim, 1) || get_tbox(c, &s->tbox) ||
        get_i64(c, "real drawable count", &s->n_real) ||
        get_count32(c, "category weight count", WEIGHT_BYTES, &s->n_weights) ||
        !(w = node_alloc(c, s->n_weights, sizeof *w)))
        return -1;
    for (uint32_t i = 0; i < s->n_weights; i++)
        if (get_i32(c, "weight category", &w[i].category) ||
            get_f32(c, "weight inclusive ratio", &w[i].incl_ratio) ||
            get_f32(c, "weight exclusive ratio", &w[i].excl_ratio) ||
            get_i64(c, "weight count", &w[i].count))
            return -1;
    s->weights = w;
    s->prim.bytes += SHADOW_EXTRA_BYTES + WEIGHT_BYTES * s->n_weights;
    return 0;
}

static int read_shadows(struct cur *c, int nestable, uint32_t *n,
                        const struct iot_slog2_shadow **out)
{
    struct iot_slog2_shadow *s;
    const char *count = nestable ? "nestable shadow count" : "nestless shadow count";
    if (get_count32(c, count, PRIM_MIN_BYTES + SHADOW_EXTRA_BYTES, n) ||
        !(s = node_alloc(c, *n, sizeof *s)))
        return -1;
    c->sub = nestable ? "nestable shadow" : "nestless shadow";
    for (uint32_t i = 0; i < *n; i++) {
        c->sub_no = (long)i;
        if (read_shadow(c, &s[i]))
            return -1;
    }
    c->sub = NULL;
    *out = s;
    return 0;
}

static int read_bufhead(struct cur *c, struct iot_slog2_tbox *t, struct iot_slog2_nodeid *id,
                        struct iot_slog2_blockptr *b)
{
    return get_tbox(c, t) || get_nodeid(c, id) || get_blockptr(c, b) ? -1 : 0;
}

static int read_shadowbufs(struct cur *c, struct iot_slog2_node *n)
{
    struct iot_slog2_shadowbuf *bufs;
    if (get_count32(c, "shadow buffer count", BUFHEAD_BYTES + 8, &n->n_shadowbufs) ||
        !(bufs = node_alloc(c, n->n_shadowbufs, sizeof *bufs)))
        return -1;
    c->item = "shadow buffer";
    for (uint32_t i = 0; i < n->n_shadowbufs; i++) {
        struct iot_slog2_shadowbuf *b = &bufs[i];
        c->item_no = (long)i;
        if (read_bufhead(c, &b->tbox, &b->id, &b->block) ||
            read_shadows(c, 0, &b->n_nestless, &b->nestless) ||
            read_shadows(c, 1, &b->n_nestable, &b->nestable))
            return -1;
    }
    n->shadowbufs = bufs;
    return 0;
}

int iot_slog2_read_node(struct iot_slog2 *r, size_t i, const struct iot_slog2_node **out)
{
    if (i >= r->n_dir)
        return fail(r, "no tree node %zu, the directory has %zu", i, r->n_dir);
    const struct iot_slog2_dirent *e = &r->dir[i];
    struct iot_slog2_node *n = &r->node;
    struct cur c;
    arena_reset(&r->arena);
    memset(n, 0, sizeof *n);
    if (load(r, e->block, &c))
        return -1;
    c.node = e->id;
    c.in_node = 1;
    if (read_bufhead(&c, &n->tbox, &n->id, &n->block) ||
        read_drawables(&c, 0, &n->n_nestless, &n->nestless) ||
        read_drawables(&c, 1, &n->n_nestable, &n->nestable) ||
        read_shadowbufs(&c, n) || finish(&c)) {
        memset(n, 0, sizeof *n);
        return -1;
    }
    *out = n;
    return 0;
}

/* ---- accessors ---- */

const char *iot_slog2_error(const struct iot_slog2 *r) { return r->err; }
int64_t iot_slog2_file_size(const struct iot_slog2 *r) { return r->size; }
const struct iot_slog2_header *iot_slog2_header(const struct iot_slog2 *r) { return &r->hdr; }
size_t iot_slog2_n_categories(const struct iot_slog2 *r) { return r->n_cats; }
size_t iot_slog2_n_lineidmaps(const struct iot_slog2 *r) { return r->n_maps; }
size_t iot_slog2_n_nodes(const struct iot_slog2 *r) { return r->n_dir; }

const struct iot_slog2_category *iot_slog2_category_at(const struct iot_slog2 *r, size_t i)
{
    return i < r->n_cats ? &r->cats[i] : NULL;
}

const struct iot_slog2_category *iot_slog2_category(const struct iot_slog2 *r, int32_t index)
{
    struct cat_key key = {index, 0};
    const struct cat_key *k = bsearch(&key, r->cat_keys, r->n_cats, sizeof key, cmp_cat_key);
    return k ? &r->cats[k->pos] : NULL;
}

const struct iot_slog2_lineidmap *iot_slog2_lineidmap_at(const struct iot_slog2 *r, size_t i)
{
    return i < r->n_maps ? &r->maps[i] : NULL;
}

const struct iot_slog2_dirent *iot_slog2_dirent_at(const struct iot_slog2 *r, size_t i)
{
    return i < r->n_dir ? &r->dir[i] : NULL;
}

long iot_slog2_find_node(const struct iot_slog2 *r, struct iot_slog2_nodeid id)
{
    size_t lo = 0, hi = r->n_dir;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_id(r->dir[r->dir_keys[mid]].id, id);
        if (c == 0)
            return (long)r->dir_keys[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- info values ---- */

static size_t type_width(char t)
{
    switch (t) {
    case 'h': return 2;
    case 'd': case 'x': case 'e': return 4;
    case 'l': case 'X': case 'E': return 8;
    default: return 0;
    }
}

static uint64_t be_bytes(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static void set_value(struct iot_slog2_value *v, char t, uint64_t u)
{
    v->type = t;
    if (t == 'e') {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, sizeof f);
        v->u.f = f;
    } else if (t == 'E') {
        memcpy(&v->u.f, &u, sizeof v->u.f);
    } else if (t == 'h') {
        v->u.i = (int16_t)(uint16_t)u;
    } else if (t == 'd' || t == 'x') {
        v->u.i = (int32_t)(uint32_t)u;
    } else {
        v->u.i = (int64_t)u;
    }
}

int iot_slog2_decode_info(const struct iot_slog2_category *c, const uint8_t *info, size_t len,
                          struct iot_slog2_value *vals, int max, size_t *used, char *why,
                          size_t whylen)
{
    size_t pos = 0;
    int k;
    for (k = 0; k < c->n_types; k++) {
        char t = c->types[k];
        size_t w = type_width(t);
        struct iot_slog2_value v = {.type = t};
        if (t == 's') {
            if (len - pos < 2)
                break;
            int16_t n = (int16_t)(uint16_t)be_bytes(info + pos, 2);
            size_t sn = n > 0 ? (size_t)n : 0;
            if (len - pos - 2 < sn)
                break;
            v.u.s.p = (const char *)info + pos + 2;
            v.u.s.len = (uint16_t)sn;
            w = 2 + sn;
        } else if (!w) {
            snprintf(why, whylen, "value %d has unknown type '%c'", k, t);
            *used = pos;
            return -1;
        } else if (len - pos < w) {
            break;
        } else {
            set_value(&v, t, be_bytes(info + pos, w));
        }
        if (k < max)
            vals[k] = v;
        pos += w;
    }
    *used = pos;
    if (k < c->n_types) {
        snprintf(why, whylen, "%zu info bytes end inside value %d ('%%%c') of %d", len, k,
                 c->types[k], c->n_types);
        return -1;
    }
    return k;
}
