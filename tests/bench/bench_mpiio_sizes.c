/* MPI-IO calls of a few transfer sizes, for counting the disk operations
 * each one causes on GlusterFS bricks (tests/bench/bench-gluster.sh).
 *
 * usage: bench_mpiio_sizes DIR CALLS SIZE...
 *
 * SIZE is a number of bytes; the buffer comes from malloc(), as in most
 * programs (anywhere in a page), or, with an "a" after the number, from
 * posix_memalign() on a 4 KiB boundary: FUSE cuts a request at 32 pages of
 * the caller's buffer, so the two differ in how many requests a large call
 * becomes.  For each SIZE, every rank makes CALLS calls of each of
 *   MPI_File_write_at     on DIR/s<SIZE>.dat
 *   MPI_File_read_at      of the same blocks
 *   MPI_File_write_at_all on the same file, default hints
 *   MPI_File_write_at_all on DIR/s<SIZE>-cb.dat, opened with
 *                         romio_cb_write=enable (ROMIO's two-phase I/O:
 *                         aggregators write the whole group's data)
 * with a barrier between the kinds.  Call i of rank r moves SIZE bytes at
 * ((i mod 4) * nprocs + r) * SIZE: the ranks' blocks are adjacent, so the
 * blocks of one collective call form one contiguous range.  Rank 0 creates
 * the files beforehand with open(2) and closes them (a file created by
 * several processes at once loses direct I/O on a GlusterFS 10 FUSE mount:
 * docs/gluster.md, Gotchas). */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 4

static int rank, nprocs;

#include "../mpi/check.h"

static void check_count(MPI_Status *st, long size, const char *what)
{
    int n;
    MPI_Get_count(st, MPI_BYTE, &n);
    if (n != size) {
        fprintf(stderr, "rank %d: %s moved %d bytes, not %ld\n", rank, what, n, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static MPI_Offset at(long i, long size)
{
    return ((MPI_Offset)(i % WINDOW) * nprocs + rank) * size;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 4) {
        if (rank == 0)
            fprintf(stderr, "usage: %s DIR CALLS SIZE...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *dir = argv[1];
    long calls = atol(argv[2]);
    char path[4096], cbpath[4096];

    if (rank == 0)
        for (int a = 3; a < argc; a++)
            for (int cb = 0; cb < 2; cb++) {
                snprintf(path, sizeof path, "%s/s%s%s.dat", dir, argv[a], cb ? "-cb" : "");
                int fd = open(path, O_CREAT | O_WRONLY, 0644);
                if (fd < 0 || close(fd) != 0) {
                    perror(path);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
    MPI_Barrier(MPI_COMM_WORLD);

    MPI_Info cbinfo;
    MPI_Info_create(&cbinfo);
    MPI_Info_set(cbinfo, "romio_cb_write", "enable");

    for (int a = 3; a < argc; a++) {
        char *end;
        long size = strtol(argv[a], &end, 10);
        int aligned = *end == 'a';
        if (size <= 0 || size > (1L << 30) || (*end && strcmp(end, "a") != 0)) {
            if (rank == 0)
                fprintf(stderr, "bad size %s\n", argv[a]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        char *buf = NULL;
        if (aligned ? posix_memalign((void **)&buf, 4096, (size_t)size) != 0
                    : !(buf = malloc((size_t)size)))
            MPI_Abort(MPI_COMM_WORLD, 4);
        memset(buf, 'A' + rank, (size_t)size);
        snprintf(path, sizeof path, "%s/s%s.dat", dir, argv[a]);
        snprintf(cbpath, sizeof cbpath, "%s/s%s-cb.dat", dir, argv[a]);
        MPI_File fh;
        MPI_Status st;

        check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");
        for (long i = 0; i < calls; i++) {
            check(MPI_File_write_at(fh, at(i, size), buf, (int)size, MPI_BYTE, &st), "write_at");
            check_count(&st, size, "write_at");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < calls; i++) {
            check(MPI_File_read_at(fh, at(i, size), buf, (int)size, MPI_BYTE, &st), "read_at");
            check_count(&st, size, "read_at");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < calls; i++) {
            check(MPI_File_write_at_all(fh, at(i, size), buf, (int)size, MPI_BYTE, &st),
                  "write_at_all");
            check_count(&st, size, "write_at_all");
        }
        check(MPI_File_close(&fh), "close");

        check(MPI_File_open(MPI_COMM_WORLD, cbpath, MPI_MODE_RDWR, cbinfo, &fh), "open (cb)");
        for (long i = 0; i < calls; i++) {
            check(MPI_File_write_at_all(fh, at(i, size), buf, (int)size, MPI_BYTE, &st),
                  "write_at_all (cb)");
            check_count(&st, size, "write_at_all (cb)");
        }
        check(MPI_File_close(&fh), "close (cb)");
        free(buf);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Info_free(&cbinfo);
    if (rank == 0)
        printf("bench_mpiio_sizes: %d ranks, %ld calls of each kind per size\n", nprocs, calls);
    MPI_Finalize();
    return 0;
}
