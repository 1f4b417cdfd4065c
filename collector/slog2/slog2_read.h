/* Reader for SLOG-2 files, format "SLOG 2.0.6", as written by Argonne's
 * slog2sdk and read by Jumpshot-4.  docs/slog2-format.md describes the
 * layout; this is the reference the iotrace writer is tested against.
 *
 * Opening reads the header, the category map, the line-ID maps and the tree
 * directory, and validates every block pointer against the file size.  Tree
 * nodes are read one at a time on request, so memory stays bounded by the
 * largest node, not by the trace.  Every count and length in the file is
 * checked against the bytes that remain before anything is allocated for it:
 * a damaged file gives an error naming the object and the file offset, never
 * a crash or an allocation larger than a small multiple of a block. */
#ifndef IOT_SLOG2_READ_H
#define IOT_SLOG2_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IOT_SLOG2_VERSION "SLOG 2.0.6"
#define IOT_SLOG2_HEADER_SIZE 108

enum iot_slog2_topo { IOT_SLOG2_EVENT = 0, IOT_SLOG2_STATE = 1, IOT_SLOG2_ARROW = 2 };

/* The seven file-block pointers of the header, in file order. */
enum iot_slog2_block {
    IOT_SLOG2_CATEGORIES,
    IOT_SLOG2_METHODDEFS,
    IOT_SLOG2_LINEIDMAPS,
    IOT_SLOG2_TREEROOT,
    IOT_SLOG2_TREEDIR,
    IOT_SLOG2_ANNOTATIONS,
    IOT_SLOG2_POSTAMBLE,
    IOT_SLOG2_N_BLOCKS
};

struct iot_slog2_blockptr {
    int64_t offset; /* 0 with size 0: absent */
    int32_t size;
};

struct iot_slog2_header {
    char version[16];
    int16_t children_per_node;
    int32_t leaf_bytesize;
    int16_t max_depth;
    int32_t max_buffer_bytesize;
    struct iot_slog2_blockptr block[IOT_SLOG2_N_BLOCKS];
};

struct iot_slog2_category {
    int32_t index; /* -1, -2, -3: Preview_Event, Preview_Arrow, Preview_State */
    char *name;
    int32_t topo; /* enum iot_slog2_topo */
    uint8_t red, green, blue, alpha;
    int modifiable;
    int width;
    int n_keys;
    char **keys; /* label text before each value, then the trailing text */
    int n_types;
    char *types; /* one of d h l x X e E s per value, in info-byte order */
    int n_methods;
    int32_t *methods;
    float incl_ratio, excl_ratio;
    int64_t count;
};

struct iot_slog2_lineidmap {
    char *title;
    int32_t n_columns; /* not counting the line ID itself */
    char **columns;
    int32_t n_rows;
    int32_t *rows; /* n_rows x (1 + n_columns): line ID, then its columns */
    int n_methods;
    int32_t *methods;
};

struct iot_slog2_nodeid {
    int16_t depth; /* 0: leaf */
    int32_t xpos;
};

struct iot_slog2_tbox {
    double start, end;
};

struct iot_slog2_dirent {
    struct iot_slog2_nodeid id;
    struct iot_slog2_tbox tbox;
    struct iot_slog2_blockptr block;
};

struct iot_slog2_vertex {
    double time;
    int32_t line;
};

struct iot_slog2_prim {
    int32_t category;
    uint16_t info_len;
    const uint8_t *info; /* raw value bytes; see iot_slog2_decode_info */
    uint16_t n_vertices;
    const struct iot_slog2_vertex *vertices;
    struct iot_slog2_tbox tbox; /* min and max of the vertex times */
    uint32_t bytes;             /* encoded size, Java's "bsize" */
    int64_t offset;             /* file offset of the encoding */
};

/* A composite's head carries its category and info but no vertices. */
struct iot_slog2_drawable {
    int composite;
    struct iot_slog2_prim head;
    uint16_t n_prims;
    const struct iot_slog2_prim *prims;
    struct iot_slog2_tbox tbox; /* composite: over its primitives */
};

struct iot_slog2_weight {
    int32_t category;
    float incl_ratio, excl_ratio;
    int64_t count;
};

/* A preview drawable: summarises real drawables of one topology and one
 * set of line IDs in a child subtree. */
struct iot_slog2_shadow {
    struct iot_slog2_prim prim; /* preview category; 1 vertex or 2 */
    struct iot_slog2_tbox tbox; /* stored, not derived from the vertices */
    int64_t n_real;
    uint32_t n_weights;
    const struct iot_slog2_weight *weights;
};

