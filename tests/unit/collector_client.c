/* Test client for iotrace-collector: speaks the agent side of common/link.h
 * over a DEALER socket, sends fixed batches (valid, duplicate, damaged) and
 * garbage, and checks every answer.  Driven by tests/collector_test.py,
 * which also knows the exact events these batches hold.
 *
 *   collector_client ENDPOINT first|second|fuzz EXPECTED_CREDIT
 *   collector_client ENDPOINT stats EXPECTED_CREDIT BASE_NS
 *   collector_client ENDPOINT withdraw EXPECTED_CREDIT
 *
 * The stats phase sends a known workload (tests/stats_test.py computes its
 * statistics by hand): two jobs, three ranks on two client nodes, two
 * storage servers, clock samples that put the nodes seconds apart, a
 * collective write with two aggregators, a disk operation that starts
 * before its call, a non-blocking write, unmatched calls and operations and
 * lost events.  Times are BASE_NS + microseconds on the collector's clock,
 * written on each node's own clock. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "iot_functions.h"
#include "link.h"
#include "wire.h"

#define T0 1700000000000000000ll
#define TIMEOUT_MS 15000
#define MAX_PARTS 16

static const char *phase;
static int failures;

struct reply {
    zmq_msg_t part[MAX_PARTS];
    int n;
};

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t base_ns; /* the stats phase's time zero */

