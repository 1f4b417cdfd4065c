/* An MPI-IO workload whose statistics can be worked out by hand: every rank
 * writes and reads whole blocks, each in one system call, and one collective
 * write and read go through a single aggregator.
 *
 * usage: known_io FILE BLOCK_BYTES BLOCKS
 *
 * Per rank (P ranks, B = BLOCK_BYTES, N = BLOCKS):
 *   MPI_File_open (no MPI_MODE_CREATE: the caller creates FILE, so that
 *   opening it makes the same requests on every rank);
 *   N x MPI_File_write_at of B bytes, block i at (i * P + rank) * B;
 *   an MPI_Send to rank - 1 (mod P) and an MPI_Recv (its blocks are
 *   written), an MPI_Barrier;
 *   N x MPI_File_read_at of B bytes, block i of rank + 1 (mod P), checked;
 *   an MPI_Irecv and an MPI_Isend to rank + 1 (mod P), MPI_Waitall;
 *   MPI_File_write_at_all of B bytes at (N * P + rank) * B;
 *   MPI_File_read_at_all of the same bytes, checked;
 *   MPI_File_close.
 * Collective buffering is forced on with one aggregator and a buffer of one
 * block (romio_cb_write, romio_cb_read = enable, cb_nodes = 1,
 * cb_buffer_size = B): the aggregator moves the P * B contiguous bytes of
 * each collective in P system calls of B bytes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs;

#include "check.h"

static void fill(char *buf, MPI_Offset n, MPI_Offset block)
{
    for (MPI_Offset i = 0; i < n; i++)
        buf[i] = (char)('a' + (block * 5 + i) % 26);
}

static void expect(const char *got, char *want, MPI_Offset n, MPI_Offset block, const char *what)
{
    fill(want, n, block);
    if (memcmp(got, want, (size_t)n) != 0) {
        fprintf(stderr, "rank %d: %s of block %lld read back wrong data\n", rank, what,
                (long long)block);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 4 || atoll(argv[2]) <= 0 || atoi(argv[3]) <= 0) {
        if (rank == 0)
            fprintf(stderr, "usage: %s FILE BLOCK_BYTES BLOCKS\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    MPI_Offset B = atoll(argv[2]);
    int N = atoi(argv[3]);
    char *w = malloc((size_t)B), *r = malloc((size_t)B), *want = malloc((size_t)B);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "romio_cb_read", "enable");
    MPI_Info_set(info, "cb_nodes", "1");
    MPI_Info_set(info, "cb_buffer_size", argv[2]);
    MPI_File fh;
    MPI_Status st;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR, info, &fh), "open");
    MPI_Info_free(&info);

    for (int i = 0; i < N; i++) {
        MPI_Offset block = (MPI_Offset)i * nprocs + rank;
        fill(w, B, block);
        check(MPI_File_write_at(fh, block * B, w, (int)B, MPI_BYTE, &st), "write_at");
    }
    /* Every block is on the servers before anyone reads another rank's: the
     * barrier alone would do; each rank also tells the one that reads its
     * blocks, so that a trace made with IOTRACE_SYNC=1 holds a message that
     * orders I/O (received from MPI_ANY_SOURCE: the source recorded is the
     * actual one).  Eager-sized, so the sends do not wait for the receives. */
    if (nprocs > 1) {
        int done = rank, reader = (rank + nprocs - 1) % nprocs;
        check(MPI_Send(&done, 1, MPI_INT, reader, 7, MPI_COMM_WORLD), "send");
        check(MPI_Recv(&done, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "recv");
        if (done != (rank + 1) % nprocs) {
            fprintf(stderr, "rank %d: \"written\" from rank %d, expected %d\n", rank, done,
                    (rank + 1) % nprocs);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < N; i++) {
        MPI_Offset block = (MPI_Offset)i * nprocs + (rank + 1) % nprocs;
        check(MPI_File_read_at(fh, block * B, r, (int)B, MPI_BYTE, &st), "read_at");
        expect(r, want, B, block, "read_at");
    }

    /* Each rank tells the writer of the blocks it read that it is done with
     * them, non-blocking this time: with IOTRACE_SYNC=1 the MPI_Isend is
     * recorded where it is posted, the MPI_Irecv where MPI_Waitall
     * completes it, with the source that arrived. */
    if (nprocs > 1) {
        int read_done = rank, got = -1;
        MPI_Request rq[2];
        MPI_Status sts[2]; /* not MPI_STATUSES_IGNORE: GCC 12 takes it for a 0-byte array */
        check(MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &rq[0]), "irecv");
        check(MPI_Isend(&read_done, 1, MPI_INT, (rank + 1) % nprocs, 8, MPI_COMM_WORLD, &rq[1]),
              "isend");
        check(MPI_Waitall(2, rq, sts), "waitall");
        if (got != (rank + nprocs - 1) % nprocs) {
            fprintf(stderr, "rank %d: \"read\" from rank %d, expected %d\n", rank, got,
                    (rank + nprocs - 1) % nprocs);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    MPI_Offset block = (MPI_Offset)N * nprocs + rank;
    fill(w, B, block);
    check(MPI_File_write_at_all(fh, block * B, w, (int)B, MPI_BYTE, &st), "write_at_all");
    check(MPI_File_read_at_all(fh, block * B, r, (int)B, MPI_BYTE, &st), "read_at_all");
    expect(r, want, B, block, "read_at_all");

    check(MPI_File_close(&fh), "close");
    free(w);
    free(r);
    free(want);
    MPI_Finalize();
    return 0;
}
