/* What the collector believes of a batch: which node and which user it
 * says it is from, against what the connection it came on has proven. */
#ifndef IOT_COLLECTOR_TRUST_H
#define IOT_COLLECTOR_TRUST_H

#include <stddef.h>

#include "wire.h"

/* Why batch `b` may not be stored, or NULL when it may.  `peer_node` is the
 * node the connection's agent named in its HELLO, and `bound` says whether
 * its CURVE key was found to speak for that node (--curve-clients); then
 * every batch must be on that node's clock, and an agent's own batches
 * (clock samples, counters) of that node.  The reason is written into
 * `buf`. */
const char *trust_check_batch(const iot_batch *b, const char *peer_node, int bound, char *buf,
                              size_t len);

#endif
