/* The agent's listener for local producers on a Unix socket path: the
 * server side of ZMTP 3.0 (NULL mechanism, a PULL socket's part) spoken on
 * sockets of the agent's own, so that it decides what each connection may
 * cost.  libzmq, which it replaces there, aborted the agent when accept()
 * ran out of descriptors (ipc_listener.cpp: Too many open files), had no
 * limit on connections, allocated a frame's claimed size before its bytes
 * came and kept a stalled partial message for ever (4 500 connections:
 * 1.29 GB), and queued up to 100 frames per connection while the agent was
 * not reading.
 *
 * Here: accept never aborts (a spare descriptor is given up to accept and
 * close a connection when the limit is reached); every connection is
 * stamped with its peer's credentials (SO_PEERCRED) and refused beyond
 * max_conns in total or max_conns_user for its uid; a frame larger than
 * max_msg is refused before any of it is buffered (the connection is
 * closed); a message is buffered as its bytes arrive, within max_bytes in
 * total and max_bytes_user per uid (beyond, the connection is not read
 * until there is room again: its bytes wait in the kernel); a handshake or
 * partial message that does not complete within stall_ns is dropped with
 * its connection.  Messages are read only when the agent asks for one, so
 * nothing is queued on the agent's side. */
#ifndef IOT_AGENT_IPCLISTEN_H
#define IOT_AGENT_IPCLISTEN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ipcl_conn;
struct ipcl_user;

struct ipcl_counters {
    uint64_t accepted;
    uint64_t refused;  /* over a connection limit, or out of descriptors */
    uint64_t stalled;  /* closed: handshake or partial message too slow */
    uint64_t oversized; /* closed: a frame over max_msg */
    uint64_t broken;   /* closed: not ZMTP */
};

struct ipcl {
    int lfd, epfd, spare_fd;
    unsigned max_conns, max_conns_user;
    size_t max_msg, max_bytes, max_bytes_user;
    int64_t stall_ns;
    struct ipcl_conn **conns;
    size_t n_conns, cap_conns;
    struct ipcl_user *users;
    size_t n_users, cap_users;
    size_t bytes;      /* buffered for partial messages, all users */
    size_t n_paused;   /* connections not read until there is room */
    int64_t accept_again_ns; /* 0: accepting; else not before then */
    int64_t last_tick_ns;
    /* The message handed out last, freed by the next call. */
    uint8_t *out;
    size_t out_len; /* bytes charged for it */
    uid_t out_uid;
    /* epoll events not yet handled. */
    void *events;
    int ev_n, ev_i;
    struct ipcl_counters c;
};

/* Listens on the Unix socket `path` (which must not exist) with mode
 * `mode`.  Returns 0, or -1 with errno. */
int ipcl_open(struct ipcl *l, const char *path, unsigned mode);

/* The descriptor to poll for input (an epoll set). */
static inline int ipcl_fd(const struct ipcl *l) { return l->epfd; }

/* The next complete message of any connection, without waiting: 1 with
 * *data, *len (valid until the next call) and the sender's credentials;
 * *multipart is set when it was a multipart message, whose parts were
 * read and thrown away.  0 when none is complete now. */
int ipcl_next(struct ipcl *l, int64_t now_ns, const uint8_t **data, size_t *len, uid_t *uid,
              gid_t *gid, pid_t *pid, int *multipart);

/* Drops handshakes and partial messages older than stall_ns and accepts
 * again after a pause; call it at least every few hundred milliseconds.
 * reading: 0 while the agent is not reading at all, whose time then does
 * not count against the connections. */
void ipcl_tick(struct ipcl *l, int64_t now_ns, int reading);

/* Connections open now. */
size_t ipcl_conns(const struct ipcl *l);

void ipcl_close(struct ipcl *l);

#endif
