/* Several threads of every rank write at once with MPI_File_write_at
 * (MPI_THREAD_MULTIPLE), each many small records, so that the client
 * library's MPI-IO calls send their threads' batches themselves
 * (IOTRACE_INLINE_SEND) while the sender thread sweeps the same process's
 * rings: tests/integration/test_inline_send.py counts what arrives.
 *
 * usage: thread_writes FILE THREADS CALLS
 *
 * After opening FILE every rank waits 600 ms (until the library's
 * connection to its agent is surely up), then thread t of rank r writes 8
 * bytes naming (r, t, i) at offset
 * ((r * THREADS + t) * CALLS + i) * 8, for i < CALLS; then every rank reads
 * its part back in one call and checks it.  Exit 0 when every byte is
 * right. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static MPI_File fh;
static int rank;
static long threads, calls;

static void word(char out[8], long t, long i)
{
    /* Not NUL-terminated: exactly 8 bytes. */
    char tmp[16];
    snprintf(tmp, sizeof tmp, "%1d%1ld%06ld", rank % 10, t % 10, i % 1000000);
    memcpy(out, tmp, 8);
}

static void *writer(void *arg)
{
    long t = (long)(intptr_t)arg;
    MPI_Offset base = ((MPI_Offset)rank * threads + t) * calls * 8;
    for (long i = 0; i < calls; i++) {
        char buf[8];
        word(buf, t, i);
        MPI_Status st;
        if (MPI_File_write_at(fh, base + (MPI_Offset)i * 8, buf, 8, MPI_CHAR, &st) != MPI_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4 || provided != MPI_THREAD_MULTIPLE || (threads = atol(argv[2])) < 1 ||
        (calls = atol(argv[3])) < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: thread_writes FILE THREADS CALLS (needs MPI_THREAD_MULTIPLE)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    /* The library's connection to the agent is up within 500 ms of its
     * first record; calls send nothing themselves before it is. */
    struct timespec settle = {0, 600000000};
    nanosleep(&settle, NULL);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    for (long t = 0; t < threads; t++)
        pthread_create(&tids[t], NULL, writer, (void *)(intptr_t)t);
    int bad = 0;
    for (long t = 0; t < threads; t++) {
        void *ret;
        pthread_join(tids[t], &ret);
        bad |= ret != NULL;
    }
    size_t len = (size_t)(threads * calls * 8);
    char *back = malloc(len);
    MPI_Status st;
    MPI_File_read_at(fh, (MPI_Offset)rank * threads * calls * 8, back, (int)len, MPI_CHAR, &st);
    for (long t = 0; t < threads && !bad; t++)
        for (long i = 0; i < calls; i++) {
            char want[8];
            word(want, t, i);
            if (memcmp(back + (t * calls + i) * 8, want, 8) != 0) {
                fprintf(stderr, "rank %d: thread %ld call %ld wrote wrong bytes\n", rank, t, i);
                bad = 1;
                break;
            }
        }
    MPI_File_close(&fh);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("ok\n");
    free(back);
    free(tids);
    MPI_Finalize();
    return any;
}
