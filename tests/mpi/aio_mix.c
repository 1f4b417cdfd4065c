/* POSIX AIO under libiotrace-client: the answers of aio_error, aio_return,
 * aio_suspend and aio_cancel, and the data of MPI-IO's non-blocking calls,
 * are what glibc alone gives.  Run with `mpiexec -n 1`, once without the
 * library and once with it (then with --expect-takeover): every check holds
 * in both runs.
 *
 * The library only takes over requests submitted inside a traced MPI-IO
 * call.  Besides ROMIO's own (MPI_File_iwrite_at/iread_at), this program
 * submits some directly from inside one: from the file error handler, which
 * ROMIO calls inside MPI_File_read_at when given a negative offset.  Their
 * descriptors include FIFOs, so that a request stays in progress until the
 * program writes into the FIFO.
 *
 * usage: aio_mix DIR [--expect-takeover]
 * Prints one line per part and "aio_mix: ok" at the end; exits non-zero on
 * the first failed check. */
#include <aio.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static int expect_takeover;

#define CHECK(cond, ...) ((cond) ? (void)0 : fail(__LINE__, __VA_ARGS__))

static void fail(int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "aio_mix:%d: ", line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));
    va_end(ap);
    exit(1);
}

static char *path(const char *name)
{
    static char buf[8][4096];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fill(char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + (seed * 31 + (int)i) % 26);
}

/* Sleeps through signal handlers. */
static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, ms % 1000 * 1000000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

static int same(const char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (char)('a' + (seed * 31 + (int)i) % 26))
            return 0;
    return 1;
}

