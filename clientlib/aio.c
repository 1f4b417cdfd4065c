/* POSIX AIO interposition.
 *
 * ROMIO posts MPI_File_iwrite_at, iread_at and the other non-blocking
 * accesses it can with aio_write/aio_read, and glibc performs them in helper
 * threads of its own: their pread/pwrite are internal calls no wrapper sees,
 * and their thread ids are not in the CallID registry, so that I/O was
 * neither recorded nor tagged with the MPI-IO call that started it.
 *
 * So a request submitted inside a traced MPI-IO call that asks for no
 * notification is taken over: one of at most MAX_WORKERS threads of ours
 * (started on first use) publishes the call's CallID in the registry and
 * performs the transfer with pread/pwrite through our own wrappers, which
 * record it with that CallID.  Every other request goes to glibc unchanged.
 * aio_error, aio_return, aio_suspend and aio_cancel answer for the requests
 * we run as glibc would, and pass everything else through.  See
 * docs/client.md.
 *
 * A finished request's result is also written into its control block, where
 * glibc keeps it (__error_code, __return_value: glibc's aio_error and
 * aio_return only read those): so an entry we drop (a full table, a reused
 * control block, a fork) leaves glibc answering exactly as we did. */
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "registry.h"

_Static_assert(sizeof(struct aiocb) == sizeof(struct aiocb64),
               "aiocb and aiocb64 share one layout, so one table serves both");

#define MAX_JOBS 1024 /* requests taken over and not yet returned */
#define N_BUCKETS 1024
#define MAX_WORKERS 2

enum job_state { JOB_FREE, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct job {
    struct aiocb *cb;  /* the application's control block; NULL once it was reused */
    struct job *hnext; /* hash chain, or the free list */
    struct job *qnext; /* run queue */
    uint64_t callid;
    void *buf;
    size_t nbytes;
    off64_t offset;
    int fd;
    int write, wide;
    enum job_state state;
    ssize_t ret;
    int err;
};

/* Everything below is guarded by `lock`, held only for table and queue
 * updates (never across I/O). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a request was queued */
    int ready;
    struct job jobs[MAX_JOBS];
    struct job *free_jobs;
    struct job *bucket[N_BUCKETS];
    struct job *queue, **queue_tail;
    int busy_fd[MAX_WORKERS]; /* descriptor each worker is serving, -1 none */
    int workers, idle;
} aq = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

/* Jobs findable by control block; 0: every request is glibc's, and the
 * query functions go straight through. */
static _Atomic int hashed;
/* Futex word of aio_suspend: bumped whenever one of our requests ends. */
static _Atomic uint32_t completions;
static _Atomic int sleepers;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static inline int any_ours(void) { return atomic_load_explicit(&hashed, memory_order_acquire); }

/* ---- the table ------------------------------------------------------------ */

static void ready_up(void)
{
    if (aq.ready)
        return;
    for (int i = MAX_JOBS - 1; i >= 0; i--) {
        aq.jobs[i].hnext = aq.free_jobs;
        aq.free_jobs = &aq.jobs[i];
    }
    aq.queue_tail = &aq.queue;
    for (int w = 0; w < MAX_WORKERS; w++)
        aq.busy_fd[w] = -1;
    aq.ready = 1;
}

static size_t bucket_of(const struct aiocb *cb)
{
    return (size_t)((((uintptr_t)cb >> 4) * 0x9E3779B97F4A7C15ull) >> 54); /* 10 bits */
}

_Static_assert(N_BUCKETS == 1 << 10, "bucket_of yields 10 bits");

static struct job **link_of(const struct aiocb *cb)
{
    struct job **l = &aq.bucket[bucket_of(cb)];
    while (*l && (*l)->cb != cb)
        l = &(*l)->hnext;
    return l;
}

static struct job *find(const struct aiocb *cb) { return *link_of(cb); }

static void hash_in(struct job *j)
{
    struct job **head = &aq.bucket[bucket_of(j->cb)];
    j->hnext = *head;
    *head = j;
    atomic_fetch_add(&hashed, 1);
}

static void unhash(struct job *j)
{
    *link_of(j->cb) = j->hnext;
    atomic_fetch_sub(&hashed, 1);
}

static void free_job(struct job *j)
{
    j->state = JOB_FREE;
    j->cb = NULL;
    j->hnext = aq.free_jobs;
    aq.free_jobs = j;
}

/* A full table gives up a finished request: its result is in its control
 * block already, where glibc's aio_error and aio_return find it. */
