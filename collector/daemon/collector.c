/* iotrace-collector: receives batches from the node agents over ZeroMQ,
 * validates them, drops duplicates, stores them durably and only then
 * acknowledges them.  Protocol in common/link.h, behaviour in docs/collector.md. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include <sys/stat.h>
#include <unistd.h>

#include "curve.h"
#include "dedup.h"
#include "http.h"
#include "ingest.h"
#include "live.h"
#include "clockserve.h"
#include "link.h"
#include "log.h"
#include "opts.h"
#include "ratelog.h"
#include "store.h"
#include "timeutil.h"
#include "trust.h"
#include "wire.h"

/* One group commit: what is drained before the single fdatasync. */
#define GROUP_MAX_BATCHES 256
#define GROUP_MAX_BYTES (8u << 20)
#define GROUP_MAX_MESSAGES 1024
#define STATS_INTERVAL_NS (10ll * 1000000000)
#define POLL_MS 1000
#define LINGER_MS 1000
#define MAX_FRAMES 8
#define PEER_ID_MAX 256
#define KEY_MAX 320
#define REASON_MAX 200
#define MAX_PEERS 1024
#define MAX_CREDIT 1000000

static char *opt_listen = "tcp://127.0.0.1:5555";
static char *opt_store;
static long opt_credit = IOT_LINK_DEFAULT_CREDIT;
static uint64_t opt_segment_size = IOT_STORE_DEFAULT_SEGMENT_SIZE;
static char *opt_log_level = "info";
static char *opt_http = "127.0.0.1:8080";
static char *opt_web_root;
static char *opt_chart_js = IOTRACE_CHART_JS;
static char *opt_export_tool;
static char *opt_http_users;
static char *opt_http_cert;
static char *opt_http_key;
static long opt_http_clients = 64;
static int opt_http_show_paths;
static long opt_http_request_timeout_s = 10;
static long opt_http_downloads = 4;
static long opt_http_downloads_per_client = 2;
static uint64_t opt_http_download_memory = 1ull << 30;
static long opt_lateness_ms = 2000;
static long opt_grace_ms = 2000;
static long opt_job_idle_ms = 10000;
static long opt_producer_idle_ms = 2000;
static long opt_analysis_nice = 10;
/* A service's dashboard shows running jobs as they run: by default the
 * analysis never waits for an idle core (a busy collector host left jobs
 * unseen for their whole run); waiting is for small setups that share the
 * ranks' cores. */
static long opt_analysis_yield_s = 0;
static long opt_keep_s = 3600;
static char *opt_analysis = "on";
static char *opt_curve_key;
static char *opt_curve_clients;
static int opt_insecure;
static char *opt_keygen;
/* -1: the --listen port + 1 */
static long opt_clock_port = -1;

static const struct iot_opt options[] = {
    {"listen", 'l', IOT_OPT_STRING, &opt_listen, "tcp://HOST:PORT",
     "ZeroMQ endpoint the agents connect to (default tcp://127.0.0.1:5555)"},
    {"store", 's', IOT_OPT_STRING, &opt_store, "DIR",
     "store directory, created if missing (required)"},
    {"clock-port", 0, IOT_OPT_INT, &opt_clock_port, "PORT",
     "answer the agents' clock exchanges over UDP on this port of the --listen address, each "
     "under its session's key, with the kernel's receive time (error bounds of tens of "
     "microseconds rather than hundreds); 0 leaves them on the ZeroMQ link (default: the "
     "--listen port + 1)"},
    {"credit", 0, IOT_OPT_INT, &opt_credit, "N",
     "unacknowledged batches an agent may have in flight (default 64)"},
    {"segment-size", 0, IOT_OPT_SIZE, &opt_segment_size, "SIZE",
     "start a new store segment at this size (default 256M, at least 4K)"},
    {"log-level", 0, IOT_OPT_STRING, &opt_log_level, "LEVEL",
     "error, warn, info or debug (default info)"},
    {"http", 0, IOT_OPT_STRING, &opt_http, "ADDR:PORT|off",
     "serve the dashboard, the JSON API and /metrics here (default 127.0.0.1:8080); an "
     "address beyond loopback needs --http-users"},
    {"http-users", 0, IOT_OPT_STRING, &opt_http_users, "FILE",
     "require HTTP basic authentication: lines USER:HASH[:ROLE], HASH from crypt(3), ROLE "
     "admin (every job) or the uid whose jobs USER sees (default: its local account's)"},
    {"http-cert", 0, IOT_OPT_STRING, &opt_http_cert, "FILE",
     "serve HTTPS with this PEM certificate (with --http-key)"},
    {"http-key", 0, IOT_OPT_STRING, &opt_http_key, "FILE", "PEM private key for --http-cert"},
    {"http-clients", 0, IOT_OPT_INT, &opt_http_clients, "N",
     "HTTP connections served at once, 1 to 1000 (default 64)"},
    {"http-show-paths", 0, IOT_OPT_FLAG, &opt_http_show_paths, NULL,
     "show file paths (timeline, JSON Lines and SLOG-2 downloads) without --http-users too: "
     "only where every local user may see every other user's paths"},
    {"http-request-timeout", 0, IOT_OPT_INT, &opt_http_request_timeout_s, "SEC",
     "a connection that has not sent a whole request this long after it connected "
     "(or after its last answer) is closed, however steadily it sends (default 10, 1 to 3600)"},
    {"http-downloads", 0, IOT_OPT_INT, &opt_http_downloads, "N",
     "downloads (iotrace-export children) at once, 1 to 1000 (default 4); beyond, 503 with "
     "Retry-After"},
    {"http-downloads-per-client", 0, IOT_OPT_INT, &opt_http_downloads_per_client, "N",
     "of those, at once for one HTTP user, or one address without --http-users (default 2)"},
    {"http-download-memory", 0, IOT_OPT_SIZE, &opt_http_download_memory, "SIZE",
     "address space of each download's iotrace-export (default 1G, 0 for no limit)"},
    {"web-root", 0, IOT_OPT_STRING, &opt_web_root, "DIR",
     "the dashboard's files (default: ../share/iotrace/web from the binary, as installed)"},
    {"chart-js", 0, IOT_OPT_STRING, &opt_chart_js, "FILE",
     "Chart.js for the dashboard (default: Debian's libjs-chart.js)"},
    {"export-tool", 0, IOT_OPT_STRING, &opt_export_tool, "FILE",
     "iotrace-export, for downloads (default: beside iotrace-collector)"},
    {"lateness", 0, IOT_OPT_INT, &opt_lateness_ms, "MS",
     "live analysis: how far behind its newest event a process may still deliver one "
     "(default 2000, as iotrace-export)"},
    {"grace", 0, IOT_OPT_INT, &opt_grace_ms, "MS",
     "live analysis: how long after a call's end its disk operations may start (default 2000)"},
    {"analysis", 0, IOT_OPT_STRING, &opt_analysis, "on|off",
     "run the live analysis (default on); off stores and acknowledges only, and needs "
     "--http off"},
    {"analysis-nice", 0, IOT_OPT_INT, &opt_analysis_nice, "N",
     "niceness of the live analysis thread, 0 to 19 (default 10): it gives way to ingest; "
     "against other processes see --analysis-yield"},
    {"analysis-yield", 0, IOT_OPT_INT, &opt_analysis_yield_s, "SEC",
     "while less than half a core is idle, the live analysis waits for one, at most SEC "
     "seconds at a time, and then reads what was stored meanwhile: the dashboard is that "
     "far behind (default 0: never waits, the dashboard is live; for a collector sharing "
     "the ranks' cores)"},
    {"producer-idle", 0, IOT_OPT_INT, &opt_producer_idle_ms, "MS",
     "live analysis: a process or storage server that sent nothing for this long no longer "
     "holds the running jobs' figures back, which then catch up while they are quiet "
     "(default 2000, 100 to 3600000; a finished job's figures, like iotrace-export's, use "
     "10000)"},
    {"job-idle", 0, IOT_OPT_INT, &opt_job_idle_ms, "MS",
     "a job without a new batch for this long is finished (default 10000)"},
    {"curve-key", 0, IOT_OPT_STRING, &opt_curve_key, "FILE",
     "authenticate and encrypt the agents' connections with CURVE, with this key pair "
     "(written by --keygen); needs --curve-clients"},
    {"curve-clients", 0, IOT_OPT_STRING, &opt_curve_clients, "DIR",
     "admit only agents whose public key is in a *.pub file of DIR, read at every connection, "
     "each for the node the file is named after (NODE.pub) or its 'node = NODE' lines"},
    {"insecure", 0, IOT_OPT_FLAG, &opt_insecure, NULL,
     "allow --listen beyond loopback without CURVE: anyone who can reach the port can send "
     "batches"},
    {"keygen", 0, IOT_OPT_STRING, &opt_keygen, "PATH",
     "write a new CURVE key pair to PATH (mode 0600) and its public key to PATH.pub, then exit"},
    {"keep", 0, IOT_OPT_INT, &opt_keep_s, "SEC",
     "how long a finished job's figures, timeline and metrics stay in memory (default 3600); "
     "they are recomputed from the store after that"},
};

