/* The daemon's HTTP server (libmicrohttpd): the dashboard's static files,
 * the read-only JSON API under /api/v1/, Server-Sent Events and /metrics
 * (docs/http-api.md).  It runs on libmicrohttpd's own threads, one per
 * connection, and reads the live state only: no HTTP client can hold up
 * ingest or acknowledgements. */
#ifndef IOT_DAEMON_HTTP_H
#define IOT_DAEMON_HTTP_H

#include <stdint.h>

#include "live.h"

struct http_config {
    const char *listen;     /* ADDR:PORT */
    const char *web_root;   /* the dashboard's files */
    const char *chart_js;   /* Chart.js, served as /vendor/chart.js */
    const char *store;      /* for downloads and free space */
    const char *export_tool; /* iotrace-export, for downloads */
    const char *users_file; /* "user:crypt-hash" lines; NULL: no password */
    const char *tls_cert, *tls_key; /* PEM files; NULL: plain HTTP */
    int max_clients;
    int show_paths; /* file paths to unauthenticated requests too */
    int request_timeout_s; /* to a complete request, however it trickles */
    int max_downloads, max_downloads_per_client; /* iotrace-export children at once */
    uint64_t download_memory; /* address space of each, bytes; 0: unbounded */
};

struct http;

/* Reads the users and TLS files and binds the address, before the collector
 * touches its store; http_serve then answers on it with the live state. */
struct http *http_open(const struct http_config *cfg, char *err, size_t errlen);
int http_serve(struct http *h, struct live *l, char *err, size_t errlen);
/* Either stage; NULL is fine. */
void http_stop(struct http *h);

/* Whether ADDR:PORT names a loopback address (127.0.0.0/8, ::1, localhost). */
int http_is_loopback(const char *listen);

#endif
