/* Whether this machine has a core to spare, measured from /proc/stat.
 *
 * The live analysis reads the store and may fall behind, so on a machine
 * whose every core runs something else (ranks beside the collector) it is
 * the one that should wait.  Niceness and SCHED_IDLE do not make it wait:
 * measured on this project's IOR-like benchmark, the thread still took its
 * CPU from the ranks (docs/performance.md, *What the live analysis costs
 * the ranks*).  So it asks how much of the machine was idle over the last
 * interval, counting its own CPU time as idle (it would stop using it). */
#ifndef IOT_IDLECORES_H
#define IOT_IDLECORES_H

#include <stdint.h>

struct iot_idlecores {
    uint64_t total, idle; /* jiffies of all cores, from /proc/stat */
    int64_t self_ns;      /* the calling thread's CPU time */
    int64_t at_ns;        /* CLOCK_MONOTONIC of the sample; 0: none yet */
    long cores, hz;
    double spare;   /* cores idle (or the caller's) over the last interval, -1 unknown */
    int unreadable; /* /proc/stat could not be read (hidden, as by ProcSubset=pid) */
};

void iot_idlecores_init(struct iot_idlecores *c);

/* Takes a sample if at least min_interval_ns passed since the last one and
 * updates `spare` from the two; returns `spare` (-1 until two samples, or
 * when /proc/stat cannot be read).  Call from the thread whose own CPU
 * counts as spare. */
double iot_idlecores_sample(struct iot_idlecores *c, int64_t min_interval_ns);

#endif
