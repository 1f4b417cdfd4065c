/* Throughput and memory of the streaming SLOG-2 writer (collector/slog2_write.c).
 *
 *   bench_slog2 [-n DRAWABLES] [-t TIMELINES] [-l LEAF_BYTES] [-c CHILDREN] [-o FILE] [-k]
 *
 * Writes DRAWABLES (default 10 M) synthetic drawables shaped like an
 * iotrace export: on each of TIMELINES (default 16) timelines, half of them
 * "MPI ranks" and half "server threads", MPI-IO states with a CallID,
 * offset and size, disk-operation states, and an arrow from a rank's call
 * to a server thread's operation.  End times never decrease, as the writer
 * requires.  Prints drawables/s (the whole run, close included), the peak
 * resident set of the process and the writer's own peak heap.  The file
 * (default /tmp/bench_slog2.slog2) is removed unless -k is given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "slog2_write.h"

enum { CAT_ARROW = 0, CAT_MPI = 1, CAT_DISK = 2 };

struct bench {
    uint64_t n;
    int timelines;
    struct iot_slog2_options opt;
    const char *path;
    int keep;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-n DRAWABLES] [-t TIMELINES] [-l LEAF_BYTES] [-c CHILDREN] "
            "[-o FILE] [-k]\n",
            prog);
    return 2;
}

static int parse_args(int argc, char **argv, struct bench *b)
{
    int c;
    *b = (struct bench){.n = 10000000, .timelines = 16, .path = "/tmp/bench_slog2.slog2"};
    while ((c = getopt(argc, argv, "n:t:l:c:o:k")) != -1) {
        switch (c) {
        case 'n': b->n = strtoull(optarg, NULL, 10); break;
        case 't': b->timelines = atoi(optarg); break;
        case 'l': b->opt.leaf_bytesize = atoi(optarg); break;
        case 'c': b->opt.children_per_node = (int16_t)atoi(optarg); break;
        case 'o': b->path = optarg; break;
        case 'k': b->keep = 1; break;
        default: return -1;
        }
    }
    return b->timelines >= 2 ? 0 : -1;
}

static int define(iot_slog2_writer *w, int timelines)
{
    static const struct iot_slog2_catdef cats[] = {
        {CAT_ARROW, "Read Path", IOT_SLOG2_ARROW, 255, 165, 0, 255, 3, "CallID=0x%X", 0, NULL},
        {CAT_MPI, "MPI_File_read_at", IOT_SLOG2_STATE, 0, 128, 255, 255, 1,
         "CallID=0x%X offset=%l bytes=%l", 0, NULL},
        {CAT_DISK, "disk read", IOT_SLOG2_STATE, 255, 64, 64, 255, 1,
         "CallID=0x%X offset=%l bytes=%l", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
        if (iot_slog2_writer_category(w, &cats[i]) < 0)
            return -1;
    for (int i = 0; i < timelines; i++)
        if (iot_slog2_writer_timeline(w, i) < 0)
            return -1;
    return 0;
}

/* One MPI-IO call on a rank, its disk operation on a server thread inside
 * it, and the arrow between them: three drawables, fed by end time. */
static int write_call(iot_slog2_writer *w, int timelines, double *now)
{
    uint64_t r = next_rand();
    int rank = (int)(r % (uint64_t)(timelines / 2));
    int server = timelines / 2 + (int)((r >> 16) % (uint64_t)(timelines - timelines / 2));
    double start = *now, op_start = start + 2e-6 + (double)((r >> 24) % 100) * 1e-7;
    double op_end = op_start + 1e-5 + (double)((r >> 32) % 1000) * 1e-7;
    struct iot_slog2_value v[3] = {{.type = 'X', .u.i = (int64_t)r},
                                   {.type = 'l', .u.i = (int64_t)((r >> 20) & 0xffffff) * 4096},
                                   {.type = 'l', .u.i = 4096}};
    *now = op_end + 1e-6;
    if (iot_slog2_writer_arrow(w, CAT_ARROW, rank, start, server, op_start, v, 1) < 0 ||
        iot_slog2_writer_state(w, CAT_DISK, server, op_start, op_end, v, 3) < 0 ||
        iot_slog2_writer_state(w, CAT_MPI, rank, start, *now, v, 3) < 0)
        return -1;
    return 0;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    struct bench b;
    char err[512];
    if (parse_args(argc, argv, &b) < 0)
        return usage(argv[0]);
    double t0 = seconds(), now = 1.0;
    iot_slog2_writer *w = iot_slog2_writer_open(b.path, &b.opt, err, sizeof err);
    if (!w) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct iot_slog2_writer_stats st;
    int rc = define(w, b.timelines);
    for (uint64_t i = 0; rc == 0 && i < b.n; i += 3)
        rc = write_call(w, b.timelines, &now);
    if (rc < 0)
        fprintf(stderr, "%s\n", iot_slog2_writer_error(w));
    iot_slog2_writer_stats(w, &st);
    if (iot_slog2_writer_close(w, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double dt = seconds() - t0;
    struct rusage ru;
    struct stat fst;
    getrusage(RUSAGE_SELF, &ru);
    if (stat(b.path, &fst) != 0)
        fst.st_size = 0;
    printf("%llu drawables in %.3f s: %.3f M drawables/s; %.1f MB written, %llu nodes, depth %d; "
           "peak RSS %ld KiB, writer heap peak %zu KiB\n",
           (unsigned long long)st.drawables, dt, (double)st.drawables / dt / 1e6,
           (double)fst.st_size / 1e6, (unsigned long long)st.nodes_written + (unsigned)st.depth + 1,
           st.depth, ru.ru_maxrss, st.peak_bytes / 1024);
    if (!b.keep)
        unlink(b.path);
    return rc < 0;
}
