/* iotrace-agent: one per node.  Takes batches from local producers over
 * ZeroMQ ipc, keeps each one until the collector has acknowledged it, and
 * forwards them in arrival order within the collector's credit.  See
 * docs/agent.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#include "clocksync.h"
#include "curve.h"
#include "dropbox.h"
#include "intake.h"
#include "journal.h"
#include "log.h"
#include "opts.h"
#include "spool.h"
#include "stats.h"
#include "timeutil.h"
#include "uplink.h"

/* Messages taken from producers per loop turn, so that acknowledgements and
 * sends are not starved while producers flood the socket. */
#define INTAKE_BURST 256
/* While producers keep the socket busy, the drop box is still looked at
 * this long after its scan was due. */
#define DROPBOX_MAX_WAIT_NS 4000000000LL
#define LOOP_TICK_MS 100

struct config {
    char *collector;
    char *listen;
    char *node;
    uint64_t max_pending;
    uint64_t max_pending_user;
    long max_conns, max_conns_user;
    char *credit_timeout;
    char *drain_timeout;
    char *stats_interval;
    char *clock_interval;
    char *log_level;
    char *state_dir;
    char *spool_sync;
    char *socket_mode;
    char *dropbox;
    char *curve_key;
    char *collector_key;
    int insecure;
    char *keygen;
};

struct agent {
    struct config cfg;
    int64_t credit_timeout_ns, drain_timeout_ns, stats_interval_ns, clock_interval_ns;
    int64_t spool_sync_ns;
    unsigned socket_mode;
    char spool_dir[4096];
    struct journal journal;
    int journal_open;
    struct iot_curve_keys curve_own, curve_collector;
    char hostname[256];
    void *zctx;
    int sigfd;
    struct spool spool;
    struct intake intake;
    struct dropbox dropbox;
    struct uplink uplink;
    struct clocksync clock;
    struct agent_stats stats;
    int intake_open;
    int stopping;
    int64_t drain_deadline;
    int full_logged, risk_logged;
};

/* "5s", "500ms", "2m", "1h", or a bare number of seconds such as "0.5". */
static int parse_duration(const char *s, int64_t *ns)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double scale = 1e9;
    if (!strcmp(end, "ms"))
        scale = 1e6;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        scale = 60e9;
    else if (!strcmp(end, "h"))
        scale = 3600e9;
    else if (*end && strcmp(end, "s"))
        return -1;
    if (v * scale > 9e18)
        return -1;
    *ns = (int64_t)(v * scale);
    return 0;
}

static const char *short_hostname(char *buf, size_t len)
{
    if (gethostname(buf, len) < 0 || !buf[0])
        snprintf(buf, len, "localhost");
    buf[len - 1] = '\0';
    char *dot = strchr(buf, '.');
    if (dot && dot != buf)
        *dot = '\0';
    return buf;
}

static void usage_error(const char *fmt, const char *value)
{
    fprintf(stderr, "iotrace-agent: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\nTry 'iotrace-agent --help'.\n");
    exit(IOT_EXIT_USAGE);
}

static const struct iot_man_section agent_man[] = {
    {"ENVIRONMENT",
     "STATE_DIRECTORY\n"
     "The default of --state-dir (systemd sets it from the unit's StateDirectory=); the "
     "first of a colon-separated list."},
    {"FILES",
     "/etc/iotrace/agent.conf\n"
     "The configuration the unit reads (iotrace-agent.service).\n"
     "\n"
     "/run/iotrace/agent.sock\n"
     "The service's socket, the default of --listen, and where producers look unless "
     "IOTRACE_AGENT says otherwise.\n"
     "\n"
     "STATE-DIR/spool/\n"
     "The spool: batches not yet acknowledged, sent again by the next start.\n"
     "\n"
     "/etc/iotrace/keys/\n"
     "CURVE key files (--keygen, --curve-key, --collector-key)."},
    {"EXIT STATUS",
     "0 after a clean shutdown (SIGTERM or SIGINT; batches still unacknowledged stay in the "
     "spool, and the log says how many), --help, --version or --man; 1 if the agent cannot "
     "start (socket in use, spool directory locked or unreadable, key file refused); 2 on a "
     "usage error."},
    {"SEE ALSO",
     "iotrace-collector(8), iotrace-export(1), libiotrace-client(7); docs/agent.md, "
     "docs/transport.md and docs/install.md in the documentation directory."},
};

