/* The agent <-> collector protocol over ZeroMQ DEALER (agent) / ROUTER
 * (collector), shared by both ends.  See docs/transport.md.
 *
 * Every message is multipart; frame 0 is IOT_LINK_PROTO, frame 1 the type.
 * Integers are little-endian fixed width.
 *
 *   agent -> collector
 *     HELLO   node, session(u64)          on start and after every reconnect
 *     BATCH   batch bytes                 one encoded iotrace batch, untouched
 *     PING    t1(i64)                     clock exchange: t1 = agent clock
 *                                         (CLOCK_REALTIME ns) just before sending
 *     CLOCKKEY key-id(u64), key(32 bytes)  after WELCOME: the key of this session's
 *                                         clock exchanges over UDP (clockudp.h)
 *   collector -> agent
 *     WELCOME credit(u32)                 answer to HELLO: the agent may have
 *                                         `credit` unacknowledged batches in
 *                                         flight and resends all it holds
 *     ACK     producer-key, epoch(u64), seq(u64), status(u8), reason
 *                                         status: IOT_ACK_STORED, IOT_ACK_DUPLICATE,
 *                                         IOT_ACK_REJECTED or IOT_ACK_DEFERRED (not
 *                                         stored now, no room: the agent keeps it
 *                                         and sends it again after a pause); each
 *                                         ACK returns one credit.  producer-key is
 *                                         iot_wire_producer_key().
 *     CLOCKUDP port(u16)                  answer to CLOCKKEY: the UDP port of the
 *                                         collector's clock, 0 for none (PING then)
 *     PONG    t1(i64), t2(i64), t3(i64)   answer to PING, sent at once (never held
 *                                         back by a group commit): t1 echoed,
 *                                         t2 = collector clock when the PING was
 *                                         read, t3 = just before the PONG is sent
 *
 * Compatibility: a collector older than PONG ignores PING, so its agents get
 * no clock samples (they log that and carry on); an agent older than PING
 * never sends one. */
#ifndef IOT_LINK_H
#define IOT_LINK_H

#include <stdint.h>

#define IOT_LINK_PROTO "IOT1"
#define IOT_LINK_HELLO "HELLO"
#define IOT_LINK_BATCH "BATCH"
#define IOT_LINK_PING "PING"
#define IOT_LINK_PONG "PONG"
#define IOT_LINK_WELCOME "WELCOME"
#define IOT_LINK_ACK "ACK"
#define IOT_LINK_CLOCKKEY "CLOCKKEY"
#define IOT_LINK_CLOCKUDP "CLOCKUDP"

enum iot_ack_status {
    IOT_ACK_STORED = 0,
    IOT_ACK_DUPLICATE = 1,
    IOT_ACK_REJECTED = 2,
    IOT_ACK_DEFERRED = 3
};

#define IOT_LINK_DEFAULT_CREDIT 64

static inline void iot_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t iot_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void iot_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t iot_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