static void check(int ok, const char *fmt, ...)
{
    if (ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "collector_client %s: FAIL: ", phase);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static void die(const char *what)
{
    fprintf(stderr, "collector_client %s: %s: %s\n", phase, what, zmq_strerror(zmq_errno()));
    exit(1);
}

/* ---- batches ---------------------------------------------------------- */

static iot_producer producer(const char *node, uint32_t pid, uint64_t start,
                             Iotrace__ProducerKind kind, const char *job, int32_t rank,
                             const char *server)
{
    iot_producer p = IOTRACE__PRODUCER__INIT;
    p.node = (char *)node;
    p.pid = pid;
    p.start_time_ns = start;
    p.kind = kind;
    p.job = (char *)job;
    p.rank = rank;
    p.server = (char *)server;
    return p;
}

static iot_producer prod_a(void)
{
    return producer("nodeA", 1001, 1000, IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT, "job42", 0, "");
}

static iot_producer prod_b(void)
{
    return producer("nodeB", 2002, 2000, IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT, "job42", 1, "");
}

static iot_producer prod_c(void)
{
    return producer("store1", 3003, 3000, IOTRACE__PRODUCER_KIND__PRODUCER_SERVER, "", -1,
                    "brick1");
}

static iot_producer prod_d(void)
{
    return producer("nodeA", 4004, 4000, IOTRACE__PRODUCER_KIND__PRODUCER_AGENT, "", -1, "");
}

struct blob {
    uint8_t *data;
    size_t len;
};

static struct blob encode(const iot_producer *p, uint64_t epoch, uint64_t seq, const iot_body *body)
{
    struct blob b;
    char err[256];
    if (iot_wire_encode(p, epoch, seq, body, &b.data, &b.len, err, sizeof err) < 0) {
        fprintf(stderr, "collector_client: encode: %s\n", err);
        exit(1);
    }
    return b;
}

static struct blob batch_a0(void)
{
    Iotrace__FileName f = IOTRACE__FILE_NAME__INIT;
    f.id = 0x1111;
    f.path = "/data/out.dat";
    Iotrace__FileName *files[] = {&f};

    uint32_t m_func[] = {15, 16}, m_tid[] = {1001, 1001};
    uint64_t m_callid[] = {1, 2}, m_file[] = {0x1111, 0x1111}, m_bytes[] = {4096, 4096};
    uint64_t m_xfer[] = {4096, 4096}, m_dur[] = {5000, 4000}, m_coll[] = {0, 1};
    int64_t m_off[] = {0, 4096}, m_t[] = {T0 + 1000, T0 + 8000};
    int32_t m_ret[] = {0, 0};
    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    m.n_func = m.n_tid = m.n_callid = m.n_file = m.n_offset = m.n_bytes = m.n_xfer = 2;
    m.n_t_start = m.n_duration = m.n_ret = m.n_coll_seq = 2;
    m.func = m_func, m.tid = m_tid, m.callid = m_callid, m.file = m_file, m.offset = m_off;
    m.bytes = m_bytes, m.xfer = m_xfer, m.t_start = m_t, m.duration = m_dur, m.ret = m_ret;
    m.coll_seq = m_coll;

    uint32_t p_func[] = {141, 144}, p_tid[] = {1001, 1002};
    uint64_t p_callid[] = {1, 0}, p_file[] = {0x1111, 0x2222}, p_bytes[] = {4096, 100};
    uint64_t p_dur[] = {2000, 100};
    int64_t p_off[] = {0, -1}, p_t[] = {T0 + 1500, T0 + 2000}, p_ret[] = {4096, 100};
    Iotrace__PosixEvents x = IOTRACE__POSIX_EVENTS__INIT;
    x.n_func = x.n_tid = x.n_callid = x.n_file = x.n_offset = x.n_bytes = 2;
    x.n_t_start = x.n_duration = x.n_ret = 2;
    x.func = p_func, x.tid = p_tid, x.callid = p_callid, x.file = p_file, x.offset = p_off;
    x.bytes = p_bytes, x.t_start = p_t, x.duration = p_dur, x.ret = p_ret;

    iot_body body = IOTRACE__BODY__INIT;
    body.n_files = 1, body.files = files, body.mpiio = &m, body.posix = &x;
    iot_producer p = prod_a();
    return encode(&p, 0xA1, 0, &body);
}

static struct blob batch_a1(void)
{
    Iotrace__Drop d = IOTRACE__DROP__INIT;
    d.reason = IOTRACE__DROP_REASON__DROP_BUFFER_FULL;
    d.count = 7, d.t_first = T0 + 6000, d.t_last = T0 + 7000, d.tid = 1001;
    Iotrace__Drop *drops[] = {&d};

    uint32_t func[] = {137}, tid[] = {1001};
    uint64_t callid[] = {0}, file[] = {0x1111}, bytes[] = {10}, dur[] = {10};
    int64_t off[] = {-1}, t[] = {T0 + 5000}, ret[] = {-9};
    Iotrace__PosixEvents x = IOTRACE__POSIX_EVENTS__INIT;
    x.n_func = x.n_tid = x.n_callid = x.n_file = x.n_offset = x.n_bytes = 1;
    x.n_t_start = x.n_duration = x.n_ret = 1;
    x.func = func, x.tid = tid, x.callid = callid, x.file = file, x.offset = off;
    x.bytes = bytes, x.t_start = t, x.duration = dur, x.ret = ret;

    iot_body body = IOTRACE__BODY__INIT;
    body.n_drops = 1, body.drops = drops, body.posix = &x;
    iot_producer p = prod_a();
    return encode(&p, 0xA1, 1, &body);
}

static struct blob batch_b0(void)
{
    Iotrace__FileName f = IOTRACE__FILE_NAME__INIT;
    f.id = 0x1111;
    f.path = "/data/other.dat";
    Iotrace__FileName *files[] = {&f};
    uint32_t func[] = {13}, tid[] = {2002};
    uint64_t callid[] = {(1ull << 40) | 1}, file[] = {0x1111}, bytes[] = {100}, xfer[] = {50};
    uint64_t dur[] = {1000}, coll[] = {0};
    int64_t off[] = {8192}, t[] = {T0 + 1000};
    int32_t ret[] = {0};
    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    m.n_func = m.n_tid = m.n_callid = m.n_file = m.n_offset = m.n_bytes = m.n_xfer = 1;
    m.n_t_start = m.n_duration = m.n_ret = m.n_coll_seq = 1;
    m.func = func, m.tid = tid, m.callid = callid, m.file = file, m.offset = off;
    m.bytes = bytes, m.xfer = xfer, m.t_start = t, m.duration = dur, m.ret = ret;
    m.coll_seq = coll;
    iot_body body = IOTRACE__BODY__INIT;
    body.n_files = 1, body.files = files, body.mpiio = &m;
    iot_producer p = prod_b();
    return encode(&p, 0xB2, 0, &body);
}

static struct blob batch_c0(void)
{
    Iotrace__FileName f = IOTRACE__FILE_NAME__INIT;
    f.id = 0x9999;
    f.path = "/bricks/b1/data/out.dat";
    Iotrace__FileName *files[] = {&f};
    char *jobs[] = {"", "job42", "job7"};
    uint32_t func[] = {193, 194, 192}, tid[] = {77, 78, 79}, job[] = {1, 2, 0};
    uint64_t callid[] = {1, 5, 0}, file[] = {0x9999, 0x9999, 0x8888}, bytes[] = {4096, 0, 512};
    uint64_t dur[] = {800, 100, 100};
    int64_t off[] = {0, -1, 0}, t[] = {T0 + 1200, T0 + 9000, T0 + 9000}, ret[] = {4096, 0, 512};
    Iotrace__DiskEvents k = IOTRACE__DISK_EVENTS__INIT;
    k.n_func = k.n_tid = k.n_job = k.n_callid = k.n_file = k.n_offset = k.n_bytes = 3;
    k.n_t_start = k.n_duration = k.n_ret = 3;
    k.func = func, k.tid = tid, k.job = job, k.callid = callid, k.file = file, k.offset = off;
    k.bytes = bytes, k.t_start = t, k.duration = dur, k.ret = ret;
    iot_body body = IOTRACE__BODY__INIT;
    body.n_files = 1, body.files = files, body.disk = &k, body.n_jobs = 3, body.jobs = jobs;
    iot_producer p = prod_c();
    return encode(&p, 0xC3, 0, &body);
}

/* Agent batches carry clock records only: stored, but no export events. */
static struct blob batch_d(uint64_t seq)
{
    Iotrace__ClockSync c = IOTRACE__CLOCK_SYNC__INIT;
    c.local_ns = T0 + (int64_t)seq, c.offset_ns = 5, c.rtt_ns = 100, c.peer = "collector";
    Iotrace__ClockSync *clocks[] = {&c};
    iot_body body = IOTRACE__BODY__INIT;
    body.n_clock = 1, body.clock = clocks;
    iot_producer p = prod_d();
    return encode(&p, 0xD4, seq, &body);
}

/* An envelope that checks out but whose body is not a protobuf Body. */
/* A sound envelope (its checksum right) around a body that cannot be
 * decoded: stored, and counted as 3 dropped events of job9 when read. */
static struct blob batch_bad_body(void)
{
    static uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    iot_batch b = IOTRACE__BATCH__INIT;
    iot_producer p = producer("nodeB", 5005, 5000, IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT,
                              "job9", 0, "");
    b.magic = IOT_WIRE_MAGIC, b.version = IOT_WIRE_VERSION, b.producer = &p;
    b.epoch = 0xE5, b.seq = 9, b.event_count = 3, b.raw_size = sizeof junk;
    b.compression = IOTRACE__COMPRESSION__COMPRESSION_NONE;
    b.body.data = junk, b.body.len = sizeof junk;
    b.checksum = iot_wire_crc32(junk, sizeof junk);
    iot_wire_set_id_checksum(&b);
    struct blob out = {malloc(protobuf_c_message_get_packed_size(&b.base)), 0};
    out.len = protobuf_c_message_pack(&b.base, out.data);
    return out;
}

static struct blob copy_blob(struct blob b)
{
    struct blob c = {malloc(b.len), b.len};
    memcpy(c.data, b.data, b.len);
    return c;
}

/* ---- protocol --------------------------------------------------------- */

static void send_parts(void *sock, int n, const void *const *data, const size_t *len)
{
    for (int i = 0; i < n; i++)
        if (zmq_send(sock, data[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0) < 0)
            die("send");
}

static void send_batch(void *sock, struct blob b)
{
    const void *data[] = {IOT_LINK_PROTO, IOT_LINK_BATCH, b.data};
    size_t len[] = {4, 5, b.len};
    send_parts(sock, 3, data, len);
}

static void recv_reply(void *sock, struct reply *r)
{
    int more = 1;
    r->n = 0;
    while (more && r->n < MAX_PARTS) {
        zmq_msg_init(&r->part[r->n]);
        if (zmq_msg_recv(&r->part[r->n], sock, 0) < 0)
            die("no answer from the collector");
        more = zmq_msg_more(&r->part[r->n]);
        r->n++;
    }
}

static void free_reply(struct reply *r)
{
    for (int i = 0; i < r->n; i++)
        zmq_msg_close(&r->part[i]);
}

static int part_is(struct reply *r, int i, const char *s)
{
    return (size_t)zmq_msg_size(&r->part[i]) == strlen(s) &&
           memcmp(zmq_msg_data(&r->part[i]), s, strlen(s)) == 0;
}

static void part_text(struct reply *r, int i, char *buf, size_t len)
{
    size_t n = zmq_msg_size(&r->part[i]);
    if (n >= len)
        n = len - 1;
    memcpy(buf, zmq_msg_data(&r->part[i]), n);
    buf[n] = '\0';
}

static void hello(void *sock, uint32_t want_credit)
{
    uint8_t session[8];
    iot_put_u64(session, 42);
    const void *data[] = {IOT_LINK_PROTO, IOT_LINK_HELLO, "testnode", session};
    size_t len[] = {4, 5, 8, 8};
    send_parts(sock, 4, data, len);
    struct reply r;
    recv_reply(sock, &r);
    check(r.n == 3 && part_is(&r, 0, IOT_LINK_PROTO) && part_is(&r, 1, IOT_LINK_WELCOME) &&
              zmq_msg_size(&r.part[2]) == 4,
          "bad WELCOME (%d frames)", r.n);
    if (r.n == 3 && zmq_msg_size(&r.part[2]) == 4) {
        uint32_t credit = iot_get_u32(zmq_msg_data(&r.part[2]));
        check(credit == want_credit, "WELCOME credit %u, expected %u", credit, want_credit);
    }
    free_reply(&r);
}

/* Receives one ACK and checks it; key NULL means "any", why NULL "empty". */
static void expect_ack(void *sock, const char *what, const char *key, uint64_t epoch,
                       uint64_t seq, int status, const char *why)
{
    struct reply r;
    recv_reply(sock, &r);
    char got_key[128] = "", reason[256] = "";
    if (r.n != 7 || !part_is(&r, 0, IOT_LINK_PROTO) || !part_is(&r, 1, IOT_LINK_ACK) ||
        zmq_msg_size(&r.part[4]) != 8 || zmq_msg_size(&r.part[5]) != 1) {
        check(0, "%s: malformed ACK (%d frames)", what, r.n);
        free_reply(&r);
        return;
    }
    part_text(&r, 2, got_key, sizeof got_key);
    part_text(&r, 6, reason, sizeof reason);
    uint64_t e = iot_get_u64(zmq_msg_data(&r.part[3])), s = iot_get_u64(zmq_msg_data(&r.part[4]));
    int st = *(const uint8_t *)zmq_msg_data(&r.part[5]);
    check(st == status, "%s: status %d, expected %d (reason '%s')", what, st, status, reason);
    if (key) {
        check(strcmp(got_key, key) == 0, "%s: key '%s', expected '%s'", what, got_key, key);
        check(e == epoch && s == seq, "%s: epoch/seq %llx/%llu, expected %llx/%llu", what,
              (unsigned long long)e, (unsigned long long)s, (unsigned long long)epoch,
              (unsigned long long)seq);
    }
    if (why)
        check(strstr(reason, why) != NULL, "%s: reason '%s' lacks '%s'", what, reason, why);
    else
        check(reason[0] == '\0', "%s: unexpected reason '%s'", what, reason);
    free_reply(&r);
}

static void roundtrip(void *sock, const char *what, struct blob b, const char *key,
                      uint64_t epoch, uint64_t seq, int status, const char *why)
{
    send_batch(sock, b);
    expect_ack(sock, what, key, epoch, seq, status, why);
}

#define KEY_A "nodeA/1001/1000"
#define KEY_B "nodeB/2002/2000"
#define KEY_C "store1/3003/3000"
#define KEY_D "nodeA/4004/4000"
#define KEY_E "nodeB/5005/5000"

static void send_damaged(void *sock, struct blob a0, struct blob a1)
{
    struct blob cut = {a0.data, a0.len / 2};
    for (int i = 0; i < 30; i++)
        roundtrip(sock, "truncated batch", cut, NULL, 0, 0, IOT_ACK_REJECTED, "malformed");

    struct blob flipped = copy_blob(a1);
    flipped.data[flipped.len - 10] ^= 0x40; /* the body's last byte: 9 bytes of
                                              * identity checksum follow it */
    roundtrip(sock, "flipped byte", flipped, KEY_A, 0xA1, 1, IOT_ACK_REJECTED, "checksum");
    free(flipped.data);

    /* A version this build does not know yet. */
    struct blob next = copy_blob(a0);
    check(next.data[5] == 0x10 && next.data[6] == IOT_WIRE_VERSION, "unexpected envelope layout");
    next.data[6] = IOT_WIRE_VERSION + 1;
    char unknown[64];
    snprintf(unknown, sizeof unknown, "version %u", IOT_WIRE_VERSION + 1);
    roundtrip(sock, "wrong version", next, KEY_A, 0xA1, 0, IOT_ACK_REJECTED, unknown);
    free(next.data);

    struct blob text = {(uint8_t *)"hello world", 11};
    roundtrip(sock, "not a batch", text, "", 0, 0, IOT_ACK_REJECTED, "magic");

    struct blob bad = batch_bad_body();
    roundtrip(sock, "bad body", bad, KEY_E, 0xE5, 9, IOT_ACK_STORED, NULL);
    free(bad.data);
}

/* None of these may be answered or hurt the collector. */
static void send_garbage(void *sock, struct blob a0)
{
    const void *one[] = {IOT_LINK_PROTO};
    size_t one_len[] = {4};
    send_parts(sock, 1, one, one_len);

    const void *proto[] = {"XYZ9", IOT_LINK_BATCH, a0.data};
    size_t proto_len[] = {4, 5, a0.len};
    send_parts(sock, 3, proto, proto_len);

    const void *type[] = {IOT_LINK_PROTO, "FOO", "x"};
    size_t type_len[] = {4, 3, 1};
    send_parts(sock, 3, type, type_len);

    const void *hello[] = {IOT_LINK_PROTO, IOT_LINK_HELLO, "n", "abc"};
    size_t hello_len[] = {4, 5, 1, 3};
    send_parts(sock, 4, hello, hello_len);

    const void *extra[] = {IOT_LINK_PROTO, IOT_LINK_BATCH, a0.data, "more"};
    size_t extra_len[] = {4, 5, a0.len, 4};
    send_parts(sock, 4, extra, extra_len);

    const void *many[12];
    size_t many_len[12];
    for (int i = 0; i < 12; i++)
        many[i] = i == 0 ? IOT_LINK_PROTO : "z", many_len[i] = i == 0 ? 4 : 1;
    send_parts(sock, 12, many, many_len);
}

/* Sent back to back, so the collector commits them in groups. */
static void send_burst(void *sock, uint64_t from, uint64_t to, int with_duplicate)
{
    for (uint64_t s = from; s < to; s++) {
        struct blob b = batch_d(s);
        send_batch(sock, b);
        free(b.data);
    }
    if (with_duplicate) {
        struct blob b = batch_d(from);
        send_batch(sock, b);
        free(b.data);
    }
    for (uint64_t s = from; s < to; s++)
        expect_ack(sock, "burst", KEY_D, 0xD4, s, IOT_ACK_STORED, NULL);
    if (with_duplicate)
        expect_ack(sock, "burst duplicate", KEY_D, 0xD4, from, IOT_ACK_DUPLICATE, NULL);
}

static void first_run(void *sock, struct blob a0, struct blob a1, struct blob b0, struct blob c0)
{
    roundtrip(sock, "A0", a0, KEY_A, 0xA1, 0, IOT_ACK_STORED, NULL);
    roundtrip(sock, "A1", a1, KEY_A, 0xA1, 1, IOT_ACK_STORED, NULL);
    roundtrip(sock, "B0", b0, KEY_B, 0xB2, 0, IOT_ACK_STORED, NULL);
    roundtrip(sock, "C0", c0, KEY_C, 0xC3, 0, IOT_ACK_STORED, NULL);
    roundtrip(sock, "A0 again", a0, KEY_A, 0xA1, 0, IOT_ACK_DUPLICATE, NULL);
    send_damaged(sock, a0, a1);
    send_garbage(sock, a0);
    struct blob d0 = batch_d(0);
    roundtrip(sock, "D0 after garbage", d0, KEY_D, 0xD4, 0, IOT_ACK_STORED, NULL);
    free(d0.data);
    send_burst(sock, 1, 21, 1);
}

static void second_run(void *sock, struct blob a0, struct blob b0)
{
    roundtrip(sock, "A0 after restart", a0, KEY_A, 0xA1, 0, IOT_ACK_DUPLICATE, NULL);
    roundtrip(sock, "B0 after restart", b0, KEY_B, 0xB2, 0, IOT_ACK_DUPLICATE, NULL);
    struct blob d20 = batch_d(20);
    roundtrip(sock, "D20 after restart", d20, KEY_D, 0xD4, 20, IOT_ACK_DUPLICATE, NULL);
    free(d20.data);
    send_burst(sock, 21, 81, 0);
}

/* ---- a group that cannot be made durable (withdraw phase) -------------- */

/* Run against a collector whose store's first group sync fails with ENOSPC
 * (tests/store_faults_test.py, faultfs).  Every batch goes twice, back to
 * back, so that copies share a group with their original and are answered
 * DUPLICATE at once.  What the failed group held must get no answer at all,
 * the copies' DUPLICATE included: an agent lets a batch go on either
 * answer, and these are not in the store.  Sent again after the collector
 * finds room, each is STORED, exactly once. */
#define WITHDRAW_N 16

/* 1 and the ACK's seq and status, or 0 when none came within ms. */
static int ack_within(void *sock, int ms, uint64_t *seq, int *status)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0)
        return 0;
    struct reply r;
    recv_reply(sock, &r);
    int ok = r.n == 7 && part_is(&r, 1, IOT_LINK_ACK) && zmq_msg_size(&r.part[4]) == 8 &&
             zmq_msg_size(&r.part[5]) == 1;
    check(ok, "withdraw: a message that is no ACK (%d frames)", r.n);
    if (ok) {
        *seq = iot_get_u64(zmq_msg_data(&r.part[4]));
        *status = *(const uint8_t *)zmq_msg_data(&r.part[5]);
    }
    free_reply(&r);
    return ok;
}