static void parse_options(struct agent *a, int argc, char **argv)
{
    struct config *c = &a->cfg;
    *c = (struct config){
        .collector = "tcp://127.0.0.1:5555",
        .listen = IOT_AGENT_DEFAULT_ENDPOINT,
        .node = (char *)short_hostname(a->hostname, sizeof a->hostname),
        .max_pending = 256ull << 20,
        .max_pending_user = UINT64_MAX,
        .max_conns = 4096,
        .max_conns_user = 1024,
        .credit_timeout = "30s",
        .drain_timeout = "5s",
        .stats_interval = "10s",
        .clock_interval = "10s",
        .log_level = "info",
        .state_dir = getenv("STATE_DIRECTORY") ? getenv("STATE_DIRECTORY") : "",
        .spool_sync = "1s",
        .socket_mode = "0666",
        .dropbox = "",
    };
    const struct iot_opt opts[] = {
        {"collector", 'c', IOT_OPT_STRING, &c->collector, "tcp://HOST:PORT",
         "collector to forward to (default tcp://127.0.0.1:5555)"},
        {"listen", 'l', IOT_OPT_STRING, &c->listen, "ipc://PATH",
         "endpoint local producers push batches to; the directory of an ipc path is "
         "created and a stale socket file replaced; producers send only to an agent run by "
         "root, by their own user, or by the service's account, the owner of /run/iotrace "
         "(default ipc:///run/iotrace/agent.sock, where the "
         "client library looks unless IOTRACE_AGENT says)"},
        {"socket-mode", 0, IOT_OPT_STRING, &c->socket_mode, "MODE",
         "permissions of an ipc socket file, octal; the default lets the processes of every "
         "local user connect, and each batch is stamped with the user, group and process "
         "that sent it, as the kernel reports them (default 0666)"},
        {"dropbox", 0, IOT_OPT_STRING, &c->dropbox, "DIR|none",
         "directory (made mode 1733) where a process that cannot reach the agent as it exits "
         "leaves its last batches, so that they and the counts of what it lost still reach "
         "the store; each file is taken as a batch of the user owning it (default: the ipc "
         "socket's path with .dropbox added; none for other endpoints)"},
        {"node", 'n', IOT_OPT_STRING, &c->node, "NAME",
         "node name sent to the collector (default: short host name)"},
        {"max-pending", 0, IOT_OPT_SIZE, &c->max_pending, "SIZE",
         "bytes of unacknowledged batches to hold; beyond it the agent keeps reading and counts "
         "the events of the batches it takes, per producer, stored as drop records "
         "(agent_full) in a reserve of an eighth more; it stops reading from producers, which "
         "then drop and count, only when it has no room to count either (default 256M)"},
        {"max-pending-per-user", 0, IOT_OPT_SIZE, &c->max_pending_user, "SIZE",
         "bytes of unacknowledged batches one local user may hold; beyond it the agent "
         "counts that user's batches' events instead (over_quota, stored as drop records) "
         "while its share of the counting lasts, then drops them (their events show as "
         "lost), and keeps reading for the others, so that on a node shared by several users none can fill "
         "the store for the others; a SIZE of --max-pending or more sets no separate limit "
         "(back-pressure instead, for a node given to one user) (default: half of "
         "--max-pending)"},
        {"max-connections", 0, IOT_OPT_INT, &c->max_conns, "N",
         "producer connections an ipc socket path takes at a time; beyond it a connection is "
         "closed at once and its producer counts what it could not hand over; lowered to what "
         "the descriptor limit (RLIMIT_NOFILE, raised to its hard limit at start) leaves "
         "(default 4096)"},
        {"max-connections-per-user", 0, IOT_OPT_INT, &c->max_conns_user, "N",
         "producer connections one local user may hold at a time, at most a quarter of "
         "--max-connections, so that no user can take them all from the others (default "
         "1024)"},
        {"credit-timeout", 0, IOT_OPT_STRING, &c->credit_timeout, "DURATION",
         "reconnect and resend if the collector sends no WELCOME or acknowledgement for "
         "this long while batches are in flight (default 30s)"},
        {"drain-timeout", 0, IOT_OPT_STRING, &c->drain_timeout, "DURATION",
         "on SIGTERM/SIGINT, time allowed to get pending batches acknowledged (default 5s)"},
        {"stats-interval", 0, IOT_OPT_STRING, &c->stats_interval, "DURATION",
         "log the counters this often when they changed (default 10s)"},
        {"clock-interval", 0, IOT_OPT_STRING, &c->clock_interval, "DURATION",
         "measure this node's clock against the collector's this often, and right after "
         "every (re)connect: a burst of 8 exchanges, the one with the smallest round trip "
         "kept and sent as a clock sample; 0 turns it off (default 10s)"},
        {"state-dir", 0, IOT_OPT_STRING, &c->state_dir, "DIR",
         "keep every batch not yet acknowledged in DIR/spool as well, so that a restarted "
         "agent sends what a killed or crashed one held; 'none': memory only (default "
         "$STATE_DIRECTORY, set by systemd's StateDirectory=; memory only, with a warning, "
         "if that is unset)"},
        {"spool-sync", 0, IOT_OPT_STRING, &c->spool_sync, "always|DURATION|never",
         "when spooled batches reach the disk itself: after every batch, at most DURATION "
         "after they were written, or when the kernel decides; they survive the agent's "
         "death in any case, a crash of the node only once synced (default 1s)"},
        {"curve-key", 0, IOT_OPT_STRING, &c->curve_key, "FILE",
         "authenticate to the collector and encrypt the connection with CURVE, with this "
         "key pair (written by --keygen; its .pub goes into the collector's --curve-clients); "
         "needs --collector-key"},
        {"collector-key", 0, IOT_OPT_STRING, &c->collector_key, "FILE",
         "the collector's public key (its --keygen's .pub file)"},
        {"insecure", 0, IOT_OPT_FLAG, &c->insecure, NULL,
         "allow a --collector beyond loopback without CURVE: batches travel unauthenticated "
         "and in clear"},
        {"keygen", 0, IOT_OPT_STRING, &c->keygen, "PATH",
         "write a new CURVE key pair to PATH (mode 0600) and its public key to PATH.pub, then "
         "exit"},
        {"log-level", 0, IOT_OPT_STRING, &c->log_level, "LEVEL",
         "error, warn, info or debug (default info)"},
    };
    const struct iot_opts_spec spec = {
        .program = "iotrace-agent",
        .synopsis = "[--collector tcp://HOST:PORT] [--listen ipc://PATH] [--node NAME] [options]",
        .description =
            "Node agent of iotrace.  Receives trace batches from the processes of this node, "
            "keeps every batch until the collector has stored it, and forwards them in order "
            "within the collector's credit, resending after a reconnect.  It also measures "
            "the node's clock against the collector's and sends the results, so that the "
            "collector can align the nodes' timelines.  DURATION is a "
            "number with an optional unit: 500ms, 5s, 2m, 1h (seconds if none).  Logs go to "
            "stderr.  Exit status: 0 after a clean shutdown (even if batches were left "
            "unacknowledged; the log says how many), 1 if the agent cannot start, 2 on a "
            "usage error.",
        .opts = opts,
        .n_opts = (int)(sizeof opts / sizeof opts[0]),
        .allow_config = 1,
        .man_section = 8,
        .summary = "iotrace node agent: forwards trace batches from this node to the collector",
        .man = agent_man,
        .n_man = (int)(sizeof agent_man / sizeof agent_man[0]),
    };
    int first = iot_opts_parse(&spec, argc, argv);
    if (first < argc)
        usage_error("unexpected argument '%s'", argv[first]);
    if (c->keygen)
        iot_curve_keygen_main("iotrace-agent", c->keygen);
    if (!c->curve_key != !c->collector_key)
        usage_error("%s--curve-key and --collector-key go together", "");
    if (!c->curve_key && !c->insecure && !iot_endpoint_is_local(c->collector))
        usage_error("--collector %s is beyond loopback: it needs --curve-key and "
                    "--collector-key (or --insecure)",
                    c->collector);
    if (parse_duration(c->credit_timeout, &a->credit_timeout_ns) < 0 ||
        a->credit_timeout_ns == 0)
        usage_error("--credit-timeout expects a duration such as 30s, got '%s'",
                    c->credit_timeout);
    if (parse_duration(c->drain_timeout, &a->drain_timeout_ns) < 0)
        usage_error("--drain-timeout expects a duration such as 5s, got '%s'",
                    c->drain_timeout);
    if (parse_duration(c->stats_interval, &a->stats_interval_ns) < 0 ||
        a->stats_interval_ns == 0)
        usage_error("--stats-interval expects a duration such as 10s, got '%s'",
                    c->stats_interval);
    if (parse_duration(c->clock_interval, &a->clock_interval_ns) < 0)
        usage_error("--clock-interval expects a duration such as 10s (0: off), got '%s'",
                    c->clock_interval);
    int level = iot_log_parse_level(c->log_level);
    if (level < 0)
        usage_error("--log-level expects error, warn, info or debug, got '%s'", c->log_level);
    iot_log_set_level((enum iot_log_level)level);
    if (!c->node[0])
        usage_error("--node must not be empty%s", "");
    if (c->max_pending == 0)
        usage_error("--max-pending must be larger than 0%s", "");
    /* On by default: a node is shared by every local user, and without a
     * share of its own one user's flood took all of the store, so that
     * another user's batches were all counted as agent_full instead of
     * stored.  Half: the rest of the store stays for the others, yet one
     * user alone still has room for bursts. */
    if (c->max_pending_user == UINT64_MAX)
        c->max_pending_user = c->max_pending / 2 ? c->max_pending / 2 : 1;
    if (c->max_pending_user == 0)
        usage_error("--max-pending-per-user must be larger than 0%s", "");
    if (c->max_conns < 1 || c->max_conns_user < 1 || c->max_conns > (1l << 20) ||
        c->max_conns_user > (1l << 20))
        usage_error("--max-connections and --max-connections-per-user must be 1 to 1048576%s",
                    "");
    char *end;
    unsigned long mode = strtoul(c->socket_mode, &end, 8);
    if (!c->socket_mode[0] || *end || mode > 0777)
        usage_error("--socket-mode expects an octal mode such as 0660, got '%s'", c->socket_mode);
    a->socket_mode = (unsigned)mode;
    if (!strcmp(c->spool_sync, "always"))
        a->spool_sync_ns = JOURNAL_SYNC_ALWAYS;
    else if (!strcmp(c->spool_sync, "never"))
        a->spool_sync_ns = JOURNAL_SYNC_NEVER;
    else if (parse_duration(c->spool_sync, &a->spool_sync_ns) < 0 || a->spool_sync_ns == 0)
        usage_error("--spool-sync expects always, never or a duration such as 1s, got '%s'",
                    c->spool_sync);
    /* STATE_DIRECTORY may list several directories; the first is ours. */
    size_t n = strcspn(c->state_dir, ":");
    if (n && strcmp(c->state_dir, "none") &&
        snprintf(a->spool_dir, sizeof a->spool_dir, "%.*s/spool", (int)n, c->state_dir) >=
            (int)sizeof a->spool_dir)
        usage_error("--state-dir is too long: '%s'", c->state_dir);
}

