/* The collector's end of the agents' clock exchanges over UDP
 * (common/clockudp.h): a thread of its own that answers each request the
 * moment it comes, its t2 the kernel's receive time, so that neither the
 * ingest loop's group commits nor ZeroMQ's threads widen an agent's error
 * bound.  It answers only requests under a key an agent gave over its
 * ZeroMQ session (CLOCKKEY), one key per node, the latest. */
#ifndef IOT_CLOCKSERVE_H
#define IOT_CLOCKSERVE_H

#include <stdint.h>

#include "clockudp.h"

struct clockserve;

/* Binds UDP on HOST (the address of the collector's --listen endpoint: "*"
 * or empty for every address) and port; starts the thread.  NULL with a
 * reason in why. */
struct clockserve *clockserve_start(const char *host, unsigned port, char *why, size_t whylen);

/* The port it answers on (the one bound, for port 0). */
unsigned clockserve_port(const struct clockserve *cs);

/* NODE's key from now on (its earlier one no longer answered): -1 when
 * the table is full of other nodes' keys. */
int clockserve_set_key(struct clockserve *cs, const char *node, uint64_t key_id,
                       const uint8_t key[IOT_CLOCKUDP_KEY]);

struct clockserve_counts {
    uint64_t answered; /* requests answered */
    uint64_t refused;  /* datagrams not answered: unknown key, bad MAC, not a request */
};
void clockserve_counts(struct clockserve *cs, struct clockserve_counts *out);

void clockserve_stop(struct clockserve *cs);

#endif
