/* An MPI-IO program that exercises the broad mix of MPI_File functions the
 * iotrace tests check: independent, collective, split collective,
 * non-blocking, shared and ordered file pointers, and a non-trivial view.
 * It verifies what it reads back and prints a digest of the file, so runs
 * with and without the preloaded library can be compared byte for byte.
 *
 * usage: mpiio_mix FILE|DIRECTORY [BLOCK_BYTES]
 *
 * Given a directory (a volume's mount point), it writes a file of its own
 * there, named by rank 0 (mpiio_mix.<seconds>.<pid>) so that runs do not
 * overwrite each other.
 *
 * Per rank it calls each of these exactly once (tests count them):
 *   open, set_view x2, write_at, read_at, write_at_all, read_at_all,
 *   write_all, read_all (under the strided view), write_at_all_begin/end,
 *   read_all_begin/end, iwrite_at, iread_at, iwrite_at_all, iread_all,
 *   write_shared, write_ordered, seek_shared, read_ordered, seek, write,
 *   read, write_at_c, sync, get_size, set_atomicity, close
 * and MPI_Wait, MPI_Test (until done), MPI_Waitall, MPI_Waitany.
 *
 * With MPIIO_MIX_PRE_INIT=PATH set, each process first writes a small file
 * PATH.<pid> with plain POSIX calls before MPI_Init, as programs reading
 * their input or configuration do; the job id tests look for these.
 * MPIIO_MIX_PRE_INIT_WAIT_MS=N then waits N ms before MPI_Init, long
 * enough for the library to send those records before the job id is known.
 * With MPIIO_MIX_NO_DIGEST set, rank 0 does not read the file back with
 * stdio at the end (no digest line).
 * With MPIIO_MIX_INIT_THREAD set, it starts with MPI_Init_thread asking for
 * MPI_THREAD_MULTIPLE (and fails without it) instead of MPI_Init.
 * With MPIIO_MIX_LATE_MS=N, rank 0 sleeps N ms before MPI_File_write_at_all,
 * so that the other ranks' call lasts at least that long. */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int rank, nprocs;
static MPI_Offset B;

#include "check.h"
#include "digest.h"

static void fill(char *buf, MPI_Offset n, int seed)
{
    for (MPI_Offset i = 0; i < n; i++)
        buf[i] = (char)('A' + (seed * 7 + i) % 26);
}

static void expect(const char *buf, MPI_Offset n, int seed, const char *what)
{
    char *want = malloc((size_t)n);
    fill(want, n, seed);
    if (memcmp(buf, want, (size_t)n) != 0) {
        fprintf(stderr, "rank %d: %s read back wrong data\n", rank, what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    free(want);
}

/* Region r of the file holds nprocs blocks, one per rank. */
static MPI_Offset region(int r) { return (MPI_Offset)r * nprocs * B; }

static void write_before_init(void)
{
    const char *base = getenv("MPIIO_MIX_PRE_INIT");
    if (!base)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", base, (int)getpid());
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "before MPI_Init\n", 16) != 16 || close(fd) != 0) {
        perror(path);
        exit(3);
    }
    const char *wait = getenv("MPIIO_MIX_PRE_INIT_WAIT_MS");
    if (wait)
        usleep((useconds_t)atoi(wait) * 1000);
}

