/* Connections that do not send their request in time (docs/http-api.md,
 * Access): a connection waiting for a complete request (a new one,
 * or a kept-alive one between requests) is closed after the request
 * timeout, however steadily it trickles bytes, and such connections hold
 * at most a share of the server's connections: when a new one would exceed
 * it, the oldest waiting connection of the address that has the most is
 * closed.  So clients that send a byte a second cannot take every slot
 * from those that send a request at once.  libmicrohttpd's connection
 * timeout only counts time without any byte. */
#ifndef IOT_DAEMON_HTTP_GUARD_H
#define IOT_DAEMON_HTTP_GUARD_H

#include <stdint.h>

struct http_guard;
struct guarded; /* one connection */

/* max_waiting connections without a complete request at once, each for at
 * most timeout_ns; starts a thread that closes the late ones.  NULL when
 * out of memory or threads. */
struct http_guard *http_guard_start(int max_waiting, int64_t timeout_ns);
void http_guard_stop(struct http_guard *g);

/* A connection was accepted (fd, its address as text): it waits for its
 * request from now on.  NULL when out of memory (then it is not guarded). */
struct guarded *http_guard_open(struct http_guard *g, int fd, const char *addr);
/* Its request is complete (header and body) / it was answered, and it waits
 * for the next one. */
void http_guard_request(struct http_guard *g, struct guarded *c);
void http_guard_waiting(struct http_guard *g, struct guarded *c);
/* Before libmicrohttpd closes the socket. */
void http_guard_close(struct http_guard *g, struct guarded *c);

#endif
