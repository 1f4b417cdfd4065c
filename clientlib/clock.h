/* Event timestamps.
 *
 * Application threads read a raw clock: the invariant TSC where the CPU has
 * one (a few ns), clock_gettime(CLOCK_REALTIME) otherwise.  The sender
 * thread converts raw readings to CLOCK_REALTIME ns with a calibration it
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
/* Takes a new calibration point; sender thread only. */
IOT_HIDDEN void iot_clock_calibrate(void);
/* Raw reading -> CLOCK_REALTIME ns, with the latest calibration. */
IOT_HIDDEN int64_t iot_clock_to_ns(uint64_t raw);
/* Length of a raw interval in ns. */
IOT_HIDDEN uint64_t iot_clock_span_ns(uint64_t raw0, uint64_t raw1);

#endif
