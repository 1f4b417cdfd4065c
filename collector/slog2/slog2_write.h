/* Streaming writer for SLOG-2 files, format "SLOG 2.0.6", laid out the way
 * Argonne's Java slog2sdk (TraceToSlog2 / logformat.slog2.output) lays them
 * out, so that Jumpshot-4 and the slog2sdk tools read them.
 * docs/slog2-format.md ("Writing") describes the placement algorithm.
 *
 * Use: open, define categories (before the drawables that use them) and any
 * line-ID maps, feed states, arrows and events in increasing END time, close.
 * Memory is bounded by the open path of the tree (one node per level, with
 * the drawables stored in it and the preview shadows of its children), never
 * by the number of drawables: full nodes are written as soon as they close,
 * and the tree directory is spilled to unlinked temporary files next to the
 * output until close.
 *
 * Every function returns 0 on success or -1 with a message naming the file,
 * the object and the reason (iot_slog2_writer_error).  A drawable or a
 * definition that is refused (unknown category, end time out of order, bad
 * info values) leaves the writer usable and the file untouched by it; an I/O
 * error makes the writer fail for good, and close then removes the partial
 * file instead of leaving a corrupt one. */
#ifndef IOT_SLOG2_WRITE_H
#define IOT_SLOG2_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "slog2_read.h"

#define IOT_SLOG2_DEFAULT_LEAF_BYTESIZE 65536
#define IOT_SLOG2_DEFAULT_CHILDREN 2
/* Below this a single drawable with a label could not fit in a leaf. */
#define IOT_SLOG2_MIN_LEAF_BYTESIZE 128

struct iot_slog2_options {
    int32_t leaf_bytesize;     /* TreeLeafByteSize; 0: 65536 */
    int16_t children_per_node; /* NumOfChildrenPerNode; 0: 2 */
};

/* A category: one legend entry.  The label is Jumpshot's popup text with a
 * %-conversion per info value: %d int32, %h int16, %l int64, %x uint32
 * shown in hex, %X uint64 shown in hex, %e float, %E double, %s string, for
 * example "CallID=0x%X offset=%l bytes=%l" (the hex conversions print no
 * "0x" of their own).  NULL or "" for none.  methods: 1 =
 * CONNECT_COMPOSITE_STATE, the only one there is; usually none. */
struct iot_slog2_catdef {
    int32_t index; /* >= 0; -1 .. -3 are the writer's Preview_* categories */
    const char *name;
    int32_t topo; /* enum iot_slog2_topo */
    uint8_t red, green, blue, alpha;
    int width; /* pixels, 1 .. 127 */
    const char *label;
    int n_methods;
    const int32_t *methods;
};

/* A line-ID map groups timelines for one of Jumpshot's views, for example
 * columns {"node", "process", "thread"}.  rows holds n_rows x (1 +
 * n_columns) values: a line ID, then its column values.  Rows may come in
 * any order (they are written sorted); a line ID may appear once. */
struct iot_slog2_mapdef {
    const char *title;
    int32_t n_columns; /* not counting the line ID */
    const char *const *columns;
    int32_t n_rows;
    const int32_t *rows;
    int n_methods;
    const int32_t *methods;
};

struct iot_slog2_writer_stats {
    uint64_t drawables;     /* accepted so far */
    uint64_t nodes_written; /* tree nodes already in the file */
    int depth;              /* depth of the current root */
    int64_t file_bytes;     /* bytes written so far */
    size_t live_bytes;      /* heap the writer holds now */
    size_t peak_bytes;      /* the most it has held */
};

typedef struct iot_slog2_writer iot_slog2_writer;

/* Creates (truncates) path.  opt may be NULL for the defaults.  NULL on
 * failure, with the reason in err. */
iot_slog2_writer *iot_slog2_writer_open(const char *path, const struct iot_slog2_options *opt,
                                        char *err, size_t errlen);

int iot_slog2_writer_category(iot_slog2_writer *w, const struct iot_slog2_catdef *c);
int iot_slog2_writer_lineidmap(iot_slog2_writer *w, const struct iot_slog2_mapdef *m);

/* Lists a timeline in the Identity Map even if no drawable uses it (lines
 * used by drawables are listed anyway). */
int iot_slog2_writer_timeline(iot_slog2_writer *w, int32_t line);

/* Drawables, in increasing end time (a state's end, an arrow's later
 * vertex, an event's time); equal end times are fine.  info holds exactly
 * one value per conversion of the category's label, each with the
 * conversion's letter as its type (struct iot_slog2_value, slog2_read.h:
 * u.i for d h l x X, u.f for e E, u.s for s). */
int iot_slog2_writer_state(iot_slog2_writer *w, int32_t category, int32_t line, double start,
                           double end, const struct iot_slog2_value *info, int n_info);
/* An arrow from (send, from_line) to (recv, to_line); recv may precede send. */
int iot_slog2_writer_arrow(iot_slog2_writer *w, int32_t category, int32_t from_line, double send,
                           int32_t to_line, double recv, const struct iot_slog2_value *info,
                           int n_info);
int iot_slog2_writer_event(iot_slog2_writer *w, int32_t category, int32_t line, double time,
                           const struct iot_slog2_value *info, int n_info);

/* The reason for the last failure on w. */
const char *iot_slog2_writer_error(const iot_slog2_writer *w);

void iot_slog2_writer_stats(const iot_slog2_writer *w, struct iot_slog2_writer_stats *st);

/* Writes the open path of the tree, the categories, the line-ID maps, the
 * tree directory and the final header, and frees w.  A file without any
 * drawable cannot be written (Java's writer refuses it too): that, or any
 * earlier I/O error, removes the file and returns -1 with the reason in
 * err. */
int iot_slog2_writer_close(iot_slog2_writer *w, char *err, size_t errlen);

/* Frees w and removes the unfinished file. */
void iot_slog2_writer_abort(iot_slog2_writer *w);

#endif
