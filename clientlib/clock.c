#include "clock.h"

#include <stdatomic.h>
#include <string.h>

#ifdef IOT_HAVE_TSC
#include <cpuid.h>
#endif

/* Two calibration points: raw readings map linearly between them and are
 * extrapolated past the newer one until the next sweep renews it. */
static struct {
    uint64_t raw_a, raw_b;
    int64_t ns_a, ns_b;
    double ns_per_tick;
} cal;

static int64_t gettime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#ifdef IOT_HAVE_TSC
static int cpu_has_invariant_tsc(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}
#endif

/* A clock_gettime reading bracketed by two TSC reads; the tightest of a few
 * tries pins the pair down to a few ns. */
static void sample(uint64_t *raw, int64_t *ns)
{
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t r0 = iot_clock_raw();
        int64_t t = gettime_ns();
        uint64_t r1 = iot_clock_raw();
        if (r1 - r0 < best_gap) {
            best_gap = r1 - r0;
            *raw = r0 + (r1 - r0) / 2;
            *ns = t;
        }
    }
}

void iot_clock_init(const char *choice)
{
    iot_g.use_tsc = 0;
#ifdef IOT_HAVE_TSC
    if (!choice || strcmp(choice, "gettime") != 0)
        iot_g.use_tsc = cpu_has_invariant_tsc() || (choice && !strcmp(choice, "tsc"));
#else
    (void)choice;
#endif
    sample(&cal.raw_a, &cal.ns_a);
    if (!iot_g.use_tsc) {
        cal.ns_per_tick = 1.0;
        cal.raw_b = cal.raw_a;
        cal.ns_b = cal.ns_a;
        return;
    }
    /* A first rate estimate so that records converted before the first
     * sweep are already close; 2 ms of spinning happens once per process. */
    int64_t until = cal.ns_a + 2000000;
    do
        sample(&cal.raw_b, &cal.ns_b);
    while (cal.ns_b < until && cal.ns_b >= cal.ns_a);
    cal.ns_per_tick = cal.raw_b > cal.raw_a
                          ? (double)(cal.ns_b - cal.ns_a) / (double)(cal.raw_b - cal.raw_a)
                          : 1.0;
}

void iot_clock_calibrate(void)
{
    if (!iot_g.use_tsc)
        return;
    uint64_t raw;
    int64_t ns;
    sample(&raw, &ns);
    /* Keep the older point far enough back (>= 50 ms) for a precise rate. */
    if (ns - cal.ns_b >= 50000000 || ns < cal.ns_b) {
        cal.raw_a = cal.raw_b;
        cal.ns_a = cal.ns_b;
    }
    cal.raw_b = raw;
    cal.ns_b = ns;
    if (cal.raw_b > cal.raw_a && cal.ns_b > cal.ns_a)
        cal.ns_per_tick = (double)(cal.ns_b - cal.ns_a) / (double)(cal.raw_b - cal.raw_a);
}

int64_t iot_clock_to_ns(uint64_t raw)
{
    if (!iot_g.use_tsc)
        return (int64_t)raw;
    double d = (double)(int64_t)(raw - cal.raw_b) * cal.ns_per_tick;
    return cal.ns_b + (int64_t)d;
}

uint64_t iot_clock_span_ns(uint64_t raw0, uint64_t raw1)
{
    if (raw1 <= raw0)
        return 0;
    if (!iot_g.use_tsc)
        return raw1 - raw0;
    return (uint64_t)((double)(raw1 - raw0) * cal.ns_per_tick);
}
