/* Event timestamps.
 *
 * Application threads read a raw clock: the invariant TSC where the CPU has
 * one (a few ns), clock_gettime(CLOCK_REALTIME) otherwise.  Whoever encodes
 * a batch (the sender thread, or an MPI-IO call sending its own) converts
 * raw readings to CLOCK_REALTIME ns with a calibration the sender thread
 * renews from clock_gettime on every sweep, so offsets and rate changes of
 * the system clock (or of libfaketime, which interposes clock_gettime) show
 * up in the converted times as they would with clock_gettime itself. */
#ifndef IOT_CLOCK_H
#define IOT_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "client.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define IOT_HAVE_TSC 1
#endif

static inline uint64_t iot_clock_raw(void)
{
#ifdef IOT_HAVE_TSC
    if (IOT_LIKELY(iot_g.use_tsc))
        return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Chooses the raw clock (IOTRACE_CLOCK=tsc|gettime overrides; iot_g.use_tsc
 * says which) and takes the first calibration point. */
IOT_HIDDEN void iot_clock_init(const char *choice);
/* Takes a new calibration point; sender thread, holding the right to
 * send (sender.c). */
IOT_HIDDEN void iot_clock_calibrate(void);

/* Two calibration points: raw readings map linearly between them and are
 * extrapolated past the newer one until the next sweep renews it.  Written
 * and read only by whoever holds the right to send (sender.c: the sender
 * thread, or an MPI-IO call sending its batch); here so that the
 * conversions below, made for every record, are inlined. */
struct iot_clock_cal {
    uint64_t raw_a, raw_b;
    int64_t ns_a, ns_b;
    double ns_per_tick;
};
IOT_HIDDEN extern struct iot_clock_cal iot_clock_cal;

/* Raw reading -> CLOCK_REALTIME ns, with the latest calibration. */
static inline int64_t iot_clock_to_ns(uint64_t raw)
{
    if (!iot_g.use_tsc)
        return (int64_t)raw;
    double d = (double)(int64_t)(raw - iot_clock_cal.raw_b) * iot_clock_cal.ns_per_tick;
    return iot_clock_cal.ns_b + (int64_t)d;
}

/* Length of a raw interval in ns.  Converted as a signed number, which
 * takes one instruction where an unsigned one takes several: no interval
 * between two readings of one process reaches 2^63 ticks. */
static inline uint64_t iot_clock_span_ns(uint64_t raw0, uint64_t raw1)
{
    if (raw1 <= raw0)
        return 0;
    if (!iot_g.use_tsc)
        return raw1 - raw0;
    return (uint64_t)((double)(int64_t)(raw1 - raw0) * iot_clock_cal.ns_per_tick);
}

#endif
