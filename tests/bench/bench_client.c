/* Cost of one intercepted call: MPI_File_write_at and pwrite of 8 bytes to
 * a file in /dev/shm, timed in a loop.  Run with and without
 * libiotrace-client preloaded (bench-client.sh does both in one run).
 * usage: bench_client FILE ITERATIONS [mpi|posix|latency]
 * mpi or posix runs one of the two loops only, so that an instruction
 * count (bench-client.sh --instructions) can tell the calls apart; latency
 * times each MPI_File_write_at of the loop on its own and prints the
 * distribution (bench-client.sh --latency): the mean hides the rare call
 * that also sends a batch (IOTRACE_INLINE_SEND). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RUSAGE_THREAD */
#endif
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Per-call times of n MPI_File_write_at: percentiles and the largest. */
static void latency_loop(MPI_File fh, long n, const char *buf)
{
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < n / 10; i++) /* warm up */
        MPI_File_write_at(fh, (i & 4095) * 8, buf, 8, MPI_BYTE, MPI_STATUS_IGNORE);
    for (long i = 0; i < n; i++) {
        double t0 = now();
        MPI_File_write_at(fh, (i & 4095) * 8, buf, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        t[i] = now() - t0;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    static const double q[] = {0.5, 0.99, 0.999, 0.9999};
    static const char *const name[] = {"p50", "p99", "p99_9", "p99_99"};
    for (int k = 0; k < 4; k++)
        printf("latency_%s_ns %.0f\n", name[k], t[(long)(q[k] * (double)(n - 1))] * 1e9);
    printf("latency_max_ns %.0f\n", t[n - 1] * 1e9);
    free(t);
}

static double rusage_ns(const struct rusage *r)
{
    return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e9 +
           (r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1e3;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE ITERATIONS [mpi|posix|latency]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long n = atol(argv[2]);
    int latency = argc >= 4 && strcmp(argv[3], "latency") == 0;
    int mpi = !latency && (argc < 4 || strcmp(argv[3], "posix") != 0);
    int posix = !latency && (argc < 4 || strcmp(argv[3], "mpi") != 0);
    char buf[8] = "iotrace";
    MPI_File fh;
    MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    if (mpi) {
        for (long i = 0; i < n / 10; i++) /* warm up */
            MPI_File_write_at(fh, (i & 4095) * 8, buf, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        double t0 = now();
        for (long i = 0; i < n; i++)
            MPI_File_write_at(fh, (i & 4095) * 8, buf, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        printf("MPI_File_write_at_ns %.1f\n", (now() - t0) / n * 1e9);
    }
    if (latency)
        latency_loop(fh, n, buf);
    MPI_File_close(&fh);

    if (posix) {
        int fd = open(argv[1], O_RDWR);
        for (long i = 0; i < n / 10; i++)
            pwrite(fd, buf, 8, (i & 4095) * 8);
        double t0 = now();
        for (long i = 0; i < n; i++)
            pwrite(fd, buf, 8, (i & 4095) * 8);
        printf("pwrite_ns %.1f\n", (now() - t0) / n * 1e9);
        close(fd);
    }
    MPI_Finalize();
    /* CPU time of the calling thread and of the whole process (the
     * library's sender thread included, joined by now), for the
     * per-component benchmark (bench-cost.py). */
    struct rusage self, thread;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_THREAD, &thread);
    printf("cpu_main_ns %.0f\ncpu_process_ns %.0f\n", rusage_ns(&thread), rusage_ns(&self));
    return 0;
}
