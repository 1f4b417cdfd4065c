#include "ipclisten.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define EVENTS_MAX 64
/* A handshake command (READY) or a command frame after it is small; more
 * is not ZMTP as producers speak it. */
#define COMMAND_MAX 4096
/* A message's buffer grows by at most this much per step, so that what a
 * connection holds follows the bytes it actually sent, not the size it
 * claims. */
#define GROW_STEP (64u << 10)
/* A pause in accepting when even the spare descriptor could not help
 * (the system's table is full). */
#define ACCEPT_PAUSE_NS 100000000LL
#define TICK_NS 100000000LL

enum { C_GREETING, C_READY, C_FRAMES };

struct ipcl_user {
    uid_t uid;
    unsigned conns;
    size_t bytes;
};

struct ipcl_conn {
    int fd;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    int state;
    uint8_t hdr[64]; /* the peer's greeting, then each frame's header */
    size_t hdr_got, hdr_need;
    int in_body, command, more, multipart;
    uint8_t *body;
    size_t body_len, body_got, body_cap;
    int64_t started_ns; /* the handshake's or the partial message's start; 0: none */
    int paused;
    size_t slot;
};

/* The agent's greeting and READY (Socket-Type PULL), sent at accept: a
 * libzmq producer waits for the signature before it sends the rest of its
 * own greeting. */
static const uint8_t server_hello[64 + 28] = {
    0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L',
    [64] = 0x04, 26, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y',
    'p', 'e', 0, 0, 0, 4, 'P', 'U', 'L', 'L'};

static struct ipcl_user *user_of(struct ipcl *l, uid_t uid, int create)
{
    for (size_t i = 0; i < l->n_users; i++)
        if (l->users[i].uid == uid)
            return &l->users[i];
    if (!create)
        return NULL;
    if (l->n_users == l->cap_users) {
        size_t cap = l->cap_users ? 2 * l->cap_users : 16;
        struct ipcl_user *u = realloc(l->users, cap * sizeof *u);
        if (!u)
            return NULL;
        l->users = u;
        l->cap_users = cap;
    }
    l->users[l->n_users] = (struct ipcl_user){.uid = uid};
    return &l->users[l->n_users++];
}

int ipcl_open(struct ipcl *l, const char *path, unsigned mode)
{
    memset(l, 0, sizeof *l);
    l->lfd = l->epfd = l->spare_fd = -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, path);
    l->events = calloc(EVENTS_MAX, sizeof(struct epoll_event));
    l->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!l->events || l->lfd < 0 || l->epfd < 0)
        goto fail;
    /* Made with its mode at once, so that no other user's process is
     * refused meanwhile; chmod again for what a umask cannot give. */
    mode_t was = umask(0777 & ~(mode_t)mode);
    int rc = bind(l->lfd, (struct sockaddr *)&sa, sizeof sa);
    umask(was);
    if (rc < 0 || chmod(path, mode) < 0 || listen(l->lfd, 1024) < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->lfd, &ev) < 0)
        goto fail;
    return 0;
fail:;
    int e = errno;
    ipcl_close(l);
    errno = e;
    return -1;
}

/* Out of the epoll set while paused, not merely without EPOLLIN: a hang-up
 * would still be reported, and with it the set would stay readable. */
static void set_reading(struct ipcl *l, struct ipcl_conn *c, int on)
{
    if (c->paused == !on)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(l->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, c->fd, &ev);
    if (c->paused == on) {
        c->paused = !on;
        l->n_paused += on ? (size_t)-1 : 1;
    }
}

static void uncharge(struct ipcl *l, uid_t uid, size_t n)
{
    struct ipcl_user *u = user_of(l, uid, 0);
    l->bytes -= n;
    if (u)
        u->bytes -= n;
    /* Room again: the connections waiting for it are read again (and stop
     * again if there is still too little). */
    for (size_t i = 0; n && l->n_paused && i < l->n_conns; i++)
        if (l->conns[i]->paused)
            set_reading(l, l->conns[i], 1);
}

static void drop_body(struct ipcl *l, struct ipcl_conn *c)
{
    if (c->body)
        uncharge(l, c->uid, c->body_cap);
    free(c->body);
    c->body = NULL;
    c->body_len = c->body_got = c->body_cap = 0;
}

static void drop_conn(struct ipcl *l, struct ipcl_conn *c)
{
    if (c->paused)
        l->n_paused--;
    c->paused = 0;
    drop_body(l, c);
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    struct ipcl_user *u = user_of(l, c->uid, 0);
    if (u && u->conns)
        u->conns--;
    l->conns[c->slot] = l->conns[--l->n_conns];
    l->conns[c->slot]->slot = c->slot;
    /* Events already fetched for it must not reach freed memory. */
    struct epoll_event *ev = l->events;
    for (int i = l->ev_i; i < l->ev_n; i++)
        if (ev[i].data.ptr == c)
            ev[i].data.ptr = l; /* a marker: skipped */
    free(c);
}

/* Out of descriptors: the spare one is given up to take the connection
 * off the backlog and close it, so that its producer learns at once and the
 * listener does not stay readable for ever. */
