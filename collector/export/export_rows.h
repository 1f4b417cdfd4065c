/* One row per event: the columns of `iotrace-export --jsonl` and `--csv`
 * and the JSON Schema `--jsonl-schema` prints, from one table, so that the
 * formats and their description cannot drift (docs/export.md, "Columns"). */
#ifndef IOT_EXPORT_ROWS_H
#define IOT_EXPORT_ROWS_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "events.h"

#define XP_ROWS_SCHEMA "iotrace-events/4"

struct xp_rows;

/* format: "jsonl" or "csv" (CSV starts with its header line); out NULL:
 * scratch space for xp_rows_json_text only. */
struct xp_rows *xp_rows_open(FILE *out, const char *format);
int xp_rows_write(struct xp_rows *w, const struct xp_data *d, const struct xp_event *ev);
/* Flushes; -1 when anything could not be written. Frees w. */
int xp_rows_close(struct xp_rows *w);

/* The drop reasons' names, by Iotrace__DropReason value. */
#define XP_DROP_REASONS 7
extern const char *const xp_drop_reasons[XP_DROP_REASONS];

/* One row as a JSON object (for other formats that carry the same fields,
 * such as the Chrome trace's slice arguments); NULL when out of memory. */
json_t *xp_rows_json(const struct xp_data *d, const struct xp_event *ev);

/* The same row as text, appended to b: what json_dumps of xp_rows_json
 * gives, without the objects.  w: from xp_rows_open (its output unused),
 * for its scratch space. */
struct xp_buf;
void xp_rows_json_text(struct xp_rows *w, struct xp_buf *b, const struct xp_data *d,
                       const struct xp_event *ev);

/* iot_func_name(func), its length measured once; NULL for a number the
 * table does not have. */
const char *xp_func_name(unsigned func, size_t *len);

/* The JSON Schema (2020-12) of one JSON Lines row, ending in a newline. */
int xp_rows_schema(FILE *out);

#endif
