/* Bounded-memory quantiles of non-negative integers (durations in ns): a
 * log-linear histogram in the manner of HdrHistogram.
 *
 * Values below 2^(B+1) (B = IOT_QHIST_SUB_BITS) get a bucket each; above,
 * every power of two [2^k, 2^(k+1)) is cut into 2^B buckets of equal width
 * 2^(k-B).  A bucket's width is thus at most 1/2^B of its lower bound, and
 * its midpoint is within 1/2^(B+1) of any value in it: with B = 7 a
 * quantile is reported within 0.39 % (relative) of the true one, whatever
 * the number of values.  Buckets are allocated one power of two at a time,
 * when a value first falls there: about 1 KiB per power of two in use,
 * never more than 58 KiB. */
#ifndef IOT_ANALYSIS_QUANTILE_H
#define IOT_ANALYSIS_QUANTILE_H

#include <stddef.h>
#include <stdint.h>

#define IOT_QHIST_SUB_BITS 7
#define IOT_QHIST_BLOCKS (64 - IOT_QHIST_SUB_BITS + 1)

struct iot_qhist {
    uint64_t *block[IOT_QHIST_BLOCKS]; /* block k: 2^B counts, NULL until used */
    uint64_t n, min, max;
    size_t bytes; /* allocated for the blocks */
};

void iot_qhist_init(struct iot_qhist *h);
void iot_qhist_free(struct iot_qhist *h);

/* Returns -1 when out of memory (the value is then not counted). */
int iot_qhist_add(struct iot_qhist *h, uint64_t v);

/* The nearest-rank p-quantile (0 < p <= 1: the ceil(p*n)-th smallest
 * value), as the midpoint of its bucket clamped to [min, max]; within
 * iot_qhist_relative_error() of the exact value, and exact when it is the
 * smallest or the largest value (p99 of fewer than 100 values).  0 when
 * empty. */
uint64_t iot_qhist_quantile(const struct iot_qhist *h, double p);

/* The bound on |reported - exact| / exact: 2^-(B+1). */
double iot_qhist_relative_error(void);

#endif
