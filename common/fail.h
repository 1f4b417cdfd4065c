/* The one error pattern of the libraries: a function that fails writes why
 * into the caller's buffer (if any) and returns -1. */
#ifndef IOT_FAIL_H
#define IOT_FAIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int iot_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int iot_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#endif
