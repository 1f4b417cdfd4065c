/* Events in time order, in memory bounded whatever the store's size: runs
 * of XP_SORT_RUN events are sorted as they come, and when there is more
 * than one they go to a temporary file (in $TMPDIR, else /tmp; removed as
 * it is made) and are merged on reading.  The order is --jsonl's and
 * --csv's: start, end, node name, pid, tid, arrival. */
#ifndef IOT_EXPORT_SORT_H
#define IOT_EXPORT_SORT_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* 262 144 events, 24 MiB, and as much again while a run is sorted. */
#define XP_SORT_RUN (1u << 18)

struct xp_sorter;

/* run_events: events per run (0: XP_SORT_RUN). d must outlive the sorter
 * (its node names order events of equal times). */
struct xp_sorter *xp_sorter_new(const struct xp_data *d, size_t run_events);
/* 0, or -1 with errno (no memory, the temporary file could not be
 * written). */
int xp_sorter_add(struct xp_sorter *s, const struct xp_event *ev);
/* After the last xp_sorter_add: 0, or -1 with errno. */
int xp_sorter_finish(struct xp_sorter *s);
/* The next event in order into *ev: 1, 0 at the end, -1 with errno. */
int xp_sorter_next(struct xp_sorter *s, struct xp_event *ev);
uint64_t xp_sorter_count(const struct xp_sorter *s);
void xp_sorter_free(struct xp_sorter *s);

#endif
