#include "intake.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "fsutil.h"
#include "launcher.h"
#include "log.h"
#include "spool.h"
#include "tally.h"
#include "timeutil.h"
#include "wire.h"

/* Producers may each queue this many batches in the agent's socket before
 * their own (non-blocking) sends start failing; the pending store, not this
 * queue, is where the agent buffers.  Not much smaller: with 4, batches a
 * producer had written into the socket just before it exited were lost
 * (ZeroMQ drops what it has not read when the peer goes), 8 of 120 in
 * agent.exactly_once. */
#define INTAKE_RCVHWM 100
/* A producer writes a batch whole, at once: a handshake or a message still
 * incomplete after this long is a stalled or hostile peer's. */
#define INTAKE_STALL_NS 10000000000LL

/* A socket file nobody accepts on is left over from a dead agent. */
static int socket_is_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return 0;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return live;
}

static int prepare_ipc_path(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int rc = iot_mkdir_p(dirname(copy), 0755);
    if (rc < 0)
        iot_err("cannot create the directory for %s: %s", path, strerror(errno));
    free(copy);
    if (rc < 0)
        return -1;
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        iot_err("%s exists and is not a socket; not replacing it", path);
        return -1;
    }
    if (socket_is_live(path)) {
        iot_err("another agent is already listening on %s", path);
        return -1;
    }
    iot_info("removing stale socket %s", path);
    if (unlink(path) < 0 && errno != ENOENT) {
        iot_err("cannot remove %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The socket file made, to be removed at close unless replaced since. */
static int note_ipc_path(struct intake *in, const char *endpoint, const char *ipc_path,
                         unsigned socket_mode)
{
    struct stat st;
    if (ipc_path && strlen(ipc_path) < sizeof in->ipc_path && lstat(ipc_path, &st) == 0) {
        strcpy(in->ipc_path, ipc_path);
        in->ipc_dev = st.st_dev;
        in->ipc_ino = st.st_ino;
    }
    iot_info("listening for producers on %s%s", endpoint,
             ipc_path && (socket_mode & 0006) == 0006 ? " (every local user may connect)" : "");
    return 0;
}

int intake_open(struct intake *in, void *zctx, const char *endpoint, const char *node,
                unsigned socket_mode)
{
    memset(in, 0, sizeof *in);
    if (!(in->via_len = iot_wire_via_field(node, in->tail))) {
        iot_err("node name '%s' is longer than %d bytes", node, IOT_WIRE_VIA_MAX);
        return -1;
    }
    snprintf(in->node, sizeof in->node, "%s", node);
    in->bad_log.interval_ns = 1000000000;
    in->quota_log.interval_ns = 10000000000;
    in->discard_log.interval_ns = 10000000000;
    in->conn_log.interval_ns = 10000000000;
    tally_init(&in->tally, 16u << 20);
    const char *ipc_path = NULL;
    if (!strncmp(endpoint, "ipc://", 6) && endpoint[6] != '@') {
        ipc_path = endpoint + 6;
        if (prepare_ipc_path(ipc_path) < 0)
            return -1;
    }
    in->ipc.lfd = in->ipc.epfd = in->ipc.spare_fd = -1;
    if (ipc_path) {
        if (ipcl_open(&in->ipc, ipc_path, socket_mode) < 0) {
            iot_err("cannot listen on %s: %s", endpoint, strerror(errno));
            intake_close(in);
            return -1;
        }
        in->own = 1;
        /* The agent sets its own limits (agent.c); these hold until then. */
        in->ipc.max_conns = in->ipc.max_conns_user = 1024;
        in->ipc.max_msg = IOT_WIRE_MAX_PRODUCER_BATCH;
        in->ipc.max_bytes = in->ipc.max_bytes_user = 64u << 20;
        in->ipc.stall_ns = INTAKE_STALL_NS;
        return note_ipc_path(in, endpoint, ipc_path, socket_mode);
    }
    in->sock = zmq_socket(zctx, ZMQ_PULL);
    int hwm = INTAKE_RCVHWM, linger = 0;
    /* A message larger than a producer's batch may be is refused by
     * ZeroMQ itself, which drops the connection before the bytes reach
     * memory; with the queue's 100 batches that bounds what one connection
     * holds (docs/agent.md, "Flow control"). */
    int64_t max = (int64_t)IOT_WIRE_MAX_PRODUCER_BATCH;
    zmq_setsockopt(in->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    zmq_setsockopt(in->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(in->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(in->sock, endpoint) < 0) {
        iot_err("cannot listen on %s: %s", endpoint, zmq_strerror(zmq_errno()));
        intake_close(in);
        return -1;
    }
    return note_ipc_path(in, endpoint, ipc_path, socket_mode);
}

static void report_invalid(struct intake *in, const char *why)
{
    uint64_t suppressed = 0;
    if (!ratelimit_allow(&in->bad_log, iot_mono_ns(), &suppressed))
        return;
    if (suppressed)
        iot_warn("rejected a message from a producer: %s (%llu more rejected since the last "
                 "report)", why, (unsigned long long)suppressed);
    else
        iot_warn("rejected a message from a producer: %s", why);
}

/* The sending process, as the kernel told ZeroMQ (SO_PEERCRED) for an ipc
 * connection: its Peer-Address property ends in ":uid:gid:pid".  0 when not
 * known (tcp). */
static int peer_credentials(zmq_msg_t *msg, Iotrace__Sender *out)
{
    const char *addr = zmq_msg_gets(msg, "Peer-Address");
    if (!addr)
        return 0;
    const char *p = addr + strlen(addr);
    unsigned long v[3];
    for (int i = 2; i >= 0; i--) {
        const char *colon = p;
        while (colon > addr && colon[-1] != ':')
            colon--;
        if (colon == addr || colon == p)
            return 0;
        char *end;
        v[i] = strtoul(colon, &end, 10);
        if (end != p || v[i] > UINT32_MAX)
            return 0;
        p = colon - 1;
    }
    iotrace__sender__init(out);
    out->uid = (uint32_t)v[0];
    out->gid = (uint32_t)v[1];
    out->pid = (uint32_t)v[2];
    return 1;
}

/* A batch there is no room for is counted in the tally (tally.h), which
 * stores its producer's events as drop records once the store's reserve has
 * room; a batch that cannot even be counted there is dropped, and its
 * events show in the store as lost once a later batch of its producer
 * arrives. */
static int keep_as_drops(struct intake *in, const iot_batch *b, int reason, const char *key,
                         int64_t uid, const uint8_t *tail, size_t tail_len,
                         struct agent_stats *st)
{
    char err[160];
    iot_body *body = iot_wire_body(b, err, sizeof err);
    int ok = body && tally_add(&in->tally, key, uid, b, body, reason, tail, tail_len,
                               iot_mono_ns()) == 0;
    if (body)
        iot_wire_free_body(body);
    if (ok) {
        st->received++;
        return INTAKE_TAKEN;
    }
    st->discarded++;
    uint64_t held_back = 0;
    if (ratelimit_allow(&in->discard_log, iot_mono_ns(), &held_back))
        iot_warn("no room to count the events of a batch of %s%s%s: dropped, they count as "
                 "lost (%llu more since the last report)",
                 key, body ? "" : ": ", body ? "" : err, (unsigned long long)held_back);
    return INTAKE_REFUSED;
}

/* What a local producer may not say of itself: that it is an agent.  An
 * agent's batches carry its clock samples, which move every event of the
 * node in time, and its counters; only this agent makes them for this node
 * (clocksync.c), and never through this socket.  NULL: nothing claimed. */
static const char *foreign_claim(const iot_batch *b)
{
    if (b->producer->kind == IOTRACE__PRODUCER_KIND__PRODUCER_AGENT)
        return "the batch says it is an agent's (clock samples), which only the agent itself "
               "makes";
    return NULL;
}

int intake_accept(struct intake *in, const uint8_t *data, size_t len,
                  const Iotrace__Sender *sender, int may_defer, struct spool *sp,
                  struct agent_stats *st)
{
    char err[256];
    iot_batch *b = iot_wire_open(data, len, err, sizeof err);
    if (!b) {
        st->invalid++;
        report_invalid(in, err);
        return INTAKE_REFUSED;
    }
    char key[512];
    uint8_t tail[sizeof in->tail];
    memcpy(tail, in->tail, in->via_len);
    size_t tail_len = in->via_len;
    if (sender)
        tail_len += iot_wire_sender_field(sender, tail + in->via_len);
    tail_len += iot_wire_stamp_field(in->node, sender, tail + tail_len);
    int rc = INTAKE_REFUSED;
    const char *foreign = foreign_claim(b);
    uint64_t user_bytes = sender && in->max_user_bytes ? spool_user_bytes(sp, sender->uid) : 0;
    if (b->sender) {
        st->invalid++;
        report_invalid(in, "the batch names its sender, which only the agent may do");
    } else if (foreign) {
        st->invalid++;
        report_invalid(in, foreign);
    } else if (b->raw_size == 0) {
        /* Nothing to forward, and exactly what a batch cut short after its
         * seq field looks like (proto3 omits the zero-valued rest): storing
         * it would make the collector discard the real batch of that seq as
         * a duplicate. */
        st->invalid++;
        report_invalid(in, "empty batch (no records, or cut short after its seq field)");
    } else if (iot_wire_producer_key(b->producer, sender, key, sizeof key) < 0) {
        st->invalid++;
        report_invalid(in, "producer identity too long");
    } else if ((in->max_user_bytes && user_bytes >= in->max_user_bytes) || spool_full(sp) ||
               (tally_has(&in->tally, key) &&
                tally_flush(&in->tally, key, sp, iot_mono_ns(), 0) > 0)) {
        /* (A producer's counted batches go into the store before its next
         * one, or that one joins them: its batches stay in order.) */
        int quota = in->max_user_bytes && user_bytes >= in->max_user_bytes;
        if (may_defer) {
            rc = INTAKE_DEFERRED;
        } else {
            *(quota ? &st->over_quota : &st->store_full) += 1;
            rc = keep_as_drops(in, b,
                               quota ? IOTRACE__DROP_REASON__DROP_OVER_QUOTA
                                     : IOTRACE__DROP_REASON__DROP_AGENT_FULL,
                               key, sender ? (int64_t)sender->uid : -1, tail, tail_len, st);
            uint64_t held_back = 0;
            if (quota && ratelimit_allow(&in->quota_log, iot_mono_ns(), &held_back))
                iot_warn("user %u holds %llu bytes of pending batches, its limit is %llu "
                         "(--max-pending-per-user): its batches are counted as drop records "
                         "(over_quota) (%llu more since the last report)",
                         sender->uid, (unsigned long long)user_bytes,
                         (unsigned long long)in->max_user_bytes, (unsigned long long)held_back);
        }
    } else if (spool_push_tail(sp, key, b->epoch, b->seq, data, len, tail, tail_len) < 0) {
        /* Same outcome for the producer as a full store: the batch is lost
         * here, and counted, rather than the agent dying. */
        if (may_defer) {
            rc = INTAKE_DEFERRED;
        } else {
            st->invalid++;
            report_invalid(in, "out of memory storing the batch");
        }
    } else {
        st->received++;
        rc = INTAKE_TAKEN;
        iot_debug("batch %s epoch=%016llx seq=%llu: %zu bytes, %u events", key,
                  (unsigned long long)b->epoch, (unsigned long long)b->seq, len,
                  b->event_count);
    }
    iot_wire_free_batch(b);
    return rc;
}

/* Stores one received message if its envelope is sound, with the job its
 * sender's launcher put it in, when known. */
static void take_one(struct intake *in, const uint8_t *data, size_t len, Iotrace__Sender *sender,
                     struct spool *sp, struct agent_stats *st)
{
    char job[IOT_WIRE_LAUNCHER_JOB_MAX + 1];
    if (sender && launcher_job(sender->pid, sender->uid, job, sizeof job))
        sender->job = job;
    intake_accept(in, data, len, sender, 0, sp, st);
}

static void accept_message(struct intake *in, zmq_msg_t *msg, struct spool *sp,
                           struct agent_stats *st)
{
    Iotrace__Sender sender;
    int known = peer_credentials(msg, &sender);
    take_one(in, zmq_msg_data(msg), zmq_msg_size(msg), known ? &sender : NULL, sp, st);
}

int intake_take(struct intake *in, struct spool *sp, struct agent_stats *st)
{
    if (in->own) {
        const uint8_t *data;
        size_t len;
        uid_t uid;
        gid_t gid;
        pid_t pid;
        int multipart;
        if (!ipcl_next(&in->ipc, iot_mono_ns(), &data, &len, &uid, &gid, &pid, &multipart))
            return 0;
        if (multipart) {
            st->invalid++;
            report_invalid(in, "multipart message (a batch is a single frame)");
            return 1;
        }
        Iotrace__Sender sender;
        iotrace__sender__init(&sender);
        sender.uid = (uint32_t)uid;
        sender.gid = (uint32_t)gid;
        sender.pid = (uint32_t)pid;
        take_one(in, data, len, &sender, sp, st);
        return 1;
    }
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, in->sock, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&msg);
        if (e == EAGAIN || e == EINTR)
            return 0;
        iot_err("receiving from producers: %s", zmq_strerror(e));
        return -1;
    }
    if (zmq_msg_more(&msg)) {
        /* A batch is one frame; swallow the rest of a multipart message. */
        while (zmq_msg_more(&msg))
            if (zmq_msg_recv(&msg, in->sock, 0) < 0)
                break;
        st->invalid++;
        report_invalid(in, "multipart message (a batch is a single frame)");
    } else {
        accept_message(in, &msg, sp, st);
    }
    zmq_msg_close(&msg);
    return 1;
}

/* A stopped agent takes its socket with it, so that producers see at once
 * that no agent listens; its drop box stays for the next start
 * (docs/agent.md, "The drop box"). */
void intake_pollitem(struct intake *in, void *item)
{
    zmq_pollitem_t *it = item;
    *it = in->own ? (zmq_pollitem_t){.fd = ipcl_fd(&in->ipc), .events = ZMQ_POLLIN}
                  : (zmq_pollitem_t){.socket = in->sock, .events = ZMQ_POLLIN};
}

void intake_tick(struct intake *in, int64_t now_ns, int reading, struct agent_stats *st)
{
    if (!in->own)
        return;
    ipcl_tick(&in->ipc, now_ns, reading);
    const struct ipcl_counters *c = &in->ipc.c;
    uint64_t refused = c->refused - st->conn_refused;
    uint64_t dropped = c->stalled + c->oversized + c->broken - st->conn_dropped;
    uint64_t held_back = 0;
    if ((refused || dropped) && ratelimit_allow(&in->conn_log, now_ns, &held_back))
        iot_warn("producer connections: %llu refused (over --max-connections or "
                 "--max-connections-per-user, or no descriptor left), %llu closed (%llu stalled "
                 "over %lld s, %llu with a frame over %zu bytes, %llu not ZMTP) so far; %zu open",
                 (unsigned long long)c->refused,
                 (unsigned long long)(c->stalled + c->oversized + c->broken),
                 (unsigned long long)c->stalled, (long long)(in->ipc.stall_ns / 1000000000),
                 (unsigned long long)c->oversized, in->ipc.max_msg, (unsigned long long)c->broken,
                 ipcl_conns(&in->ipc));
    if (!refused && !dropped && st->connections == ipcl_conns(&in->ipc))
        return;
    st->conn_refused = c->refused;
    st->conn_dropped = c->stalled + c->oversized + c->broken;
    st->connections = ipcl_conns(&in->ipc);
}

void intake_close(struct intake *in)
{
    tally_free(&in->tally);
    if (in->own)
        ipcl_close(&in->ipc);
    in->own = 0;
    if (in->sock)
        zmq_close(in->sock);
    in->sock = NULL;
    struct stat st;
    if (in->ipc_path[0] && lstat(in->ipc_path, &st) == 0 && st.st_dev == in->ipc_dev &&
        st.st_ino == in->ipc_ino)
        unlink(in->ipc_path);
    in->ipc_path[0] = '\0';
}