static int check_seq(uint64_t seq)
{
    check(seq < WITHDRAW_N, "withdraw: ACK for D%llu, never sent", (unsigned long long)seq);
    return seq < WITHDRAW_N;
}

/* Takes the ACKs until quiet_ms pass without one. */
static void take_acks(void *sock, int quiet_ms, int stored[], int dup[])
{
    uint64_t seq;
    int status;
    while (ack_within(sock, quiet_ms, &seq, &status)) {
        if (!check_seq(seq))
            continue;
        check(status != IOT_ACK_REJECTED, "withdraw: D%llu rejected", (unsigned long long)seq);
        check(status != IOT_ACK_DUPLICATE || stored[seq],
              "withdraw: D%llu answered DUPLICATE but never STORED: it is not in the store",
              (unsigned long long)seq);
        if (status == IOT_ACK_STORED)
            stored[seq]++;
        else if (status == IOT_ACK_DUPLICATE)
            dup[seq]++;
    }
}

static void withdraw_run(void *sock)
{
    int stored[WITHDRAW_N] = {0}, dup[WITHDRAW_N] = {0};
    struct blob d[WITHDRAW_N];
    for (uint64_t s = 0; s < WITHDRAW_N; s++) {
        d[s] = batch_d(s);
        send_batch(sock, d[s]);
        send_batch(sock, d[s]);
    }
    take_acks(sock, 1500, stored, dup);
    int withdrawn = 0, answered_dup = 0;
    for (int s = 0; s < WITHDRAW_N; s++) {
        withdrawn += !stored[s];
        answered_dup += dup[s];
    }
    check(withdrawn > 0, "withdraw: every batch STORED: no group failed (was the fault injected?)");
    /* The collector tries again every 5 s (FULL_RETRY_NS); an agent sends
     * what it holds again after --credit-timeout. */
    for (int round = 0; round < 30; round++) {
        int left = 0;
        for (int s = 0; s < WITHDRAW_N; s++)
            if (!stored[s]) {
                send_batch(sock, d[s]);
                left++;
            }
        if (!left)
            break;
        take_acks(sock, 1000, stored, dup);
    }
    for (int s = 0; s < WITHDRAW_N; s++) {
        check(stored[s] == 1, "withdraw: D%d STORED %d times", s, stored[s]);
        free(d[s].data);
    }
    printf("withdraw: %d batches sent twice each; %d withdrawn with the failed group (no "
           "answer), %d copies answered DUPLICATE, all %d STORED once in the end\n",
           WITHDRAW_N, withdrawn, answered_dup, WITHDRAW_N);
}

