/* MPI-IO from many short-lived threads (MPI_THREAD_MULTIPLE), one after
 * the other, as hybrid programs make it: each thread writes its own 8
 * bytes with MPI_File_write_at and ends.  The client library claims a
 * CallID registry slot for each such thread; tests/integration/
 * test_registry.py reads the registry while this program waits, and
 * expects the slots of the threads that ended to have been freed.
 *
 * usage: thread_calls FILE THREADS
 *
 * After the threads, every rank has its file checked, prints "waiting PID"
 * and waits for a line on standard input before it closes the file and
 * finalizes.  Exit 0 when every write landed. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static MPI_File fh;

static void *one_call(void *arg)
{
    long i = (long)(intptr_t)arg;
    char buf[9];
    snprintf(buf, sizeof buf, "%08lu", (unsigned long)i % 100000000ul);
    MPI_Status st;
    int *ok = malloc(sizeof *ok);
    *ok = MPI_File_write_at(fh, (MPI_Offset)i * 8, buf, 8, MPI_CHAR, &st) == MPI_SUCCESS;
    return ok;
}

int main(int argc, char **argv)
{
    int provided = -1, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 3 || provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, argc != 3 ? "usage: thread_calls FILE THREADS\n"
                                      : "thread_calls: no MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
    long threads = atol(argv[2]);
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                      &fh) != MPI_SUCCESS) {
        fprintf(stderr, "thread_calls: cannot open %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int bad = 0;
    for (long i = 0; i < threads; i++) {
        pthread_t t;
        void *ok = NULL;
        if (pthread_create(&t, NULL, one_call, (void *)(intptr_t)i) != 0 ||
            pthread_join(t, &ok) != 0 || !ok || !*(int *)ok)
            bad++;
        free(ok);
    }
    MPI_Offset size = 0;
    MPI_File_get_size(fh, &size);
    if (size != threads * 8) {
        fprintf(stderr, "thread_calls: rank %d: %s has %lld bytes, want %ld\n", rank, path,
                (long long)size, threads * 8);
        bad++;
    }
    printf("waiting %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        line[0] = '\0';
    MPI_File_close(&fh);
    MPI_Finalize();
    return bad != 0;
}