/* Signals arrive as readable events in the poll set, never interrupting the
 * loop half-way; blocking them before ZeroMQ starts its threads keeps them
 * from being delivered there. */
static int open_signalfd(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static uint64_t new_session_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id)
        id = (uint64_t)iot_now_ns() ^ ((uint64_t)getpid() << 32);
    return id;
}

/* Descriptors the agent needs besides its producers' connections:
 * ZeroMQ's (context, uplink), the spool's, the drop box's scan, the log. */
#define FD_RESERVE 64

/* The own listener's limits (intake.h).  Connections need a descriptor
 * each: the soft RLIMIT_NOFILE is raised to the hard one, and the limit
 * lowered to what that leaves, so that the agent refuses connections
 * rather than run out (libzmq aborted there).  Messages being received
 * may take a quarter of --max-pending (at least 16 MiB), one user a
 * quarter of that (at least two of the largest batches). */
static void set_connection_limits(struct agent *a)
{
    struct ipcl *l = &a->intake.ipc;
    if (!a->intake.own)
        return;
    struct rlimit rl;
    uint64_t fds = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t want = rl.rlim_max;
            if (want == RLIM_INFINITY || want > (1u << 20))
                want = 1u << 20;
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        fds = rl.rlim_cur == RLIM_INFINITY ? (1u << 20) : rl.rlim_cur;
    }
    uint64_t conns = (uint64_t)a->cfg.max_conns;
    if (conns + FD_RESERVE > fds) {
        conns = fds > 2 * FD_RESERVE ? fds - FD_RESERVE : fds / 2;
        iot_warn("--max-connections %ld lowered to %llu: the descriptor limit is %llu",
                 a->cfg.max_conns, (unsigned long long)conns,
                 (unsigned long long)fds);
    }
    l->max_conns = (unsigned)conns;
    /* At most a quarter of them each: one user cannot take them all. */
    uint64_t per_user = (uint64_t)a->cfg.max_conns_user;
    if (per_user > conns / 4)
        per_user = conns / 4 ? conns / 4 : 1;
    l->max_conns_user = (unsigned)per_user;
    size_t total = a->cfg.max_pending / 4 > (16u << 20) ? a->cfg.max_pending / 4 : (16u << 20);
    size_t user = total / 4 > 2 * l->max_msg ? total / 4 : 2 * l->max_msg;
    l->max_bytes = total;
    l->max_bytes_user = user < total ? user : total;
}

