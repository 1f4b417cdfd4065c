/* The producer side of the agent: a PULL socket that local producers PUSH
 * batches to.  Batches are taken as opaque bytes; only the envelope is
 * opened, to learn (producer, epoch, seq) and to keep garbage out of the
 * pending store, and the agent's node is appended as the batch's `via`. */
#ifndef IOT_AGENT_INTAKE_H
#define IOT_AGENT_INTAKE_H

#include "stats.h"
#include "wire.h"

struct spool;

struct intake {
    void *sock;
    struct ratelimit bad_log;
    uint8_t via[IOT_WIRE_VIA_MAX + 3]; /* this agent's node as a `via` field, */
    size_t via_len;                    /* appended to every batch it takes */
};

/* Binds `endpoint`; every batch taken is stamped with `node` (its events
 * are on this node's clock, whatever node the producer names).  For ipc:// it creates the parent directory and removes
 * a socket file left by a dead agent, but refuses to take over the socket of
 * a live one.  Returns -1 after logging why. */
int intake_open(struct intake *in, void *zctx, const char *endpoint, const char *node);

/* Takes at most one message without blocking.  Returns 1 if one was taken
 * (valid or not), 0 if none was waiting, -1 on a socket error. */
int intake_take(struct intake *in, struct spool *sp, struct agent_stats *st);

void intake_close(struct intake *in);

#endif