/* The shadows of one child, kept in its parent. */
struct iot_slog2_shadowbuf {
    struct iot_slog2_tbox tbox;
    struct iot_slog2_nodeid id;
    struct iot_slog2_blockptr block;
    uint32_t n_nestless, n_nestable;
    const struct iot_slog2_shadow *nestless; /* arrows and events */
    const struct iot_slog2_shadow *nestable; /* states */
};

struct iot_slog2_node {
    struct iot_slog2_tbox tbox;
    struct iot_slog2_nodeid id;
    struct iot_slog2_blockptr block;
    uint32_t n_nestless, n_nestable;
    const struct iot_slog2_drawable *nestless; /* arrows and events */
    const struct iot_slog2_drawable *nestable; /* states and composites */
    uint32_t n_shadowbufs;
    const struct iot_slog2_shadowbuf *shadowbufs;
};

/* One decoded info value; strings point into the node and are not
 * NUL-terminated. */
struct iot_slog2_value {
    char type;
    union {
        int64_t i; /* d h l x X; x and X keep the bit pattern */
        double f;  /* e E */
        struct {
            const char *p;
            uint16_t len;
        } s;
    } u;
};

struct iot_slog2;

/* NULL on failure, with the reason (file, object, offset) in err. */
struct iot_slog2 *iot_slog2_open(const char *path, char *err, size_t errlen);
void iot_slog2_close(struct iot_slog2 *r);

/* The reason for the last failed call on r. */
const char *iot_slog2_error(const struct iot_slog2 *r);

int64_t iot_slog2_file_size(const struct iot_slog2 *r);
const struct iot_slog2_header *iot_slog2_header(const struct iot_slog2 *r);

size_t iot_slog2_n_categories(const struct iot_slog2 *r);
const struct iot_slog2_category *iot_slog2_category_at(const struct iot_slog2 *r, size_t i);
const struct iot_slog2_category *iot_slog2_category(const struct iot_slog2 *r, int32_t index);

size_t iot_slog2_n_lineidmaps(const struct iot_slog2 *r);
const struct iot_slog2_lineidmap *iot_slog2_lineidmap_at(const struct iot_slog2 *r, size_t i);

/* Tree directory entries in file order (root first). */
size_t iot_slog2_n_nodes(const struct iot_slog2 *r);
const struct iot_slog2_dirent *iot_slog2_dirent_at(const struct iot_slog2 *r, size_t i);
/* Index of the entry with that ID, or -1. */
long iot_slog2_find_node(const struct iot_slog2 *r, struct iot_slog2_nodeid id);

/* Reads and decodes the node of directory entry i.  The node stays valid
 * until the next call or iot_slog2_close.  0 or -1 (iot_slog2_error). */
int iot_slog2_read_node(struct iot_slog2 *r, size_t i, const struct iot_slog2_node **node);

/* Decodes info bytes by the category's value types.  Returns the number of
 * values (at most max are stored), or -1 with a reason in why when the bytes
 * are too short or a type is unknown; *used gets the bytes consumed. */
int iot_slog2_decode_info(const struct iot_slog2_category *c, const uint8_t *info, size_t len,
                          struct iot_slog2_value *vals, int max, size_t *used, char *why,
                          size_t whylen);

/* The popup text Jumpshot shows: each info key followed by its value,
 * values printed as Java prints them.  0, or -1 if the bytes do not decode
 * (the text then ends with a marker). */
int iot_slog2_format_info(char *buf, size_t len, const struct iot_slog2_category *c,
                          const uint8_t *info, size_t info_len);

/* Java's Double.toString and Float.toString ("5.0E-4", "0.0025", "NaN"). */
void iot_slog2_format_double(char *buf, size_t len, double v);
void iot_slog2_format_float(char *buf, size_t len, float v);

const char *iot_slog2_topo_name(int32_t topo);

/* Checks the tree invariants over the whole file: every node inside its
 * parent's time box and listed by it, drawables inside their node, in the
 * stored order and matching their categories, each child's shadows summing
 * the real primitives of its subtree, category counts, the identity map.
 * report() gets one message per violation.  Returns the number of
 * violations, or -1 if a node cannot be read (iot_slog2_error).  Reads
 * every node, so the node last returned by iot_slog2_read_node is gone. */
long iot_slog2_check(struct iot_slog2 *r, void (*report)(void *ctx, const char *msg), void *ctx);

/* Prints the whole file, one line per item, then the check's violations.
 * Returns 0 if the file reads and checks cleanly, 1 if it reads but
 * violates invariants, -1 on a read error (reason in err). */
int iot_slog2_dump(FILE *out, const char *path, char *err, size_t errlen);

#endif
