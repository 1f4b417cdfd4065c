#include "log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "iotrace";
static enum iot_log_level threshold = IOT_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* systemd sets JOURNAL_STREAM when stderr goes to the journal. */
static int getenv_journal(void) { return getenv("JOURNAL_STREAM") != NULL; }

void iot_log_init(const char *program, enum iot_log_level level)
{
    prog = program;
    threshold = level;
}

void iot_log_set_level(enum iot_log_level level) { threshold = level; }

int iot_log_enabled(enum iot_log_level level) { return level <= threshold; }

int iot_log_parse_level(const char *name)
{
    for (int i = 0; i <= IOT_LOG_DEBUG; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    if (strcmp(name, "warning") == 0)
        return IOT_LOG_WARN;
    return -1;
}

void iot_log(enum iot_log_level level, const char *fmt, ...)
{
    if (level > threshold)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The journal adds its own timestamps; a plain terminal gets one here. */
    char stamp[40] = "";
    if (!getenv_journal()) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(stamp + n, sizeof stamp - n, ".%03ldZ ", ts.tv_nsec / 1000000);
    }
    fprintf(stderr, "%s%s[%d] %s: %s\n", stamp, prog, (int)getpid(), level_names[level], msg);
}
