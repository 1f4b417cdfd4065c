/* Latency of small synchronous operations through FUSE mounts, for the
 * GlusterFS translator benchmark (tests/bench/bench-gluster.sh).
 *
 * usage: bench_fuse_ops [-r REGISTRY] [-j JOB] [-s BYTES] OPS NAME:MODE:FILE...
 *
 * Opens each FILE (created if missing) with O_DIRECT, then times OPS
 * pwrite()s of BYTES (default 4096) to each, at aligned offsets cycling over
 * a 4 MiB region, and then OPS pread()s of the same offsets, after 100
 * untimed ones of each.  The files take turns operation by operation (the
 * first of each turn rotating), so that a machine whose load drifts slows
 * them all alike.  On a GlusterFS volume mounted with --direct-io-mode=enable
 * each operation is one FUSE request and one writev/readv on a brick, made
 * and waited for in this thread.  Prints per NAME and operation the mean and
 * the median (ns):
 *   NAME pwrite_ns MEAN
 *   NAME pwrite_p50_ns MEDIAN
 *   NAME pread_ns MEAN
 *   NAME pread_p50_ns MEDIAN
 *
 * MODE says what the CallID registry holds for this thread during FILE's
 * operations (-r opens this user's registry of base name REGISTRY, creating
 * it if needed, as the client library does; OPS 0 then only creates it):
 *   plain  nothing is done (for mounts without iotrace-client)
 *   tag    the thread has a slot (job JOB, default "bench", rank 0) with a
 *          new CallID published around each operation: iotrace-client finds
 *          it and tags the request
 *   miss   the thread has no slot: iotrace-client's lookup misses
 * Claiming and releasing the slot happen outside the timed part. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT, syscall() */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "registry.h"

#define REGION (4u << 20)
#define WARMUP 100
#define MAX_TARGETS 16

enum mode { PLAIN, TAG, MISS };

struct target {
    const char *name;
    enum mode mode;
    int fd;
    uint64_t *lat;
    uint64_t sum;
};

static iot_registry *reg;
static struct iot_reg_slot *slot;
static const char *job = "bench";
static uint32_t tid;
static uint64_t next_callid = 1;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Puts the registry in the state MODE asks for. */
static void set_mode(enum mode m)
{
    if (m == PLAIN)
        return;
    if (m == MISS) {
        if (slot)
            iot_registry_release(slot, tid);
        slot = NULL;
        return;
    }
    if (!slot && !(slot = iot_registry_claim(reg, tid, (uint32_t)getpid(), job, 0))) {
        fprintf(stderr, "bench_fuse_ops: no free registry slot\n");
        exit(1);
    }
}

/* One operation on target t; returns its duration. */
static uint64_t one(struct target *t, int write, char *buf, size_t bytes, long i)
{
    off_t off = (off_t)(i % (long)(REGION / bytes)) * (off_t)bytes;
    set_mode(t->mode);
    if (t->mode == TAG)
        iot_registry_begin(slot, next_callid++);
    uint64_t a = now_ns();
    ssize_t n = write ? pwrite(t->fd, buf, bytes, off) : pread(t->fd, buf, bytes, off);
    uint64_t d = now_ns() - a;
    if (t->mode == TAG)
        iot_registry_end(slot);
    if (n != (ssize_t)bytes) {
        fprintf(stderr, "bench_fuse_ops: %s: %s at %lld: %zd (%s)\n", t->name,
                write ? "pwrite" : "pread", (long long)off, n, n < 0 ? strerror(errno) : "short");
        exit(1);
    }
    return d;
}

static void loop(struct target *t, int nt, int write, char *buf, size_t bytes, long ops,
                 int timed)
{
    for (long i = 0; i < ops; i++)
        for (int k = 0; k < nt; k++) {
            struct target *x = &t[(i + k) % nt];
            uint64_t d = one(x, write, buf, bytes, i);
            if (timed) {
                x->lat[i] = d;
                x->sum += d;
            }
        }
}

static void report(struct target *t, int nt, const char *op, long ops)
{
    for (int k = 0; k < nt; k++) {
        qsort(t[k].lat, (size_t)ops, sizeof *t[k].lat, cmp_u64);
        printf("%s %s_ns %.1f\n%s %s_p50_ns %.1f\n", t[k].name, op, (double)t[k].sum / (double)ops,
               t[k].name, op, (double)t[k].lat[ops / 2]);
        t[k].sum = 0;
    }
}

int main(int argc, char **argv)
{
    const char *registry = NULL;
    int opt;
    size_t bytes = 4096;
    while ((opt = getopt(argc, argv, "r:j:s:")) != -1) {
        switch (opt) {
        case 'r': registry = optarg; break;
        case 'j': job = optarg; break;
        case 's': bytes = (size_t)strtoul(optarg, NULL, 10); break;
        default: goto usage;
        }
    }
    if (argc - optind < 1 || bytes == 0 || bytes > REGION || bytes % 512 != 0)
        goto usage;
    long ops = atol(argv[optind]);
    int nt = argc - optind - 1;
    if (ops < 0 || nt > MAX_TARGETS || (ops > 0 && nt == 0))
        goto usage;
    tid = (uint32_t)syscall(SYS_gettid);

    if (registry) {
        char name[512], err[256] = "name too long";
        if (iot_registry_user_name(registry, (uint32_t)geteuid(), name, sizeof name) == 0)
            reg = iot_registry_open(name, 1, err, sizeof err);
        if (!reg) {
            fprintf(stderr, "bench_fuse_ops: registry %s: %s\n", registry, err);
            return 1;
        }
    }
    if (ops == 0)
        goto done;

    struct target t[MAX_TARGETS];
    for (int k = 0; k < nt; k++) {
        char *spec = argv[optind + 1 + k], *m = strchr(spec, ':'), *f = m ? strchr(m + 1, ':') : NULL;
        if (!f)
            goto usage;
        *m++ = '\0';
        *f++ = '\0';
        t[k].name = spec;
        int mode = !strcmp(m, "plain") ? PLAIN : !strcmp(m, "tag") ? TAG : !strcmp(m, "miss") ? MISS : -1;
        if (mode < 0 || (mode != PLAIN && !reg))
            goto usage;
        t[k].mode = (enum mode)mode;
        t[k].fd = open(f, O_RDWR | O_CREAT | O_DIRECT, 0644);
        if (t[k].fd < 0) {
            fprintf(stderr, "bench_fuse_ops: %s: %s\n", f, strerror(errno));
            return 1;
        }
        t[k].lat = malloc((size_t)ops * sizeof *t[k].lat);
        t[k].sum = 0;
        if (!t[k].lat)
            return 1;
    }
    char *buf;
    if (posix_memalign((void **)&buf, 4096, bytes) != 0)
        return 1;
    memset(buf, 'x', bytes);

    loop(t, nt, 1, buf, bytes, WARMUP, 0);
    loop(t, nt, 1, buf, bytes, ops, 1);
    report(t, nt, "pwrite", ops);
    loop(t, nt, 0, buf, bytes, WARMUP, 0);
    loop(t, nt, 0, buf, bytes, ops, 1);
    report(t, nt, "pread", ops);
    for (int k = 0; k < nt; k++) {
        free(t[k].lat);
        close(t[k].fd);
    }
    free(buf);
done:
    if (slot)
        iot_registry_release(slot, tid);
    iot_registry_close(reg);
    return 0;

usage:
    fprintf(stderr,
            "usage: %s [-r REGISTRY] [-j JOB] [-s BYTES] OPS NAME:{plain|tag|miss}:FILE...\n",
            argv[0]);
    return 2;
}