static const struct iot_man_section collector_man[] = {
    {"FILES",
     "/etc/iotrace/collector.conf\n"
     "The configuration the unit reads (iotrace-collector.service).\n"
     "\n"
     "/var/lib/iotrace/store/\n"
     "The store the shipped configuration names: segment files and the LOCK a running "
     "collector holds.\n"
     "\n"
     "/etc/iotrace/keys/collector, /etc/iotrace/keys/agents/*.pub\n"
     "Its CURVE key pair and the agents it admits."},
    {"SIGNALS",
     "SIGTERM and SIGINT stop it cleanly: the current group of batches is stored, synced "
     "and acknowledged, the store closed, the totals logged."},
    {"EXIT STATUS",
     "0 after SIGTERM or SIGINT, --help, --version or --man; 1 on a runtime failure (store "
     "in use by another collector, damaged or unwritable store, cannot listen, a write or "
     "sync error, a key file refused); 2 on a usage error."},
    {"SEE ALSO",
     "iotrace-agent(8), iotrace-export(1), libiotrace-client(7); docs/collector.md, "
     "docs/http-api.md, docs/dashboard.md and docs/install.md in the documentation "
     "directory."},
};

static const struct iot_opts_spec spec = {
    .program = "iotrace-collector",
    .synopsis = "--store DIR [--listen tcp://HOST:PORT] [options]",
    .description = "Receives event batches from iotrace agents, stores them durably in DIR\n"
                   "and acknowledges them once stored; analyses them live per job and serves a\n"
                   "dashboard, a JSON API and Prometheus metrics over HTTP.  See\n"
                   "docs/collector.md, docs/http-api.md and docs/dashboard.md.",
    .opts = options,
    .n_opts = (int)(sizeof options / sizeof options[0]),
    .allow_config = 1,
    .man_section = 8,
    .summary = "iotrace collector: stores trace batches durably, analyses them live, serves "
               "the dashboard, the JSON API and Prometheus metrics",
    .man = collector_man,
    .n_man = (int)(sizeof collector_man / sizeof collector_man[0]),
};

struct counters {
    uint64_t batches, events;
    uint64_t dup_batches, dup_events;
    uint64_t rejected;
    uint64_t malformed;
    uint64_t auth_refused;
};

struct peer {
    uint8_t id[PEER_ID_MAX];
    size_t id_len;
    char node[64];
    /* With CURVE: the connection's key speaks for `node` (--curve-clients);
     * its batches are taken only then. */
    int bound;
};

struct ack {
    uint8_t peer[PEER_ID_MAX];
    size_t peer_len;
    char key[KEY_MAX];
    uint64_t epoch, seq;
    uint8_t status;
    char reason[REASON_MAX];
    /* STORED: what the batch adds to the counters once it is durable, and
     * where its record ends in the store */
    uint64_t events, bytes;
    unsigned kind;
    struct iot_store_pos end;
};

struct message {
    zmq_msg_t part[MAX_FRAMES];
    int n;         /* frames kept */
    int extra;     /* frames beyond MAX_FRAMES, received and dropped */
};

struct collector {
    struct ingest_view *view;
    struct live *live;
    struct http *http;
    uint64_t bytes_stored, acks_sent, syncs;
    uint64_t kind_batches[IOT_INGEST_KINDS], kind_events[IOT_INGEST_KINDS];
    void *zctx, *sock;
    void *zap; /* ZeroMQ's authentication requests, with CURVE */
    struct clockserve *clock; /* UDP clock exchanges, NULL without */
    void *mon; /* handshake failures of the agents' socket, with CURVE */
    struct iot_curve_keys keys;
    struct iot_store *store;
    struct iot_dedup *dedup;
    struct iot_ratelog *ratelog;
    struct counters count, logged;
    struct peer *peers;
    size_t n_peers, next_peer;
    struct ack *acks;
    size_t n_acks;
    int dirty;     /* appended since the last sync */
    int fatal;
    int64_t next_stats;
    /* Out of space: batches are neither stored nor acknowledged (the agents
     * keep them and send them again) until a retry finds room. */
    int full;
    int64_t full_since, full_retry, full_logged; /* monotonic */
    uint64_t deferred;                           /* batches not acknowledged for it */
};

struct group {
    size_t batches, bytes, messages;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* No SA_RESTART: the signal must interrupt zmq_poll. */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* Peer-supplied bytes go into log lines only as short printable text. */
static void printable(char *out, size_t outlen, const uint8_t *p, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 4 < outlen; i++)
        out[n++] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    if (len > 0 && n + 4 >= outlen && len > n)
        n += (size_t)snprintf(out + n, outlen - n, "...");
    out[n] = '\0';
}

static const uint8_t *frame_data(struct message *m, int i)
{
    return zmq_msg_data(&m->part[i]);
}

static size_t frame_size(struct message *m, int i) { return zmq_msg_size(&m->part[i]); }

static int frame_is(struct message *m, int i, const char *s)
{
    size_t len = strlen(s);
    return frame_size(m, i) == len && memcmp(frame_data(m, i), s, len) == 0;
}

static struct peer *find_peer(struct collector *c, const uint8_t *id, size_t len)
{
    for (size_t i = 0; i < c->n_peers; i++)
        if (c->peers[i].id_len == len && memcmp(c->peers[i].id, id, len) == 0)
            return &c->peers[i];
    return NULL;
}

/* The table is bounded; a forgotten peer is only named less nicely in logs. */
static struct peer *remember_peer(struct collector *c, const uint8_t *id, size_t len)
{
    struct peer *p;
    if (c->n_peers < MAX_PEERS)
        p = &c->peers[c->n_peers++];
    else {
        p = &c->peers[c->next_peer];
        c->next_peer = (c->next_peer + 1) % MAX_PEERS;
    }
    memcpy(p->id, id, len);
    p->id_len = len;
    p->node[0] = '\0';
    p->bound = 0;
    return p;
}

