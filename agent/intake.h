/* The producer side of the agent: a PULL socket that local producers PUSH
 * batches to.  Batches are taken as opaque bytes; only the envelope is
 * opened, to learn (producer, epoch, seq) and to keep garbage out of the
 * pending store, and the agent's node is appended as the batch's `via`. */
#ifndef IOT_AGENT_INTAKE_H
#define IOT_AGENT_INTAKE_H

#include <sys/types.h>

#include "ipclisten.h"
#include "stats.h"
#include "tally.h"
#include "wire.h"

struct spool;

struct intake {
    void *sock;      /* libzmq's PULL socket, for other endpoints than a path */
    struct ipcl ipc; /* the agent's own listener, for ipc://PATH */
    int own;         /* 1: ipc in use */
    struct ratelimit bad_log;
    /* Appended to every batch taken: this agent's node as its `via`, then,
     * for the ipc socket, the sending process's credentials as `sender`,
     * then the stamp checksum over both. */
    uint8_t tail[IOT_WIRE_TAIL_MAX];
    size_t via_len;
    char node[IOT_WIRE_VIA_MAX + 1];
    /* Bytes of pending batches one local user may hold (0: no limit); once
     * it holds that much, its batches are counted in the tally instead
     * (over_quota), within the user's share of it. */
    uint64_t max_user_bytes;
    struct ratelimit quota_log, discard_log, conn_log;
    /* Batches taken with no room to keep them, counted per producer until
     * they can be stored as drop records (tally.h); the agent sets its
     * size. */
    struct tally tally;
    /* The socket file this agent made, removed when it closes unless
     * another agent has replaced it since; path empty: none. */
    char ipc_path[108];
    dev_t ipc_dev;
    ino_t ipc_ino;
};

/* Binds `endpoint`; every batch taken is stamped with `node` (its events
 * are on this node's clock, whatever node the producer names).  For ipc://
 * it creates the parent directory, removes a socket file left by a dead
 * agent but refuses to take over the socket of a live one, and gives the
 * socket file `socket_mode` (0666: ranks of every user may connect; each
 * batch is stamped with its sender's credentials).  Returns -1 after
 * logging why. */
int intake_open(struct intake *in, void *zctx, const char *endpoint, const char *node,
                unsigned socket_mode);

enum { INTAKE_TAKEN, INTAKE_REFUSED, INTAKE_DEFERRED };

/* Checks one batch's envelope and puts it in the pending store, stamped
 * with this node and, when known, its sender.  With the store full, or its
 * user at --max-pending-per-user, the batch's events are counted in the
 * tally (agent_full, over_quota), INTAKE_TAKEN.  INTAKE_REFUSED: invalid,
 * counted and logged (or, without may_defer, no room even in the tally, or
 * no memory: counted as discarded).
 * INTAKE_DEFERRED (may_defer only): no room for it now; the caller keeps it
 * and tries again later. */
int intake_accept(struct intake *in, const uint8_t *data, size_t len,
                  const Iotrace__Sender *sender, int may_defer, struct spool *sp,
                  struct agent_stats *st);

/* Takes at most one message without blocking.  Returns 1 if one was taken
 * (valid or not), 0 if none was waiting, -1 on a socket error. */
int intake_take(struct intake *in, struct spool *sp, struct agent_stats *st);

/* Its entry in the agent's poll set. */
void intake_pollitem(struct intake *in, void *zmq_pollitem);

/* Drops stalled handshakes and partial messages (own listener; reading:
 * see ipcl_tick); updates the connection counters in st. */
void intake_tick(struct intake *in, int64_t now_ns, int reading, struct agent_stats *st);

void intake_close(struct intake *in);

#endif
