/* Writes 8 bytes at a time with MPI_File_write_at to FILE (one file per
 * rank: FILE.RANK) for SECONDS, pausing a little every 64 calls so that
 * the events are spread over the whole time rather than made in a burst:
 * a traced job that is running while its node's agent is killed and
 * restarted (tests/integration/test_agent_kill.py).
 * With CALLS_PER_SECOND, each rank keeps to about that rate instead (8
 * calls, then a pause): a job long enough to outlast a fault without
 * making millions of events (tests/integration/test_cluster_faults.py).
 * usage: steady_io FILE SECONDS [CALLS_PER_SECOND]
 * Prints "rank R calls N" when its calls are done, before MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE SECONDS [CALLS_PER_SECOND]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                      &fh) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    double end = now() + atof(argv[2]);
    long calls = 0;
    char buf[8] = "iotrace";
    struct timespec pause = {0, 5000000};
    int burst = 64;
    if (argc > 3 && atof(argv[3]) > 0) {
        double p = 8 / atof(argv[3]);
        burst = 8;
        pause.tv_sec = (time_t)p;
        pause.tv_nsec = (long)((p - (double)pause.tv_sec) * 1e9);
    }
    while (now() < end) {
        for (int i = 0; i < burst; i++, calls++)
            MPI_File_write_at(fh, (calls & 1023) * 8, buf, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        nanosleep(&pause, NULL);
    }
    MPI_File_close(&fh);
    printf("rank %d calls %ld\n", rank, calls);
    fflush(stdout); /* the end of the calls, seen at once by a test */
    MPI_Finalize();
    return 0;
}
