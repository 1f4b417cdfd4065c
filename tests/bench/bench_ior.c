/* An IOR-like MPI-IO bandwidth test: every rank writes, then reads back, its
 * blocks of a shared file in transfers of a fixed size, the way IOR's MPIIO
 * backend does with -a MPIIO -t XFER -b BLOCK -s SEGMENTS (segmented layout:
 * segment s, rank r, transfer j at s*np*BLOCK + r*BLOCK + j*XFER), with
 * independent (MPI_File_write_at/read_at) or collective
 * (MPI_File_write_at_all/read_at_all) calls.  As IOR does, a phase is timed
 * from a barrier before the open to a barrier after the close, so that its
 * bandwidth is the slowest rank's.  The data read back is checked.
 *
 * usage: bench_ior FILE XFER BLOCK SEGMENTS indep|coll [REPS]
 * Rank 0 prints one line per repetition and phase:
 *   write MiB/s SECONDS CALLS_PER_RANK
 *   read MiB/s SECONDS CALLS_PER_RANK
 * and exits 1 if a rank read back what it did not write. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *buf, long n, long long off)
{
    /* Each 8-byte word holds its own file offset: a misplaced transfer
     * cannot read back right. */
    for (long i = 0; i + 8 <= n; i += 8) {
        long long v = off + i;
        memcpy(buf + i, &v, 8);
    }
}

static double phase(MPI_File *fh, const char *path, int writing, int coll, long xfer, long block,
                    long segments, int rank, int np, unsigned char *buf, unsigned char *want,
                    long *bad)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int amode = writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    if (MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, fh) != MPI_SUCCESS) {
        fprintf(stderr, "bench_ior: cannot open %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (long s = 0; s < segments; s++)
        for (long j = 0; j < block / xfer; j++) {
            MPI_Offset off = (MPI_Offset)s * np * block + (MPI_Offset)rank * block + j * xfer;
            int rc;
            if (writing) {
                fill(buf, xfer, off);
                rc = coll ? MPI_File_write_at_all(*fh, off, buf, (int)xfer, MPI_BYTE,
                                                  MPI_STATUS_IGNORE)
                          : MPI_File_write_at(*fh, off, buf, (int)xfer, MPI_BYTE,
                                              MPI_STATUS_IGNORE);
            } else {
                rc = coll ? MPI_File_read_at_all(*fh, off, buf, (int)xfer, MPI_BYTE,
                                                 MPI_STATUS_IGNORE)
                          : MPI_File_read_at(*fh, off, buf, (int)xfer, MPI_BYTE,
                                             MPI_STATUS_IGNORE);
                fill(want, xfer, off);
                if (memcmp(buf, want, (size_t)xfer))
                    (*bad)++;
            }
            if (rc != MPI_SUCCESS) {
                fprintf(stderr, "bench_ior: %s failed at offset %lld\n",
                        writing ? "write" : "read", (long long)off);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
    MPI_File_close(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 6) {
        if (rank == 0)
            fprintf(stderr, "usage: %s FILE XFER BLOCK SEGMENTS indep|coll [REPS]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long xfer = atol(argv[2]), block = atol(argv[3]), segments = atol(argv[4]);
    int coll = !strcmp(argv[5], "coll");
    int reps = argc > 6 ? atoi(argv[6]) : 1;
    if (xfer < 8 || xfer % 8 || block < xfer || block % xfer || segments < 1 || reps < 1) {
        if (rank == 0)
            fprintf(stderr, "bench_ior: XFER must be a multiple of 8 dividing BLOCK\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char *buf = malloc((size_t)xfer), *want = malloc((size_t)xfer);
    if (!buf || !want)
        MPI_Abort(MPI_COMM_WORLD, 2);
    double mib = (double)np * block * segments / (1024.0 * 1024.0);
    long calls = block / xfer * segments, bad = 0, bad_all = 0;
    MPI_File fh;
    for (int r = 0; r < reps; r++) {
        double tw = phase(&fh, argv[1], 1, coll, xfer, block, segments, rank, np, buf, want, &bad);
        double tr = phase(&fh, argv[1], 0, coll, xfer, block, segments, rank, np, buf, want, &bad);
        if (rank == 0) {
            printf("write %.2f %.6f %ld\n", mib / tw, tw, calls);
            printf("read %.2f %.6f %ld\n", mib / tr, tr, calls);
            fflush(stdout);
        }
    }
    MPI_Reduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && bad_all)
        fprintf(stderr, "bench_ior: %ld transfers read back wrong\n", bad_all);
    free(buf);
    free(want);
    MPI_Finalize();
    return rank == 0 && bad_all ? 1 : 0;
}
