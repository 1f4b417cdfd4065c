#include "zpush.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agenttrust.h"

/* The client library wraps close() and fcntl(): its own descriptor must be
 * handled past the wrappers, which hide it from the application. */
static void close_fd(int fd)
{
    if (fd >= 0)
        syscall(SYS_close, fd);
}

static int dup_above(int fd, int low) { return (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, low); }

/* ZMTP 3.0 (rfc.zeromq.org/spec/23): signature, version 3.0, mechanism
 * NULL, as-server 0, filler; then the READY command naming our socket type.
 * The agent's libzmq reads it from the stream at its own pace: nothing here
 * waits for its greeting, which stays unread in the receive buffer (a
 * PULL peer never sends more). */
static const uint8_t greeting[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
static const uint8_t ready[28] = {0x04, 26, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e',
                                  't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 4, 'P', 'U', 'S', 'H'};

int iot_zpush_init(struct iot_zpush *z, const char *endpoint, size_t max_queue, char *err,
                   size_t errlen)
{
    /* Field by field: the descriptor is read by other threads (the
     * wrappers), and must never look like 0 meanwhile. */
    atomic_store(&z->fd, -1);
    atomic_store(&z->users, 0);
    z->ino = 0;
    z->peer_got = z->peer_need = 0;
    memset(&z->addr, 0, sizeof z->addr);
    z->queue = NULL;
    z->head = z->n = 0;
    z->connects = z->breaks = z->lost_partial = 0;
    z->refused_uid = -1;
    z->refusals = 0;
    if (strncmp(endpoint, "ipc://", 6) != 0) {
        snprintf(err, errlen, "%s: only ipc:// endpoints (a Unix socket) reach the agent", endpoint);
        return -1;
    }
    const char *path = endpoint + 6;
    size_t len = strlen(path);
    if (!len || len >= sizeof z->addr.sun_path) {
        snprintf(err, errlen, "%s: the socket path must have 1 to %zu characters", endpoint,
                 sizeof z->addr.sun_path - 1);
        return -1;
    }
    z->addr.sun_family = AF_UNIX;
    memcpy(z->addr.sun_path, path, len);
    if (path[0] == '@')
        z->addr.sun_path[0] = '\0';
    z->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    z->max_queue = max_queue ? max_queue : 1;
    z->queue = calloc(z->max_queue, sizeof *z->queue);
    if (!z->queue) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int iot_zpush_low_fd(void)
{
    struct rlimit rl;
    rlim_t soft = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        soft = rl.rlim_cur;
    if (soft > (1u << 20))
        soft = 1u << 20;
    int low = (int)(soft * 3 / 4);
    return low > 10 ? low : 10;
}

/* The descriptor to write on, counted as in use; -1 when there is none.
 * Whoever moves the socket (iot_zpush_vacate) first publishes the new
 * number, then waits until no one counted holds the old one: the counter
 * is taken before the number is read, both sequentially consistent. */
static int use(struct iot_zpush *z)
{
    atomic_fetch_add(&z->users, 1);
    int fd = atomic_load(&z->fd);
    if (fd < 0)
        atomic_fetch_sub(&z->users, 1);
    return fd;
}

static void unuse(struct iot_zpush *z) { atomic_fetch_sub(&z->users, 1); }

static void drop_connection(struct iot_zpush *z, int fd, int close_it)
{
    int expected = fd;
    if (!atomic_compare_exchange_strong(&z->fd, &expected, -1))
        return;
    if (close_it)
        close_fd(fd);
    z->breaks++;
}

/* A new stream: a message cut off mid-frame on the old one is lost with it
 * (the running total every producer leaves at exit counts it, sender.c),
 * the others go out whole from their start. */
static void restart_queue(struct iot_zpush *z)
{
    if (z->n && z->queue[z->head].off) {
        struct iot_zpush_msg *m = &z->queue[z->head];
        free(m->buf);
        memset(m, 0, sizeof *m);
        z->head = (z->head + 1) % z->max_queue;
        z->n--;
        z->lost_partial++;
    }
}

/* Still our socket?  A program can close or replace a descriptor without
 * going through the wrappers (a raw system call); writing on a number that
 * is now its file or its socket must never happen. */
static int still_ours(struct iot_zpush *z, int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == z->ino)
        return 1;
    drop_connection(z, fd, 0); /* the number is the program's now: not closed */
    return 0;
}

/* Writes what it can of iov without waiting: bytes written, or -1 when the
 * connection broke. */
static ssize_t write_some(int fd, struct iovec *iov, int n)
{
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
            return 0;
        return -1;
    }
}

int iot_zpush_connect(struct iot_zpush *z)
{
    if (atomic_load(&z->fd) >= 0)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&z->addr, z->addr_len) != 0) {
        int e = errno;
        close_fd(fd);
        errno = e;
        return -1;
    }
    /* Another thread of the program may close every descriptor meanwhile
     * (a daemon's loop) and open its own under the same number: the low
     * number is closed only while it is still this socket, and the high
     * one kept only if it is a socket connected to the agent. */
    int high = dup_above(fd, iot_zpush_low_fd());
    struct stat st, low_st;
    if (high >= 0) {
        if (fstat(high, &st) == 0 && fstat(fd, &low_st) == 0 && st.st_ino == low_st.st_ino &&
            st.st_dev == low_st.st_dev)
            close_fd(fd);
        fd = high;
    }
    struct sockaddr_un peer;
    socklen_t peer_len = sizeof peer;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0 ||
        peer.sun_family != AF_UNIX) {
        if (fd == high)
            close_fd(fd);
        errno = EBADF;
        return -1;
    }
    /* Whoever listens at the path gets this process's file names and
     * events: only root, this user or the service's account (agenttrust.h),
     * never another user who took the endpoint first; checked before a
     * byte is written. */
    uid_t peer_uid = (uid_t)-1;
    int known = iot_agent_peer_uid(fd, &peer_uid) == 0;
    if (!known || !iot_agent_uid_trusted(peer_uid)) {
        int e = known ? EACCES : errno;
        close_fd(fd);
        if (known) {
            z->refusals++;
            z->refused_uid = (long)peer_uid;
        }
        errno = e;
        return -1;
    }
    z->ino = st.st_ino;
    /* A new socket's buffer takes the 92 bytes whole. */
    struct iovec iov[2] = {{(void *)greeting, sizeof greeting}, {(void *)ready, sizeof ready}};
    if (write_some(fd, iov, 2) != (ssize_t)(sizeof greeting + sizeof ready)) {
        close_fd(fd);
        errno = ECONNRESET;
        return -1;
    }
    z->connects++;
    z->peer_got = z->peer_need = 0;
    restart_queue(z);
    atomic_store(&z->fd, fd);
    return 0;
}