static int start(struct agent *a)
{
    a->sigfd = open_signalfd();
    if (a->sigfd < 0) {
        iot_err("cannot set up signal handling: %s", strerror(errno));
        return -1;
    }
    a->zctx = zmq_ctx_new();
    if (!a->zctx || spool_init(&a->spool, a->cfg.max_pending) < 0) {
        iot_err("out of memory at start");
        return -1;
    }
    /* Batches left by the last run go first, ahead of anything new from
     * the same producers. */
    if (a->spool_dir[0]) {
        a->journal_open = 1;
        if (journal_open(&a->journal, a->spool_dir, a->spool_sync_ns, a->cfg.max_pending,
                         &a->spool) < 0)
            return -1;
    } else if (strcmp(a->cfg.state_dir, "none")) {
        iot_warn("no --state-dir: batches not yet acknowledged are held in memory only and "
                 "lost if the agent is killed");
    }
    char box[4096];
    if (!a->cfg.dropbox[0])
        dropbox_default_path(a->cfg.listen, box, sizeof box);
    else
        snprintf(box, sizeof box, "%s", strcmp(a->cfg.dropbox, "none") ? a->cfg.dropbox : "");
    /* Made before the socket is bound: a process that finds the socket may
     * count on the drop box beside it, and so may whoever takes the socket's
     * appearance for the agent being up. Not fatal: without it only the
     * counts of a process's last, unsendable batches are lost, as they were
     * before there was one. */
    if (dropbox_open(&a->dropbox, box) < 0)
        iot_warn("running without a drop box");
    if (intake_open(&a->intake, a->zctx, a->cfg.listen, a->cfg.node, a->socket_mode) < 0)
        return -1;
    /* A share as large as the whole store is no share: back-pressure, as
     * without one. */
    a->intake.max_user_bytes =
        a->cfg.max_pending_user < a->cfg.max_pending ? a->cfg.max_pending_user : 0;
    /* Tens of bytes per batch counted, plus its file names: a sixteenth of
     * the store counts hundreds of thousands. */
    a->intake.tally.max_bytes = a->cfg.max_pending / 16 > (1u << 20) ? a->cfg.max_pending / 16
                                                                      : (1u << 20);
    if (a->intake.max_user_bytes)
        a->intake.tally.max_user_bytes = a->intake.tally.max_bytes / 8;
    set_connection_limits(a);
    a->intake_open = 1;
    /* What processes left while no agent ran goes first. */
    dropbox_scan(&a->dropbox, 0, &a->intake, &a->spool, &a->stats);
    char err[512];
    if (a->cfg.curve_key &&
        (iot_curve_load(a->cfg.curve_key, 1, &a->curve_own, err, sizeof err) < 0 ||
         iot_curve_load(a->cfg.collector_key, 0, &a->curve_collector, err, sizeof err) < 0)) {
        iot_err("%s", err);
        return -1;
    }
    int curve = a->cfg.curve_key != NULL;
    if (uplink_open(&a->uplink, a->zctx, a->cfg.collector, a->cfg.node, new_session_id(),
                    a->credit_timeout_ns, &a->spool, &a->stats, curve ? &a->curve_own : NULL,
                    curve ? &a->curve_collector : NULL) < 0)
        return -1;
    clocksync_init(&a->clock, &a->uplink, &a->spool, &a->stats, a->cfg.node,
                   a->cfg.collector, a->clock_interval_ns);
    return 0;
}

