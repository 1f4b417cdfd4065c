/* Streaming merge: events of many producers, each arriving in roughly
 * increasing start time but interleaved with the others, come out in
 * (aligned) start-time order behind a watermark.
 *
 * The watermark is the smallest of the latest start times of the active
 * producers and of the arrival time (the collector's clock, on which the
 * events are aligned too), minus `lateness`: a producer is expected never
 * to send an event that starts more than `lateness` before the newest one
 * it sent, and a producer not heard of yet sends events of about now.
 * Events starting at or before the watermark are released in order of
 * (t_start, arrival).  A producer that is closed, or that has sent nothing
 * for `idle` of arrival time, no longer holds the watermark back (it
 * rejoins with its next event).  The watermark never goes back.
 *
 * An event that arrives behind what has already been released (a producer
 * broke the lateness bound) is released at once, out of order, and counted
 * as late: nothing is ever dropped.
 *
 * Memory: the events between the watermark and the newest start times
 * (event rate times lateness; 112 bytes each, in chunks of up to 1024),
 * up to 64 drained chunks of each of two sizes kept for reuse, plus a few
 * words per producer and kind. */
#ifndef IOT_ANALYSIS_MERGE_H
#define IOT_ANALYSIS_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* Receives the released events in order; a non-zero return stops the
 * release and is returned by iot_merge_advance()/iot_merge_finish(). */
typedef int (*iot_merge_sink)(void *ctx, const struct xp_event *ev);

struct iot_merge_config {
    int64_t lateness_ns;
    int64_t idle_ns; /* 0: a producer stays active until closed */
};

struct mg_producer;
struct mg_queue;
struct mg_chunk;
struct mg_item;
struct mg_qent;

struct iot_merge {
    struct iot_merge_config cfg;
    struct mg_producer *prod;
    size_t n_prod;
    uint32_t *pheap; /* active producers, min-heap on their latest start */
    size_t pheap_n;
    uint32_t *dirty; /* producers that sent something since the last advance */
    size_t n_dirty, cap_dirty;
    struct mg_queue *queue; /* per (producer, kind): held events in arrival order */
    size_t n_queue;
    /* Drained chunks kept for reuse: [0] of the first size, [1] full-size. */
    struct mg_chunk *spare[2];
    size_t n_spare[2], chunk_items;
    struct mg_qent *qheap; /* non-empty queues, min-heap on their first event */
    size_t qheap_n;
    struct mg_item *strag; /* events that started before their queue's last */
    size_t strag_n, strag_cap;
    size_t heap_n; /* events held */
    int64_t watermark, last_out;
    uint64_t seq;
    /* counters */
    uint64_t pushed, released, late;
    uint64_t stragglers; /* events held out of their queue's order */
    int64_t max_late_ns; /* how far behind the released order the latest-arriving event was */
    size_t peak_held;
};

void iot_merge_init(struct iot_merge *m, const struct iot_merge_config *cfg);
void iot_merge_free(struct iot_merge *m);

/* Holds a copy of ev (ev->producer names its producer); -1 when out of
 * memory.  Nothing is released before the next iot_merge_advance(). */
int iot_merge_push(struct iot_merge *m, const struct xp_event *ev);

/* A producer that will send nothing more (its process ended). */
void iot_merge_close_producer(struct iot_merge *m, uint32_t producer);

/* A producer whose slot will be given to another: -1 while it still has
 * events held (or pushed since the last advance), else it is as if never
 * seen, and no longer holds the watermark back. */
int iot_merge_forget_producer(struct iot_merge *m, uint32_t producer);

/* Arrival time of the last advance that saw the producer push (INT64_MIN:
 * none). */
int64_t iot_merge_last_arrival(const struct iot_merge *m, uint32_t producer);

/* Recomputes the watermark at arrival time now_ns (the clock `idle` is
 * measured on; the collector's) and releases what it allows. */
int iot_merge_advance(struct iot_merge *m, int64_t now_ns, iot_merge_sink sink, void *ctx);

/* End of input: releases everything held. */
int iot_merge_finish(struct iot_merge *m, iot_merge_sink sink, void *ctx);

/* Bytes allocated (events, heaps, producers). */
size_t iot_merge_bytes(const struct iot_merge *m);

#endif
