/* What ZeroMQ does not promise when a producer closes its socket: that the
 * agent has read what the producer wrote last.  Over ipc (a Unix socket)
 * the agent's ZeroMQ stops reading a connection while that connection's
 * 100 batches wait for the agent (its receive queue, RCVHWM); if the
 * producer closes meanwhile, the kernel reports the hang-up at once and
 * ZeroMQ throws away whatever is still in the socket, unread and uncounted
 * (libzmq issue #1813).  A producer that exits right after a burst of
 * batches lost its last ones that way whenever the agent was behind.
 *
 * So a producer holds its connections open past zmq_ctx_term(), through a
 * duplicate of each file descriptor, until the agent has read every byte
 * (SIOCOUTQ falls to 0) or its linger runs out, and only then lets the
 * hang-up happen.  For tcp:// endpoints there is nothing to do: a FIN
 * reaches a stopped reader as data, not as a hang-up. */
#ifndef IOT_HANDOVER_H
#define IOT_HANDOVER_H

#include <stdint.h>

#define IOT_HANDOVER_MAX 8

struct iot_handover {
    int n;
    int fd[IOT_HANDOVER_MAX];            /* duplicates; -1 when only noted */
    unsigned long ino[IOT_HANDOVER_MAX]; /* the sockets' inode numbers */
};

/* Finds this process's sockets connected to the Unix socket of `endpoint`
 * (ipc://PATH or ipc://@NAME; nothing for any other) other than those in
 * `except` (NULL: none), and notes them in `out`, with a duplicate of each
 * when `dup` is set.  A process notes the ones it inherited (a forked
 * child has its parent's connection) before it connects, and holds the
 * others at exit.  Returns how many it noted. */
int iot_handover_find(const char *endpoint, const struct iot_handover *except,
                      struct iot_handover *out, int dup);

/* Waits until the agent has read everything written on the held sockets
 * or CLOCK_MONOTONIC reaches `deadline_ns`, then closes the duplicates.
 * Returns the bytes the agent had not read by then (0: it read them all). */
long iot_handover_release(struct iot_handover *h, int64_t deadline_ns);

#endif