/* ---- the statistics workload (stats phase) ---------------------------- */

#define US 1000ll
#define R(rank) ((uint64_t)(rank) << 40)
#define FILE_S 0xF1F1ull
#define N_ROWS 8

/* Offsets of the nodes' clocks: collector clock - node clock. */
#define OFF_C1 3000000000ll
#define OFF_C2 (-1500000000ll)
#define OFF_S1 250000ll
#define OFF_S2 0ll /* s2 sends no clock samples: its clock is taken as it is */

struct mrow {
    uint32_t func;
    uint64_t callid, bytes, coll;
    int64_t t_us, dur_us;
};

struct drow {
    uint32_t func, job; /* job: index into {"", "jobS", "jobT"} */
    uint64_t callid, bytes;
    int64_t t_us, dur_us;
};

/* Columns of up to N_ROWS events. */
struct cols {
    uint32_t func[N_ROWS], tid[N_ROWS], job[N_ROWS];
    uint64_t callid[N_ROWS], file[N_ROWS], bytes[N_ROWS], xfer[N_ROWS], dur[N_ROWS];
    uint64_t coll[N_ROWS];
    int64_t off[N_ROWS], t[N_ROWS], ret64[N_ROWS];
    int32_t ret[N_ROWS];
};

/* Times on the node's own clock: aligned time minus the node's offset. */
static int64_t local_time(int64_t t_us, int64_t node_off)
{
    return base_ns + t_us * US - node_off;
}

