#include "clockmap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void iot_clockmap_init(struct iot_clockmap *m) { memset(m, 0, sizeof *m); }

void iot_clockmap_free(struct iot_clockmap *m)
{
    free(m->v);
    memset(m, 0, sizeof *m);
}

int iot_clockmap_add(struct iot_clockmap *m, int64_t local_ns, int64_t offset_ns,
                     uint64_t rtt_ns)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct iot_clock_sample *v = realloc(m->v, cap * sizeof *v);
        if (!v)
            return -1;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = (struct iot_clock_sample){local_ns, offset_ns, rtt_ns};
    m->finished = 0;
    return 0;
}

/* Ties on local time put the smallest round trip first, so that keeping
 * the first of each run keeps the most precise sample. */
static int cmp_sample(const void *pa, const void *pb)
{
    const struct iot_clock_sample *a = pa, *b = pb;
    if (a->local_ns != b->local_ns)
        return a->local_ns < b->local_ns ? -1 : 1;
    return a->rtt_ns < b->rtt_ns ? -1 : a->rtt_ns > b->rtt_ns;
}

void iot_clockmap_finish(struct iot_clockmap *m)
{
    if (m->n > 1)
        qsort(m->v, m->n, sizeof *m->v, cmp_sample);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (k == 0 || m->v[k - 1].local_ns != m->v[i].local_ns)
            m->v[k++] = m->v[i];
    m->n = k;
    m->finished = 1;
}

