/* Clock exchanges over UDP, stamped by the kernel: the agent's PING/PONG
 * over ZeroMQ crosses four threads (each side's I/O thread and main loop),
 * and every wake-up among them lands in the round trip and so in the error
 * bound (0.1 to 1.5 ms on a loaded host).  Here the collector's t2 and the
 * agent's t4 are the kernel's receive time of the datagram (SO_TIMESTAMPNS),
 * so that only the wire and the two sends count.
 *
 * Each datagram carries a key id and a BLAKE2b MAC (libsodium's
 * crypto_generichash, keyed) under a key the agent chose for its session and
 * gave the collector over the CURVE link (CLOCKKEY, common/link.h): nobody
 * without the key can make the collector answer or forge an answer, so the
 * worst an attacker on the path can do is delay datagrams, which widens the
 * round trip and the bound that holds the error.  docs/transport.md. */
#ifndef IOT_CLOCKUDP_H
#define IOT_CLOCKUDP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define IOT_CLOCKUDP_KEY 32
#define IOT_CLOCKUDP_MAC 16

/* request: magic, kind 1, key id, nonce, t1, MAC
 * answer:  magic, kind 2, key id, nonce, t1, t2, t3, MAC
 * Integers little-endian. */
#define IOT_CLOCKUDP_REQUEST 48
#define IOT_CLOCKUDP_ANSWER 64

struct iot_clockudp_msg {
    int kind; /* 1 request, 2 answer */
    uint64_t key_id, nonce;
    int64_t t1, t2, t3;
};

/* Writes msg into buf (IOT_CLOCKUDP_REQUEST or _ANSWER bytes, by kind),
 * MAC included; returns its length. */
size_t iot_clockudp_pack(uint8_t *buf, const struct iot_clockudp_msg *msg,
                         const uint8_t key[IOT_CLOCKUDP_KEY]);

/* Reads the header of a datagram of len bytes (kind and key id, to find the
 * key): 0, or -1 when it is no iotrace clock datagram. */
int iot_clockudp_peek(const uint8_t *buf, size_t len, struct iot_clockudp_msg *msg);

/* Checks the MAC under key and reads every field: 0, or -1. */
int iot_clockudp_open(const uint8_t *buf, size_t len, const uint8_t key[IOT_CLOCKUDP_KEY],
                      struct iot_clockudp_msg *msg);

/* A UDP socket that has the kernel stamp what it receives (SO_TIMESTAMPNS),
 * close-on-exec, non-blocking: -1 with errno. */
int iot_clockudp_socket(int family);

/* Receives one datagram into buf (up to cap bytes) with its kernel receive
 * time converted to this process's CLOCK_REALTIME (*at_ns), and its sender
 * into from/fromlen when from is not NULL.  The length, or -1 with errno
 * (EAGAIN when none waits; ENOMSG when the kernel gave no time). */
long iot_clockudp_recv(int fd, uint8_t *buf, size_t cap, int64_t *at_ns,
                       struct sockaddr *from, socklen_t *fromlen);

/* HOST and PORT of a ZeroMQ endpoint tcp://HOST:PORT (an IPv6 HOST
 * without its brackets): 0, or -1 when it is not one (another transport,
 * a host longer than hostlen). */
int iot_clockudp_tcp_endpoint(const char *endpoint, char *host, size_t hostlen,
                              unsigned long *port);

/* This process's CLOCK_REALTIME minus the kernel's.  0 but for an
 * interposer such as libfaketime (the kernel's stamps are in the kernel's
 * clock, the other two times of an exchange in the process's). */
int64_t iot_clockudp_skew_ns(void);

#endif
