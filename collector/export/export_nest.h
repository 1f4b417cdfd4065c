/* Which slices may share a row: the one rule of the SLOG-2 and the Chrome
 * exports.  A row keeps the end times of the slices open on it, outermost
 * first; a new slice (they come in start order) goes on a row where it
 * nests inside the innermost open slice, or where nothing is open, because
 * Jumpshot, Perfetto and Catapult all draw a row's slices as a nest. */
#ifndef IOT_EXPORT_NEST_H
#define IOT_EXPORT_NEST_H

#include <stdint.h>

#include "grow.h"

struct xp_nest {
    int64_t *open; /* end times, outermost first */
    size_t n, cap;
};

/* 1: [start, end] was placed on this row; 0: it would overlap the innermost
 * open slice without nesting (try the next row); -1: out of memory. */
static inline int xp_nest_place(struct xp_nest *r, int64_t start, int64_t end)
{
    while (r->n && r->open[r->n - 1] <= start)
        r->n--;
    if (r->n && r->open[r->n - 1] < end)
        return 0;
    if (iot_grow((void **)&r->open, &r->cap, r->n + 1, sizeof *r->open, 16) < 0)
        return -1;
    r->open[r->n++] = end;
    return 1;
}

#endif