/* Whether batches may be taken from producers: not when the tally is full,
 * nor when the disk refuses the spool and its reserve has no slot left (a
 * batch taken then would be held in memory only, its loss uncounted if the
 * agent died; in the socket, the producer counts a failed send). */
static int may_take(const struct agent *a)
{
    return !tally_full(&a->intake.tally) && !(a->journal_open && journal_at_risk(&a->journal));
}

/* Full, the agent keeps reading and counts each batch's events in its
 * tally (tally.h), stored as drop records in the store's reserve; only when
 * the tally is full too does it stop reading, and producers' own sends fail
 * and are counted there. */
static void note_backpressure(struct agent *a)
{
    int risk = a->journal_open && journal_at_risk(&a->journal);
    if (risk && !a->risk_logged)
        iot_err("the disk refuses the spool in %s and its reserve is full: not reading from "
                "producers until the collector acknowledges or the disk has room",
                a->spool_dir);
    else if (!risk && a->risk_logged)
        iot_info("the spool in %s may take batches again", a->spool_dir);
    a->risk_logged = risk;
    int full = !risk && spool_full(&a->spool) ? 1 + tally_full(&a->intake.tally) : 0;
    if (full > a->full_logged && a->full_logged == 0)
        iot_warn("pending store full (%zu batches, %llu bytes): batches are kept as counts of "
                 "their events, stored as drop records (agent_full), until the collector "
                 "acknowledges",
                 a->spool.count, (unsigned long long)a->spool.bytes);
    if (full == 2 && a->full_logged < 2)
        iot_warn("pending store full (%zu batches, %llu bytes) and no room to count more: not "
                 "reading from producers until the collector acknowledges",
                 a->spool.count, (unsigned long long)a->spool.bytes);
    if (!full && a->full_logged)
        iot_info("pending store below its limit again");
    a->full_logged = full;
}

