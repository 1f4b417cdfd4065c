/* Writes 8 bytes at a time with MPI_File_write_at to FILE (one file per
 * rank: FILE.RANK) for SECONDS, pausing a little every 64 calls so that
 * the events are spread over the whole time rather than made in a burst:
 * a traced job that is running while its node's agent is killed and
 * restarted (tests/integration/test_agent_kill.py).
 * usage: steady_io FILE SECONDS
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
        fprintf(stderr, "usage: %s FILE SECONDS\n", argv[0]);
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
    const struct timespec pause = {0, 5000000};
    while (now() < end) {
        for (int i = 0; i < 64; i++, calls++)
            MPI_File_write_at(fh, (calls & 1023) * 8, buf, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        nanosleep(&pause, NULL);
    }
    MPI_File_close(&fh);
    printf("rank %d calls %ld\n", rank, calls);
    fflush(stdout); /* the end of the calls, seen at once by a test */
    MPI_Finalize();
    return 0;
}