static void mpiio_cols(const struct mrow *r, size_t n, int64_t node_off, uint32_t tid,
                       struct cols *c, Iotrace__MpiioEvents *m)
{
    for (size_t i = 0; i < n; i++) {
        c->func[i] = r[i].func, c->tid[i] = tid, c->callid[i] = r[i].callid;
        c->file[i] = FILE_S, c->off[i] = 0, c->bytes[i] = c->xfer[i] = r[i].bytes;
        c->t[i] = local_time(r[i].t_us, node_off), c->dur[i] = (uint64_t)(r[i].dur_us * US);
        c->ret[i] = 0, c->coll[i] = r[i].coll;
    }
    m->n_func = m->n_tid = m->n_callid = m->n_file = m->n_offset = m->n_bytes = m->n_xfer = n;
    m->n_t_start = m->n_duration = m->n_ret = m->n_coll_seq = n;
    m->func = c->func, m->tid = c->tid, m->callid = c->callid, m->file = c->file;
    m->offset = c->off, m->bytes = c->bytes, m->xfer = c->xfer, m->t_start = c->t;
    m->duration = c->dur, m->ret = c->ret, m->coll_seq = c->coll;
}

static void disk_cols(const struct drow *r, size_t n, int64_t node_off, struct cols *c,
                      Iotrace__DiskEvents *k)
{
    for (size_t i = 0; i < n; i++) {
        c->func[i] = r[i].func, c->tid[i] = 70 + (uint32_t)i, c->job[i] = r[i].job;
        c->callid[i] = r[i].callid, c->file[i] = 0xB1B1, c->off[i] = 0;
        c->bytes[i] = r[i].bytes, c->ret64[i] = (int64_t)r[i].bytes;
        c->t[i] = local_time(r[i].t_us, node_off), c->dur[i] = (uint64_t)(r[i].dur_us * US);
    }
    k->n_func = k->n_tid = k->n_job = k->n_callid = k->n_file = k->n_offset = k->n_bytes = n;
    k->n_t_start = k->n_duration = k->n_ret = n;
    k->func = c->func, k->tid = c->tid, k->job = c->job, k->callid = c->callid;
    k->file = c->file, k->offset = c->off, k->bytes = c->bytes, k->t_start = c->t;
    k->duration = c->dur, k->ret = c->ret64;
}

static Iotrace__FileName file_s = {PROTOBUF_C_MESSAGE_INIT(&iotrace__file_name__descriptor),
                                   FILE_S, "/gluster/vol/out.dat"};
static Iotrace__FileName *files_s[] = {&file_s};