static void peer_label(struct collector *c, const uint8_t *id, size_t len, char *buf,
                       size_t buflen)
{
    struct peer *p = find_peer(c, id, len);
    if (p && p->node[0]) {
        snprintf(buf, buflen, "agent %s", p->node);
        return;
    }
    size_t n = (size_t)snprintf(buf, buflen, "peer 0x");
    for (size_t i = 0; i < len && n + 3 < buflen; i++)
        n += (size_t)snprintf(buf + n, buflen - n, "%02x", id[i]);
}

static void report(struct collector *c, struct message *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report(struct collector *c, struct message *m, const char *fmt, ...)
{
    char label[PEER_ID_MAX * 2 + 16], text[REASON_MAX + 64];
    peer_label(c, frame_data(m, 0), frame_size(m, 0), label, sizeof label);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    iot_ratelog_note(c->ratelog, label, text, iot_mono_ns());
}

static int send_frames(void *sock, const void *const *data, const size_t *len, int n)
{
    for (int i = 0; i < n; i++)
        if (zmq_send(sock, data[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0) < 0)
            return -1;
    return 0;
}

static void send_welcome(struct collector *c, struct message *m)
{
    uint8_t credit[4];
    iot_put_u32(credit, (uint32_t)opt_credit);
    const void *data[] = {frame_data(m, 0), IOT_LINK_PROTO, IOT_LINK_WELCOME, credit};
    size_t len[] = {frame_size(m, 0), strlen(IOT_LINK_PROTO), strlen(IOT_LINK_WELCOME), 4};
    if (send_frames(c->sock, data, len, 4) < 0)
        iot_debug("cannot send WELCOME: %s", zmq_strerror(errno));
}

static void send_ack(struct collector *c, const struct ack *a)
{
    uint8_t epoch[8], seq[8];
    iot_put_u64(epoch, a->epoch);
    iot_put_u64(seq, a->seq);
    const void *data[] = {a->peer, IOT_LINK_PROTO, IOT_LINK_ACK, a->key, epoch, seq,
                          &a->status, a->reason};
    size_t len[] = {a->peer_len, strlen(IOT_LINK_PROTO), strlen(IOT_LINK_ACK),
                    strlen(a->key), 8, 8, 1, strlen(a->reason)};
    if (send_frames(c->sock, data, len, 8) < 0)
        iot_debug("cannot send ACK: %s", zmq_strerror(errno));
}

static void send_acks(struct collector *c)
{
    c->acks_sent += c->n_acks;
    for (size_t i = 0; i < c->n_acks; i++)
        send_ack(c, &c->acks[i]);
    c->n_acks = 0;
}

static struct ack *queue_ack(struct collector *c, struct message *m, enum iot_ack_status status,
                             const char *key, uint64_t epoch, uint64_t seq, const char *reason)
{
    struct ack *a = &c->acks[c->n_acks++];
    a->peer_len = frame_size(m, 0);
    memcpy(a->peer, frame_data(m, 0), a->peer_len);
    snprintf(a->key, sizeof a->key, "%s", key);
    a->epoch = epoch;
    a->seq = seq;
    a->status = (uint8_t)status;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    return a;
}

/* What /api/v1/nodes and /metrics show of each agent. */
static void note_agent(struct collector *c, const char *node, int session, uint64_t batches,
                       uint64_t events)
{
    pthread_mutex_lock(&c->view->lock);
    struct ingest_agent *a = ingest_view_agent(c->view, node);
    a->last_seen_ns = iot_now_ns();
    a->sessions += (uint64_t)session;
    a->batches += batches;
    a->events += events;
    pthread_mutex_unlock(&c->view->lock);
}

/* Answered at once, not queued with the group's ACKs: time spent here
 * before t2 or after t3 counts as round trip and widens the agent's error
 * bound, time between them does not matter. */
static void handle_ping(struct collector *c, struct message *m)
{
    int64_t t2 = iot_now_ns();
    if (m->n != 4 || frame_size(m, 3) != 8) {
        c->count.malformed++;
        report(c, m, "ignored a PING of %d frames (expected 3, the last of 8 bytes)",
               m->n - 1);
        return;
    }
    uint8_t t[2][8];
    iot_put_u64(t[0], (uint64_t)t2);
    struct peer *p = find_peer(c, frame_data(m, 0), frame_size(m, 0));
    const void *data[] = {frame_data(m, 0), IOT_LINK_PROTO, IOT_LINK_PONG, frame_data(m, 3),
                          t[0], t[1]};
    size_t len[] = {frame_size(m, 0), strlen(IOT_LINK_PROTO), strlen(IOT_LINK_PONG), 8, 8, 8};
    iot_put_u64(t[1], (uint64_t)iot_now_ns());
    if (send_frames(c->sock, data, len, 6) < 0)
        iot_debug("cannot send PONG: %s", zmq_strerror(errno));
    if (p && p->node[0])
        note_agent(c, p->node, 0, 0, 0);
}

/* With CURVE, an agent speaks for the nodes its key is bound to and no
 * other: a HELLO naming another is not welcomed (the agent keeps its
 * batches and tries again, so that binding the key later lets it in), and
 * the connection's batches are not taken (handle_batch). */
static int key_speaks_for(struct collector *c, struct message *m, struct peer *p,
                          const char *node)
{
    const char *key = zmq_msg_gets(&m->part[2], "User-Id");
    int ok = key && frame_size(m, 3) < sizeof p->node &&
             memchr(frame_data(m, 3), '\0', frame_size(m, 3)) == NULL &&
             iot_curve_speaks_for(opt_curve_clients, key, node) == 1;
    p->bound = ok;
    if (!ok) {
        p->node[0] = '\0';
        c->count.auth_refused++;
        char text[256];
        snprintf(text, sizeof text,
                 "refused the HELLO of node '%s': CURVE key %s does not speak for it in "
                 "--curve-clients (a NODE.pub file, or a 'node = NODE' line)",
                 node, key ? key : "?");
        iot_ratelog_note(c->ratelog, node, text, iot_mono_ns());
    }
    return ok;
}

/* CLOCKKEY key-id(u64) key(32): the key of the agent's UDP clock exchanges
 * for this session; answered CLOCKUDP port(u16), 0 when the collector has
 * no UDP clock (the agent keeps to PING).  Only from an agent whose HELLO
 * was welcomed: the key is bound to its node. */
static void handle_clockkey(struct collector *c, struct message *m)
{
    struct peer *p = find_peer(c, frame_data(m, 0), frame_size(m, 0));
    if (m->n != 5 || frame_size(m, 3) != 8 || frame_size(m, 4) != IOT_CLOCKUDP_KEY) {
        c->count.malformed++;
        report(c, m, "ignored a CLOCKKEY of %d frames (expected 3: an 8-byte id, a 32-byte key)",
               m->n - 1);
        return;
    }
    if (!p || !p->node[0] || (c->zap && !p->bound)) {
        c->count.malformed++;
        report(c, m, "ignored a CLOCKKEY on a connection without a welcomed HELLO");
        return;
    }
    uint16_t port = 0;
    if (c->clock && clockserve_set_key(c->clock, p->node, iot_get_u64(frame_data(m, 3)),
                                       frame_data(m, 4)) == 0)
        port = (uint16_t)clockserve_port(c->clock);
    uint8_t pb[2] = {(uint8_t)port, (uint8_t)(port >> 8)};
    const void *data[] = {frame_data(m, 0), IOT_LINK_PROTO, IOT_LINK_CLOCKUDP, pb};
    size_t len[] = {frame_size(m, 0), strlen(IOT_LINK_PROTO), strlen(IOT_LINK_CLOCKUDP), 2};
    if (send_frames(c->sock, data, len, 4) < 0)
        iot_debug("cannot send CLOCKUDP: %s", zmq_strerror(errno));
}

static void handle_hello(struct collector *c, struct message *m)
{
    if (m->n != 5) {
        c->count.malformed++;
        report(c, m, "ignored HELLO with %d frames (expected 4)", m->n - 1);
        return;
    }
    if (frame_size(m, 4) != 8) {
        c->count.malformed++;
        report(c, m, "ignored HELLO with a %zu-byte session (expected 8)", frame_size(m, 4));
        return;
    }
    char node[64];
    printable(node, sizeof node, frame_data(m, 3), frame_size(m, 3));
    struct peer *p = find_peer(c, frame_data(m, 0), frame_size(m, 0));
    int known = p && strcmp(p->node, node) == 0;
    if (!p)
        p = remember_peer(c, frame_data(m, 0), frame_size(m, 0));
    if (c->zap && !key_speaks_for(c, m, p, node))
        return;
    snprintf(p->node, sizeof p->node, "%s", node);
    note_agent(c, node, 1, 0, 0);
    iot_log(known ? IOT_LOG_DEBUG : IOT_LOG_INFO, "agent %s connected (session %016llx)", node,
            (unsigned long long)iot_get_u64(frame_data(m, 4)));
    send_welcome(c, m);
}

/* Rejected batches are still acknowledged so the agent can drop them; the
 * envelope is unpacked without checks to name the batch if at all possible. */
static void reject_batch(struct collector *c, struct message *m, const iot_batch *opened,
                         const char *reason)
{
    const uint8_t *data = frame_data(m, 3);
    size_t len = frame_size(m, 3);
    iot_batch *raw = NULL;
    if (!opened && len <= IOT_WIRE_MAX_BATCH)
        raw = iotrace__batch__unpack(NULL, len, data);
    const iot_batch *b = opened ? opened : raw;
    char key[KEY_MAX] = "";
    if (b && b->producer && b->producer->node && iot_wire_batch_key(b, key, sizeof key) < 0)
        key[0] = '\0';
    queue_ack(c, m, IOT_ACK_REJECTED, key, b ? b->epoch : 0, b ? b->seq : 0, reason);
    if (raw)
        iotrace__batch__free_unpacked(raw, NULL);
    c->count.rejected++;
    report(c, m, "rejected batch: %s", reason);
}

#define FULL_RETRY_NS (5 * 1000000000ll)
#define FULL_LOG_NS (60 * 1000000000ll)

/* No room in the store: what this group appended is not acknowledged (the
 * store cuts it away when it recovers), and nothing is stored until a retry
 * finds room; the collector stays up, answering everything else. */
static void enter_full(struct collector *c)
{
    int64_t now = iot_mono_ns();
    if (!c->full) {
        iot_warn("store: %s: batches are not acknowledged until there is room again (the "
                 "agents keep them and send them again); trying every %lld s",
                 iot_store_error(c->store), FULL_RETRY_NS / 1000000000ll);
        c->full = 1;
        c->full_since = c->full_logged = now;
    }
    c->full_retry = now + FULL_RETRY_NS;
    c->dirty = 0;
}

/* A store failure other than a full disk ends the collector. */
static int store_failed(struct collector *c)
{
    if (iot_store_out_of_space(c->store)) {
        enter_full(c);
        return 0;
    }
    iot_err("store: %s", iot_store_error(c->store));
    c->fatal = 1;
    return -1;
}

static void try_leave_full(struct collector *c)
{
    int64_t now = iot_mono_ns();
    if (!c->full || now < c->full_retry)
        return;
    if (iot_store_recover(c->store) < 0) {
        /* Cutting the failed tail, or making the next segment, can fail
         * otherwise (EIO): that ends the collector as any such failure. */
        if (!iot_store_out_of_space(c->store)) {
            store_failed(c);
            return;
        }
        c->full_retry = now + FULL_RETRY_NS;
        if (now - c->full_logged >= FULL_LOG_NS) {
            iot_warn("store: still no room after %lld s (%s); %llu batches not acknowledged",
                     (long long)((now - c->full_since) / 1000000000ll),
                     iot_store_error(c->store), (unsigned long long)c->deferred);
            c->full_logged = now;
        }
        return;
    }
    iot_info("store: writing again after %lld s without room (%llu batches were not "
             "acknowledged; the agents send them again)",
             (long long)((now - c->full_since) / 1000000000ll), (unsigned long long)c->deferred);
    c->full = 0;
}

/* STORED acknowledgements of this group wait for its sync: the batch is a
 * duplicate of one of them too. */
static int in_group(const struct collector *c, const char *key, uint64_t epoch, uint64_t seq)
{
    for (size_t i = 0; i < c->n_acks; i++) {
        const struct ack *a = &c->acks[i];
        if (a->status == IOT_ACK_STORED && a->seq == seq && a->epoch == epoch &&
            strcmp(a->key, key) == 0)
            return 1;
    }
    return 0;
}

/* The agents' clock samples are stored like any batch and used at export;
 * the debug log shows them as they come (decoding the body only then). */
static void log_clock(const iot_batch *b)
{
    if (b->producer->kind != IOTRACE__PRODUCER_KIND__PRODUCER_AGENT ||
        !iot_log_enabled(IOT_LOG_DEBUG))
        return;
    char why[REASON_MAX];
    iot_body *body = iot_wire_body(b, why, sizeof why);
    if (!body) {
        iot_debug("agent %s clock batch: %s", b->producer->node, why);
        return;
    }
    for (size_t i = 0; i < body->n_clock; i++) {
        const Iotrace__ClockSync *s = body->clock[i];
        iot_debug("agent %s clock: offset %lld ns, rtt %llu ns, error bound %llu ns (at %lld)",
                  b->producer->node, (long long)s->offset_ns, (unsigned long long)s->rtt_ns,
                  (unsigned long long)(s->rtt_ns / 2 + (s->rtt_ns & 1)), (long long)s->local_ns);
    }
    iot_wire_free_body(body);
}

/* Not stored, for want of room: DEFERRED tells the agent at once that it
 * still holds the batch and should send it again after a pause, rather
 * than leaving it in flight until --credit-timeout (30 s) runs out, past
 * the end of a short outage, with the agent's status saying nothing. */
static void defer_batch(struct collector *c, struct message *m, const char *key,
                        const iot_batch *b)
{
    c->deferred++;
    queue_ack(c, m, IOT_ACK_DEFERRED, key, b->epoch, b->seq, "the store has no room");
}

static void accept_batch(struct collector *c, struct message *m, const iot_batch *b)
{
    char key[KEY_MAX], why[REASON_MAX];
    struct peer *p = find_peer(c, frame_data(m, 0), frame_size(m, 0));
    if (c->zap && !(p && p->bound)) {
        /* Not answered: an agent sends only after WELCOME, and keeps what
         * it sent until a session of its own node takes it. */
        c->count.malformed++;
        report(c, m, "ignored a batch on a connection without a welcomed HELLO");
        return;
    }
    const char *distrust = trust_check_batch(b, p ? p->node : "", p && p->bound, why, sizeof why);
    if (distrust) {
        reject_batch(c, m, b, distrust);
        return;
    }
    if (iot_wire_batch_key(b, key, sizeof key) < 0) {
        reject_batch(c, m, NULL, "producer node name too long");
        return;
    }
    if (iot_dedup_contains(c->dedup, key, b->epoch, b->seq) ||
        in_group(c, key, b->epoch, b->seq)) {
        queue_ack(c, m, IOT_ACK_DUPLICATE, key, b->epoch, b->seq, "");
        c->count.dup_batches++;
        c->count.dup_events += b->event_count;
        return;
    }
    if (c->full) { /* kept by the agent, sent again */
        defer_batch(c, m, key, b);
        return;
    }
    if (iot_store_append(c->store, frame_data(m, 3), frame_size(m, 3), (uint64_t)iot_now_ns()) < 0) {
        if (store_failed(c) == 0)
            defer_batch(c, m, key, b);
        return;
    }
    c->dirty = 1;
    struct ack *a = queue_ack(c, m, IOT_ACK_STORED, key, b->epoch, b->seq, "");
    a->events = b->event_count;
    a->bytes = frame_size(m, 3);
    a->kind = (unsigned)b->producer->kind < IOT_INGEST_KINDS ? (unsigned)b->producer->kind : 0;
    iot_store_end(c->store, &a->end);
    log_clock(b);
}

/* The group is durable: its batches count, and are duplicates from now on. */
static int count_stored(struct collector *c)
{
    for (size_t i = 0; i < c->n_acks; i++) {
        const struct ack *a = &c->acks[i];
        if (a->status != IOT_ACK_STORED)
            continue;
        if (iot_dedup_add(c->dedup, a->key, a->epoch, a->seq) < 0) {
            iot_err("out of memory in the duplicate table");
            c->fatal = 1;
            return -1;
        }
        c->count.batches++;
        c->count.events += a->events;
        c->bytes_stored += a->bytes;
        c->kind_batches[a->kind]++;
        c->kind_events[a->kind] += a->events;
        struct peer *p = find_peer(c, a->peer, a->peer_len);
        if (p && p->node[0])
            note_agent(c, p->node, 0, 1, a->events);
    }
    return 0;
}

/* Out of space: the STORED acknowledgements of records that no sync
 * covered are withdrawn (the store cuts those records away when it
 * recovers; the agents send the batches again).  A rotation inside the
 * group has made the records before it durable: those stand. */
#define WITHDRAWN 0xff      /* marks, never sent */
#define WITHDRAWN_COPY 0xfe

static int withdrawn(const struct collector *c, const struct ack *dup)
{
    for (size_t i = 0; i < c->n_acks; i++) {
        const struct ack *a = &c->acks[i];
        if (a->status == WITHDRAWN && a->seq == dup->seq && a->epoch == dup->epoch &&
            strcmp(a->key, dup->key) == 0)
            return 1;
    }
    return 0;
}

static void withdraw_stored(struct collector *c)
{
    struct iot_store_pos d;
    iot_store_durable(c->store, &d);
    for (size_t i = 0; i < c->n_acks; i++) {
        struct ack *a = &c->acks[i];
        if (a->status == IOT_ACK_STORED &&
            !(a->end.segment < d.segment ||
              (a->end.segment == d.segment && a->end.offset <= d.offset))) {
            a->status = WITHDRAWN;
            c->deferred++;
        }
    }
    /* The first answer for a withdrawn batch becomes DEFERRED (sent), a
     * second copy's is dropped: one is enough for the agent's one entry. */
    /* A second copy of a withdrawn batch in the same group was answered
     * DUPLICATE: that answer goes too, or the agent would let it go. */
    for (size_t i = 0; i < c->n_acks; i++)
        if (c->acks[i].status == IOT_ACK_DUPLICATE && withdrawn(c, &c->acks[i]))
            c->acks[i].status = WITHDRAWN_COPY;
    size_t n = 0;
    for (size_t i = 0; i < c->n_acks; i++) {
        if (c->acks[i].status == WITHDRAWN_COPY)
            continue;
        if (c->acks[i].status == WITHDRAWN) {
            c->acks[i].status = IOT_ACK_DEFERRED;
            snprintf(c->acks[i].reason, sizeof c->acks[i].reason, "%s", "the store has no room");
        }
        c->acks[n++] = c->acks[i];
    }
    c->n_acks = n;
}

static void handle_batch(struct collector *c, struct message *m, struct group *g)
{
    if (m->n != 4) {
        c->count.malformed++;
        report(c, m, "ignored BATCH with %d frames (expected 3)", m->n - 1);
        return;
    }
    g->batches++;
    g->bytes += frame_size(m, 3);
    char reason[REASON_MAX] = "";
    /* The envelope, its sizes and the body's checksum are checked; the body
     * itself is decoded by whoever reads the store (the live analysis at
     * once), which counts one that cannot be decoded as dropped events of
     * its producer: decoding it here too would double ingest's cost. */
    iot_batch *b = iot_wire_open(frame_data(m, 3), frame_size(m, 3), reason, sizeof reason);
    if (b)
        accept_batch(c, m, b);
    else
        reject_batch(c, m, NULL, reason);
    iot_wire_free_batch(b);
}

static void handle_message(struct collector *c, struct message *m, struct group *g)
{
    char text[40];
    if (m->n < 3 || m->extra) {
        c->count.malformed++;
        report(c, m, "ignored a message of %d frames", m->n - 1 + m->extra);
    } else if (!frame_is(m, 1, IOT_LINK_PROTO)) {
        c->count.malformed++;
        printable(text, sizeof text, frame_data(m, 1), frame_size(m, 1));
        report(c, m, "ignored a message of unknown protocol '%s'", text);
    } else if (frame_is(m, 2, IOT_LINK_BATCH)) {
        handle_batch(c, m, g);
    } else if (frame_is(m, 2, IOT_LINK_HELLO)) {
        handle_hello(c, m);
    } else if (frame_is(m, 2, IOT_LINK_PING)) {
        handle_ping(c, m);
    } else if (frame_is(m, 2, IOT_LINK_CLOCKKEY)) {
        handle_clockkey(c, m);
    } else {
        c->count.malformed++;
        printable(text, sizeof text, frame_data(m, 2), frame_size(m, 2));
        report(c, m, "ignored a message of unknown type '%s'", text);
    }
}

static void close_message(struct message *m)
{
    for (int i = 0; i < m->n; i++)
        zmq_msg_close(&m->part[i]);
    m->n = 0;
}

static int more_frames(void *sock)
{
    int more = 0;
    size_t sz = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more;
}

/* Returns 1 with a message in m, 0 if none is waiting, -1 on error.  The
 * frames of a multipart message arrive together, so only the first receive
 * can find nothing. */
static int recv_message(void *sock, struct message *m)
{
    m->n = m->extra = 0;
    zmq_msg_init(&m->part[0]);
    if (zmq_msg_recv(&m->part[0], sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m->part[0]);
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    m->n = 1;
    while (more_frames(sock)) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, 0) < 0) {
            zmq_msg_close(&part);
            close_message(m);
            return -1;
        }
        if (m->n < MAX_FRAMES) {
            zmq_msg_init(&m->part[m->n]);
            zmq_msg_move(&m->part[m->n++], &part);
        } else {
            m->extra++; /* only the count matters: the message is malformed */
        }
        zmq_msg_close(&part);
    }
    return 1;
}

