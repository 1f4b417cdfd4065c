/* Keeps every rank inside MPI-IO calls until told to stop, for tests that
 * do something to the node while a job is in the middle of its I/O.
 *
 * usage: mpiio_loop FILE BLOCK_BYTES STOP_FILE
 *
 * Each rank writes its block (rank i at i * BLOCK_BYTES) with
 * MPI_File_write_at and reads it back with MPI_File_read_at, checking it,
 * over and over until STOP_FILE exists (at least once, at most 120 s).
 * The data never changes, so the file's contents do not depend on how
 * often a rank went round; a wrong read aborts the job. Rank 0 prints the
 * number of ranks when all are done. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed\n", rank, what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    int nprocs;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    int B = argc == 4 ? atoi(argv[2]) : 0;
    if (B <= 0) {
        if (rank == 0)
            fprintf(stderr, "usage: %s FILE BLOCK_BYTES STOP_FILE\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    char *w = malloc((size_t)B), *r = malloc((size_t)B);
    for (int i = 0; i < B; i++)
        w[i] = (char)('a' + (rank * 3 + i) % 26);
    MPI_File fh;
    MPI_Status st;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh), "open");
    MPI_Offset off = (MPI_Offset)rank * B;
    double until = MPI_Wtime() + 120;
    do {
        check(MPI_File_write_at(fh, off, w, B, MPI_BYTE, &st), "write_at");
        check(MPI_File_read_at(fh, off, r, B, MPI_BYTE, &st), "read_at");
        if (memcmp(w, r, (size_t)B) != 0) {
            fprintf(stderr, "rank %d: read back wrong data\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } while (access(argv[3], F_OK) != 0 && MPI_Wtime() < until);
    check(MPI_File_close(&fh), "close");
    if (rank == 0)
        printf("%d ranks done\n", nprocs);
    free(w);
    free(r);
    MPI_Finalize();
    return 0;
}
