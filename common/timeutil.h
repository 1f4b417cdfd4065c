#ifndef IOT_TIMEUTIL_H
#define IOT_TIMEUTIL_H

#include <stdint.h>
#include <stdio.h>
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

/* ns since the epoch as ISO 8601 UTC with all nine decimals, the way every
 * report of iotrace prints a time. */
static inline void iot_format_utc(char *buf, size_t len, int64_t ns)
{
    time_t sec = (time_t)(ns / 1000000000);
    long frac = (long)(ns % 1000000000);
    if (frac < 0) {
        frac += 1000000000;
        sec--;
    }
    struct tm tm;
    gmtime_r(&sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%09ldZ", frac);
}

#endif
