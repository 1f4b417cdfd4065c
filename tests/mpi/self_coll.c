/* Collective calls on handles of one rank each, as Darshan's
 * tst_mpio_pthread makes them, beside the same calls on a handle of all
 * ranks: the ranks' calls share (file, sequence number) but only those of
 * one communicator are one collective.
 *
 * usage: self_coll FILE BLOCK_BYTES CALLS self|world
 *
 * Every rank opens FILE with MPI_COMM_SELF (self) or MPI_COMM_WORLD
 * (world), makes CALLS x MPI_File_write_at_all of BLOCK_BYTES at block
 * (i * P + rank), then CALLS x MPI_File_read_at_all of the same blocks,
 * checks what it read, and closes.  Rank 0 creates the file beforehand, so
 * that no open creates it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs;

#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 5 || (strcmp(argv[4], "self") && strcmp(argv[4], "world"))) {
        if (!rank)
            fprintf(stderr, "usage: %s FILE BLOCK_BYTES CALLS self|world\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *path = argv[1];
    int block = atoi(argv[2]), calls = atoi(argv[3]);
    MPI_Comm comm = strcmp(argv[4], "self") == 0 ? MPI_COMM_SELF : MPI_COMM_WORLD;
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        if (!f) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    char *buf = malloc((size_t)block), *back = malloc((size_t)block);
    MPI_File fh;
    check(MPI_File_open(comm, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "MPI_File_open");
    for (int i = 0; i < calls; i++) {
        memset(buf, 'a' + (rank + i) % 26, (size_t)block);
        MPI_Offset at = ((MPI_Offset)i * nprocs + rank) * block;
        check(MPI_File_write_at_all(fh, at, buf, block, MPI_BYTE, MPI_STATUS_IGNORE),
              "MPI_File_write_at_all");
    }
    for (int i = 0; i < calls; i++) {
        MPI_Offset at = ((MPI_Offset)i * nprocs + rank) * block;
        check(MPI_File_read_at_all(fh, at, back, block, MPI_BYTE, MPI_STATUS_IGNORE),
              "MPI_File_read_at_all");
        memset(buf, 'a' + (rank + i) % 26, (size_t)block);
        if (memcmp(buf, back, (size_t)block) != 0) {
            fprintf(stderr, "rank %d: block %d read back wrong\n", rank, i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    check(MPI_File_close(&fh), "MPI_File_close");
    free(buf);
    free(back);
    MPI_Finalize();
    return 0;
}