static struct job *alloc_job(void)
{
    struct job *j = aq.free_jobs;
    if (j) {
        aq.free_jobs = j->hnext;
        return j;
    }
    for (int i = 0; i < MAX_JOBS; i++)
        if (aq.jobs[i].state == JOB_DONE) {
            unhash(&aq.jobs[i]);
            return &aq.jobs[i];
        }
    return NULL;
}

/* The application hands a control block to a new request: what we kept of
 * its previous one goes.  A finished one's result is in the block already;
 * one still running was reused against the rules, and its worker finishes
 * it without touching the block. */
static void forget(const struct aiocb *cb)
{
    struct job *j = find(cb);
    if (!j)
        return;
    unhash(j);
    if (j->state == JOB_DONE)
        free_job(j);
    else
        j->cb = NULL;
}

static void forget_locked(const struct aiocb *cb)
{
    pthread_mutex_lock(&aq.lock);
    forget(cb);
    pthread_mutex_unlock(&aq.lock);
}

static int is_ours(const struct aiocb *cb)
{
    pthread_mutex_lock(&aq.lock);
    int ours = find(cb) != NULL;
    pthread_mutex_unlock(&aq.lock);
    return ours;
}

/* Under the lock: the result becomes visible (to us and, through the
 * control block, to glibc). */
static void finish(struct job *j)
{
    if (!j->cb) {
        free_job(j);
        return;
    }
    j->cb->__return_value = j->ret;
    j->cb->__error_code = j->err;
    j->state = JOB_DONE;
}

static void wake_waiters(void)
{
    atomic_fetch_add(&completions, 1);
    if (atomic_load(&sleepers)) {
        int saved = errno;
        syscall(SYS_futex, (uint32_t *)&completions, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        errno = saved;
    }
}

/* ---- the queue and the workers --------------------------------------------- */

static int fd_busy(int fd)
{
    for (int w = 0; w < MAX_WORKERS; w++)
        if (aq.busy_fd[w] == fd)
            return 1;
    return 0;
}

/* The first queued job whose descriptor no worker is serving.  glibc runs
 * one request per descriptor at a time, in order, and so do we: overlapping
 * requests end as they would have. */
static struct job **runnable(void)
{
    for (struct job **l = &aq.queue; *l; l = &(*l)->qnext)
        if (!fd_busy((*l)->fd))
            return l;
    return NULL;
}

static void unlink_queued(struct job **l)
{
    struct job *j = *l;
    *l = j->qnext;
    if (!*l)
        aq.queue_tail = l;
}

static void unqueue(struct job *j)
{
    struct job **l = &aq.queue;
    while (*l != j)
        l = &(*l)->qnext;
    unlink_queued(l);
}

/* As glibc's helper does it: pread/pwrite, and read/write where the
 * descriptor cannot seek (Linux refuses pread on pipes and sockets with
 * ESPIPE where other systems ignore the offset).  The calls go through our
 * POSIX wrappers, which record them. */
static ssize_t transfer(const struct job *j)
{
    ssize_t r;
    do {
        if (j->write)
            r = j->wide ? pwrite64(j->fd, j->buf, j->nbytes, j->offset)
                        : pwrite(j->fd, j->buf, j->nbytes, (off_t)j->offset);
        else
            r = j->wide ? pread64(j->fd, j->buf, j->nbytes, j->offset)
                        : pread(j->fd, j->buf, j->nbytes, (off_t)j->offset);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == ESPIPE)
        do
            r = j->write ? write(j->fd, j->buf, j->nbytes) : read(j->fd, j->buf, j->nbytes);
        while (r < 0 && errno == EINTR);
    return r;
}

/* While the transfer runs, this thread is "in" the call that submitted it:
 * its records carry the CallID, and the registry lists it for the file
 * system client. */
static void perform(struct job *j)
{
    iot_t.callid = j->callid;
    struct iot_reg_slot *slot = iot_t.reg ? iot_t.reg : iot_callreg_attach();
    iot_registry_begin(slot, j->callid);
    ssize_t r = transfer(j);
    j->err = r < 0 ? errno : 0;
    j->ret = r;
    iot_registry_end(slot);
    iot_t.callid = 0;
}

static struct job *take_job(int slot)
{
    struct job **l;
    while (!(l = runnable())) {
        aq.idle++;
        pthread_cond_wait(&aq.work, &aq.lock);
        aq.idle--;
    }
    struct job *j = *l;
    unlink_queued(l);
    j->state = JOB_RUNNING;
    aq.busy_fd[slot] = j->fd;
    if (aq.idle && runnable())
        pthread_cond_signal(&aq.work);
    return j;
}

static void *worker_main(void *arg)
{
    int slot = (int)(intptr_t)arg;
    pthread_mutex_lock(&aq.lock);
    for (;;) {
        struct job *j = take_job(slot);
        pthread_mutex_unlock(&aq.lock);
        perform(j);
        pthread_mutex_lock(&aq.lock);
        aq.busy_fd[slot] = -1;
        finish(j);
        pthread_mutex_unlock(&aq.lock);
        wake_waiters();
        pthread_mutex_lock(&aq.lock);
    }
    return NULL;
}

/* Under the lock.  Workers block every signal, as glibc's helpers do: the
 * application's signals are for its own threads. */
static int spawn_worker(void)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)aq.workers);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return -1;
    pthread_setname_np(t, "iotrace-aio");
    aq.workers++;
    return 0;
}

