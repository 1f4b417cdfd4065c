#include "download.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* How often a reader waiting on a child looks whether the server stops. */
#define WAKE_MS 500

struct client_slots {
    char key[96];
    int n;
};

struct downloads {
    pthread_mutex_t lock;
    int max_total, max_per_client, total;
    uint64_t mem_limit;
    atomic_int stopping;
    struct client_slots *clients; /* max_total of them: no more can hold a slot */
};

struct download {
    struct downloads *d;
    struct client_slots *slot;
    pid_t pid;  /* 0 once reaped */
    int out;    /* the read end of the child's standard output */
    int sock;   /* the client's socket, not ours to close */
};

struct downloads *downloads_new(int max_total, int max_per_client, uint64_t mem_limit)
{
    struct downloads *d = calloc(1, sizeof *d);
    if (!d || !(d->clients = calloc((size_t)max_total, sizeof *d->clients))) {
        free(d);
        return NULL;
    }
    pthread_mutex_init(&d->lock, NULL);
    d->max_total = max_total;
    d->max_per_client = max_per_client;
    d->mem_limit = mem_limit;
    return d;
}

void downloads_stopping(struct downloads *d)
{
    if (d)
        atomic_store(&d->stopping, 1);
}

void downloads_free(struct downloads *d)
{
    if (!d)
        return;
    pthread_mutex_destroy(&d->lock);
    free(d->clients);
    free(d);
}

struct download *download_begin(struct downloads *d, const char *client, const char **why)
{
    struct download *dl = calloc(1, sizeof *dl);
    if (!dl) {
        *why = "out of memory";
        return NULL;
    }
    pthread_mutex_lock(&d->lock);
    struct client_slots *mine = NULL, *free_slot = NULL;
    for (int i = 0; i < d->max_total; i++) {
        if (d->clients[i].n && strcmp(d->clients[i].key, client) == 0)
            mine = &d->clients[i];
        else if (!d->clients[i].n && !free_slot)
            free_slot = &d->clients[i];
    }
    *why = d->total >= d->max_total ? "downloads in progress reach --http-downloads"
           : mine && mine->n >= d->max_per_client
               ? "this client's downloads in progress reach --http-downloads-per-client"
               : NULL;
    if (!*why) {
        if (!mine) {
            mine = free_slot; /* there is one: fewer than max_total clients hold slots */
            snprintf(mine->key, sizeof mine->key, "%s", client);
        }
        mine->n++;
        d->total++;
        dl->slot = mine;
    }
    pthread_mutex_unlock(&d->lock);
    if (*why) {
        free(dl);
        return NULL;
    }
    dl->d = d;
    dl->out = -1;
    dl->sock = -1;
    return dl;
}

int download_spawn(struct download *dl, char *const argv[], int sock)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    /* Opened before the fork: the child calls only what is safe after a
     * fork of a threaded process. */
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct rlimit mem = {(rlim_t)dl->d->mem_limit, (rlim_t)dl->d->mem_limit};
    pid_t pid = fork();
    if (pid == 0) {
        /* Its own process group, so that whatever it starts ends with it. */
        setpgid(0, 0);
#if !defined(__SANITIZE_ADDRESS__)
        /* A big job's export holds hundreds of MiB: many at once ran the
         * host out of memory.  (AddressSanitizer reserves terabytes of
         * address space up front, so test builds with it go unbounded.) */
        if (mem.rlim_cur)
            setrlimit(RLIMIT_AS, &mem);
#else
        (void)mem;
#endif
        dup2(p[1], STDOUT_FILENO);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    int saved = errno;
    close(p[1]);
    if (devnull >= 0)
        close(devnull);
    if (pid < 0) {
        close(p[0]);
        errno = saved;
        return -1;
    }
    setpgid(pid, pid); /* as the child does, whichever runs first */
    dl->pid = pid;
    dl->out = p[0];
    dl->sock = sock;
    return 0;
}

/* 0 exited with 0, -1 otherwise. */
static int reap(struct download *dl, int kill_it)
{
    if (!dl->pid)
        return 0;
    if (kill_it)
        kill(-dl->pid, SIGKILL);
    int status = 0;
    while (waitpid(dl->pid, &status, 0) < 0 && errno == EINTR)
        ;
    dl->pid = 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Waits for the child's output or the client leaving: 1 output (or its
 * end) is there, 0 the client left or the server stops. */
static int wait_output(struct download *dl)
{
    for (;;) {
        if (atomic_load(&dl->d->stopping))
            return 0;
        /* The client's socket is only watched for its end: a client that
         * closed (or shut down its sending side) has left, and what the
         * child would make for it is wasted. */
        struct pollfd fds[2] = {{.fd = dl->out, .events = POLLIN},
                                {.fd = dl->sock, .events = POLLRDHUP}};
        int n = poll(fds, dl->sock >= 0 ? 2 : 1, WAKE_MS);
        if (n < 0 && errno != EINTR)
            return 0;
        if (n > 0 && (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
            return 0;
        if (n > 0 && fds[0].revents)
            return 1;
    }
}

int download_wait(struct download *dl)
{
    char buf[4096];
    for (;;) {
        if (!wait_output(dl)) {
            reap(dl, 1);
            return 1;
        }
        ssize_t n = read(dl->out, buf, sizeof buf);
        if (n == 0)
            return reap(dl, 0);
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            reap(dl, 1);
            return -1;
        }
    }
}

ssize_t download_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct download *dl = cls;
    for (;;) {
        if (!wait_output(dl))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        ssize_t n = read(dl->out, buf, max);
        if (n > 0)
            return n;
        /* A child that failed half way must not look like a complete
         * download: the response ends without its last chunk. */
        if (n == 0)
            return reap(dl, 0) == 0 ? MHD_CONTENT_READER_END_OF_STREAM
                                    : MHD_CONTENT_READER_END_WITH_ERROR;
        if (errno != EINTR && errno != EAGAIN)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

void download_end(void *cls)
{
    struct download *dl = cls;
    if (!dl)
        return;
    reap(dl, 1);
    if (dl->out >= 0)
        close(dl->out);
    struct downloads *d = dl->d;
    pthread_mutex_lock(&d->lock);
    dl->slot->n--;
    d->total--;
    pthread_mutex_unlock(&d->lock);
    free(dl);
}