static int group_full(const struct group *g)
{
    return g->batches >= GROUP_MAX_BATCHES || g->bytes >= GROUP_MAX_BYTES ||
           g->messages >= GROUP_MAX_MESSAGES;
}

/* The counters and the durable end of the store, for the live analysis and
 * HTTP: published after the ACKs, once per group commit. */
static void publish(struct collector *c, int synced)
{
    struct ingest_view *v = c->view;
    pthread_mutex_lock(&v->lock);
    struct ingest_counters *k = &v->count;
    memcpy(k->batches, c->kind_batches, sizeof k->batches);
    memcpy(k->events, c->kind_events, sizeof k->events);
    k->dup_batches = c->count.dup_batches;
    k->dup_events = c->count.dup_events;
    k->rejected = c->count.rejected;
    k->malformed = c->count.malformed;
    k->auth_refused = c->count.auth_refused;
    k->bytes_stored = c->bytes_stored;
    k->acks = c->acks_sent;
    k->syncs = c->syncs += (uint64_t)synced;
    k->deferred = c->deferred;
    if (c->full && !k->store_full)
        k->store_full_since_ns = iot_now_ns();
    k->store_full = c->full;
    if (synced) {
        iot_store_end(c->store, &v->durable);
        pthread_cond_broadcast(&v->stored);
    }
    pthread_mutex_unlock(&v->lock);
}

