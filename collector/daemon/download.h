/* Downloads by iotrace-export children, bounded (docs/http-api.md,
 * Downloads): at most so many at once in total and per client (the HTTP
 * user where the request is authenticated, else its address), each child
 * in its own process group with its address space limited, ended and
 * reaped as soon as its client leaves.  The HTTP server (http.c) asks for
 * a slot, runs the child here and hands libmicrohttpd the reader. */
#ifndef IOT_DAEMON_DOWNLOAD_H
#define IOT_DAEMON_DOWNLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct downloads;

/* max_total children at once, max_per_client of them for one client;
 * mem_limit bytes of address space each (0: none). */
struct downloads *downloads_new(int max_total, int max_per_client, uint64_t mem_limit);
/* Ends whatever still runs: readers waiting on a child give up. */
void downloads_stopping(struct downloads *d);
void downloads_free(struct downloads *d);

/* One download: a slot taken for `client`, its child and the pipe of its
 * standard output. */
struct download;

/* A slot for client, or NULL when the bounds are reached (the caller
 * answers 503); *why says which bound. */
struct download *download_begin(struct downloads *d, const char *client, const char **why);
/* Starts argv[0] with its standard output into the download's pipe; sock
 * is the client's socket, watched for the client leaving.  0 or -1
 * (errno). */
int download_spawn(struct download *dl, char *const argv[], int sock);
/* Waits for the child's end, reading and discarding its output: 0 when it
 * exited with 0, 1 when the client left (the child is killed), -1 when the
 * child failed. */
int download_wait(struct download *dl);
/* libmicrohttpd's content reader and its free callback for a streamed
 * download (MHD_create_response_from_callback): the child's output as it
 * comes; the client leaving, the child failing or the server stopping end
 * the response with an error, and the free callback kills and reaps the
 * child and gives the slot back. */
ssize_t download_read(void *cls, uint64_t pos, char *buf, size_t max);
void download_end(void *cls);

#endif
