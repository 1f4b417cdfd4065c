/* Individual file pointer accesses under views of resized filetypes.  Right
 * after MPI_File_set_view with the filetype of MPICH's
 * test/mpi/io/resized.c (an int whose lower bound is the next int), and
 * after seeking back to 0, MPICH 4.0 reports the position as -1, and
 * MPI_File_get_byte_offset of -1 returns MPI_SUCCESS without writing its
 * result: the offsets a tracer records there must still be true ones.  The
 * other two views are ones where ROMIO answers both queries.
 *
 * usage: resized_view FILE [fatal]
 *
 * Files return their errors (MPI_ERRORS_RETURN, the default), which the
 * program counts; with "fatal" every MPI-IO error ends the run instead
 * (MPI_ERRORS_ARE_FATAL), one raised by a tracer's own queries too.
 *
 * Each rank works on a file of its own, FILE.<rank>.  Per view (below), it
 * fills the file under the default view with each int's own index, then
 * through the view: MPI_File_read of 4 ints (16 bytes) from position 0,
 * MPI_File_seek to 0, MPI_File_write of 4 ints of marks.  Where those two
 * accesses really started is worked out from the data, not asked of MPI:
 * the first int read names its own index, and the file read back under the
 * default view shows the first mark.  One line per access, in call order:
 *   access RANK FUNC BYTE
 * FUNC being MPI_File_read or MPI_File_write and BYTE the byte offset where
 * it started. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4     /* ints per access: 16 bytes */
#define SLOTS 64 /* ints in the file, more than any view below reaches */

static int rank, failures;

/* Counted, not fatal at once: under MPI_ERRORS_RETURN a call goes on
 * returning after a failure, and the run fails at its end. */
#define TRY(call) (failures += (call) != MPI_SUCCESS)

static MPI_Datatype resized(MPI_Datatype t, MPI_Aint lb, MPI_Aint extent)
{
    MPI_Datatype r;
    TRY(MPI_Type_create_resized(t, lb, extent, &r));
    TRY(MPI_Type_commit(&r));
    return r;
}

static void default_view(MPI_File fh)
{
    TRY(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
}

/* The read and the write through the view (disp, filetype), and where
 * each started. */
static void accesses(MPI_File fh, const char *name, MPI_Offset disp, MPI_Datatype filetype)
{
    int slots[SLOTS], got[N] = {-1}, marks[N];
    for (int i = 0; i < SLOTS; i++)
        slots[i] = i;
    default_view(fh);
    TRY(MPI_File_write_at(fh, 0, slots, SLOTS, MPI_INT, MPI_STATUS_IGNORE));
    TRY(MPI_File_set_view(fh, disp, MPI_INT, filetype, "native", MPI_INFO_NULL));
    TRY(MPI_File_read(fh, got, N, MPI_INT, MPI_STATUS_IGNORE));
    if (got[0] < 0 || got[0] >= SLOTS) {
        fprintf(stderr, "rank %d: %s: read %d, not an index\n", rank, name, got[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    printf("access %d MPI_File_read %lld\n", rank, (long long)got[0] * (long long)sizeof(int));

    TRY(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    for (int i = 0; i < N; i++)
        marks[i] = -1 - i;
    TRY(MPI_File_write(fh, marks, N, MPI_INT, MPI_STATUS_IGNORE));
    default_view(fh);
    TRY(MPI_File_read_at(fh, 0, slots, SLOTS, MPI_INT, MPI_STATUS_IGNORE));
    int first = 0;
    while (first < SLOTS && slots[first] != -1)
        first++;
    if (first == SLOTS) {
        fprintf(stderr, "rank %d: %s: the write is nowhere in the file\n", rank, name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    printf("access %d MPI_File_write %lld\n", rank, (long long)first * (long long)sizeof(int));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "fatal") != 0)) {
        fprintf(stderr, "usage: resized_view FILE [fatal]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
    if (argc == 3) /* handles opened from now on take it */
        TRY(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_ARE_FATAL));
    MPI_File fh;
    TRY(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));

    /* MPICH's test/mpi/io/resized.c: an int with its lower bound at the
     * next int and an extent of three, resized once more the same way. */
    MPI_Datatype inner = resized(MPI_INT, sizeof(int), 3 * sizeof(int));
    MPI_Datatype twice = resized(inner, sizeof(int), 3 * sizeof(int));
    accesses(fh, "resized int", 0, twice);

    /* A contiguous block of 4 ints every 8, after a displacement. */
    MPI_Datatype block, spaced;
    TRY(MPI_Type_contiguous(N, MPI_INT, &block));
    spaced = resized(block, 0, 2 * N * sizeof(int));
    accesses(fh, "resized contiguous", 8 * sizeof(int), spaced);

    /* A vector (every other int, twice) with a lower bound of its own,
     * after a displacement. */
    MPI_Datatype vec, shifted;
    TRY(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    shifted = resized(vec, 2 * sizeof(int), 6 * sizeof(int));
    accesses(fh, "resized vector", 4 * sizeof(int), shifted);

    TRY(MPI_File_close(&fh));
    TRY(MPI_Type_free(&shifted));
    TRY(MPI_Type_free(&vec));
    TRY(MPI_Type_free(&spaced));
    TRY(MPI_Type_free(&block));
    TRY(MPI_Type_free(&twice));
    TRY(MPI_Type_free(&inner));
    if (failures) {
        fprintf(stderr, "rank %d: %d MPI calls failed\n", rank, failures);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