/* Drains what is waiting, stores it with one fdatasync, then acknowledges.
 * No ACK leaves before the sync, duplicates of a batch of this very group
 * included. */
static void commit_group(struct collector *c)
{
    struct group g = {0, 0, 0};
    struct message m;
    try_leave_full(c);
    while (!c->fatal && !group_full(&g) && recv_message(c->sock, &m) > 0) {
        g.messages++;
        handle_message(c, &m, &g);
        close_message(&m);
    }
    if (c->fatal)
        return;
    if (c->dirty && iot_store_sync(c->store) < 0 && store_failed(c) < 0)
        return;
    int synced = c->dirty;
    c->dirty = 0;
    if (c->full)
        withdraw_stored(c);
    if (count_stored(c) < 0)
        return;
    send_acks(c);
    publish(c, synced);
}

static void log_stats(struct collector *c, const char *prefix)
{
    const struct counters *k = &c->count;
    iot_info("%sbatches: %llu accepted (%llu events), %llu duplicate (%llu events), "
             "%llu rejected; %llu malformed messages",
             prefix, (unsigned long long)k->batches, (unsigned long long)k->events,
             (unsigned long long)k->dup_batches, (unsigned long long)k->dup_events,
             (unsigned long long)k->rejected, (unsigned long long)k->malformed);
    c->logged = c->count;
}