static void refuse_pending(struct ipcl *l, int64_t now_ns)
{
    if (l->spare_fd >= 0) {
        close(l->spare_fd);
        l->spare_fd = -1;
        int fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            l->c.refused++;
        }
        l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    if (l->spare_fd < 0) {
        struct epoll_event ev = {.events = 0, .data.ptr = NULL};
        epoll_ctl(l->epfd, EPOLL_CTL_MOD, l->lfd, &ev);
        l->accept_again_ns = now_ns + ACCEPT_PAUSE_NS;
    }
}

static void accept_all(struct ipcl *l, int64_t now_ns)
{
    for (int n = 0; n < EVENTS_MAX; n++) {
        int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                refuse_pending(l, now_ns);
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof cred;
        struct ipcl_user *u = NULL;
        struct ipcl_conn *c = NULL;
        if (l->n_conns == l->cap_conns) {
            size_t cap = l->cap_conns ? 2 * l->cap_conns : 64;
            struct ipcl_conn **grown = realloc(l->conns, cap * sizeof *grown);
            if (grown) {
                l->conns = grown;
                l->cap_conns = cap;
            }
        }
        /* Beyond a limit the connection is closed at once: its producer's
         * sends fail, and it counts what it could not hand over. */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred ||
            l->n_conns >= l->max_conns || l->n_conns == l->cap_conns ||
            !(u = user_of(l, cred.uid, 1)) || u->conns >= l->max_conns_user ||
            !(c = calloc(1, sizeof *c))) {
            close(fd);
            l->c.refused++;
            continue;
        }
        *c = (struct ipcl_conn){.fd = fd, .uid = cred.uid, .gid = cred.gid, .pid = cred.pid,
                                .hdr_need = 64, .started_ns = now_ns, .slot = l->n_conns};
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (send(fd, server_hello, sizeof server_hello, MSG_DONTWAIT | MSG_NOSIGNAL) !=
                (ssize_t)sizeof server_hello ||
            epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            l->c.refused++;
            continue;
        }
        l->conns[l->n_conns++] = c;
        u->conns++;
        l->c.accepted++;
    }
}

/* Room for `n` more bytes of `uid`'s partial messages: charged, 1; else 0. */
static int charge(struct ipcl *l, uid_t uid, size_t n)
{
    struct ipcl_user *u = user_of(l, uid, 0);
    if (!u || l->bytes + n > l->max_bytes || u->bytes + n > l->max_bytes_user)
        return 0;
    l->bytes += n;
    u->bytes += n;
    return 1;
}

/* A frame's header is complete: what comes next.  -1: close. */
static int frame_header(struct ipcl *l, struct ipcl_conn *c)
{
    uint8_t flags = c->hdr[0];
    uint64_t size = 0;
    if (flags & 0x02)
        for (int i = 1; i < 9; i++)
            size = size << 8 | c->hdr[i];
    else
        size = c->hdr[1];
    c->command = (flags & 0x04) != 0;
    c->more = (flags & 0x01) != 0;
    if ((flags & 0xf8) || (c->command && (c->more || size > COMMAND_MAX)) ||
        (c->state == C_READY && !c->command)) {
        l->c.broken++;
        return -1;
    }
    if (!c->command && size > l->max_msg) {
        l->c.oversized++;
        return -1;
    }
    c->in_body = 1;
    c->body_len = (size_t)size;
    c->body_got = 0;
    return 0;
}

/* Reads what one connection has, up to one complete message.  1: a
 * message is complete in c->body; 0: nothing more now (or paused);
 * -1: the connection is to be closed. */
static int read_conn(struct ipcl *l, struct ipcl_conn *c, int64_t now_ns)
{
    for (;;) {
        uint8_t *to;
        size_t want;
        if (!c->in_body) {
            to = c->hdr + c->hdr_got;
            want = c->hdr_need - c->hdr_got;
        } else {
            if (c->body_got == c->body_cap && c->body_cap < c->body_len) {
                size_t grow = c->body_len - c->body_cap;
                if (grow > GROW_STEP)
                    grow = GROW_STEP;
                uint8_t *b;
                if (!charge(l, c->uid, grow)) {
                    set_reading(l, c, 0);
                    return 0;
                }
                if (!(b = realloc(c->body, c->body_cap + grow))) {
                    uncharge(l, c->uid, grow);
                    set_reading(l, c, 0);
                    return 0;
                }
                c->body = b;
                c->body_cap += grow;
            }
            to = c->body + c->body_got;
            want = c->body_cap - c->body_got;
        }
        ssize_t r = want ? recv(c->fd, to, want, MSG_DONTWAIT) : 0;
        if (want && r == 0)
            return -1;
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        if (!c->in_body) {
            if (!c->hdr_got && c->state == C_FRAMES)
                c->started_ns = now_ns;
            c->hdr_got += (size_t)r;
            if (c->hdr_got < c->hdr_need)
                continue;
            if (c->state == C_GREETING) {
                /* Signature, version 3 or later, mechanism NULL. */
                if (c->hdr[0] != 0xff || c->hdr[9] != 0x7f || c->hdr[10] < 3 ||
                    memcmp(c->hdr + 12, "NULL", 5) != 0) {
                    l->c.broken++;
                    return -1;
                }
                c->state = C_READY;
                c->hdr_got = 0;
                c->hdr_need = 2;
                continue;
            }
            if (c->hdr_need == 2 && (c->hdr[0] & 0x02)) { /* LONG: 8 size bytes */
                c->hdr_need = 9;
                if (c->hdr_got < 9)
                    continue;
            }
            if (frame_header(l, c) < 0)
                return -1;
            continue;
        }
        c->body_got += (size_t)r;
        if (c->body_got < c->body_len)
            continue;
        /* A frame is complete. */
        c->in_body = 0;
        c->hdr_got = 0;
        c->hdr_need = 2;
        if (c->command) {
            int ready = c->body_len >= 6 && !memcmp(c->body, "\x05READY", 6);
            drop_body(l, c);
            if (c->state == C_READY) {
                if (!ready) {
                    l->c.broken++;
                    return -1;
                }
                c->state = C_FRAMES;
                c->started_ns = 0;
            }
            continue; /* PING and other commands: nothing to answer */
        }
        if (c->more) {
            c->multipart = 1; /* a batch is one frame: thrown away */
            drop_body(l, c);
            continue;
        }
        c->started_ns = 0;
        return 1;
    }
}

