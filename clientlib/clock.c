#include "clock.h"

#include <stdatomic.h>
#include <string.h>

#ifdef IOT_HAVE_TSC
#include <cpuid.h>
#endif

struct iot_clock_cal iot_clock_cal;

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
    struct iot_clock_cal *c = &iot_clock_cal;
    sample(&c->raw_a, &c->ns_a);
    if (!iot_g.use_tsc) {
        c->ns_per_tick = 1.0;
        c->raw_b = c->raw_a;
        c->ns_b = c->ns_a;
        return;
    }
    /* A first rate estimate so that records converted before the first
     * sweep are already close; 2 ms of spinning happens once per process. */
    int64_t until = c->ns_a + 2000000;
    do
        sample(&c->raw_b, &c->ns_b);
    while (c->ns_b < until && c->ns_b >= c->ns_a);
    c->ns_per_tick =
        c->raw_b > c->raw_a ? (double)(c->ns_b - c->ns_a) / (double)(c->raw_b - c->raw_a) : 1.0;
}

void iot_clock_calibrate(void)
{
    if (!iot_g.use_tsc)
        return;
    struct iot_clock_cal *c = &iot_clock_cal;
    uint64_t raw;
    int64_t ns;
    sample(&raw, &ns);
    /* Keep the older point far enough back (>= 50 ms) for a precise rate. */
    if (ns - c->ns_b >= 50000000 || ns < c->ns_b) {
        c->raw_a = c->raw_b;
        c->ns_a = c->ns_b;
    }
    c->raw_b = raw;
    c->ns_b = ns;
    if (c->raw_b > c->raw_a && c->ns_b > c->ns_a)
        c->ns_per_tick = (double)(c->ns_b - c->ns_a) / (double)(c->raw_b - c->raw_a);
}
