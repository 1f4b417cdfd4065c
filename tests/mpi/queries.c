/* An MPI-IO program that asks MPI about its file: every MPI_File_get_*
 * query, around a few accesses, under the default view and under a view
 * whose filetype is empty (zero bytes, as in MPICH's test/mpi/io tests of
 * zero-length views), where MPI_File_get_position_shared still reads the
 * shared file pointer's file.  Tests count what it calls.
 *
 * usage: queries FILE
 *
 * Per rank, in this order:
 *   open, write_at, write_shared,
 *   ROUNDS x (get_position, get_position_shared, get_size, get_byte_offset,
 *             get_view, get_info, get_amode, get_group, get_atomicity,
 *             get_type_extent, get_errhandler),
 *   set_view (empty filetype), ROUNDS x get_position_shared, get_view,
 *   set_view (default), read_at, close.
 * Rank 0 prints one line "queries ok SIZE SHARED" at the end: the file's
 * size and the shared file pointer's position, for comparing runs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3
#define B 4096

static int rank;

#include "check.h"

static void ask_everything(MPI_File fh)
{
    MPI_Offset pos, shared, size, byte, disp;
    MPI_Datatype etype, filetype;
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Info info;
    MPI_Group group;
    MPI_Aint extent;
    MPI_Errhandler eh;
    int amode, atomic;
    check(MPI_File_get_position(fh, &pos), "get_position");
    check(MPI_File_get_position_shared(fh, &shared), "get_position_shared");
    check(MPI_File_get_size(fh, &size), "get_size");
    check(MPI_File_get_byte_offset(fh, pos, &byte), "get_byte_offset");
    check(MPI_File_get_view(fh, &disp, &etype, &filetype, rep), "get_view");
    check(MPI_File_get_info(fh, &info), "get_info");
    MPI_Info_free(&info);
    check(MPI_File_get_amode(fh, &amode), "get_amode");
    check(MPI_File_get_group(fh, &group), "get_group");
    MPI_Group_free(&group);
    check(MPI_File_get_atomicity(fh, &atomic), "get_atomicity");
    check(MPI_File_get_type_extent(fh, MPI_INT, &extent), "get_type_extent");
    check(MPI_File_get_errhandler(fh, &eh), "get_errhandler");
    MPI_Errhandler_free(&eh);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: queries FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char buf[B];
    memset(buf, 'a' + rank % 26, sizeof buf);
    MPI_File fh;
    MPI_Status st;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL,
                        &fh),
          "open");
    check(MPI_File_write_at(fh, (MPI_Offset)rank * B, buf, B, MPI_BYTE, &st), "write_at");
    /* The same bytes from every rank: the file does not depend on which
     * rank the shared file pointer serves first. */
    check(MPI_File_write_shared(fh, "shared pointer..", 16, MPI_BYTE, &st), "write_shared");
    for (int i = 0; i < ROUNDS; i++)
        ask_everything(fh);

    /* A filetype of no bytes: nothing can be accessed through the view,
     * but the shared file pointer is still there to be asked for. */
    MPI_Datatype empty;
    MPI_Type_contiguous(0, MPI_BYTE, &empty);
    MPI_Type_commit(&empty);
    check(MPI_File_set_view(fh, 0, MPI_BYTE, empty, "native", MPI_INFO_NULL), "set_view empty");
    MPI_Offset shared = -1, disp;
    for (int i = 0; i < ROUNDS; i++)
        check(MPI_File_get_position_shared(fh, &shared), "get_position_shared (empty view)");
    MPI_Datatype etype, filetype;
    char rep[MPI_MAX_DATAREP_STRING];
    check(MPI_File_get_view(fh, &disp, &etype, &filetype, rep), "get_view (empty view)");
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
    MPI_Type_free(&empty);

    check(MPI_File_read_at(fh, (MPI_Offset)rank * B, buf, B, MPI_BYTE, &st), "read_at");
    MPI_Offset size = 0;
    PMPI_File_get_size(fh, &size); /* the program's own PMPI_ query, once */
    check(MPI_File_close(&fh), "close");
    if (rank == 0)
        printf("queries ok %lld %lld\n", (long long)size, (long long)shared);
    MPI_Finalize();
    return 0;
}