int main(int argc, char **argv)
{
    write_before_init();
    if (getenv("MPIIO_MIX_INIT_THREAD")) {
        int provided = -1;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "mpiio_mix: MPI_Init_thread gave thread level %d\n", provided);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: %s FILE|DIRECTORY [BLOCK_BYTES]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    B = argc > 2 ? atoll(argv[2]) : 4096;
    char path[4096];
    {
        struct stat sb;
        int len = 0;
        if (rank == 0) {
            if (stat(argv[1], &sb) == 0 && S_ISDIR(sb.st_mode))
                len = snprintf(path, sizeof path, "%s/mpiio_mix.%lld.%d", argv[1],
                               (long long)time(NULL), (int)getpid());
            else
                len = snprintf(path, sizeof path, "%s", argv[1]);
        }
        MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (len <= 0 || len >= (int)sizeof path) {
            if (rank == 0)
                fprintf(stderr, "mpiio_mix: path too long\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Bcast(path, len + 1, MPI_CHAR, 0, MPI_COMM_WORLD);
        argv[1] = path;
    }
    char *w = malloc((size_t)B), *r = malloc((size_t)B);
    MPI_File fh;
    MPI_Status st;
    MPI_Request req, reqs[2];

    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "open");
    check(MPI_File_set_atomicity(fh, 0), "set_atomicity");

    /* independent, explicit offsets: region 0 */
    fill(w, B, rank);
    check(MPI_File_write_at(fh, region(0) + rank * B, w, (int)B, MPI_BYTE, &st), "write_at");
    check(MPI_File_read_at(fh, region(0) + rank * B, r, (int)B, MPI_BYTE, &st), "read_at");
    expect(r, B, rank, "read_at");

    /* collective, explicit offsets: region 1 */
    fill(w, B, rank + 100);
    const char *late = getenv("MPIIO_MIX_LATE_MS");
    if (late && rank == 0)
        usleep((useconds_t)atoi(late) * 1000);
    check(MPI_File_write_at_all(fh, region(1) + rank * B, w, (int)B, MPI_BYTE, &st), "write_at_all");
    check(MPI_File_read_at_all(fh, region(1) + rank * B, r, (int)B, MPI_BYTE, &st), "read_at_all");
    expect(r, B, rank + 100, "read_at_all");

    /* split collective: region 2 */
    fill(w, B, rank + 200);
    check(MPI_File_write_at_all_begin(fh, region(2) + rank * B, w, (int)B, MPI_BYTE), "write_at_all_begin");
    check(MPI_File_write_at_all_end(fh, w, &st), "write_at_all_end");

    /* non-blocking: regions 3 and 4 */
    fill(w, B, rank + 300);
    check(MPI_File_iwrite_at(fh, region(3) + rank * B, w, (int)B, MPI_BYTE, &req), "iwrite_at");
    check(MPI_Wait(&req, &st), "wait");
    check(MPI_File_iread_at(fh, region(3) + rank * B, r, (int)B, MPI_BYTE, &req), "iread_at");
    int done = 0;
    while (!done)
        check(MPI_Test(&req, &done, &st), "test");
    expect(r, B, rank + 300, "iread_at");
    char *w2 = malloc((size_t)B);
    fill(w2, B, rank + 400);
    check(MPI_File_iwrite_at_all(fh, region(4) + rank * B, w2, (int)B, MPI_BYTE, &reqs[0]), "iwrite_at_all");
    reqs[1] = MPI_REQUEST_NULL;
    MPI_Status sts[2];
    check(MPI_Waitall(2, reqs, sts), "waitall");

    /* shared and ordered file pointers: regions 5 and 6 */
    check(MPI_File_seek_shared(fh, region(5), MPI_SEEK_SET), "seek_shared");
    fill(w, B, 500);
    check(MPI_File_write_shared(fh, w, (int)B, MPI_BYTE, &st), "write_shared");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, region(6), MPI_SEEK_SET), "seek_shared");
    fill(w, B, rank + 600);
    check(MPI_File_write_ordered(fh, w, (int)B, MPI_BYTE, &st), "write_ordered");
    check(MPI_File_seek_shared(fh, region(6), MPI_SEEK_SET), "seek_shared");
    check(MPI_File_read_ordered(fh, r, (int)B, MPI_BYTE, &st), "read_ordered");
    expect(r, B, rank + 600, "read_ordered");

    /* individual file pointer: region 7 */
    check(MPI_File_seek(fh, region(7) + rank * B, MPI_SEEK_SET), "seek");
    fill(w, B, rank + 700);
    check(MPI_File_write(fh, w, (int)B, MPI_BYTE, &st), "write");
    check(MPI_File_seek(fh, region(7) + rank * B, MPI_SEEK_SET), "seek");
    check(MPI_File_read(fh, r, (int)B, MPI_BYTE, &st), "read");
    expect(r, B, rank + 700, "read");

    /* large-count variant: region 8 */
    fill(w, B, rank + 800);
    check(MPI_File_write_at_c(fh, region(8) + rank * B, w, (MPI_Count)B, MPI_BYTE, &st), "write_at_c");

    /* A strided view from region 9 on: each rank sees every nprocs-th block
     * of B/4 bytes, so its 4 quarter blocks interleave with the others'. */
    MPI_Offset q = B / 4;
    MPI_Datatype filetype;
    MPI_Type_vector(4, (int)q, (int)(q * nprocs), MPI_BYTE, &filetype);
    MPI_Datatype resized;
    MPI_Type_create_resized(filetype, 0, (MPI_Aint)(4 * q * nprocs), &resized);
    MPI_Type_commit(&resized);
    check(MPI_File_set_view(fh, region(9) + rank * q, MPI_BYTE, resized, "native", MPI_INFO_NULL),
          "set_view");
    fill(w, 4 * q, rank + 900);
    check(MPI_File_write_all(fh, w, (int)(4 * q), MPI_BYTE, &st), "write_all");
    check(MPI_File_seek(fh, 0, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all_begin(fh, r, (int)(4 * q), MPI_BYTE), "read_all_begin");
    check(MPI_File_read_all_end(fh, r, &st), "read_all_end");
    expect(r, 4 * q, rank + 900, "read_all_begin/end");
    check(MPI_File_seek(fh, 0, MPI_SEEK_SET), "seek");
    check(MPI_File_iread_all(fh, r, (int)(4 * q), MPI_BYTE, &reqs[0]), "iread_all");
    int idx;
    check(MPI_Waitany(1, reqs, &idx, &st), "waitany");
    expect(r, 4 * q, rank + 900, "iread_all");
    check(MPI_File_seek(fh, 0, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all(fh, r, (int)(4 * q), MPI_BYTE, &st), "read_all");
    expect(r, 4 * q, rank + 900, "read_all");
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
    MPI_Type_free(&resized);
    MPI_Type_free(&filetype);

    check(MPI_File_sync(fh), "sync");
    MPI_Offset size;
    check(MPI_File_get_size(fh, &size), "get_size");
    check(MPI_File_close(&fh), "close");

    /* MPIIO_MIX_NO_DIGEST: tests that want every read of the file to come
     * from an MPI-IO call skip the digest's plain reads. */
    if (rank == 0 && !getenv("MPIIO_MIX_NO_DIGEST")) {
        /* A digest of the whole file with plain stdio. */
        long n;
        uint64_t h = file_digest(argv[1], &n);
        printf("mpiio_mix: %d ranks, block %lld, file %lld bytes, digest %016llx\n", nprocs,
               (long long)B, (long long)size, (unsigned long long)h);
    }
    free(w);
    free(w2);
    free(r);
    MPI_Finalize();
    return 0;
}