/* 1 when batches may still be waiting in the socket. */
static int take_from_producers(struct agent *a, int limit)
{
    int i = 0;
    for (; i < limit && may_take(a); i++)
        if (intake_take(&a->intake, &a->spool, &a->stats) <= 0)
            break;
    note_backpressure(a);
    return i == limit || !may_take(a);
}

/* Stop accepting: what producers already queued in the socket is still
 * taken (it was handed over, so it must not vanish silently), then the
 * socket closes and later sends fail on the producers' side, where they are
 * counted. */
static void begin_shutdown(struct agent *a, int signo)
{
    if (a->stopping) {
        iot_warn("second signal (%s): exiting without waiting for acknowledgements",
                 strsignal(signo));
        a->drain_deadline = iot_mono_ns();
        return;
    }
    a->stopping = 1;
    clocksync_stop(&a->clock); /* a new sample now would only lengthen the drain */
    take_from_producers(a, INT32_MAX);
    /* Only with a spool on disk: files taken into memory now would be lost
     * if the drain ran out, where the next start would have taken them. */
    if (a->journal_open)
        dropbox_scan(&a->dropbox, 0, &a->intake, &a->spool, &a->stats);
    /* What was counted goes into the store (and the spool) whatever its
     * limits: it is small, and the only record of those events. */
    tally_flush(&a->intake.tally, NULL, &a->spool, iot_mono_ns(), 1);
    intake_close(&a->intake);
    a->intake_open = 0;
    a->drain_deadline = iot_mono_ns() + a->drain_timeout_ns;
    iot_info("%s: stopped accepting batches; waiting up to %.1f s for %zu pending batches "
             "to be acknowledged",
             strsignal(signo), a->drain_timeout_ns / 1e9, a->spool.count);
}

static void read_signals(struct agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        begin_shutdown(a, (int)si.ssi_signo);
}

/* The loop wakes at least every LOOP_TICK_MS, and sooner when a clock
 * exchange is due (they are a few ms apart within a burst). */
static long poll_timeout_ms(const struct agent *a, int64_t now)
{
    int64_t due = clocksync_due(&a->clock);
    if (due == INT64_MAX)
        return LOOP_TICK_MS;
    int64_t left = due - now;
    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left < LOOP_TICK_MS ? (long)left : LOOP_TICK_MS;
}

