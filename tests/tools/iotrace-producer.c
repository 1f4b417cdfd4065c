/* iotrace-producer: a synthetic producer for tests and benchmarks.
 *
 * Builds valid batches the way the client library does (MPI-IO events with
 * the POSIX calls ROMIO makes inside them, file-name records, delta-coded
 * start times, drop records for batches it could not hand over) and PUSHes
 * them to an agent.  With --bad it sends corrupt messages instead, to
 * exercise the agent's rejection path.  With --realtime events carry the
 * time they were made (for clock tests under libfaketime), and --truth
 * writes each MPI-IO event's CallID with its time and the true time (a raw
 * system call that libfaketime does not intercept). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "handover.h"
#include "iot_functions.h"
#include "log.h"
#include "opts.h"
#include "timeutil.h"
#include "wire.h"

#define BLOCK (1ull << 20)
#define N_FILES 2

struct options {
    char *agent, *node, *job, *bad, *truth;
    long rank, batches, events, linger, hwm, lose;
    int forge;
    uint64_t rate; /* events per second, 0 = as fast as possible */
    int nonblocking;
    int realtime;
};

/* Column storage for one batch, reused for every batch. */
struct columns {
    uint32_t *m_func, *m_tid, *p_func, *p_tid;
    uint64_t *m_callid, *m_file, *m_bytes, *m_xfer, *m_dur, *m_coll;
    uint64_t *p_callid, *p_file, *p_bytes, *p_dur;
    int64_t *m_off, *m_start, *p_off, *p_start, *p_ret;
    int32_t *m_ret;
};

struct producer {
    struct options o;
    iot_producer id;
    char key[512];
    uint64_t epoch;
    uint64_t seq;
    uint64_t next_callid;
    uint64_t coll_seq;
    int64_t clock_ns;
    uint32_t rng;
    uint64_t file_ids[N_FILES];
    char file_paths[N_FILES][256];
    struct columns c;
    FILE *truth;
    uint64_t dropped_batches, dropped_events, sent_events, sent_bytes;
    uint64_t made;        /* Body.made_through of the last batch handed over */
    uint64_t lost_events; /* in batches --lose made vanish after the handover */
    void *zctx, *sock;
};

static uint32_t next_rand(struct producer *p)
{
    p->rng = p->rng * 1664525u + 1013904223u;
    return p->rng >> 8;
}

static uint64_t fnv64(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "iotrace-producer: out of memory\n");
        exit(IOT_EXIT_FAILURE);
    }
    return p;
}

static void alloc_columns(struct columns *c, size_t n)
{
    c->m_func = xcalloc(n, sizeof *c->m_func);
    c->m_tid = xcalloc(n, sizeof *c->m_tid);
    c->p_func = xcalloc(n, sizeof *c->p_func);
    c->p_tid = xcalloc(n, sizeof *c->p_tid);
    c->m_callid = xcalloc(n, sizeof *c->m_callid);
    c->m_file = xcalloc(n, sizeof *c->m_file);
    c->m_bytes = xcalloc(n, sizeof *c->m_bytes);
    c->m_xfer = xcalloc(n, sizeof *c->m_xfer);
    c->m_dur = xcalloc(n, sizeof *c->m_dur);
    c->m_coll = xcalloc(n, sizeof *c->m_coll);
    c->p_callid = xcalloc(n, sizeof *c->p_callid);
    c->p_file = xcalloc(n, sizeof *c->p_file);
    c->p_bytes = xcalloc(n, sizeof *c->p_bytes);
    c->p_dur = xcalloc(n, sizeof *c->p_dur);
    c->m_off = xcalloc(n, sizeof *c->m_off);
    c->m_start = xcalloc(n, sizeof *c->m_start);
    c->p_off = xcalloc(n, sizeof *c->p_off);
    c->p_start = xcalloc(n, sizeof *c->p_start);
    c->p_ret = xcalloc(n, sizeof *c->p_ret);
    c->m_ret = xcalloc(n, sizeof *c->m_ret);
}

