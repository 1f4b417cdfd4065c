#ifndef IOT_TIMEUTIL_H
#define IOT_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

/* Wall-clock ns: the timeline every iotrace event is stamped on, so that the
 * collector can align nodes (and clock-shifting tools act on it). */
static inline int64_t iot_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Monotonic ns, for timeouts and rates. */
static inline int64_t iot_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
