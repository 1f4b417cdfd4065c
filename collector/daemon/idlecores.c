#include "idlecores.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "timeutil.h"

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void iot_idlecores_init(struct iot_idlecores *c)
{
    *c = (struct iot_idlecores){.spare = -1};
    c->cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->hz = sysconf(_SC_CLK_TCK);
}

/* The first line of /proc/stat: user nice system idle iowait irq softirq
 * steal (guest time is already in user).  Idle is idle + iowait. */
static int read_stat(uint64_t *total, uint64_t *idle)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *idle = v[3] + v[4];
    return 0;
}

double iot_idlecores_sample(struct iot_idlecores *c, int64_t min_interval_ns)
{
    int64_t now = iot_mono_ns();
    if (c->at_ns && now - c->at_ns < min_interval_ns)
        return c->spare;
    uint64_t total, idle;
    if (read_stat(&total, &idle) < 0 || c->cores < 1 || c->hz < 1) {
        c->unreadable = 1;
        c->spare = -1;
        return -1;
    }
    int64_t self = thread_cpu_ns();
    if (c->at_ns && total > c->total) {
        double dt = (double)(total - c->total); /* jiffies of all cores together */
        double own = (double)(self - c->self_ns) * (double)c->hz / 1e9;
        double free = ((double)(idle - c->idle) + own) / dt * (double)c->cores;
        c->spare = free < 0 ? 0 : free > (double)c->cores ? (double)c->cores : free;
    }
    c->total = total;
    c->idle = idle;
    c->self_ns = self;
    c->at_ns = now;
    return c->spare;
}
