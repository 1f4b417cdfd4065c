/* Several non-blocking collective requests on one file, completed together
 * by one MPI_Waitall, as MPICH's test/mpi/io/i_aggregation1.c and
 * i_hindexed.c do.  ROMIO runs each as a generalized request whose reads
 * and writes happen inside the MPI_Waitall, on every rank (every rank is an
 * aggregator: cb_nodes = the number of ranks, cb_config_list *:*).
 *
 * usage: nb_coll FILE
 *
 * With R = ranks x BLK bytes, request k of each phase covers the bytes
 * [k R, (k + 1) R) of its region, rank r's BLK of them at k R + r BLK:
 *   1. K x MPI_File_iwrite_at_all, MPI_Waitall
 *   2. K x MPI_File_iread_at_all, MPI_Waitall (checked)
 *   3. MPI_File_set_view (disp K R + r BLK, a filetype of BLK bytes every R),
 *      K x MPI_File_iwrite_all, MPI_Waitall, MPI_File_seek to 0,
 *      K x MPI_File_iread_all, MPI_Waitall (checked)
 * and open, close.  Rank 0 prints "nb_coll ok BYTES DIGEST" of the file,
 * or, with NB_COLL_NO_DIGEST set, "nb_coll ok" without reading it back (on
 * a traced volume those reads would be disk operations of no call). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 4
#define BLK 65536

static int rank, nprocs;

#include "check.h"
#include "digest.h"

static void fill(char *buf, int seed)
{
    for (int i = 0; i < BLK; i++)
        buf[i] = (char)('a' + (seed * 131 + i / 512 + rank * 7) % 26);
}

static void waitall(MPI_Request *req, const char *what)
{
    MPI_Status st[K];
    check(MPI_Waitall(K, req, st), what);
    for (int k = 0; k < K; k++) {
        int n = -1;
        MPI_Get_count(&st[k], MPI_BYTE, &n);
        if (n != BLK) {
            fprintf(stderr, "rank %d: %s: request %d moved %d bytes, not %d\n", rank, what, k, n,
                    BLK);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void verify(char bufs[K][BLK], int seed0, const char *what)
{
    char want[BLK];
    for (int k = 0; k < K; k++) {
        fill(want, seed0 + k);
        if (memcmp(bufs[k], want, BLK) != 0) {
            fprintf(stderr, "rank %d: %s: request %d read other data\n", rank, what, k);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        fprintf(stderr, "usage: nb_coll FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Info info;
    char nodes[16];
    snprintf(nodes, sizeof nodes, "%d", nprocs);
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "romio_cb_read", "enable");
    MPI_Info_set(info, "cb_nodes", nodes);
    MPI_Info_set(info, "cb_config_list", "*:*");
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh),
          "open");
    MPI_Info_free(&info);

    static char out[K][BLK], in[K][BLK];
    MPI_Request req[K];
    const MPI_Offset R = (MPI_Offset)nprocs * BLK;

    for (int k = 0; k < K; k++) {
        fill(out[k], k);
        check(MPI_File_iwrite_at_all(fh, k * R + rank * BLK, out[k], BLK, MPI_BYTE, &req[k]),
              "iwrite_at_all");
    }
    waitall(req, "Waitall (iwrite_at_all)");
    for (int k = 0; k < K; k++)
        check(MPI_File_iread_at_all(fh, k * R + rank * BLK, in[k], BLK, MPI_BYTE, &req[k]),
              "iread_at_all");
    waitall(req, "Waitall (iread_at_all)");
    verify(in, 0, "iread_at_all");

    MPI_Datatype block, filetype;
    MPI_Type_contiguous(BLK, MPI_BYTE, &block);
    MPI_Type_create_resized(block, 0, R, &filetype);
    MPI_Type_commit(&filetype);
    check(MPI_File_set_view(fh, K * R + rank * BLK, MPI_BYTE, filetype, "native", MPI_INFO_NULL),
          "set_view");
    for (int k = 0; k < K; k++) {
        fill(out[k], K + k);
        check(MPI_File_iwrite_all(fh, out[k], BLK, MPI_BYTE, &req[k]), "iwrite_all");
    }
    waitall(req, "Waitall (iwrite_all)");
    check(MPI_File_seek(fh, 0, MPI_SEEK_SET), "seek");
    memset(in, 0, sizeof in);
    for (int k = 0; k < K; k++)
        check(MPI_File_iread_all(fh, in[k], BLK, MPI_BYTE, &req[k]), "iread_all");
    waitall(req, "Waitall (iread_all)");
    verify(in, K, "iread_all");
    MPI_Type_free(&filetype);
    MPI_Type_free(&block);
    check(MPI_File_close(&fh), "close");

    if (rank == 0 && getenv("NB_COLL_NO_DIGEST")) {
        printf("nb_coll ok\n");
    } else if (rank == 0) { /* a digest of the whole file, to compare runs */
        long n;
        uint64_t h = file_digest(argv[1], &n);
        printf("nb_coll ok %ld %016llx\n", n, (unsigned long long)h);
    }
    MPI_Finalize();
    return 0;
}
