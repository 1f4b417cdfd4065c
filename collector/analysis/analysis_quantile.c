#include "analysis_quantile.h"

#include <stdlib.h>
#include <string.h>

#define B IOT_QHIST_SUB_BITS
#define PER_BLOCK (1u << B)

void iot_qhist_init(struct iot_qhist *h)
{
    memset(h, 0, sizeof *h);
}

void iot_qhist_free(struct iot_qhist *h)
{
    for (int k = 0; k < IOT_QHIST_BLOCKS; k++)
        free(h->block[k]);
    iot_qhist_init(h);
}

/* Block 0 holds the values 0 .. 2^B - 1, block k >= 1 the values
 * [2^(B+k-1), 2^(B+k)) in 2^B buckets of width 2^(k-1). */
static void locate(uint64_t v, unsigned *block, unsigned *sub)
{
    if (v < PER_BLOCK) {
        *block = 0;
        *sub = (unsigned)v;
        return;
    }
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - B;
    *block = shift + 1;
    *sub = (unsigned)(v >> shift) - PER_BLOCK;
}

static uint64_t bucket_low(unsigned block, unsigned sub)
{
    return block == 0 ? sub : (uint64_t)(PER_BLOCK + sub) << (block - 1);
}

static uint64_t bucket_width(unsigned block)
{
    return block == 0 ? 1 : 1ull << (block - 1);
}

int iot_qhist_add(struct iot_qhist *h, uint64_t v)
{
    unsigned block, sub;
    locate(v, &block, &sub);
    if (!h->block[block]) {
        if (!(h->block[block] = calloc(PER_BLOCK, sizeof(uint64_t))))
            return -1;
        h->bytes += PER_BLOCK * sizeof(uint64_t);
    }
    h->block[block][sub]++;
    if (h->n == 0 || v < h->min)
        h->min = v;
    if (h->n == 0 || v > h->max)
        h->max = v;
    h->n++;
    return 0;
}

/* The midpoint keeps the error symmetric: half a bucket either way. */
static uint64_t report(const struct iot_qhist *h, unsigned block, unsigned sub)
{
    uint64_t v = bucket_low(block, sub) + (bucket_width(block) - 1) / 2;
    return v < h->min ? h->min : v > h->max ? h->max : v;
}

uint64_t iot_qhist_quantile(const struct iot_qhist *h, double p)
{
    if (h->n == 0)
        return 0;
    double want = p * (double)h->n;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank >= h->n)
        return h->max; /* the extremes are known exactly */
    if (rank == 1)
        return h->min;
    uint64_t seen = 0;
    for (unsigned k = 0; k < IOT_QHIST_BLOCKS; k++) {
        if (!h->block[k])
            continue;
        for (unsigned s = 0; s < PER_BLOCK; s++)
            if ((seen += h->block[k][s]) >= rank)
                return report(h, k, s);
    }
    return h->max;
}

double iot_qhist_relative_error(void)
{
    return 1.0 / (double)(2u * PER_BLOCK);
}