/* Threads named as the library names its AIO workers. */
static int workers_seen(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[300], comm[64] = "";
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(p, "r") : NULL;
        if (f && fgets(comm, sizeof comm, f) && strncmp(comm, "iotrace-aio", 11) == 0)
            n++;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static void setup_cb(struct aiocb *cb, int fd, void *buf, size_t n, off_t off)
{
    memset(cb, 0, sizeof *cb);
    cb->aio_fildes = fd;
    cb->aio_buf = buf;
    cb->aio_nbytes = n;
    cb->aio_offset = off;
    cb->aio_sigevent.sigev_notify = SIGEV_NONE;
}

static void wait_one(struct aiocb *cb)
{
    const struct aiocb *list[1] = {cb};
    while (aio_error(cb) == EINPROGRESS)
        CHECK(aio_suspend(list, 1, NULL) == 0 || errno == EINTR, "aio_suspend");
}

/* ---- part 1: requests outside MPI-IO stay glibc's ----------------------------- */

static void direct_io(void)
{
    int fd = open(path("direct.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0, "open direct.bin");
    char w[3000], r[3000];
    fill(w, sizeof w, 7);
    struct aiocb cb;
    setup_cb(&cb, fd, w, sizeof w, 100);
    CHECK(aio_write(&cb) == 0, "aio_write");
    wait_one(&cb);
    CHECK(aio_error(&cb) == 0 && aio_return(&cb) == (ssize_t)sizeof w, "aio_write result");
    struct aiocb64 cb64;
    memset(&cb64, 0, sizeof cb64);
    cb64.aio_fildes = fd;
    cb64.aio_buf = r;
    cb64.aio_nbytes = sizeof r;
    cb64.aio_offset = 100;
    cb64.aio_sigevent.sigev_notify = SIGEV_NONE;
    CHECK(aio_read64(&cb64) == 0, "aio_read64");
    const struct aiocb64 *l64[1] = {&cb64};
    while (aio_error64(&cb64) == EINPROGRESS)
        aio_suspend64(l64, 1, NULL);
    CHECK(aio_return64(&cb64) == (ssize_t)sizeof r && same(r, sizeof r, 7), "aio_read64 data");
    CHECK(aio_cancel(fd, NULL) == AIO_ALLDONE, "aio_cancel with nothing queued");
    CHECK(aio_cancel(-1, NULL) == -1 && errno == EBADF, "aio_cancel of a bad descriptor");
    close(fd);
    CHECK(workers_seen() == 0, "requests outside MPI-IO were taken over");
    printf("direct: ok\n");
}

/* ---- part 2: requests submitted inside an MPI-IO call -------------------------- */

static int fifo1, fifo2, regular;
static struct aiocb cb1, cb2, cb3, cb4, cb5, cbsig;
static char buf1[16], buf2[16], buf3[16], buf4[4096], buf5[512], bufsig[64];
static volatile sig_atomic_t usr1, alarms;
static void (*in_call)(void); /* what the error handler submits */
static int handler_ran;

/* Runs inside MPI_File_read_at, as ROMIO reports its bad offset. */
static void on_error(MPI_File *fh, int *code, ...)
{
    (void)fh;
    (void)code;
    handler_ran++;
    in_call();
}

static void call_inside_mpi_io(void (*fn)(void))
{
    MPI_File fh;
    MPI_Errhandler eh;
    MPI_Status st;
    char b;
    CHECK(MPI_File_open(MPI_COMM_SELF, path("eh.bin"), MPI_MODE_CREATE | MPI_MODE_RDWR,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS, "MPI_File_open");
    MPI_File_create_errhandler(on_error, &eh);
    MPI_File_set_errhandler(fh, eh);
    in_call = fn;
    handler_ran = 0;
    CHECK(MPI_File_read_at(fh, -1, &b, 1, MPI_BYTE, &st) != MPI_SUCCESS, "negative offset");
    CHECK(handler_ran == 1, "the error handler did not run");
    MPI_File_close(&fh);
    MPI_Errhandler_free(&eh);
}

static void submit_first(void)
{
    setup_cb(&cb1, fifo1, buf1, sizeof buf1, 0); /* blocks until the FIFO has data */
    setup_cb(&cb2, fifo1, buf2, sizeof buf2, 0); /* queued behind cb1 */
    setup_cb(&cb3, fifo1, buf3, sizeof buf3, 0);
    fill(buf4, sizeof buf4, 4);
    setup_cb(&cb4, regular, buf4, sizeof buf4, 0);
    fill(buf5, sizeof buf5, 5);
    setup_cb(&cb5, regular, buf5, sizeof buf5, 8192);
    setup_cb(&cbsig, regular, bufsig, sizeof bufsig, 0);
    cbsig.aio_sigevent.sigev_notify = SIGEV_SIGNAL; /* a notification: glibc's */
    cbsig.aio_sigevent.sigev_signo = SIGUSR1;
    CHECK(aio_read(&cb1) == 0 && aio_read(&cb2) == 0 && aio_read(&cb3) == 0, "aio_read fifo");
    CHECK(aio_write(&cb4) == 0 && aio_write(&cb5) == 0, "aio_write regular");
    CHECK(aio_read(&cbsig) == 0, "aio_read with a signal");
}

static void on_usr1(int sig) { (void)sig, usr1++; }
static void on_alarm(int sig) { (void)sig, alarms++; }

static void open_fifos(void)
{
    CHECK(mkfifo(path("fifo1"), 0600) == 0 && mkfifo(path("fifo2"), 0600) == 0, "mkfifo");
    fifo1 = open(path("fifo1"), O_RDWR); /* read and write ends: no blocking open */
    fifo2 = open(path("fifo2"), O_RDWR);
    regular = open(path("regular.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fifo1 >= 0 && fifo2 >= 0 && regular >= 0, "open fifos");
}

/* Until a thread (our worker or glibc's helper) blocks in read(fd): its
 * /proc/self/task/T/syscall starts with the number of read and fd. */
static void wait_reading(int fd)
{
    char want[32];
    snprintf(want, sizeof want, "0 0x%x ", fd);
    for (int i = 0; i < 1000; i++) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        int found = 0;
        while (d && (e = readdir(d)) && !found) {
            char p[300], line[256] = "";
            snprintf(p, sizeof p, "/proc/self/task/%s/syscall", e->d_name);
            FILE *f = e->d_name[0] != '.' ? fopen(p, "r") : NULL;
            found = f && fgets(line, sizeof line, f) && strncmp(line, want, strlen(want)) == 0;
            if (f)
                fclose(f);
        }
        if (d)
            closedir(d);
        if (found)
            return;
        sleep_ms(10);
    }
    fail(__LINE__, "no thread came to read descriptor %d", fd);
}

static void submit_inside_mpi_call(void)
{
    call_inside_mpi_io(submit_first);
    /* cbsig's signal comes now rather than in the middle of a later wait */
    for (int i = 0; i < 200 && !usr1; i++)
        sleep_ms(10);
    CHECK(usr1 == 1, "the SIGEV_SIGNAL request's signal arrived %d times", (int)usr1);
    wait_reading(fifo1); /* cb1 has started: cancelling it fails */
}

static void check_in_progress(void)
{
    CHECK(aio_error(&cb1) == EINPROGRESS && aio_error(&cb2) == EINPROGRESS, "in progress");
    const struct aiocb *l1[1] = {&cb1};
    struct timespec t50 = {0, 50000000};
    double t0 = now_s();
    CHECK(aio_suspend(l1, 1, &t50) == -1 && errno == EAGAIN, "aio_suspend timeout");
    double took = now_s() - t0;
    CHECK(took >= 0.045 && took < 2.0, "aio_suspend waited %.3f s for 0.05", took);
    struct timespec zero = {0, 0};
    CHECK(aio_suspend(l1, 1, &zero) == -1 && errno == EAGAIN, "aio_suspend poll");
    const struct aiocb *l2[3] = {NULL, &cb1, &cb4};
    struct timespec t5 = {5, 0};
    CHECK(aio_suspend(l2, 3, &t5) == 0, "aio_suspend with one done");
    CHECK(aio_error(&cb4) == 0 && aio_return(&cb4) == (ssize_t)sizeof buf4, "cb4 result");
    CHECK(aio_return(&cb4) == (ssize_t)sizeof buf4, "cb4 result read twice");
    wait_one(&cb5); /* not returned: see reuse_control_block */
    CHECK(aio_error(&cb5) == 0, "cb5 done");
}

static void check_cancel(void)
{
    CHECK(aio_cancel(fifo1, &cb2) == AIO_CANCELED, "cancel queued cb2");
    CHECK(aio_error(&cb2) == ECANCELED && aio_return(&cb2) == -1, "cb2 cancelled");
    CHECK(aio_cancel(fifo1, &cb1) == AIO_NOTCANCELED, "cancel running cb1");
    CHECK(aio_cancel(regular, &cb1) == -1 && errno == EINVAL, "cancel on another fd");
    CHECK(aio_cancel(-1, &cb1) == -1 && errno == EBADF, "cancel on a bad fd");
    CHECK(aio_cancel(fifo1, NULL) == AIO_NOTCANCELED, "cancel all on fifo1");
    CHECK(aio_error(&cb3) == ECANCELED && aio_return(&cb3) == -1, "cb3 cancelled");
    CHECK(aio_cancel(regular, &cb5) == AIO_ALLDONE, "cancel a finished one");
    CHECK(aio_error(&cb1) == EINPROGRESS, "cb1 still in progress");
}

static volatile int interrupted_wait_over;

/* Until the wait is over: a signal that came before it began would not end it. */
static void *alarm_until_over(void *arg)
{
    while (!interrupted_wait_over) {
        sleep_ms(50);
        pthread_kill(*(pthread_t *)arg, SIGALRM);
    }
    return NULL;
}

/* A handler (without SA_RESTART) ends the wait.  The signal goes to this
 * thread: MPI's own threads might take a process-wide one. */
static void check_signal_interrupts(void)
{
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    pthread_t self = pthread_self(), t;
    pthread_create(&t, NULL, alarm_until_over, &self);
    const struct aiocb *l1[1] = {&cb1};
    int r = aio_suspend(l1, 1, NULL);
    CHECK(r == -1 && errno == EINTR && alarms >= 1, "aio_suspend interrupted: %d", r);
    interrupted_wait_over = 1;
    pthread_join(t, NULL);
    signal(SIGALRM, SIG_IGN);
}

static void *feed_later(void *arg)
{
    sleep_ms(50);
    CHECK(write(*(int *)arg, "0123456789abcdef", 16) == 16, "feed fifo");
    return NULL;
}

/* A list with a request of ours and one of glibc's: either ends the wait. */
static void check_mixed_list(void)
{
    struct aiocb g;
    char gbuf[16];
    setup_cb(&g, fifo2, gbuf, sizeof gbuf, 0);
    CHECK(aio_read(&g) == 0, "glibc aio_read on fifo2");
    const struct aiocb *l[2] = {&cb1, &g};
    struct timespec t30 = {0, 30000000}, t5 = {5, 0};
    CHECK(aio_suspend(l, 2, &t30) == -1 && errno == EAGAIN, "mixed aio_suspend timeout");
    pthread_t t;
    pthread_create(&t, NULL, feed_later, &fifo2);
    double t0 = now_s();
    CHECK(aio_suspend(l, 2, &t5) == 0, "mixed aio_suspend");
    CHECK(now_s() - t0 < 2.0, "mixed aio_suspend took %.3f s", now_s() - t0);
    pthread_join(t, NULL);
    wait_one(&g);
    CHECK(aio_return(&g) == 16 && memcmp(gbuf, "0123456789abcdef", 16) == 0, "fifo2 data");
    CHECK(aio_error(&cb1) == EINPROGRESS, "cb1 still in progress");
}

static void finish_cb1(void)
{
    pthread_t t;
    pthread_create(&t, NULL, feed_later, &fifo1);
    const struct aiocb *l1[1] = {&cb1};
    CHECK(aio_suspend(l1, 1, NULL) == 0, "aio_suspend for cb1");
    pthread_join(t, NULL);
    CHECK(aio_error(&cb1) == 0 && aio_return(&cb1) == 16, "cb1 result");
    CHECK(memcmp(buf1, "0123456789abcdef", 16) == 0, "cb1 data");
}

/* cb5 finished and was never returned; handed to a new request (glibc's,
 * outside MPI-IO), it answers for that one. */
static void reuse_control_block(void)
{
    char b[16];
    setup_cb(&cb5, fifo2, b, sizeof b, 0);
    CHECK(aio_read(&cb5) == 0, "reuse cb5");
    sleep_ms(20);
    CHECK(aio_error(&cb5) == EINPROGRESS, "reused cb5 answers for its new request");
    CHECK(write(fifo2, "fedcba9876543210", 16) == 16, "feed fifo2");
    wait_one(&cb5);
    CHECK(aio_return(&cb5) == 16 && memcmp(b, "fedcba9876543210", 16) == 0, "reused cb5 data");
}

static void taken_over_requests(void)
{
    signal(SIGUSR1, on_usr1);
    open_fifos();
    submit_inside_mpi_call();
    CHECK(workers_seen() == (expect_takeover ? 2 : 0), "%d AIO workers", workers_seen());
    check_in_progress();
    check_cancel();
    check_signal_interrupts();
    check_mixed_list();
    finish_cb1();
    reuse_control_block();
    wait_one(&cbsig);
    CHECK(aio_return(&cbsig) >= 0, "cbsig result");
    printf("inside MPI-IO: ok\n");
}

/* ---- part 3: ROMIO's non-blocking calls --------------------------------------- */

#define BLK 8192
#define K 16

static void check(int rc, const char *what) { CHECK(rc == MPI_SUCCESS, "%s", what); }

static int all_null(const MPI_Request *req, int n)
{
    for (int i = 0; i < n; i++)
        if (req[i] != MPI_REQUEST_NULL)
            return 0;
    return 1;
}

static MPI_File open_mpi(const char *name)
{
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_SELF, path(name), MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh), "MPI_File_open");
    return fh;
}

/* Completes the reads in many of the ways MPI offers (not MPI_Testall:
 * MPICH 4.0 fails an assertion in it on ROMIO's generalized requests, with
 * or without the library). */
static void complete_mixed(MPI_Request *req, int n)
{
    MPI_Status st, sts[K];
    int flag = 0, idx, out, ind[K];
    check(MPI_Wait(&req[0], &st), "MPI_Wait");
    while (!flag)
        check(MPI_Test(&req[1], &flag, &st), "MPI_Test");
    check(MPI_Waitany(n, req, &idx, &st), "MPI_Waitany");
    check(MPI_Waitsome(n, req, &out, ind, sts), "MPI_Waitsome");
    do
        check(MPI_Testsome(n, req, &out, ind, sts), "MPI_Testsome");
    while (out != MPI_UNDEFINED && out >= 0 && !all_null(req, n));
    for (idx = 0; idx != MPI_UNDEFINED;)
        check(MPI_Testany(n, req, &idx, &flag, &st), "MPI_Testany");
}

static void round_trip(MPI_File fh, int round, char *w, char *r)
{
    MPI_Request req[K];
    MPI_Status st[K];
    for (int i = 0; i < K; i++) {
        fill(w + i * BLK, BLK, round * K + i);
        check(MPI_File_iwrite_at(fh, (MPI_Offset)i * BLK, w + i * BLK, BLK, MPI_BYTE, &req[i]),
              "iwrite_at");
    }
    check(MPI_Waitall(K, req, st), "MPI_Waitall");
    memset(r, 0, (size_t)K * BLK);
    for (int i = 0; i < K; i++)
        check(MPI_File_iread_at(fh, (MPI_Offset)i * BLK, r + i * BLK, BLK, MPI_BYTE, &req[i]),
              "iread_at");
    complete_mixed(req, K);
    for (int i = 0; i < K; i++)
        CHECK(same(r + i * BLK, BLK, round * K + i), "round %d block %d read back wrong", round, i);
}

/* Requests on one file run in order: the last write to a block wins. */
static void overlapping_writes(MPI_File fh)
{
    char a[BLK], b[BLK], r[BLK];
    MPI_Request req[2];
    MPI_Status st[2];
    for (int round = 0; round < 20; round++) {
        fill(a, BLK, 1000 + round);
        fill(b, BLK, 2000 + round);
        check(MPI_File_iwrite_at(fh, 0, a, BLK, MPI_BYTE, &req[0]), "iwrite_at a");
        check(MPI_File_iwrite_at(fh, 0, b, BLK, MPI_BYTE, &req[1]), "iwrite_at b");
        check(MPI_Waitall(2, req, st), "MPI_Waitall");
        check(MPI_File_read_at(fh, 0, r, BLK, MPI_BYTE, MPI_STATUS_IGNORE), "read_at");
        CHECK(same(r, BLK, 2000 + round), "overlapping writes ended out of order");
    }
}

/* More requests outstanding than the library's table holds: finished ones
 * give up their entries (glibc then answers from their control blocks), and
 * when none has finished yet the rest go to glibc. */
#define MANY 1100
#define SMALL 512

static void many_outstanding(MPI_File fh)
{
    static char w[MANY * SMALL], r[MANY * SMALL];
    static MPI_Request req[MANY];
    static MPI_Status st[MANY];
    for (int i = 0; i < MANY; i++) {
        fill(w + i * SMALL, SMALL, 3000 + i);
        check(MPI_File_iwrite_at(fh, (MPI_Offset)i * SMALL, w + i * SMALL, SMALL, MPI_BYTE,
                                 &req[i]), "iwrite_at many");
    }
    check(MPI_Waitall(MANY, req, st), "MPI_Waitall many");
    check(MPI_File_read_at(fh, 0, r, MANY * SMALL, MPI_BYTE, MPI_STATUS_IGNORE), "read_at many");
    for (int i = 0; i < MANY; i++)
        CHECK(same(r + i * SMALL, SMALL, 3000 + i), "request %d of many read back wrong", i);
}

static void romio_nonblocking(void)
{
    MPI_File a = open_mpi("nb-a.bin"), b = open_mpi("nb-b.bin");
    char *w = malloc((size_t)K * BLK * 2), *r = malloc((size_t)K * BLK * 2);
    for (int round = 0; round < 40; round++)
        round_trip(round % 2 ? b : a, round, w, r); /* two files: two workers */
    overlapping_writes(a);
    many_outstanding(b);
    free(w);
    free(r);
    check(MPI_File_close(&a), "close a");
    check(MPI_File_close(&b), "close b");
    printf("non-blocking MPI-IO: ok\n");
}

/* ---- part 4: fork -------------------------------------------------------------- */

static struct aiocb cb_running, cb_done;
static char buf_running[16], buf_done[256];

static void submit_before_fork(void)
{
    setup_cb(&cb_running, fifo1, buf_running, sizeof buf_running, 0);
    fill(buf_done, sizeof buf_done, 6);
    setup_cb(&cb_done, regular, buf_done, sizeof buf_done, 0);
    CHECK(aio_read(&cb_running) == 0 && aio_write(&cb_done) == 0, "submit before fork");
}

/* The child has none of the parent's workers or requests (and glibc's AIO
 * is no use in a child of a process that used it: its helpers are gone
 * too); the control blocks still say what the parent knew. */
static void fork_child_checks(void)
{
    int ok = aio_error(&cb_running) == EINPROGRESS && aio_error(&cb_done) == 0 &&
             aio_return(&cb_done) == (ssize_t)sizeof buf_done;
    _exit(ok ? 0 : 3);
}

static void fork_after_takeover(void)
{
    call_inside_mpi_io(submit_before_fork);
    const struct aiocb *l[1] = {&cb_done};
    CHECK(aio_suspend(l, 1, NULL) == 0 && aio_error(&cb_done) == 0, "cb_done");
    pid_t pid = fork(); /* while a worker is busy with cb_running */
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        fork_child_checks();
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK(aio_error(&cb_running) == EINPROGRESS, "cb_running in the parent");
    CHECK(write(fifo1, "after fork......", 16) == 16, "feed fifo1");
    wait_one(&cb_running);
    CHECK(aio_return(&cb_running) == 16 && memcmp(buf_running, "after fork", 10) == 0,
          "cb_running result");
    CHECK(aio_return(&cb_done) == (ssize_t)sizeof buf_done, "cb_done result");
    printf("fork: ok\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [--expect-takeover]\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    expect_takeover = argc > 2 && strcmp(argv[2], "--expect-takeover") == 0;
    direct_io();
    taken_over_requests();
    romio_nonblocking();
    fork_after_takeover();
    MPI_Finalize();
    printf("aio_mix: ok\n");
    return 0;
}
