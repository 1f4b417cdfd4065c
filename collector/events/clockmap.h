/* Clock alignment of one node: maps times read on the node's clock
 * (CLOCK_REALTIME of that node) to the collector's clock.
 *
 * The node's agent measures offset = collector clock - node clock with
 * NTP-style exchanges and sends one sample per burst (ClockSync records,
 * docs/transport.md).  Between two samples the offset is interpolated
 * linearly in local time, so a constant drift between the clocks is followed
 * exactly; before the first and after the last sample the nearest sample's
 * offset is used.  See docs/export.md ("Clock alignment") for the error bound.
 *
 * Usage: iot_clockmap_add() every sample (any order), iot_clockmap_finish()
 * once, then query. */
#ifndef IOT_CLOCKMAP_H
#define IOT_CLOCKMAP_H

#include <stddef.h>
#include <stdint.h>

struct iot_clock_sample {
    int64_t local_ns;  /* node clock at the exchange's midpoint */
    int64_t offset_ns; /* collector clock minus node clock */
    uint64_t rtt_ns;   /* round trip of the exchange; the offset is within +-rtt/2 */
};

struct iot_clockmap {
    struct iot_clock_sample *v;
    size_t n, cap;
    int finished; /* sorted by local_ns, one sample per local time */
};

void iot_clockmap_init(struct iot_clockmap *m);
void iot_clockmap_free(struct iot_clockmap *m);

/* Returns -1 when out of memory.  Invalidates a finished map until the next
 * iot_clockmap_finish(). */
int iot_clockmap_add(struct iot_clockmap *m, int64_t local_ns, int64_t offset_ns,
                     uint64_t rtt_ns);

/* Sorts by local time; of samples with the same local time the one with the
 * smallest round trip (the most precise) is kept. */
void iot_clockmap_finish(struct iot_clockmap *m);

/* Offset at a local time; 0 without samples. */
int64_t iot_clockmap_offset(const struct iot_clockmap *m, int64_t local_ns);

/* local_ns on the collector's clock.  Non-decreasing in local_ns as long as
 * the offset's slope between samples is above -1 (real clocks: |slope| is
 * parts per million). */
int64_t iot_clockmap_map(const struct iot_clockmap *m, int64_t local_ns);

/* The same, with *hint (start at 0) the interval the caller's last time fell
 * in: a caller whose times mostly grow skips the search.  Any value of
 * *hint gives the same result. */
int64_t iot_clockmap_offset_at(const struct iot_clockmap *m, size_t *hint, int64_t local_ns);
int64_t iot_clockmap_map_at(const struct iot_clockmap *m, size_t *hint, int64_t local_ns);

/* Error bound of the mapped time at local_ns: the larger rtt/2 of the two
 * samples around it, plus what a change of drift inside that interval could
 * add (estimated from the neighbouring intervals' slopes); outside the
 * sampled span, the nearest sample's rtt/2 plus the drift of the nearest
 * interval times the distance.  -1 without samples. */
int64_t iot_clockmap_error_at(const struct iot_clockmap *m, int64_t local_ns);

/* What is reported per node (iotrace-export --clock, and --stats). */
struct iot_clock_summary {
    size_t samples;
    int64_t offset_ns;       /* of the last sample */
    uint64_t rtt_ns;         /* smallest round trip */
    int64_t error_ns;        /* bound over the sampled span: max of iot_clockmap_error_at */
    int has_drift;           /* at least two samples */
    double drift_ppm;        /* how much faster the node's clock runs than the
                                collector's, first to last sample (ppm) */
    int64_t first_local_ns, last_local_ns;
};

/* All zero (samples = 0) for an empty map. */
void iot_clockmap_summary(const struct iot_clockmap *m, struct iot_clock_summary *s);

/* The summary of the samples that align times from from_ns to to_ns (the
 * collector's clock): the last sample at or before from_ns through the first
 * at or after to_ns.  Samples outside them do not move those times, so a
 * job's figures stop changing once its node has a sample after its end,
 * however long the agent runs on (--stats, the live /stats). */
void iot_clockmap_summary_span(const struct iot_clockmap *m, int64_t from_ns, int64_t to_ns,
                               struct iot_clock_summary *s);

/* Whether the map has a sample at or after t_ns (the collector's clock):
 * then times up to t_ns are aligned as they will stay. */
int iot_clockmap_settled(const struct iot_clockmap *m, int64_t t_ns);

#endif