/* ---- fork ------------------------------------------------------------------ */

static void fork_prepare(void) { pthread_mutex_lock(&aq.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&aq.lock); }

/* The workers do not exist in the child.  Requests they were running never
 * finish there (nor do glibc's: its helpers are gone too), and their control
 * blocks say EINPROGRESS to glibc; finished ones' results are in theirs. */
static void fork_child(void)
{
    memset(&aq, 0, sizeof aq);
    pthread_mutex_init(&aq.lock, NULL);
    pthread_cond_init(&aq.work, NULL);
    atomic_store(&hashed, 0);
    atomic_store(&completions, 0);
    atomic_store(&sleepers, 0);
}

static void watch_forks(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* ---- submission -------------------------------------------------------------- */

/* Requests inside a traced MPI-IO call that ask for no notification:
 * SIGEV_NONE, or SIGEV_SIGNAL with the null signal, which is what ROMIO
 * leaves in its zeroed control blocks on Linux (glibc "sends" it with
 * sigqueue(pid, 0, ...), which delivers nothing).  Priorities are glibc's
 * business. */
static int wanted(const struct aiocb *cb)
{
    if (!iot_t.callid || !iot_recording())
        return 0;
    const struct sigevent *ev = &cb->aio_sigevent;
    int silent = ev->sigev_notify == SIGEV_NONE ||
                 (ev->sigev_notify == SIGEV_SIGNAL && ev->sigev_signo == 0);
    return silent && cb->aio_reqprio == 0;
}

static void fill(struct job *j, struct aiocb *cb, int write, int wide)
{
    *j = (struct job){.cb = cb, .callid = iot_t.callid, .buf = (void *)cb->aio_buf,
                      .nbytes = cb->aio_nbytes, .offset = cb->aio_offset,
                      .fd = cb->aio_fildes, .write = write, .wide = wide,
                      .state = JOB_QUEUED};
    cb->__error_code = EINPROGRESS; /* as glibc marks a queued request */
    cb->__return_value = 0;
}

static void queue_job(struct job *j)
{
    j->qnext = NULL;
    *aq.queue_tail = j;
    aq.queue_tail = &j->qnext;
    if (aq.idle)
        pthread_cond_signal(&aq.work);
    else if (aq.workers < MAX_WORKERS && runnable())
        spawn_worker(); /* if it fails, the first worker gets to it */
}

/* 1 when a worker of ours will run the request; 0: glibc's. */
static int enqueue(struct aiocb *cb, int write, int wide)
{
    pthread_once(&atfork_once, watch_forks);
    pthread_mutex_lock(&aq.lock);
    ready_up();
    forget(cb);
    struct job *j = alloc_job();
    int taken = j && (aq.workers || spawn_worker() == 0);
    if (taken) {
        fill(j, cb, write, wide);
        hash_in(j);
        queue_job(j);
    } else if (j) {
        free_job(j);
    }
    pthread_mutex_unlock(&aq.lock);
    return taken;
}

/* 1 when we took the request over; 0: the caller hands it to glibc. */
static int take_over(struct aiocb *cb, int write, int wide)
{
    if (!wanted(cb)) {
        if (any_ours())
            forget_locked(cb);
        return 0;
    }
    int saved = errno;
    iot_t.internal++;
    int taken = enqueue(cb, write, wide);
    iot_t.internal--;
    errno = saved;
    return taken;
}

int aio_read(struct aiocb *cb)
{
    IOT_NEXT(aio_read, -1);
    return take_over(cb, 0, 0) ? 0 : next_aio_read(cb);
}

int aio_write(struct aiocb *cb)
{
    IOT_NEXT(aio_write, -1);
    return take_over(cb, 1, 0) ? 0 : next_aio_write(cb);
}

int aio_read64(struct aiocb64 *cb)
{
    IOT_NEXT(aio_read64, -1);
    return take_over((struct aiocb *)cb, 0, 1) ? 0 : next_aio_read64(cb);
}

int aio_write64(struct aiocb64 *cb)
{
    IOT_NEXT(aio_write64, -1);
    return take_over((struct aiocb *)cb, 1, 1) ? 0 : next_aio_write64(cb);
}

/* ---- status ------------------------------------------------------------------ */

/* 1 when cb is ours; *err as aio_error returns it. */
static int error_of(const struct aiocb *cb, int *err)
{
    pthread_mutex_lock(&aq.lock);
    struct job *j = find(cb);
    if (j)
        *err = j->state == JOB_DONE ? j->err : EINPROGRESS;
    pthread_mutex_unlock(&aq.lock);
    return j != NULL;
}

/* 1 when cb is ours and finished: *ret is its result, and it is forgotten.
 * A request still running goes to glibc, which reads the control block as
 * it does for its own. */
static int return_of(struct aiocb *cb, ssize_t *ret)
{
    pthread_mutex_lock(&aq.lock);
    struct job *j = find(cb);
    int done = j && j->state == JOB_DONE;
    if (done) {
        *ret = j->ret;
        unhash(j);
        free_job(j);
    }
    pthread_mutex_unlock(&aq.lock);
    return done;
}

int aio_error(const struct aiocb *cb)
{
    IOT_NEXT(aio_error, -1);
    int err;
    return any_ours() && error_of(cb, &err) ? err : next_aio_error(cb);
}

int aio_error64(const struct aiocb64 *cb)
{
    IOT_NEXT(aio_error64, -1);
    int err;
    return any_ours() && error_of((const struct aiocb *)cb, &err) ? err : next_aio_error64(cb);
}

ssize_t aio_return(struct aiocb *cb)
{
    IOT_NEXT(aio_return, -1);
    ssize_t ret;
    return any_ours() && return_of(cb, &ret) ? ret : next_aio_return(cb);
}

ssize_t aio_return64(struct aiocb64 *cb)
{
    IOT_NEXT(aio_return64, -1);
    ssize_t ret;
    return any_ours() && return_of((struct aiocb *)cb, &ret) ? ret : next_aio_return64(cb);
}

/* ---- aio_suspend --------------------------------------------------------------- */

enum survey { NONE_OURS, OURS_DONE, OURS_PENDING };

/* How the listed requests we run stand; *foreign: some listed are glibc's. */
static enum survey survey(const struct aiocb *const list[], int nent, int *foreign)
{
    enum survey st = NONE_OURS;
    *foreign = 0;
    pthread_mutex_lock(&aq.lock);
    for (int i = 0; i < nent && st != OURS_DONE; i++) {
        if (!list[i])
            continue;
        struct job *j = find(list[i]);
        if (!j)
            *foreign = 1;
        else
            st = j->state == JOB_DONE ? OURS_DONE : OURS_PENDING;
    }
    pthread_mutex_unlock(&aq.lock);
    return st;
}

typedef int glibc_error_fn(const struct aiocb *);

static int foreign_done(const struct aiocb *const list[], int nent, glibc_error_fn *glibc_error)
{
    for (int i = 0; i < nent; i++)
        if (list[i] && !is_ours(list[i]) && glibc_error(list[i]) != EINPROGRESS)
            return 1;
    return 0;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Time left until the deadline (INT64_MAX: none), at most cap_ns. */
static int64_t time_left(int64_t deadline, int64_t cap_ns)
{
    int64_t left = deadline == INT64_MAX ? INT64_MAX : deadline - mono_ns();
    return left < cap_ns ? left : cap_ns;
}

/* 0 (woken, or the word moved on), ETIMEDOUT or EINTR.  A signal handler
 * ends the wait with EINTR, as it ends glibc's. */
static int sleep_on_completions(uint32_t seen, int64_t ns)
{
    struct timespec rel = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    long r = syscall(SYS_futex, (uint32_t *)&completions, FUTEX_WAIT_PRIVATE, seen,
                     ns == INT64_MAX ? NULL : &rel, NULL, 0);
    return r < 0 && (errno == ETIMEDOUT || errno == EINTR) ? errno : 0;
}

enum step { STEP_READY, STEP_AGAIN, STEP_TIMEOUT, STEP_SIGNAL };

/* One look at the list and at most one sleep.  Our completions wake the
 * sleep; glibc's do not, so while glibc's requests are listed too the sleep
 * lasts at most poll_ns.  The caller counts itself among the sleepers
 * before `seen` is read, so a completion either shows in the survey or
 * wakes the sleep. */
static enum step suspend_step(const struct aiocb *const list[], int nent, int64_t deadline,
                              glibc_error_fn *glibc_error, int64_t poll_ns)
{
    uint32_t seen = atomic_load(&completions);
    int foreign;
    if (survey(list, nent, &foreign) != OURS_PENDING) /* done, or already returned */
        return STEP_READY;
    if (foreign && foreign_done(list, nent, glibc_error))
        return STEP_READY;
    int64_t ns = time_left(deadline, foreign ? poll_ns : INT64_MAX);
    if (ns <= 0)
        return STEP_TIMEOUT;
    return sleep_on_completions(seen, ns) == EINTR ? STEP_SIGNAL : STEP_AGAIN;
}

static int suspend_ours(const struct aiocb *const list[], int nent, int64_t deadline,
                        glibc_error_fn *glibc_error)
{
    int64_t poll_ns = 20000; /* 20 us, doubling up to 1 ms */
    enum step s;
    do {
        pthread_testcancel(); /* aio_suspend is a cancellation point */
        atomic_fetch_add(&sleepers, 1);
        s = suspend_step(list, nent, deadline, glibc_error, poll_ns);
        atomic_fetch_sub(&sleepers, 1);
        if (poll_ns < 1000000)
            poll_ns *= 2;
    } while (s == STEP_AGAIN);
    if (s == STEP_READY)
        return 0;
    errno = s == STEP_TIMEOUT ? EAGAIN : EINTR;
    return -1;
}

/* The timeout is taken as glibc takes it: seconds and nanoseconds added to
 * the monotonic clock, whatever their range.  INT64_MAX: no deadline. */
static int64_t deadline_of(const struct timespec *t)
{
    int64_t ns, at;
    if (!t)
        return INT64_MAX;
    if (__builtin_mul_overflow((int64_t)t->tv_sec, (int64_t)1000000000, &ns) ||
        __builtin_add_overflow(ns, (int64_t)t->tv_nsec, &ns) ||
        __builtin_add_overflow(ns, mono_ns(), &at))
        return t->tv_sec < 0 ? 0 : INT64_MAX;
    return at;
}

static int suspend(const struct aiocb *const list[], int nent, const struct timespec *timeout,
                   glibc_error_fn *glibc_error)
{
    int64_t deadline = deadline_of(timeout);
    int saved = errno;
    int r = suspend_ours(list, nent, deadline, glibc_error);
    if (r == 0)
        errno = saved;
    return r;
}

static int lists_ours(const struct aiocb *const list[], int nent)
{
    int foreign;
    return nent > 0 && survey(list, nent, &foreign) != NONE_OURS;
}

int aio_suspend(const struct aiocb *const list[], int nent, const struct timespec *timeout)
{
    IOT_NEXT(aio_suspend, -1);
    IOT_NEXT(aio_error, -1);
    if (!any_ours() || !lists_ours(list, nent))
        return next_aio_suspend(list, nent, timeout);
    return suspend(list, nent, timeout, next_aio_error);
}

int aio_suspend64(const struct aiocb64 *const list[], int nent, const struct timespec *timeout)
{
    IOT_NEXT(aio_suspend64, -1);
    IOT_NEXT(aio_error, -1);
    const struct aiocb *const *l = (const struct aiocb *const *)list;
    if (!any_ours() || !lists_ours(l, nent))
        return next_aio_suspend64(list, nent, timeout);
    return suspend(l, nent, timeout, next_aio_error);
}

/* ---- aio_cancel ----------------------------------------------------------------- */

/* Under the lock.  A queued request is cancelled, as glibc cancels one no
 * helper has started; one running is not. */
static int cancel_job(struct job *j)
{
    if (j->state == JOB_DONE)
        return AIO_ALLDONE;
    if (j->state == JOB_RUNNING)
        return AIO_NOTCANCELED;
    unqueue(j);
    j->ret = -1;
    j->err = ECANCELED;
    finish(j);
    return AIO_CANCELED;
}

/* 1 when cb is ours: *result is what aio_cancel returns (errno set for -1),
 * after glibc's checks in glibc's order. */
static int cancel_one(int fd, struct aiocb *cb, int *result)
{
    if (!is_ours(cb))
        return 0;
    if (fcntl(fd, F_GETFL) < 0) {
        errno = EBADF;
        *result = -1;
        return 1;
    }
    if (cb->aio_fildes != fd) {
        errno = EINVAL;
        *result = -1;
        return 1;
    }
    pthread_mutex_lock(&aq.lock);
    struct job *j = find(cb);
    if (j)
        *result = cancel_job(j);
    pthread_mutex_unlock(&aq.lock);
    if (j && *result == AIO_CANCELED)
        wake_waiters();
    return j != NULL;
}

/* Under the lock: cancels our queued requests on fd; 1 when one of ours on
 * fd is running. */
static int cancel_queued(int fd, int *cancelled)
{
    for (struct job **l = &aq.queue; *l;) {
        struct job *j = *l;
        if (j->fd != fd || !j->cb) {
            l = &j->qnext;
            continue;
        }
        unlink_queued(l);
        j->ret = -1;
        j->err = ECANCELED;
        finish(j);
        *cancelled = 1;
    }
    for (int i = 0; i < MAX_JOBS; i++)
        if (aq.jobs[i].state == JOB_RUNNING && aq.jobs[i].fd == fd && aq.jobs[i].cb)
            return 1;
    return 0;
}

/* aio_cancel(fd, NULL) over glibc's requests and ours: not cancelled if any
 * is running, else cancelled if any was cancelled, else all done. */
static int cancel_fd(int fd, int glibc_result)
{
    int cancelled = 0;
    pthread_mutex_lock(&aq.lock);
    int running = cancel_queued(fd, &cancelled);
    pthread_mutex_unlock(&aq.lock);
    if (cancelled)
        wake_waiters();
    if (running || glibc_result == AIO_NOTCANCELED)
        return AIO_NOTCANCELED;
    if (cancelled || glibc_result == AIO_CANCELED)
        return AIO_CANCELED;
    return AIO_ALLDONE;
}

int aio_cancel(int fd, struct aiocb *cb)
{
    IOT_NEXT(aio_cancel, -1);
    int r;
    if (!any_ours())
        return next_aio_cancel(fd, cb);
    if (cb)
        return cancel_one(fd, cb, &r) ? r : next_aio_cancel(fd, cb);
    r = next_aio_cancel(fd, NULL);
    return r == -1 ? r : cancel_fd(fd, r);
}

int aio_cancel64(int fd, struct aiocb64 *cb)
{
    IOT_NEXT(aio_cancel64, -1);
    int r;
    if (!any_ours())
        return next_aio_cancel64(fd, cb);
    if (cb)
        return cancel_one(fd, (struct aiocb *)cb, &r) ? r : next_aio_cancel64(fd, cb);
    r = next_aio_cancel64(fd, NULL);
    return r == -1 ? r : cancel_fd(fd, r);
}

/* ---- submissions that stay glibc's ------------------------------------------------ */

/* lio_listio and aio_fsync always go to glibc; a control block they reuse
 * must not be answered for from our table. */
static void forget_list(struct aiocb *const list[], int nent)
{
    pthread_mutex_lock(&aq.lock);
    for (int i = 0; i < nent; i++)
        if (list[i] && list[i]->aio_lio_opcode != LIO_NOP)
            forget(list[i]);
    pthread_mutex_unlock(&aq.lock);
}

int lio_listio(int mode, struct aiocb *const list[], int nent, struct sigevent *sev)
{
    IOT_NEXT(lio_listio, -1);
    if (any_ours())
        forget_list(list, nent);
    return next_lio_listio(mode, list, nent, sev);
}

int lio_listio64(int mode, struct aiocb64 *const list[], int nent, struct sigevent *sev)
{
    IOT_NEXT(lio_listio64, -1);
    if (any_ours())
        forget_list((struct aiocb *const *)list, nent);
    return next_lio_listio64(mode, list, nent, sev);
}

int aio_fsync(int op, struct aiocb *cb)
{
    IOT_NEXT(aio_fsync, -1);
    if (any_ours())
        forget_locked(cb);
    return next_aio_fsync(op, cb);
}

int aio_fsync64(int op, struct aiocb64 *cb)
{
    IOT_NEXT(aio_fsync64, -1);
    if (any_ours())
        forget_locked((struct aiocb *)cb);
    return next_aio_fsync64(op, cb);
}