static int run(struct agent *a)
{
    int64_t next_stats = iot_mono_ns() + a->stats_interval_ns;
    for (;;) {
        int64_t now = iot_mono_ns();
        if (a->stopping && (a->spool.count == 0 || now >= a->drain_deadline))
            return 0;
        zmq_pollitem_t items[3 + UPLINK_POLL_ITEMS];
        int n = 0;
        items[n++] = (zmq_pollitem_t){.fd = a->sigfd, .events = ZMQ_POLLIN};
        int intake_at = -1;
        if (a->intake_open && may_take(a)) {
            intake_at = n;
            intake_pollitem(&a->intake, &items[n++]);
        }
        int uplink_at = n;
        uplink_poll_items(&a->uplink, &items[n]);
        n += UPLINK_POLL_ITEMS;
        int clock_at = -1;
        if (clocksync_fd(&a->clock) >= 0) {
            clock_at = n;
            items[n++] = (zmq_pollitem_t){.fd = clocksync_fd(&a->clock), .events = ZMQ_POLLIN};
        }

        if (zmq_poll(items, n, poll_timeout_ms(a, now)) < 0 && zmq_errno() != EINTR) {
            iot_err("poll failed: %s", zmq_strerror(zmq_errno()));
            return -1;
        }
        if (items[0].revents & ZMQ_POLLIN)
            read_signals(a);
        /* The collector's messages first: a clock answer read after a burst
         * of producer batches would carry their processing time in its
         * round trip. */
        if (clock_at >= 0 && (items[clock_at].revents & ZMQ_POLLIN))
            clocksync_readable(&a->clock);
        uplink_handle(&a->uplink, &items[uplink_at]);
        int backlog = 0;
        if (intake_at >= 0 && a->intake_open && (items[intake_at].revents & ZMQ_POLLIN))
            backlog = take_from_producers(a, INTAKE_BURST);
        else if (a->intake_open)
            note_backpressure(a);
        now = iot_mono_ns();
        if (a->intake_open) {
            /* A process leaves its running total in the drop box after its
             * last batches went into the socket: taken while batches still
             * wait there, it would come before them, and the live figures
             * would count them as lost (the store's readers take that
             * back); so the scan waits for the socket to be read, up to
             * DROPBOX_MAX_WAIT_NS. */
            if (!backlog || now - a->dropbox.next_scan_ns >= DROPBOX_MAX_WAIT_NS)
                dropbox_scan(&a->dropbox, now, &a->intake, &a->spool, &a->stats);
            tally_flush(&a->intake.tally, NULL, &a->spool, now, 0);
            intake_tick(&a->intake, now, !tally_full(&a->intake.tally), &a->stats);
        }
        clocksync_tick(&a->clock, now);
        if (a->journal_open)
            journal_tick(&a->journal, now);
        uplink_pump(&a->uplink);
        uplink_tick(&a->uplink, now);
        if (now >= next_stats) {
            stats_log(&a->stats, &a->spool, 0);
            next_stats = now + a->stats_interval_ns;
        }
    }
}

static void finish(struct agent *a)
{
    if (a->stopping) {
        size_t memory_only = 0;
        for (struct spool_entry *e = a->spool.head; e; e = e->next)
            memory_only += !e->seg && !e->slot; /* a slot's drop record counts it */
        if (a->spool.count == 0)
            iot_info("all batches acknowledged");
        else if (memory_only)
            iot_warn("%zu batches (%llu bytes) remain unacknowledged; %zu of them were held "
                     "in memory only and are lost",
                     a->spool.count, (unsigned long long)a->spool.bytes, memory_only);
        else
            iot_info("%zu batches (%llu bytes) remain unacknowledged in the spool %s, to be "
                     "sent by the next start",
                     a->spool.count, (unsigned long long)a->spool.bytes, a->spool_dir);
    }
    stats_log(&a->stats, &a->spool, 1);
    if (a->intake_open)
        intake_close(&a->intake);
    dropbox_close(&a->dropbox);
    uplink_close(&a->uplink);
    if (a->journal_open)
        journal_close(&a->journal);
    a->spool.journal = NULL;
    spool_free(&a->spool);
    if (a->zctx)
        zmq_ctx_term(a->zctx);
    if (a->sigfd >= 0)
        close(a->sigfd);
}

int main(int argc, char **argv)
{
    static struct agent a;
    a.sigfd = -1;
    iot_log_init("iotrace-agent", IOT_LOG_INFO);
    parse_options(&a, argc, argv);
    int rc = start(&a) < 0 ? -1 : run(&a);
    finish(&a);
    return rc < 0 ? IOT_EXIT_FAILURE : IOT_EXIT_OK;
}