static void periodic(struct collector *c)
{
    int64_t now = iot_mono_ns();
    if (now < c->next_stats)
        return;
    c->next_stats = now + STATS_INTERVAL_NS;
    if (memcmp(&c->count, &c->logged, sizeof c->count) != 0)
        log_stats(c, "");
    iot_ratelog_flush(c->ratelog, now);
}

static int poll_timeout_ms(const struct collector *c)
{
    int64_t left = (c->next_stats - iot_mono_ns()) / 1000000;
    return left < 0 ? 0 : left > POLL_MS ? POLL_MS : (int)left;
}

/* ZeroMQ asks before admitting a CURVE client: the handshake proved that
 * the peer holds the secret key of the public key it showed, and only keys
 * listed in --curve-clients get in.  Answered in the ingest loop: a request
 * comes once per connection. */
static void answer_zap(struct collector *c)
{
    zmq_msg_t f[7];
    int n = 0;
    for (int more = 1; more && n < 7; n++) {
        zmq_msg_init(&f[n]);
        if (zmq_msg_recv(&f[n], c->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[n]);
            for (int i = 0; i < n; i++)
                zmq_msg_close(&f[i]);
            return;
        }
        more = zmq_msg_more(&f[n]);
    }
    int allowed = 0;
    char key[IOT_CURVE_Z85 + 1] = "?", peer[64] = "?";
    if (n == 7 && zmq_msg_size(&f[6]) == 32 && zmq_msg_size(&f[5]) == 5 &&
        !memcmp(zmq_msg_data(&f[5]), "CURVE", 5)) {
        zmq_z85_encode(key, zmq_msg_data(&f[6]), 32);
        snprintf(peer, sizeof peer, "%.*s", (int)zmq_msg_size(&f[3]),
                 (const char *)zmq_msg_data(&f[3]));
        allowed = iot_curve_allowed(opt_curve_clients, key);
        if (allowed < 0)
            iot_err("cannot read the allowed agents' keys in %s: %s", opt_curve_clients,
                    strerror(errno));
    }
    const char *status = allowed == 1 ? "200" : "400";
    const char *text = allowed == 1 ? "OK" : "key not allowed";
    const void *data[6] = {"1.0", zmq_msg_data(&f[1]), status, text, allowed == 1 ? key : "",
                           ""};
    size_t len[6] = {3, n > 1 ? zmq_msg_size(&f[1]) : 0, 3, strlen(text),
                     allowed == 1 ? strlen(key) : 0, 0};
    send_frames(c->zap, data, len, 6);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
    if (allowed != 1) {
        char text_key[160];
        snprintf(text_key, sizeof text_key,
                 "refused a connection: its CURVE public key %s is not in --curve-clients", key);
        iot_ratelog_note(c->ratelog, peer, text_key, iot_mono_ns());
    }
}

/* Every failed handshake (a key not admitted, a peer without CURVE or with
 * the wrong collector key, garbage) is counted; the ZAP handler logs the
 * refused keys. */
static void read_monitor(struct collector *c)
{
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return;
    }
    uint16_t event = 0;
    if (zmq_msg_size(&ev) >= 2)
        memcpy(&event, zmq_msg_data(&ev), 2);
    while (zmq_msg_more(&ev) && zmq_msg_recv(&ev, c->mon, 0) >= 0)
        ;
    zmq_msg_close(&ev);
    if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
        c->count.auth_refused++;
}

/* With CURVE the collector is a CURVE server, and ZeroMQ passes each new
 * client to the ZAP handler, which must be bound before the first one. */