/* One batch of MPI-IO events (and optionally a POSIX event and a drop). */
static struct blob rank_batch(const char *node, uint32_t pid, const char *job, int32_t rank,
                              int64_t node_off, const struct mrow *rows, size_t n,
                              Iotrace__PosixEvents *posix, Iotrace__Drop *drop)
{
    struct cols c;
    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    mpiio_cols(rows, n, node_off, pid, &c, &m);
    Iotrace__Drop *drops[] = {drop};
    iot_body body = IOTRACE__BODY__INIT;
    body.n_files = 1, body.files = files_s, body.mpiio = &m, body.posix = posix;
    body.n_drops = drop ? 1 : 0, body.drops = drops;
    iot_producer p = producer(node, pid, 1000 + pid, IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT,
                              job, rank, "");
    return encode(&p, 0x5000 + pid, 0, &body);
}

/* Batch `seq` of a storage server, its rows' jobs indices into `jobs`, with
 * the file names given. */
static struct blob server_batch_of(const char *node, uint32_t pid, const char *server,
                                   int64_t node_off, const struct drow *rows, size_t n,
                                   char **jobs, size_t n_jobs, Iotrace__FileName **files,
                                   size_t n_files, uint64_t seq)
{
    struct cols c;
    Iotrace__DiskEvents k = IOTRACE__DISK_EVENTS__INIT;
    disk_cols(rows, n, node_off, &c, &k);
    iot_body body = IOTRACE__BODY__INIT;
    body.disk = &k, body.n_jobs = n_jobs, body.jobs = jobs;
    body.n_files = n_files, body.files = files;
    iot_producer p = producer(node, pid, 1000 + pid, IOTRACE__PRODUCER_KIND__PRODUCER_SERVER,
                              "", -1, server);
    return encode(&p, 0x5000 + pid, seq, &body);
}

static struct blob server_batch(const char *node, uint32_t pid, const char *server,
                                 int64_t node_off, const struct drow *rows, size_t n)
{
    static char *jobs[] = {"", "jobS", "jobT"};
    return server_batch_of(node, pid, server, node_off, rows, n, jobs, 3, NULL, 0, 0);
}

/* Two samples 20 s apart with the same offset: a constant offset, error
 * bound max(rtt)/2. */
static struct blob agent_batch(const char *node, uint32_t pid, int64_t node_off, uint64_t rtt1,
                               uint64_t rtt2)
{
    Iotrace__ClockSync a = IOTRACE__CLOCK_SYNC__INIT, b = IOTRACE__CLOCK_SYNC__INIT;
    a.local_ns = base_ns - 10000000000ll - node_off, a.offset_ns = node_off, a.rtt_ns = rtt1;
    b.local_ns = base_ns + 10000000000ll - node_off, b.offset_ns = node_off, b.rtt_ns = rtt2;
    a.peer = b.peer = "collector";
    Iotrace__ClockSync *clocks[] = {&a, &b};
    iot_body body = IOTRACE__BODY__INIT;
    body.n_clock = 2, body.clock = clocks;
    iot_producer p = producer(node, pid, 1000 + pid, IOTRACE__PRODUCER_KIND__PRODUCER_AGENT, "",
                              -1, "");
    return encode(&p, 0x5000 + pid, 0, &body);
}

/* Rank 0 (node c1): a write with a replica on each server, the collective's
 * aggregator, an MPI_File_sync, and ROMIO's pwrite inside the first call. */
static struct blob stats_rank0(void)
{
    const struct mrow rows[] = {
        {IOT_F_MPIIO_MPI_File_write_at, R(0) | 1, 1000, 0, 1000, 2000},
        {IOT_F_MPIIO_MPI_File_write_at_all, R(0) | 2, 4096, 3, 10000, 10000},
        {IOT_F_MPIIO_MPI_File_sync, R(0) | 3, 0, 4, 32000, 1000}};
    uint32_t func[] = {IOT_F_POSIX_pwrite}, tid[] = {101};
    uint64_t callid[] = {R(0) | 1}, file[] = {FILE_S}, bytes[] = {1000}, dur[] = {1600 * US};
    int64_t off[] = {0}, t[] = {local_time(1200, OFF_C1)}, ret[] = {1000};
    Iotrace__PosixEvents x = IOTRACE__POSIX_EVENTS__INIT;
    x.n_func = x.n_tid = x.n_callid = x.n_file = x.n_offset = x.n_bytes = 1;
    x.n_t_start = x.n_duration = x.n_ret = 1;
    x.func = func, x.tid = tid, x.callid = callid, x.file = file, x.offset = off;
    x.bytes = bytes, x.t_start = t, x.duration = dur, x.ret = ret;
    return rank_batch("c1", 101, "jobS", 0, OFF_C1, rows, 3, &x, NULL);
}

/* Rank 1 (node c1): a read whose disk operation starts 10 us before it, its
 * part of the collective, and a non-blocking write completed by MPI_Wait. */
static struct blob stats_rank1(void)
{
    const struct mrow rows[] = {
        {IOT_F_MPIIO_MPI_File_read_at, R(1) | 1, 500, 0, 2000, 500},
        {IOT_F_MPIIO_MPI_File_write_at_all, R(1) | 2, 4096, 3, 10100, 9900},
        {IOT_F_MPIIO_MPI_File_iwrite_at, R(1) | 3, 2048, 0, 50000, 100},
        {IOT_F_MPIIO_MPI_Wait, R(1) | 3, 2048, 0, 52000, 1000}};
    return rank_batch("c1", 102, "jobS", 1, OFF_C1, rows, 4, NULL, NULL);
}

/* Rank 2 (node c2): the collective's second aggregator, a write that no
 * disk operation follows, and 5 lost events. */