static int peer_ready(struct iot_zpush *z, int fd);

/* Writes the queue's head messages until the kernel takes no more.  Not
 * before the agent's READY has come: until libzmq has sent its own, it
 * takes a message frame for a handshake command and drops the connection
 * (the NULL mechanism's "unexpected message"), so messages wait here. */
static void flush_queue(struct iot_zpush *z, int fd)
{
    if (!peer_ready(z, fd))
        return;
    while (z->n) {
        struct iot_zpush_msg *m = &z->queue[z->head];
        struct iovec iov = {m->buf + m->off, m->len - m->off};
        ssize_t w = write_some(fd, &iov, 1);
        if (w < 0) {
            drop_connection(z, fd, 1);
            return;
        }
        m->off += (size_t)w;
        if (m->off < m->len)
            return;
        free(m->buf);
        memset(m, 0, sizeof *m);
        z->head = (z->head + 1) % z->max_queue;
        z->n--;
    }
}

static size_t frame_header(uint8_t *hdr, size_t len)
{
    if (len < 256) {
        hdr[0] = 0x00;
        hdr[1] = (uint8_t)len;
        return 2;
    }
    hdr[0] = 0x02; /* LONG */
    for (int i = 0; i < 8; i++)
        hdr[1 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    return 9;
}

/* Queues the rest of a message of which `done` bytes were written. */
static int enqueue(struct iot_zpush *z, const uint8_t *hdr, size_t hdr_len, const void *body,
                   size_t len, size_t done)
{
    if (z->n == z->max_queue)
        return -1;
    uint8_t *buf = malloc(hdr_len + len);
    if (!buf)
        return -1;
    memcpy(buf, hdr, hdr_len);
    memcpy(buf + hdr_len, body, len);
    z->queue[(z->head + z->n) % z->max_queue] =
        (struct iot_zpush_msg){.buf = buf, .len = hdr_len + len, .off = done, .hdr = hdr_len};
    z->n++;
    return 0;
}

int iot_zpush_send(struct iot_zpush *z, const void *buf, size_t len)
{
    int fd = use(z);
    if (fd < 0)
        return -1;
    int ret = -1;
    uint8_t hdr[9];
    size_t hdr_len = frame_header(hdr, len);
    if (!still_ours(z, fd))
        goto out;
    flush_queue(z, fd);
    if (atomic_load(&z->fd) != fd)
        goto out;
    if (z->n || !peer_ready(z, fd)) { /* behind others, or before the handshake's end */
        ret = enqueue(z, hdr, hdr_len, buf, len, 0);
        goto out;
    }
    struct iovec iov[2] = {{hdr, hdr_len}, {(void *)buf, len}};
    ssize_t w = write_some(fd, iov, 2);
    if (w < 0) {
        drop_connection(z, fd, 1);
        goto out;
    }
    ret = (size_t)w == hdr_len + len ? 0 : enqueue(z, hdr, hdr_len, buf, len, (size_t)w);
    if (ret != 0 && w > 0) /* a frame cut short, and no room to finish it */
        drop_connection(z, fd, 1);
out:
    unuse(z);
    return ret;
}

size_t iot_zpush_flush(struct iot_zpush *z)
{
    int fd = use(z);
    if (fd >= 0) {
        if (still_ours(z, fd))
            flush_queue(z, fd);
        unuse(z);
    }
    return z->n;
}

long iot_zpush_unread(struct iot_zpush *z)
{
    int fd = use(z);
    if (fd < 0)
        return 0;
    int q = 0;
    if (!still_ours(z, fd) || ioctl(fd, SIOCOUTQ, &q) != 0)
        q = 0;
    unuse(z);
    return q;
}

static int peer_ready(struct iot_zpush *z, int fd)
{
    while (!z->peer_need || z->peer_got < z->peer_need) {
        uint8_t scratch[256];
        uint8_t *to = z->peer_got < sizeof z->peer ? z->peer + z->peer_got : scratch;
        size_t room = z->peer_got < sizeof z->peer ? sizeof z->peer - z->peer_got : sizeof scratch;
        if (z->peer_need && z->peer_need - z->peer_got < room)
            room = z->peer_need - z->peer_got;
        ssize_t r = recv(fd, to, room, MSG_DONTWAIT);
        if (r <= 0)
            return 0;
        z->peer_got += (size_t)r;
        /* The greeting is 64 bytes; the READY command after it has a short
         * (1-byte) or long (8-byte) size. */
        if (!z->peer_need && z->peer_got >= 66) {
            if (!(z->peer[64] & 0x02))
                z->peer_need = 66 + z->peer[65];
            else if (z->peer_got >= 73) {
                uint64_t n = 0;
                for (int i = 0; i < 8; i++)
                    n = n << 8 | z->peer[65 + i];
                z->peer_need = 73 + (size_t)(n < 65536 ? n : 65536);
            }
        }
    }
    return 1;
}

int iot_zpush_peer_ready(struct iot_zpush *z)
{
    int fd = use(z);
    if (fd < 0)
        return 0;
    int ready = peer_ready(z, fd);
    unuse(z);
    return ready;
}

void iot_zpush_drain(struct iot_zpush *z, void (*fn)(const uint8_t *, size_t, void *), void *arg)
{
    for (; z->n; z->n--, z->head = (z->head + 1) % z->max_queue) {
        struct iot_zpush_msg *m = &z->queue[z->head];
        if (!m->off && fn)
            fn(m->buf + m->hdr, m->len - m->hdr, arg);
        else if (m->off)
            z->lost_partial++;
        free(m->buf);
        memset(m, 0, sizeof *m);
    }
}

void iot_zpush_close(struct iot_zpush *z)
{
    int fd = use(z);
    if (fd < 0)
        return;
    drop_connection(z, fd, 1);
    z->breaks--; /* closed, not broken */
    unuse(z);
}

int iot_zpush_vacate(struct iot_zpush *z, int fd)
{
    static pthread_mutex_t movers = PTHREAD_MUTEX_INITIALIZER;
    if (fd < 0 || iot_zpush_fd(z) != fd)
        return 0;
    pthread_mutex_lock(&movers);
    int moved = 0;
    if (atomic_load(&z->fd) == fd) {
        int to = dup_above(fd, iot_zpush_low_fd());
        if (to < 0)
            to = dup_above(fd, 3);
        /* Publish the new number (or none), then wait out whoever still
         * writes on the old one: a send never waits, so this is short. */
        atomic_store(&z->fd, to >= 0 ? to : -1);
        while (atomic_load(&z->users))
            sched_yield();
        moved = 1;
    }
    pthread_mutex_unlock(&movers);
    return moved;
}
