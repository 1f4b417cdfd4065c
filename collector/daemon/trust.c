#include "trust.h"

#include <stdio.h>
#include <string.h>

const char *trust_check_batch(const iot_batch *b, const char *peer_node, int bound, char *buf,
                              size_t len)
{
    const iot_producer *p = b->producer;
    int agent = p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_AGENT;
    const char *via = b->via && b->via[0] ? b->via : NULL;
    /* via and sender are appended by the agent after the producer's bytes,
     * outside the identity checksum: its stamp covers them, so that a
     * changed node or user is refused like a changed identity. */
    if (!iot_wire_stamp_ok(b))
        snprintf(buf, len, "via or sender does not match the agent's stamp checksum (changed on "
                           "the way, or not stamped by an agent)");
    /* Clock samples move every event of their node: only the agent makes
     * them, for its own node, and never hands them in as a local user's. */
    else if (agent && b->sender)
        snprintf(buf, len, "an agent's batch (clock samples) handed in by local user %u",
                 b->sender->uid);
    else if (agent && via && strcmp(via, p->node) != 0)
        snprintf(buf, len, "an agent's batch of node '%.64s' forwarded by node '%.64s'", p->node,
                 via);
    /* The key proved which agent this is, and --curve-clients which nodes
     * it speaks for: it forwards its own node's batches only. */
    else if (bound && strcmp(iot_wire_clock_node(b), peer_node) != 0)
        snprintf(buf, len, "a batch of node '%.64s' on the connection of agent '%.64s', whose key "
                           "speaks for its own node only",
                 iot_wire_clock_node(b), peer_node);
    else
        return NULL;
    return buf;
}