static struct blob stats_rank2(void)
{
    const struct mrow rows[] = {
        {IOT_F_MPIIO_MPI_File_write_at_all, R(2) | 1, 4096, 3, 10200, 9700},
        {IOT_F_MPIIO_MPI_File_write_at, R(2) | 2, 100, 0, 30000, 1000}};
    Iotrace__Drop d = IOTRACE__DROP__INIT;
    d.reason = IOTRACE__DROP_REASON__DROP_BUFFER_FULL, d.count = 5, d.tid = 201;
    d.t_first = d.t_last = (uint64_t)local_time(60000, OFF_C2);
    return rank_batch("c2", 201, "jobS", 2, OFF_C2, rows, 2, NULL, &d);
}

/* Another job on c2, whose rank 0 uses the same CallID as jobS's rank 0. */
static struct blob stats_job_t(void)
{
    const struct mrow rows[] = {{IOT_F_MPIIO_MPI_File_write_at, R(0) | 1, 300, 0, 5000, 1000}};
    return rank_batch("c2", 202, "jobT", 0, OFF_C2, rows, 1, NULL, NULL);
}

static struct blob stats_s1(void)
{
    const struct drow rows[] = {
        {IOT_F_DISK_writev, 1, R(0) | 1, 1000, 1500, 300},
        {IOT_F_DISK_readv, 1, R(1) | 1, 500, 1990, 310},
        {IOT_F_DISK_writev, 2, R(0) | 1, 300, 5200, 200},
        {IOT_F_DISK_writev, 1, R(0) | 2, 8192, 15000, 1000},
        {IOT_F_DISK_fsync, 1, R(0) | 3, 0, 32500, 400},
        {IOT_F_DISK_fsync, 1, R(0) | 99, 0, 40000, 100},
        {IOT_F_DISK_readv, 1, 0, 512, 41000, 200},
        {IOT_F_DISK_readv, 0, R(0) | 1, 64, 42000, 100}};
    return server_batch("s1", 301, "s1:/bricks/b1", OFF_S1, rows, 8);
}

static struct blob stats_s2(void)
{
    const struct drow rows[] = {
        {IOT_F_DISK_writev, 1, R(0) | 1, 1000, 1600, 400},
        {IOT_F_DISK_writev, 1, R(0) | 2, 4096, 15500, 1500},
        {IOT_F_DISK_writev, 1, R(2) | 1, 4096, 16000, 500},
        {IOT_F_DISK_writev, 1, R(1) | 3, 2048, 51000, 500}};
    return server_batch("s2", 401, "s2:/bricks/b2", OFF_S2, rows, 4);
}

/* Servers first: their operations reach the collector before the calls,
 * which the client library records only when they return. */
static void stats_run(void *sock)
{
    struct blob b[] = {stats_s1(),
                       stats_s2(),
                       stats_rank0(),
                       stats_rank1(),
                       stats_rank2(),
                       stats_job_t(),
                       agent_batch("c1", 109, OFF_C1, 2000, 3000),
                       agent_batch("c2", 209, OFF_C2, 800, 800),
                       agent_batch("s1", 309, OFF_S1, 1000, 500)};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        roundtrip(sock, "stats batch", b[i], NULL, 0, 0, IOT_ACK_STORED, NULL);
        free(b[i].data);
    }
}

/* The "files" workload: a storage server names a file in a batch whose
 * operations are all of jobA, then works on it for jobB in its next batch,
 * whose dictionary names jobB alone.  A pass for jobB leaves the first
 * batch's events unread (collector/events/events.c, server_elsewhere) but
 * must still learn the file's name from it. */
static void files_run(void *sock)
{
    static char *jobs_a[] = {"", "jobA"}, *jobs_b[] = {"", "jobB"};
    static Iotrace__FileName name = {PROTOBUF_C_MESSAGE_INIT(&iotrace__file_name__descriptor),
                                     0xB1B1, "/bricks/b9/shared.dat"};
    Iotrace__FileName *names[] = {&name};
    const struct drow da[] = {{IOT_F_DISK_writev, 1, R(0) | 1, 100, 1100, 100}};
    const struct drow db[] = {{IOT_F_DISK_writev, 1, R(0) | 1, 200, 2100, 100}};
    const struct mrow ma[] = {{IOT_F_MPIIO_MPI_File_write_at, R(0) | 1, 100, 0, 1000, 500}};
    const struct mrow mb[] = {{IOT_F_MPIIO_MPI_File_write_at, R(0) | 1, 200, 0, 2000, 500}};
    struct blob b[] = {
        server_batch_of("s9", 901, "s9:/bricks/b9", 0, da, 1, jobs_a, 2, names, 1, 0),
        server_batch_of("s9", 901, "s9:/bricks/b9", 0, db, 1, jobs_b, 2, NULL, 0, 1),
        rank_batch("c9", 911, "jobA", 0, 0, ma, 1, NULL, NULL),
        rank_batch("c9", 912, "jobB", 0, 0, mb, 1, NULL, NULL)};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        roundtrip(sock, "files batch", b[i], NULL, 0, 0, IOT_ACK_STORED, NULL);
        free(b[i].data);
    }
}

/* Deterministic, so that a failure can be replayed. */
static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static struct blob mutate(struct blob src, uint32_t *rnd)
{
    struct blob m = copy_blob(src);
    int edits = 1 + (int)(next_random(rnd) % 4);
    for (int i = 0; i < edits; i++) {
        size_t at = next_random(rnd) % m.len;
        switch (next_random(rnd) % 3) {
        case 0: m.data[at] ^= (uint8_t)(1u << (next_random(rnd) % 8)); break;
        case 1: m.data[at] = (uint8_t)next_random(rnd); break;
        default: m.len = at ? at : 1; break;
        }
    }
    return m;
}

/* Every mutation must be answered, whatever it decodes to. */
static void fuzz(void *sock, struct blob a0, struct blob c0)
{
    uint32_t rnd = 0x2545f491;
    for (int i = 0; i < 2000; i++) {
        struct blob m = mutate(i % 2 ? a0 : c0, &rnd);
        send_batch(sock, m);
        struct reply r;
        recv_reply(sock, &r);
        check(r.n == 7 && part_is(&r, 1, IOT_LINK_ACK), "mutation %d: no ACK", i);
        free_reply(&r);
        free(m.data);
    }
    hello(sock, IOT_LINK_DEFAULT_CREDIT);
}