static int set_up_curve(struct collector *c)
{
    char err[512];
    if (iot_curve_load(opt_curve_key, 1, &c->keys, err, sizeof err) < 0) {
        iot_err("%s", err);
        return -1;
    }
    if (iot_curve_allowed(opt_curve_clients, "") < 0) {
        iot_err("cannot read --curve-clients %s: %s", opt_curve_clients, strerror(errno));
        return -1;
    }
    c->zap = zmq_socket(c->zctx, ZMQ_REP);
    int one = 1;
    if (!c->zap || zmq_bind(c->zap, "inproc://zeromq.zap.01") < 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SERVER, &one, sizeof one) < 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, c->keys.secret_key, IOT_CURVE_Z85 + 1) < 0 ||
        zmq_setsockopt(c->sock, ZMQ_ZAP_DOMAIN, "iotrace", 7) < 0) {
        iot_err("cannot set up CURVE: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    const char *mon_ep = "inproc://iotrace-collector-monitor";
    if (zmq_socket_monitor(c->sock, mon_ep,
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) < 0 ||
        !(c->mon = zmq_socket(c->zctx, ZMQ_PAIR)) || zmq_connect(c->mon, mon_ep) < 0) {
        iot_err("cannot watch the agents' handshakes: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    iot_info("CURVE on: agents authenticate with a key listed in %s; collector public key %s",
             opt_curve_clients, c->keys.public_key);
    return 0;
}

static int serve(struct collector *c)
{
    while (!stop_requested && !c->fatal) {
        zmq_pollitem_t items[3] = {{c->sock, 0, ZMQ_POLLIN, 0},
                                   {c->zap, 0, ZMQ_POLLIN, 0},
                                   {c->mon, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(items, c->zap ? 3 : 1, poll_timeout_ms(c));
        if (rc < 0 && errno != EINTR) {
            iot_err("zmq_poll: %s", zmq_strerror(errno));
            return -1;
        }
        if (rc > 0 && c->zap && (items[1].revents & ZMQ_POLLIN))
            answer_zap(c);
        if (rc > 0 && c->zap && (items[2].revents & ZMQ_POLLIN)) {
            read_monitor(c);
            publish(c, 0);
        }
        if (rc > 0 && (items[0].revents & ZMQ_POLLIN))
            commit_group(c);
        periodic(c);
    }
    return c->fatal ? -1 : 0;
}

struct rebuild {
    struct iot_dedup *dedup;
    uint64_t batches, unreadable;
};

static int rebuild_one(void *ctx, const uint8_t *batch, size_t len, uint64_t recv_ns)
{
    (void)recv_ns;
    struct rebuild *r = ctx;
    char key[KEY_MAX], why[REASON_MAX];
    iot_batch *b = iot_wire_open_stored(batch, len, why, sizeof why);
    if (!b || iot_wire_batch_key(b, key, sizeof key) < 0) {
        r->unreadable++;
        iot_wire_free_batch(b);
        return 0;
    }
    int rc = iot_dedup_add(r->dedup, key, b->epoch, b->seq);
    iot_wire_free_batch(b);
    r->batches++;
    return rc < 0 ? -1 : 0;
}

/* Restarting on the same store must still drop what was stored before. */
static int rebuild_dedup(struct collector *c)
{
    struct rebuild r = {c->dedup, 0, 0};
    char err[512] = "out of memory in the duplicate table";
    if (iot_store_scan(opt_store, rebuild_one, &r, err, sizeof err) != 0) {
        iot_err("cannot read the store: %s", err);
        return -1;
    }
    if (r.unreadable)
        iot_warn("store: %llu stored batches have an unreadable envelope; they cannot be "
                 "recognised as duplicates", (unsigned long long)r.unreadable);
    iot_info("store %s holds %llu batches from %zu producer streams", opt_store,
             (unsigned long long)r.batches, iot_dedup_streams(c->dedup));
    pthread_mutex_lock(&c->view->lock);
    c->view->records_at_start = r.batches + r.unreadable;
    pthread_mutex_unlock(&c->view->lock);
    return 0;
}

/* The UDP clock beside a tcp:// endpoint, on its address: without it
 * (another transport, the port taken) the agents measure over ZeroMQ, as
 * before, and the collector says so. */
static void start_clock(struct collector *c)
{
    char host[256];
    unsigned long tcp_port = 0;
    if (opt_clock_port == 0)
        return;
    if (iot_clockudp_tcp_endpoint(opt_listen, host, sizeof host, &tcp_port) < 0) {
        iot_info("clock: no UDP clock beside %s (not tcp://HOST:PORT): the agents measure over "
                 "ZeroMQ", opt_listen);
        return;
    }
    unsigned port = opt_clock_port > 0 ? (unsigned)opt_clock_port : (unsigned)(tcp_port + 1);
    char why[256];
    c->clock = clockserve_start(host, port, why, sizeof why);
    if (!c->clock)
        iot_warn("clock: %s; the agents measure over ZeroMQ (wider error bounds)", why);
    else
        iot_info("clock: answering the agents' clock exchanges on UDP port %u",
                 clockserve_port(c->clock));
}

static int open_socket(struct collector *c)
{
    c->zctx = zmq_ctx_new();
    c->sock = c->zctx ? zmq_socket(c->zctx, ZMQ_ROUTER) : NULL;
    if (!c->sock) {
        iot_err("cannot create the ZeroMQ socket: %s", zmq_strerror(errno));
        return -1;
    }
    if (opt_curve_key && set_up_curve(c) < 0)
        return -1;
    /* Frames larger than any valid batch are refused by ZeroMQ itself, which
     * drops the connection before the bytes reach memory. */
    int64_t max = (int64_t)IOT_WIRE_MAX_BATCH + 65536;
    int linger = LINGER_MS;
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(c->sock, opt_listen) < 0) {
        iot_err("cannot listen on %s: %s", opt_listen, zmq_strerror(errno));
        return -1;
    }
    start_clock(c);
    return 0;
}

/* The dashboard's files: where the install put them relative to this
 * binary (so that a moved tree still serves its own), else where the
 * configured prefix says, else (a build that was not installed) the source
 * tree's. */
static const char *web_root(void)
{
    static char beside[4096];
    struct stat st;
    if (opt_web_root)
        return opt_web_root;
    ssize_t n = readlink("/proc/self/exe", beside, sizeof beside - 1);
    if (n > 0) {
        beside[n] = '\0';
        char *slash = strrchr(beside, '/');
        size_t used = slash ? (size_t)(slash - beside) : 0;
        int m = snprintf(beside + used, sizeof beside - used, "/" IOTRACE_WEB_REL);
        char index[4200];
        if (slash && m > 0 && (size_t)m < sizeof beside - used &&
            snprintf(index, sizeof index, "%s/index.html", beside) < (int)sizeof index &&
            stat(index, &st) == 0)
            return beside;
    }
    return stat(IOTRACE_WEB_DIR "/index.html", &st) == 0 ? IOTRACE_WEB_DIR
                                                          : IOTRACE_SOURCE_WEB_DIR;
}

/* iotrace-export beside this program, unless told otherwise. */
static const char *export_tool(char *buf, size_t len)
{
    if (opt_export_tool)
        return opt_export_tool;
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0)
        return "iotrace-export";
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    snprintf(slash ? slash + 1 : buf, len - (size_t)(slash ? slash + 1 - buf : 0),
             "iotrace-export");
    return buf;
}

/* The HTTP address bound and its users and TLS files read; served once the
 * live analysis runs (start_live). */
static int open_http(struct collector *c)
{
    char err[512];
    static char tool[4096];
    if (strcmp(opt_http, "off") == 0)
        return 0;
    struct http_config hc = {.listen = opt_http, .web_root = web_root(),
                             .chart_js = opt_chart_js, .store = opt_store,
                             .export_tool = export_tool(tool, sizeof tool),
                             .users_file = opt_http_users, .tls_cert = opt_http_cert,
                             .tls_key = opt_http_key, .max_clients = (int)opt_http_clients,
                             .show_paths = opt_http_show_paths,
                             .request_timeout_s = (int)opt_http_request_timeout_s,
                             .max_downloads = (int)opt_http_downloads,
                             .max_downloads_per_client = (int)opt_http_downloads_per_client,
                             .download_memory = opt_http_download_memory};
    if (!(c->http = http_open(&hc, err, sizeof err))) {
        iot_err("%s", err);
        return -1;
    }
    return 0;
}

static int start_live(struct collector *c)
{
    char err[512];
    if (strcmp(opt_analysis, "off") == 0)
        return 0;
    struct live_config lc = {.store = opt_store,
                             .lateness_ns = (int64_t)opt_lateness_ms * 1000000,
                             .grace_ns = (int64_t)opt_grace_ms * 1000000,
                             .job_idle_ns = (int64_t)opt_job_idle_ms * 1000000,
                             .producer_idle_ns = (int64_t)opt_producer_idle_ms * 1000000,
                             .keep_ns = (int64_t)opt_keep_s * 1000000000,
                             .nice = (int)opt_analysis_nice,
                             .yield_ns = opt_analysis_yield_s * 1000000000ll};
    if (!(c->live = live_start(&lc, c->view, err, sizeof err))) {
        iot_err("%s", err);
        return -1;
    }
    if (!c->http)
        return 0;
    if (http_serve(c->http, c->live, err, sizeof err) < 0) {
        iot_err("%s", err);
        return -1;
    }
    iot_info("dashboard on http%s://%s/ (API /api/v1/, metrics /metrics)",
             opt_http_cert ? "s" : "", opt_http);
    return 0;
}

static int start(struct collector *c)
{
    char err[512];
    c->dedup = iot_dedup_new();
    c->ratelog = iot_ratelog_new();
    c->peers = calloc(MAX_PEERS, sizeof *c->peers);
    c->acks = calloc(GROUP_MAX_MESSAGES, sizeof *c->acks);
    if (!c->dedup || !c->ratelog || !c->peers || !c->acks) {
        iot_err("out of memory");
        return -1;
    }
    /* Keys, the listening address and the HTTP address first: a collector
     * that cannot start must not leave a new store behind.  Agents that
     * connect meanwhile wait for the serve loop. */
    if (open_socket(c) < 0 || open_http(c) < 0)
        return -1;
    c->store = iot_store_open(opt_store, 1, err, sizeof err);
    if (!c->store) {
        iot_err("%s", err);
        return -1;
    }
    iot_store_set_segment_size(c->store, opt_segment_size);
    if (rebuild_dedup(c) < 0)
        return -1;
    /* What the store holds already is analysed too: its jobs are listed. */
    iot_store_end(c->store, &c->view->durable);
    if (start_live(c) < 0)
        return -1;
    c->next_stats = iot_mono_ns() + STATS_INTERVAL_NS;
    iot_info("iotrace-collector %s listening on %s, store %s (segment %u, credit %ld)",
             IOTRACE_VERSION, opt_listen, opt_store, iot_store_segment(c->store), opt_credit);
    /* Loopback is no boundary between the users of one machine: say what
     * any of them can do here (docs/transport.md, "Without CURVE"). */
    if (!opt_curve_key)
        iot_warn("agents are not authenticated (no --curve-key): any local user can connect to "
                 "%s as the agent of any node, store batches as any node and any user of it "
                 "(root included) and give clock samples that move a node's events; give "
                 "--curve-key and --curve-clients to admit only the agents' keys, each for its "
                 "own node",
                 opt_listen);
    return 0;
}

static int finish(struct collector *c, int rc)
{
    clockserve_stop(c->clock);
    http_stop(c->http);
    live_stop(c->live);
    if (c->store && iot_store_close(c->store) < 0)
        rc = -1;
    if (c->mon) {
        zmq_socket_monitor(c->sock, NULL, 0);
        zmq_close(c->mon);
    }
    if (c->sock)
        zmq_close(c->sock);
    if (c->zap)
        zmq_close(c->zap);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    if (c->next_stats) {
        iot_ratelog_flush(c->ratelog, iot_mono_ns());
        log_stats(c, rc == 0 ? "stopped; " : "stopped on error; ");
    }
    iot_dedup_free(c->dedup);
    iot_ratelog_free(c->ratelog);
    free(c->peers);
    free(c->acks);
    return rc == 0 ? IOT_EXIT_OK : IOT_EXIT_FAILURE;
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", spec.program);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '%s --help'.\n", spec.program);
    exit(IOT_EXIT_USAGE);
}

static void check_options(int argc, char **argv, int first)
{
    char num[32];
    if (first < argc)
        usage_error("unexpected argument '%s'", argv[first]);
    if (opt_keygen)
        iot_curve_keygen_main(spec.program, opt_keygen);
    if (opt_curve_key && !opt_curve_clients)
        usage_error("%s--curve-key needs --curve-clients DIR: without it any key would be "
                    "admitted", "");
    if (opt_curve_clients && !opt_curve_key)
        usage_error("%s--curve-clients needs --curve-key FILE", "");
    if (!opt_curve_key && !opt_insecure && !iot_endpoint_is_local(opt_listen))
        usage_error("--listen %s is beyond loopback: it needs --curve-key and --curve-clients "
                    "(or --insecure)", opt_listen);
    if (!opt_store || !opt_store[0])
        usage_error("%s--store DIR is required", "");
    snprintf(num, sizeof num, "%ld", opt_credit);
    if (opt_credit < 1 || opt_credit > MAX_CREDIT)
        usage_error("--credit must be between 1 and 1000000, got %s", num);
    if (opt_segment_size < IOT_STORE_MIN_SEGMENT_SIZE)
        usage_error("%s--segment-size must be at least 4K", "");
    if (iot_log_parse_level(opt_log_level) < 0)
        usage_error("unknown --log-level '%s' (error, warn, info, debug)", opt_log_level);
    if (strcmp(opt_http, "off") != 0) {
        if (!http_is_loopback(opt_http) && !opt_http_users)
            usage_error("--http %s is beyond loopback: it needs --http-users FILE (and "
                        "should have --http-cert)", opt_http);
        if (!opt_http_cert != !opt_http_key)
            usage_error("%s--http-cert and --http-key go together", "");
        if (strchr(opt_http, ':') == NULL)
            usage_error("--http wants ADDR:PORT or off, got '%s'", opt_http);
    }
    if (strcmp(opt_analysis, "on") != 0 && strcmp(opt_analysis, "off") != 0)
        usage_error("--analysis is on or off, got '%s'", opt_analysis);
    if (strcmp(opt_analysis, "off") == 0 && strcmp(opt_http, "off") != 0)
        usage_error("%s--analysis off needs --http off: the HTTP server shows the analysis", "");
    if (opt_http_clients < 1 || opt_http_clients > 1000)
        usage_error("%s--http-clients must be between 1 and 1000", "");
    if (opt_http_request_timeout_s < 1 || opt_http_request_timeout_s > 3600)
        usage_error("%s--http-request-timeout must be between 1 and 3600", "");
    if (opt_http_downloads < 1 || opt_http_downloads > 1000 || opt_http_downloads_per_client < 1 ||
        opt_http_downloads_per_client > opt_http_downloads)
        usage_error("%s--http-downloads must be between 1 and 1000, "
                    "--http-downloads-per-client between 1 and --http-downloads", "");
    if (opt_http_download_memory && opt_http_download_memory < (16u << 20))
        usage_error("%s--http-download-memory must be 0 or at least 16M", "");
    if (opt_lateness_ms < 0 || opt_grace_ms < 0)
        usage_error("%s--lateness and --grace must not be negative", "");
    if (opt_analysis_nice < 0 || opt_analysis_nice > 19)
        usage_error("%s--analysis-nice must be between 0 and 19", "");
    if (opt_analysis_yield_s < 0 || opt_analysis_yield_s > 86400)
        usage_error("%s--analysis-yield must be between 0 and 86400 seconds", "");
    if (opt_producer_idle_ms < 100 || opt_producer_idle_ms > 3600000)
        usage_error("%s--producer-idle must be between 100 and 3600000 ms", "");
    if (opt_job_idle_ms < 100)
        usage_error("%s--job-idle must be at least 100 ms", "");
    if (opt_keep_s < 0)
        usage_error("%s--keep must not be negative", "");
}

int main(int argc, char **argv)
{
    iot_log_init(spec.program, IOT_LOG_INFO);
    check_options(argc, argv, iot_opts_parse(&spec, argc, argv));
    iot_log_set_level((enum iot_log_level)iot_log_parse_level(opt_log_level));
    install_signals();
    struct collector c;
    memset(&c, 0, sizeof c);
    static struct ingest_view view;
    ingest_view_init(&view);
    c.view = &view;
    int rc = start(&c);
    if (rc == 0)
        rc = serve(&c);
    return finish(&c, rc);
}
