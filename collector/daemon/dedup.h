/* Which batches the store already holds, by (producer key, epoch, seq).
 *
 * Producers number their batches 0, 1, 2, ... per (producer, epoch), and the
 * agents resend until acknowledged, so each stream is kept as a floor below
 * which every seq was seen plus the few seqs seen above it (out of order or
 * after a gap).  Memory grows with the number of streams, not of batches. */
#ifndef IOT_DEDUP_H
#define IOT_DEDUP_H

#include <stddef.h>
#include <stdint.h>

struct iot_dedup;

struct iot_dedup *iot_dedup_new(void);
void iot_dedup_free(struct iot_dedup *d);

/* 1 if (key, epoch, seq) was added before, else 0. */
int iot_dedup_contains(const struct iot_dedup *d, const char *key, uint64_t epoch, uint64_t seq);

/* Records (key, epoch, seq): 1 if it is new, 0 if it was already there,
 * -1 when out of memory. */
int iot_dedup_add(struct iot_dedup *d, const char *key, uint64_t epoch, uint64_t seq);

/* Number of (producer, epoch) streams. */
size_t iot_dedup_streams(const struct iot_dedup *d);

/* Seqs held individually above the floors, summed over all streams. */
size_t iot_dedup_pending(const struct iot_dedup *d);

/* Floor of one stream (every seq below it was seen); 0 for an unknown stream. */
uint64_t iot_dedup_floor(const struct iot_dedup *d, const char *key, uint64_t epoch);

#endif