/* Index of the last sample at or before t, or -1 if t precedes them all. */
static long segment(const struct iot_clockmap *m, int64_t t)
{
    size_t lo = 0, hi = m->n; /* answer in [lo - 1, hi - 1] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].local_ns <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

/* Exact integer interpolation: offsets of seconds times gaps of hours do not
 * fit in 64 bits.  Truncation keeps each segment monotonic in t.  Real
 * offsets change by microseconds between samples seconds apart, so the
 * product nearly always fits in 64 bits, where division is several times
 * cheaper than __int128's; both truncate toward zero alike. */
static int64_t interpolate(const struct iot_clock_sample *a, const struct iot_clock_sample *b,
                           int64_t t)
{
    int64_t doff, dt, den, num;
    if (!__builtin_sub_overflow(b->offset_ns, a->offset_ns, &doff) &&
        !__builtin_sub_overflow(t, a->local_ns, &dt) &&
        !__builtin_sub_overflow(b->local_ns, a->local_ns, &den) &&
        !__builtin_mul_overflow(doff, dt, &num))
        return a->offset_ns + num / den;
    __int128 wide = ((__int128)b->offset_ns - a->offset_ns) * ((__int128)t - a->local_ns);
    return (int64_t)(a->offset_ns + wide / ((__int128)b->local_ns - a->local_ns));
}

/* Times past the last sample (a live job, ahead of its agent's next
 * exchange) or before the first need no search; nor, mostly, does a time
 * in the interval of the one before (a node's events come in time order). */
int64_t iot_clockmap_offset_at(const struct iot_clockmap *m, size_t *hint, int64_t local_ns)
{
    if (m->n == 0)
        return 0;
    if (local_ns >= m->v[m->n - 1].local_ns)
        return m->v[m->n - 1].offset_ns;
    if (local_ns < m->v[0].local_ns)
        return m->v[0].offset_ns;
    size_t i = *hint;
    if (i + 1 >= m->n || local_ns < m->v[i].local_ns || local_ns >= m->v[i + 1].local_ns)
        *hint = i = (size_t)segment(m, local_ns);
    return interpolate(&m->v[i], &m->v[i + 1], local_ns);
}

int64_t iot_clockmap_offset(const struct iot_clockmap *m, int64_t local_ns)
{
    size_t hint = 0;
    return iot_clockmap_offset_at(m, &hint, local_ns);
}

int64_t iot_clockmap_map_at(const struct iot_clockmap *m, size_t *hint, int64_t local_ns)
{
    int64_t off = iot_clockmap_offset_at(m, hint, local_ns), t;
    if (__builtin_add_overflow(local_ns, off, &t))
        return off > 0 ? INT64_MAX : INT64_MIN;
    return t;
}

int64_t iot_clockmap_map(const struct iot_clockmap *m, int64_t local_ns)
{
    size_t hint = 0;
    return iot_clockmap_map_at(m, &hint, local_ns);
}

static int64_t half_rtt(const struct iot_clock_sample *s)
{
    uint64_t h = s->rtt_ns / 2 + (s->rtt_ns & 1);
    return h > INT64_MAX ? INT64_MAX : (int64_t)h;
}

/* b - a as a double, the difference taken first: times of ~1.7e18 ns are
 * only exact to 256 ns as doubles. */
static double span(int64_t a, int64_t b) { return (double)((__int128)b - a); }

/* Offset slope of interval k (between samples k and k+1), dimensionless. */
static double slope(const struct iot_clockmap *m, size_t k)
{
    const struct iot_clock_sample *a = &m->v[k], *b = &m->v[k + 1];
    return span(a->offset_ns, b->offset_ns) / span(a->local_ns, b->local_ns);
}

/* Linear interpolation follows a constant drift exactly; what it misses is a
 * change of drift inside the interval.  If the slope changed by d somewhere
 * in an interval of length g, the true offset leaves the chord by at most
 * d*g/4; d is estimated from the neighbouring intervals' slopes. */
static double drift_change_term(const struct iot_clockmap *m, size_t i)
{
    double s = slope(m, i), d = 0;
    if (i > 0)
        d = fabs(s - slope(m, i - 1));
    if (i + 2 < m->n)
        d = fmax(d, fabs(slope(m, i + 1) - s));
    return d * span(m->v[i].local_ns, m->v[i + 1].local_ns) / 4;
}

static int64_t add_bound(int64_t base, double extra)
{
    double t = (double)base + ceil(extra);
    return t >= 9.2e18 ? INT64_MAX : (int64_t)t;
}

static int64_t interval_error(const struct iot_clockmap *m, size_t i)
{
    int64_t a = half_rtt(&m->v[i]), b = half_rtt(&m->v[i + 1]);
    return add_bound(a > b ? a : b, drift_change_term(m, i));
}

int64_t iot_clockmap_error_at(const struct iot_clockmap *m, int64_t local_ns)
{
    if (m->n == 0)
        return -1;
    long i = segment(m, local_ns);
    if (m->n == 1)
        return half_rtt(&m->v[0]);
    /* Outside the span the offset is held constant while the clocks keep
     * drifting apart at (about) the nearest interval's rate. */
    if (i < 0)
        return add_bound(half_rtt(&m->v[0]),
                         fabs(slope(m, 0)) * span(local_ns, m->v[0].local_ns));
    if ((size_t)i + 1 >= m->n)
        return add_bound(half_rtt(&m->v[m->n - 1]),
                         fabs(slope(m, m->n - 2)) * span(m->v[m->n - 1].local_ns, local_ns));
    return interval_error(m, (size_t)i);
}

void iot_clockmap_summary(const struct iot_clockmap *m, struct iot_clock_summary *s)
{
    memset(s, 0, sizeof *s);
    if (m->n == 0)
        return;
    const struct iot_clock_sample *first = &m->v[0], *last = &m->v[m->n - 1];
    s->samples = m->n;
    s->offset_ns = last->offset_ns;
    s->first_local_ns = first->local_ns;
    s->last_local_ns = last->local_ns;
    s->rtt_ns = first->rtt_ns;
    s->error_ns = half_rtt(first);
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].rtt_ns < s->rtt_ns)
            s->rtt_ns = m->v[i].rtt_ns;
    for (size_t i = 0; i + 1 < m->n; i++) {
        int64_t e = interval_error(m, i);
        if (e > s->error_ns)
            s->error_ns = e;
    }
    if (m->n < 2)
        return;
    /* Collector time elapses (1 + k) times as fast as node time, so the
     * node's clock runs 1 / (1 + k) as fast as the collector's:
     * 1 / (1 + k) - 1 = -k / (1 + k). */
    double k = span(first->offset_ns, last->offset_ns) / span(first->local_ns, last->local_ns);
    s->has_drift = 1;
    s->drift_ppm = k > -1 ? -k / (1 + k) * 1e6 : -k * 1e6;
    if (s->drift_ppm == 0)
        s->drift_ppm = 0; /* not -0, which prints as "-0.000" */
}

/* A sample's own time on the collector's clock; samples are in local time
 * order and the mapping is monotonic, so these are ordered too. */
static __int128 sample_at(const struct iot_clock_sample *s)
{
    return (__int128)s->local_ns + s->offset_ns;
}

void iot_clockmap_summary_span(const struct iot_clockmap *m, int64_t from_ns, int64_t to_ns,
                               struct iot_clock_summary *s)
{
    size_t lo = 0, hi = m->n ? m->n - 1 : 0;
    for (size_t i = 0; i < m->n && sample_at(&m->v[i]) <= from_ns; i++)
        lo = i;
    for (size_t i = m->n; i-- > lo;)
        if (sample_at(&m->v[i]) >= to_ns)
            hi = i;
    struct iot_clockmap view = {.v = m->v + lo, .n = m->n ? hi - lo + 1 : 0, .finished = 1};
    iot_clockmap_summary(&view, s);
}

int iot_clockmap_settled(const struct iot_clockmap *m, int64_t t_ns)
{
    return m && m->n && sample_at(&m->v[m->n - 1]) >= t_ns;
}