static void free_columns(struct columns *c)
{
    void *all[] = {c->m_func, c->m_tid,  c->p_func, c->p_tid,   c->m_callid, c->m_file,
                   c->m_bytes, c->m_xfer, c->m_dur, c->m_coll,  c->p_callid, c->p_file,
                   c->p_bytes, c->p_dur,  c->m_off, c->m_start, c->p_off,    c->p_start,
                   c->p_ret,  c->m_ret};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* CLOCK_REALTIME as the kernel has it, past any LD_PRELOADed clock shifter. */
static int64_t true_now_ns(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One MPI-IO call and, for all but the last when the count is odd, the
 * pwrite/pread ROMIO issues inside it with the same CallID. */
static void fill_event(struct producer *p, size_t i, int with_posix)
{
    struct columns *c = &p->c;
    int write = (p->next_callid & 1) == 0;
    int f = (int)(p->next_callid / 64 % N_FILES);
    uint64_t callid = ((uint64_t)p->o.rank << 40) | (p->next_callid & ((1ull << 40) - 1));
    uint64_t block = p->next_callid / 2;
    int64_t offset = (int64_t)((block * 64 + (uint64_t)p->o.rank) * BLOCK);
    uint64_t dur = 20000 + next_rand(p) % 40000;
    if (p->o.realtime)
        p->clock_ns = iot_now_ns();
    if (p->truth)
        fprintf(p->truth, "0x%llx %lld %lld\n", (unsigned long long)callid,
                (long long)p->clock_ns, (long long)true_now_ns());

    c->m_func[i] = write ? IOT_F_MPIIO_MPI_File_write_at_all : IOT_F_MPIIO_MPI_File_read_at_all;
    c->m_tid[i] = p->id.pid;
    c->m_callid[i] = callid;
    c->m_file[i] = p->file_ids[f];
    c->m_off[i] = offset;
    c->m_bytes[i] = BLOCK;
    c->m_xfer[i] = BLOCK;
    c->m_start[i] = p->clock_ns;
    c->m_dur[i] = dur;
    c->m_ret[i] = 0;
    c->m_coll[i] = ++p->coll_seq;
    if (with_posix) {
        c->p_func[i] = write ? IOT_F_POSIX_pwrite64 : IOT_F_POSIX_pread64;
        c->p_tid[i] = p->id.pid;
        c->p_callid[i] = callid;
        c->p_file[i] = p->file_ids[f];
        c->p_off[i] = offset;
        c->p_bytes[i] = BLOCK;
        c->p_start[i] = p->clock_ns + 2000;
        c->p_dur[i] = dur - 4000;
        c->p_ret[i] = (int64_t)BLOCK;
    }
    p->clock_ns += (int64_t)dur + 1000 + next_rand(p) % 5000;
    p->next_callid++;
}

/* Encodes the next batch of p->o.events events.  A drop record reports the
 * events of batches the agent did not take. */
static int build_batch(struct producer *p, uint8_t **out, size_t *len)
{
    size_t total = (size_t)p->o.events, n_m = (total + 1) / 2, n_p = total / 2;
    for (size_t i = 0; i < n_m; i++)
        fill_event(p, i, i < n_p);
    struct columns *c = &p->c;

    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    m.n_func = m.n_tid = m.n_callid = m.n_file = m.n_offset = m.n_bytes = m.n_xfer =
        m.n_t_start = m.n_duration = m.n_ret = m.n_coll_seq = n_m;
    m.func = c->m_func, m.tid = c->m_tid, m.callid = c->m_callid, m.file = c->m_file;
    m.offset = c->m_off, m.bytes = c->m_bytes, m.xfer = c->m_xfer, m.t_start = c->m_start;
    m.duration = c->m_dur, m.ret = c->m_ret, m.coll_seq = c->m_coll;

    Iotrace__PosixEvents x = IOTRACE__POSIX_EVENTS__INIT;
    x.n_func = x.n_tid = x.n_callid = x.n_file = x.n_offset = x.n_bytes = x.n_t_start =
        x.n_duration = x.n_ret = n_p;
    x.func = c->p_func, x.tid = c->p_tid, x.callid = c->p_callid, x.file = c->p_file;
    x.offset = c->p_off, x.bytes = c->p_bytes, x.t_start = c->p_start;
    x.duration = c->p_dur, x.ret = c->p_ret;

    Iotrace__FileName names[N_FILES], *name_ptrs[N_FILES];
    for (int f = 0; f < N_FILES; f++) {
        iotrace__file_name__init(&names[f]);
        names[f].id = p->file_ids[f];
        names[f].path = p->file_paths[f];
        name_ptrs[f] = &names[f];
    }
    Iotrace__Drop drop = IOTRACE__DROP__INIT, *drops[1] = {&drop};
    drop.reason = IOTRACE__DROP_REASON__DROP_SEND_FAILED;
    drop.count = p->dropped_events;
    drop.t_first = drop.t_last = (uint64_t)iot_now_ns();
    drop.tid = p->id.pid;

    iot_body body = IOTRACE__BODY__INIT;
    body.mpiio = &m;
    body.posix = &x;
    if (p->seq == 0) { /* names travel once, ahead of the events that use them */
        body.n_files = N_FILES;
        body.files = name_ptrs;
    }
    if (p->dropped_events) {
        body.n_drops = 1;
        body.drops = drops;
    }
    body.made_through = p->made + total + p->dropped_events;
    char err[256];
    if (iot_wire_encode(&p->id, p->epoch, p->seq, &body, out, len, err, sizeof err) < 0) {
        fprintf(stderr, "iotrace-producer: encoding failed: %s\n", err);
        return -1;
    }
    /* An agent takes no larger message (ZeroMQ drops the connection, and
     * the batch, without a word): fewer events per batch. */
    if (*len > IOT_WIRE_MAX_PRODUCER_BATCH) {
        fprintf(stderr, "iotrace-producer: a batch of %zu bytes is over the %u an agent takes; "
                "use fewer --events-per-batch\n", *len, IOT_WIRE_MAX_PRODUCER_BATCH);
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* The batch built last was handed over (the library's rule: only then do
 * its seq and running total count). */
static void handed_over(struct producer *p)
{
    p->made += (uint64_t)p->o.events + p->dropped_events;
    p->dropped_events = 0;
    p->seq++;
}

static void pace(const struct producer *p, int64_t start_ns)
{
    if (!p->o.rate)
        return;
    int64_t due = start_ns + (int64_t)((double)p->sent_events * 1e9 / (double)p->o.rate);
    int64_t wait = due - iot_mono_ns();
    if (wait > 0) {
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        nanosleep(&ts, NULL);
    }
}

/* Sends one message (frames: one, or two for the multipart bad kind). */
static int push(struct producer *p, const void *data, size_t len, const void *data2,
                size_t len2)
{
    int flags = p->o.nonblocking ? ZMQ_DONTWAIT : 0;
    if (zmq_send(p->sock, data, len, flags | (data2 ? ZMQ_SNDMORE : 0)) < 0)
        return -1;
    if (data2 && zmq_send(p->sock, data2, len2, flags) < 0)
        return -1;
    return 0;
}

static int send_good(struct producer *p)
{
    int64_t start = iot_mono_ns();
    for (long b = 0; b < p->o.batches; b++) {
        uint8_t *buf;
        size_t len;
        if (p->o.forge && b > 0) {
            p->id.start_time_ns++;
            p->seq = 0;
            p->made = 0;
        }
        if (build_batch(p, &buf, &len) < 0)
            return -1;
        if (p->o.lose && (b + 1) % p->o.lose == 0) {
            /* As if the agent died with it in its socket. */
            p->lost_events += (uint64_t)p->o.events + p->dropped_events;
            handed_over(p);
        } else if (push(p, buf, len, NULL, 0) < 0) {
            if (zmq_errno() != EAGAIN) {
                fprintf(stderr, "iotrace-producer: send: %s\n", zmq_strerror(zmq_errno()));
                free(buf);
                return -1;
            }
            p->dropped_batches++;
            p->dropped_events += (uint64_t)p->o.events;
        } else {
            p->sent_events += (uint64_t)p->o.events;
            p->sent_bytes += len;
            handed_over(p);
        }
        free(buf);
        pace(p, start);
    }
    return 0;
}

static void set_version(uint8_t **buf, size_t *len, uint32_t version)
{
    iot_batch *b = iotrace__batch__unpack(NULL, *len, *buf);
    b->version = version;
    iot_wire_set_id_checksum(b); /* the version alone is wrong */
    free(*buf);
    *len = iotrace__batch__get_packed_size(b);
    *buf = xcalloc(*len, 1);
    iotrace__batch__pack(b, *buf);
    iotrace__batch__free_unpacked(b, NULL);
}

static const char *const bad_kinds[] = {"truncated", "flip",      "version", "magic",
                                        "garbage",   "empty",     "multipart", "huge",
                                        "sender",    "clock"};

/* A sound batch that says it is the node agent's, with one clock sample
 * putting the node an hour behind the collector: were it believed, every
 * event of the node would move by +3600 s. */
static int clock_batch(struct producer *p, uint8_t **out, size_t *len)
{
    iot_producer id = p->id;
    id.kind = IOTRACE__PRODUCER_KIND__PRODUCER_AGENT;
    id.job = (char *)"";
    id.rank = -1;
    Iotrace__ClockSync sample = IOTRACE__CLOCK_SYNC__INIT, *samples[1] = {&sample};
    sample.local_ns = iot_now_ns();
    sample.offset_ns = 3600ll * 1000000000ll;
    sample.rtt_ns = 1000;
    sample.peer = (char *)"forged";
    iot_body body = IOTRACE__BODY__INIT;
    body.n_clock = 1;
    body.clock = samples;
    char err[256];
    if (iot_wire_encode(&id, p->epoch, p->seq, &body, out, len, err, sizeof err) < 0) {
        fprintf(stderr, "iotrace-producer: encoding failed: %s\n", err);
        return -1;
    }
    return 0;
}

/* Turns a valid batch into the named kind of garbage. */
static void corrupt(struct producer *p, const char *kind, uint8_t **buf, size_t *len)
{
    if (!strcmp(kind, "truncated"))
        *len /= 2;
    else if (!strcmp(kind, "flip"))
        (*buf)[*len - 10] ^= 0x40; /* the body's last byte (9 bytes of identity checksum
                                     * follow it), covered by the body's CRC */
    else if (!strcmp(kind, "version"))
        set_version(buf, len, IOT_WIRE_VERSION + 1);
    else if (!strcmp(kind, "magic"))
        (*buf)[2] ^= 0xff;
    else if (!strcmp(kind, "garbage"))
        for (size_t i = 0; i < *len; i++)
            (*buf)[i] = (uint8_t)next_rand(p);
    else if (!strcmp(kind, "empty"))
        *len = 0;
    else if (!strcmp(kind, "sender")) { /* a sound batch that claims to come from root */
        Iotrace__Sender root = IOTRACE__SENDER__INIT;
        uint8_t field[IOT_WIRE_SENDER_MAX];
        size_t n = iot_wire_sender_field(&root, field);
        uint8_t *more = realloc(*buf, *len + n);
        if (more) {
            memcpy(more + *len, field, n);
            *buf = more;
            *len += n;
        }
    } else if (!strcmp(kind, "huge")) { /* larger than any batch may be */
        size_t n = (size_t)IOT_WIRE_MAX_BATCH + (1u << 20);
        uint8_t *big = calloc(1, n);
        if (big) {
            memcpy(big, *buf, *len);
            free(*buf);
            *buf = big;
            *len = n;
        }
    }
}

static int send_bad(struct producer *p)
{
    for (long b = 0; b < p->o.batches; b++) {
        uint8_t *buf;
        size_t len;
        if ((!strcmp(p->o.bad, "clock") ? clock_batch(p, &buf, &len) : build_batch(p, &buf, &len)) < 0)
            return -1;
        p->seq++;
        corrupt(p, p->o.bad, &buf, &len);
        int multipart = !strcmp(p->o.bad, "multipart");
        int rc = push(p, buf, multipart ? len / 2 : len, multipart ? buf + len / 2 : NULL,
                      len - len / 2);
        free(buf);
        if (rc < 0) {
            p->dropped_batches++;
            continue;
        }
        p->sent_bytes += len;
    }
    return 0;
}

static void parse_options(struct options *o, int argc, char **argv, char *host)
{
    *o = (struct options){.agent = IOT_AGENT_DEFAULT_ENDPOINT, .node = host,
                          .job = "synthetic", .batches = 10, .events = 4096, .linger = 30,
                          .hwm = 1000};
    const struct iot_opt opts[] = {
        {"agent", 'a', IOT_OPT_STRING, &o->agent, "ENDPOINT",
         "agent to push to (default " IOT_AGENT_DEFAULT_ENDPOINT ")"},
        {"node", 'n', IOT_OPT_STRING, &o->node, "NAME", "producer node (default: host name)"},
        {"job", 'j', IOT_OPT_STRING, &o->job, "JOB", "job id (default synthetic)"},
        {"rank", 'r', IOT_OPT_INT, &o->rank, "R", "MPI rank, upper 24 bits of CallIDs (default 0)"},
        {"batches", 'b', IOT_OPT_INT, &o->batches, "B", "batches to send (default 10)"},
        {"events-per-batch", 'e', IOT_OPT_INT, &o->events, "E",
         "events per batch, half MPI-IO and half POSIX (default 4096)"},
        {"rate", 0, IOT_OPT_SIZE, &o->rate, "EVENTS",
         "events per second, K/M suffixes allowed (default: as fast as the agent takes them)"},
        {"nonblocking", 0, IOT_OPT_FLAG, &o->nonblocking, NULL,
         "never block, like the client library: a batch the agent does not take is dropped "
         "and reported in a drop record of the next batch"},
        {"lose", 0, IOT_OPT_INT, &o->lose, "N",
         "every Nth batch counts as handed over but is never sent, as if the agent had died "
         "with it in its socket: readers of the store must report its events as lost"},
        {"forge", 0, IOT_OPT_FLAG, &o->forge, NULL,
         "every batch claims a producer of its own (a new start time, seq 0), as a user "
         "forging producer identities would"},
        {"hwm", 0, IOT_OPT_INT, &o->hwm, "N",
         "batches ZeroMQ may queue towards the agent (default 1000)"},
        {"linger", 0, IOT_OPT_INT, &o->linger, "SECONDS",
         "time allowed at exit to hand queued batches to the agent (default 30)"},
        {"realtime", 0, IOT_OPT_FLAG, &o->realtime, NULL,
         "stamp every MPI-IO event with the current CLOCK_REALTIME instead of a synthetic "
         "clock running ahead (use with --rate to spread events over time)"},
        {"truth", 0, IOT_OPT_STRING, &o->truth, "FILE",
         "write one line per MPI-IO event: CallID, t_start, and the kernel's CLOCK_REALTIME "
         "read by a raw system call (unshifted by libfaketime)"},
        {"bad", 0, IOT_OPT_STRING, &o->bad, "KIND",
         "send B corrupt messages instead: truncated, flip, version, magic, garbage, empty, "
         "multipart, huge, sender (a sound batch naming a sender, which only the agent may), "
         "or clock (a sound agent's batch with a clock sample of +3600 s, which only the "
         "agent may make)"},
    };
    const struct iot_opts_spec spec = {
        .program = "iotrace-producer",
        .synopsis = "--agent ENDPOINT --node N --job J --rank R --batches B "
                    "--events-per-batch E [options]",
        .description = "Synthetic iotrace producer for tests and benchmarks.  Prints one "
                       "line: what was sent, the producer key and the epoch.",
        .opts = opts,
        .n_opts = (int)(sizeof opts / sizeof opts[0]),
    };
    iot_opts_parse(&spec, argc, argv);
    int known = !o->bad;
    for (size_t i = 0; o->bad && i < sizeof bad_kinds / sizeof bad_kinds[0]; i++)
        known |= !strcmp(o->bad, bad_kinds[i]);
    if (!known || o->batches < 0 || o->events < 1 || o->rank < -1 || o->rank >= (1 << 24)) {
        fprintf(stderr, "iotrace-producer: bad --bad kind, --batches, --events-per-batch or "
                        "--rank value\nTry 'iotrace-producer --help'.\n");
        exit(IOT_EXIT_USAGE);
    }
}

static void init_producer(struct producer *p)
{
    p->id = (iot_producer)IOTRACE__PRODUCER__INIT;
    p->id.node = p->o.node;
    p->id.pid = (uint32_t)getpid();
    p->id.start_time_ns = (uint64_t)iot_now_ns();
    p->id.kind = IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT;
    p->id.job = p->o.job;
    p->id.rank = (int32_t)p->o.rank;
    iot_wire_producer_key(&p->id, NULL, p->key, sizeof p->key);
    if (getrandom(&p->epoch, sizeof p->epoch, 0) != sizeof p->epoch)
        p->epoch = (uint64_t)iot_now_ns();
    p->rng = (uint32_t)p->epoch;
    p->next_callid = 1;
    p->clock_ns = iot_now_ns();
    for (int f = 0; f < N_FILES; f++) {
        snprintf(p->file_paths[f], sizeof p->file_paths[f], "/scratch/%s/%s", p->o.job,
                 f == 0 ? "output.h5" : "checkpoint.dat");
        p->file_ids[f] = fnv64(p->file_paths[f]);
    }
    alloc_columns(&p->c, (size_t)(p->o.events + 1) / 2);
}

int main(int argc, char **argv)
{
    static struct producer p;
    char host[256];
    if (gethostname(host, sizeof host) < 0)
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    iot_log_init("iotrace-producer", IOT_LOG_INFO);
    parse_options(&p.o, argc, argv, host);
    init_producer(&p);
    if (p.o.truth && !(p.truth = fopen(p.o.truth, "w"))) {
        perror(p.o.truth);
        return IOT_EXIT_FAILURE;
    }

    p.zctx = zmq_ctx_new();
    p.sock = zmq_socket(p.zctx, ZMQ_PUSH);
    int linger = (int)(p.o.linger * 1000);
    int hwm = (int)p.o.hwm;
    zmq_setsockopt(p.sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(p.sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (zmq_connect(p.sock, p.o.agent) < 0) {
        fprintf(stderr, "iotrace-producer: cannot connect to %s: %s\n", p.o.agent,
                zmq_strerror(zmq_errno()));
        return IOT_EXIT_FAILURE;
    }
    int64_t t0 = iot_mono_ns();
    int rc = p.o.bad ? send_bad(&p) : send_good(&p);
    /* As the client library does (common/handover.h): the connection stays
     * until the agent has read it, or the linger has run out. */
    struct iot_handover held;
    iot_handover_find(p.o.agent, NULL, &held, 1);
    int64_t closing = iot_mono_ns();
    zmq_close(p.sock);
    zmq_ctx_term(p.zctx);
    iot_handover_release(&held, closing + (int64_t)linger * 1000000);
    double secs = (double)(iot_mono_ns() - t0) / 1e9;
    printf("key=%s epoch=%016llx batches=%ld sent_events=%llu bytes=%llu "
           "dropped_batches=%llu lost_events=%llu seconds=%.3f%s%s\n",
           p.key, (unsigned long long)p.epoch, p.o.batches,
           (unsigned long long)p.sent_events, (unsigned long long)p.sent_bytes,
           (unsigned long long)p.dropped_batches, (unsigned long long)p.lost_events, secs, p.o.bad ? " bad=" : "",
           p.o.bad ? p.o.bad : "");
    free_columns(&p.c);
    if (p.truth && fclose(p.truth) != 0)
        rc = -1;
    return rc < 0 ? IOT_EXIT_FAILURE : IOT_EXIT_OK;
}
