/* Ranks whose MPI_File_open fails and that end the job with MPI_Abort, as
 * ROMIO's excl.c and fstype_prefix.c do when a file system says no.
 *
 * usage: open_abort DIR all|one
 *
 * Every rank writes DIR/ok.RANK with MPI_COMM_SELF (open, write_at, close),
 * then opens DIR/missing/file read-only on MPI_COMM_WORLD, which fails on
 * every rank, and waits in MPI_Barrier for the others to have failed too
 * (so that every rank has recorded its failed open before any aborts).
 * all: every rank then calls MPI_Abort.  one: rank 0 calls MPI_Abort and
 * the others wait in a second MPI_Barrier until the launcher ends them.
 * Exits 0 only if the open succeeded, which it must not. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 3 || (strcmp(argv[2], "all") && strcmp(argv[2], "one"))) {
        if (!rank)
            fprintf(stderr, "usage: %s DIR all|one\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[4096];
    MPI_File fh;
    snprintf(path, sizeof path, "%s/ok.%d", argv[1], rank);
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                      &fh) == MPI_SUCCESS) {
        MPI_File_write_at(fh, 0, path, (int)strlen(path), MPI_CHAR, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    }
    snprintf(path, sizeof path, "%s/missing/file", argv[1]);
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s opened\n", rank, path);
        MPI_File_close(&fh);
        MPI_Finalize();
        return 0;
    }
    fprintf(stderr, "rank %d: cannot open %s\n", rank, path);
    MPI_Barrier(MPI_COMM_WORLD);
    if (strcmp(argv[2], "all") == 0 || rank == 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 1;
}
