/* A producer's connection to its node agent: a ZeroMQ PUSH peer spoken by
 * hand (ZMTP 3.0, NULL mechanism) over a Unix stream socket that the
 * producer owns.  The agent's side is a PULL peer of its own
 * (agent/ipclisten.h), or libzmq's for other endpoints: ZMTP either way.
 *
 * Why not libzmq in the producer: the client library runs inside every
 * process of every user, and libzmq's context holds descriptors of its own
 * (eventfds, an epoll set, the socket) and threads the library cannot see.
 * A program that closes or dup2()s over low descriptors, as shells and
 * daemons do, made libzmq abort (signaler.cpp: Bad file descriptor) or
 * zmq_ctx_term() hang at exit, and its connection completes only later, on
 * its I/O thread, so a process had to wait for it at start.  Here there is
 * one descriptor, placed high (iot_zpush_low_fd), that the client library's
 * close/dup2/dup3/close_range/closefrom wrappers keep out of the
 * application's way (iot_zpush_owns, iot_zpush_vacate), and that is checked
 * to still be this socket before every write; connect(2) to a Unix socket
 * answers at once, so an absent agent costs nothing.
 *
 * Never blocks: a message the kernel cannot take whole right now waits in a
 * queue of at most `max_queue` messages, written out by later sends and
 * iot_zpush_flush(); past that, a send is refused (-1) and the caller counts
 * the loss.  A partly written message goes out whole before any other, so
 * the stream stays well framed. */
#ifndef IOT_ZPUSH_H
#define IOT_ZPUSH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

struct iot_zpush_msg {
    uint8_t *buf; /* frame header and body */
    size_t len, off, hdr; /* bytes, bytes written, header bytes */
};

struct iot_zpush {
    _Atomic int fd;    /* -1: not connected */
    _Atomic int users; /* threads between reading fd and being done with it */
    unsigned long ino; /* the socket's inode: fd is checked to be it */
    uint8_t peer[73];  /* the start of the agent's greeting and READY */
    size_t peer_got, peer_need; /* bytes of them received; all there are (0: not known yet) */
    struct sockaddr_un addr;
    socklen_t addr_len;
    struct iot_zpush_msg *queue; /* ring of max_queue; head may be partly written */
    size_t max_queue, head, n;
    uint64_t connects, breaks, lost_partial;
    long refused_uid; /* the owner of the last endpoint refused (agenttrust.h), or -1 */
    uint64_t refusals;
};

/* ipc://PATH or ipc://@NAME (Linux's abstract namespace, as ZeroMQ spells
 * it).  0, or -1 with a reason in err. */
int iot_zpush_init(struct iot_zpush *z, const char *endpoint, size_t max_queue, char *err,
                   size_t errlen);

/* Connects if not connected: 0 when connected (the greeting is written),
 * -1 with errno otherwise (ENOENT, ECONNREFUSED: no agent; EAGAIN: its
 * backlog is full; EACCES: the process listening there is another user's,
 * one agenttrust.h does not trust, whose uid is then in refused_uid:
 * nothing was written).  Never waits. */
int iot_zpush_connect(struct iot_zpush *z);

/* Hands one message over: 0 when the kernel took it or it waits in the
 * queue, -1 when it was refused (not connected, queue full, connection
 * broken), nothing of it written. */
int iot_zpush_send(struct iot_zpush *z, const void *buf, size_t len);

/* Writes out what the queue holds, as far as the kernel takes it; returns
 * the number of messages still queued. */
size_t iot_zpush_flush(struct iot_zpush *z);

/* Bytes written that the agent has not read yet (SIOCOUTQ); 0 when not
 * connected. */
long iot_zpush_unread(struct iot_zpush *z);

/* 1 once the agent's greeting and READY command have arrived: only then
 * are messages written (before it, libzmq takes them for handshake
 * commands and drops the connection).  Reads what has arrived; never
 * waits. */
int iot_zpush_peer_ready(struct iot_zpush *z);

/* Takes the queued messages that nothing of was written, one by one, into
 * fn (their bodies, without framing), and empties the queue. */
void iot_zpush_drain(struct iot_zpush *z, void (*fn)(const uint8_t *, size_t, void *), void *arg);

/* Closes the connection; queued messages are kept for the next one. */
void iot_zpush_close(struct iot_zpush *z);

/* The lowest descriptor number the socket is moved to: three quarters of
 * the way up to the soft RLIMIT_NOFILE, out of the range programs name. */
int iot_zpush_low_fd(void);

/* The connection's socket, or -1. */
static inline int iot_zpush_fd(struct iot_zpush *z)
{
    return __atomic_load_n((int *)&z->fd, __ATOMIC_RELAXED);
}

/* The application is about to make `fd` one of its own (dup2, dup3): when
 * it is the socket, move the socket to another number first, once nobody
 * is using the old one.  1 when fd was the socket (it has moved, or, when
 * no other number was free, the connection was given up to the program),
 * else 0.  A thread that writes on the socket blocks signals meanwhile, or
 * a handler of the program's that dup2()s onto it would wait for itself. */
int iot_zpush_vacate(struct iot_zpush *z, int fd);

#endif
