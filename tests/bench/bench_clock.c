/* What one reading of each raw clock the client library can use costs
 * (IOTRACE_CLOCK: the TSC or clock_gettime(CLOCK_REALTIME), clientlib/clock.h).
 * A traced MPI-IO call with one POSIX call inside reads the clock four
 * times, which instruction counts do not show (docs/performance.md, "Where
 * a 4 KiB read's cost is now").
 *
 *     bench_clock [READINGS]
 *
 * Rounds of READINGS (default 10 000 000) readings of each clock in turn,
 * timed by CLOCK_MONOTONIC; prints the median and range of ns per reading
 * over 7 rounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#define ROUNDS 7

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The sum is printed, so that no reading is optimised away. */
static volatile uint64_t sink;

static double per_gettime(long n)
{
    uint64_t s = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        s += (uint64_t)t.tv_nsec;
    }
    double t1 = now_ns();
    sink += s;
    return (t1 - t0) / (double)n;
}

#ifdef HAVE_TSC
static double per_tsc(long n)
{
    uint64_t s = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        s += __rdtsc();
    double t1 = now_ns();
    sink += s;
    return (t1 - t0) / (double)n;
}
#endif

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *v)
{
    qsort(v, ROUNDS, sizeof *v, cmp);
    printf("%-34s %6.1f ns per reading (rounds %.1f-%.1f); 4 a call: %.0f ns\n", name,
           v[ROUNDS / 2], v[0], v[ROUNDS - 1], 4 * v[ROUNDS / 2]);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    if (n <= 0) {
        fprintf(stderr, "usage: bench_clock [READINGS]\n");
        return 2;
    }
    double g[ROUNDS];
#ifdef HAVE_TSC
    double t[ROUNDS];
#endif
    for (int r = 0; r < ROUNDS; r++) { /* interleaved, so that load affects both */
        g[r] = per_gettime(n);
#ifdef HAVE_TSC
        t[r] = per_tsc(n);
#endif
    }
#ifdef HAVE_TSC
    report("TSC (IOTRACE_CLOCK=tsc)", t);
#endif
    report("clock_gettime (IOTRACE_CLOCK=gettime)", g);
    return (int)(sink & 0);
}