int ipcl_next(struct ipcl *l, int64_t now_ns, const uint8_t **data, size_t *len, uid_t *uid,
              gid_t *gid, pid_t *pid, int *multipart)
{
    if (l->out) {
        free(l->out);
        l->out = NULL;
        uncharge(l, l->out_uid, l->out_len);
    }
    struct epoll_event *ev = l->events;
    for (int polled = 0;;) {
        while (l->ev_i < l->ev_n) {
            struct ipcl_conn *c = ev[l->ev_i].data.ptr;
            if (c == NULL) {
                l->ev_i++;
                accept_all(l, now_ns);
                continue;
            }
            if ((void *)c == (void *)l) {
                l->ev_i++;
                continue;
            }
            int r = read_conn(l, c, now_ns);
            if (r < 0) {
                l->ev_i++;
                drop_conn(l, c);
                continue;
            }
            if (r == 0) {
                l->ev_i++;
                continue;
            }
            /* Handed out whole; the connection's next message is read
             * when its event comes again (level-triggered). */
            l->ev_i++;
            l->out = c->body;
            l->out_len = c->body ? c->body_cap : 0; /* the charge stays until the next call */
            l->out_uid = c->uid;
            *data = c->body;
            *len = c->body_len;
            *uid = c->uid;
            *gid = c->gid;
            *pid = c->pid;
            *multipart = c->multipart;
            c->multipart = 0;
            c->body = NULL;
            c->body_len = c->body_got = c->body_cap = 0;
            return 1;
        }
        if (polled)
            return 0;
        polled = 1;
        l->ev_i = 0;
        l->ev_n = epoll_wait(l->epfd, ev, EVENTS_MAX, 0);
        if (l->ev_n < 0)
            l->ev_n = 0;
    }
}

void ipcl_tick(struct ipcl *l, int64_t now_ns, int reading)
{
    if (l->accept_again_ns && now_ns >= l->accept_again_ns) {
        if (l->spare_fd < 0)
            l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(l->epfd, EPOLL_CTL_MOD, l->lfd, &ev);
        l->accept_again_ns = 0;
    }
    /* A look at every connection ten times a second, not at every turn of
     * the agent's loop (one per batch under load). */
    if (l->last_tick_ns && now_ns - l->last_tick_ns < TICK_NS)
        return;
    /* While the agent does not read (it has no room even to count), the
     * producers are not the slow ones: their clocks stand still. */
    int64_t since = l->last_tick_ns ? now_ns - l->last_tick_ns : 0;
    l->last_tick_ns = now_ns;
    if (!reading) {
        for (size_t i = 0; i < l->n_conns; i++)
            if (l->conns[i]->started_ns)
                l->conns[i]->started_ns += since;
        return;
    }
    for (size_t i = 0; i < l->n_conns;) {
        struct ipcl_conn *c = l->conns[i];
        if (c->started_ns && now_ns - c->started_ns > l->stall_ns) {
            l->c.stalled++;
            drop_conn(l, c); /* the last one moved into slot i */
            continue;
        }
        i++;
    }
}

size_t ipcl_conns(const struct ipcl *l) { return l->n_conns; }

void ipcl_close(struct ipcl *l)
{
    while (l->n_conns)
        drop_conn(l, l->conns[l->n_conns - 1]);
    free(l->out);
    free(l->conns);
    free(l->users);
    free(l->events);
    for (int *fd = &l->lfd; fd; fd = fd == &l->lfd ? &l->epfd : fd == &l->epfd ? &l->spare_fd : NULL)
        if (*fd >= 0)
            close(*fd);
    memset(l, 0, sizeof *l);
    l->lfd = l->epfd = l->spare_fd = -1;
}