/* Whether two decoded batches name the same node and user. */
static int same_stamp(const iot_batch *a, const iot_batch *b)
{
    const char *va = a->via ? a->via : "", *vb = b->via ? b->via : "";
    if (strcmp(va, vb) != 0 || !a->sender != !b->sender)
        return 0;
    return !a->sender || (a->sender->uid == b->sender->uid && a->sender->gid == b->sender->gid &&
                          a->sender->pid == b->sender->pid &&
                          strcmp(a->sender->job ? a->sender->job : "",
                                 b->sender->job ? b->sender->job : "") == 0);
}

/* The agent appends `via`, `sender` and their stamp checksum to each
 * batch: of random changes to those bytes, none that makes the batch say
 * another node or user may be stored.  Every batch has a seq of its own,
 * so that none is answered as a duplicate of another. */
static void stamp_run(void *sock)
{
    Iotrace__Drop d = IOTRACE__DROP__INIT, *ds[] = {&d};
    d.count = 1;
    iot_body body = IOTRACE__BODY__INIT;
    body.n_drops = 1;
    body.drops = ds;
    Iotrace__Sender root = IOTRACE__SENDER__INIT;
    root.pid = 1;
    uint8_t tail[IOT_WIRE_TAIL_MAX];
    size_t tail_len = iot_wire_via_field("cn-root", tail);
    tail_len += iot_wire_sender_field(&root, tail + tail_len);
    tail_len += iot_wire_stamp_field("cn-root", &root, tail + tail_len);
    iot_producer p = prod_a();
    uint32_t rnd = 0x7f4a7c15;
    int changed = 0, stored_changed = 0, stored = 0;
    for (int i = 0; i <= 3000; i++) {
        struct blob b = encode(&p, 0x57a3b, (uint64_t)i, &body);
        size_t at = b.len;
        b.data = realloc(b.data, b.len + tail_len);
        memcpy(b.data + b.len, tail, tail_len);
        b.len += tail_len;
        char err[256];
        iot_batch *orig = iot_wire_open(b.data, b.len, err, sizeof err);
        check(orig != NULL, "stamped batch does not open: %s", err);
        if (i > 0) { /* the first one as the agent sent it */
            int edits = 1 + (int)(next_random(&rnd) % 3);
            for (int e = 0; e < edits; e++) {
                size_t pos = at + next_random(&rnd) % tail_len;
                if (next_random(&rnd) % 2)
                    b.data[pos] ^= (uint8_t)(1u << (next_random(&rnd) % 8));
                else
                    b.data[pos] = (uint8_t)next_random(&rnd);
            }
        }
        iot_batch *mut = iot_wire_open(b.data, b.len, err, sizeof err);
        int differs = mut && orig && !same_stamp(orig, mut);
        changed += differs;
        send_batch(sock, b);
        struct reply r;
        recv_reply(sock, &r);
        int st = r.n == 7 && zmq_msg_size(&r.part[5]) == 1 ? *(const uint8_t *)zmq_msg_data(&r.part[5]) : -1;
        check(st >= 0, "stamp mutation %d: no ACK", i);
        if (i == 0)
            check(st == IOT_ACK_STORED, "the batch as its agent stamped it: status %d", st);
        stored += st == IOT_ACK_STORED;
        stored_changed += differs && st == IOT_ACK_STORED;
        free_reply(&r);
        iot_wire_free_batch(mut);
        iot_wire_free_batch(orig);
        free(b.data);
    }
    printf("stamp: 3000 mutations of via/sender/stamp, %d decode to another node or user, "
           "%d of those stored (%d stored in all, the first unchanged one included)\n",
           changed, stored_changed, stored);
    check(changed > 0, "no mutation changed the node or user");
    check(stored_changed == 0, "%d batches stored under another node or user", stored_changed);
}

int main(int argc, char **argv)
{
    int is_stats = argc == 5 && (strcmp(argv[2], "stats") == 0 || strcmp(argv[2], "files") == 0);
    if (!is_stats && (argc != 4 || (strcmp(argv[2], "first") && strcmp(argv[2], "second") &&
                                    strcmp(argv[2], "fuzz") && strcmp(argv[2], "withdraw") &&
                                    strcmp(argv[2], "stamp")))) {
        fprintf(stderr,
                "usage: collector_client ENDPOINT first|second|fuzz|withdraw|stamp EXPECTED_CREDIT\n"
                        "       collector_client ENDPOINT stats|files EXPECTED_CREDIT BASE_NS\n");
        return 2;
    }
    if (is_stats)
        base_ns = strtoll(argv[4], NULL, 10);
    phase = argv[2];
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int timeout = TIMEOUT_MS, linger = 0;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(sock, argv[1]) < 0)
        die("connect");
    hello(sock, (uint32_t)strtoul(argv[3], NULL, 10));

    struct blob a0 = batch_a0(), a1 = batch_a1(), b0 = batch_b0(), c0 = batch_c0();
    if (strcmp(phase, "first") == 0)
        first_run(sock, a0, a1, b0, c0);
    else if (strcmp(phase, "second") == 0)
        second_run(sock, a0, b0);
    else if (strcmp(phase, "stats") == 0)
        stats_run(sock);
    else if (strcmp(phase, "files") == 0)
        files_run(sock);
    else if (strcmp(phase, "withdraw") == 0)
        withdraw_run(sock);
    else if (strcmp(phase, "stamp") == 0)
        stamp_run(sock);
    else
        fuzz(sock, a0, c0);
    free(a0.data), free(a1.data), free(b0.data), free(c0.data);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    if (failures)
        fprintf(stderr, "collector_client %s: %d checks failed\n", phase, failures);
    return failures ? 1 : 0;
}
