#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
/* The wire library: exact round trips of every kind of record, delta
 * coding, and rejection of every corruption with a clear reason.
 *
 * The body's CRC covers the body bytes, the identity checksum every other
 * field a producer sets: test_flip_every_byte holds the library to
 * rejecting every flip of every bit. */
#include <lz4.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "iot_functions.h"
#include "wire.h"

#define N_EV 3

/* Absolute start times; the wire carries them delta coded. */
static const int64_t mpiio_start[N_EV] = {1700000000000000000, 1700000000000050000,
                                          1700000000000040000};
static const int64_t posix_start[N_EV] = {1700000000000002000, 1700000000000052000,
                                          1700000000000042000};
static const int64_t disk_start[N_EV] = {1700000000000003000, 1700000000000001000,
                                         1700000000000090000};

struct fixture {
    iot_producer producer;
    iot_body body;
    Iotrace__MpiioEvents mpiio;
    Iotrace__PosixEvents posix;
    Iotrace__DiskEvents disk;
    Iotrace__FileName files[2], *file_ptrs[2];
    Iotrace__Drop drops[2], *drop_ptrs[2];
    Iotrace__ClockSync clock[2], *clock_ptrs[2];
    char *jobs[3];
    uint32_t m_func[N_EV], m_tid[N_EV], p_func[N_EV], p_tid[N_EV];
    uint32_t d_func[N_EV], d_tid[N_EV], d_job[N_EV];
    uint64_t m_callid[N_EV], m_file[N_EV], m_bytes[N_EV], m_xfer[N_EV], m_dur[N_EV],
        m_coll[N_EV];
    uint64_t p_callid[N_EV], p_file[N_EV], p_bytes[N_EV], p_dur[N_EV];
    uint64_t d_callid[N_EV], d_file[N_EV], d_bytes[N_EV], d_dur[N_EV];
    int64_t m_off[N_EV], m_start[N_EV], p_off[N_EV], p_start[N_EV], p_ret[N_EV];
    int64_t d_off[N_EV], d_start[N_EV], d_ret[N_EV];
    int32_t m_ret[N_EV];
};

static void fill_mpiio(struct fixture *f)
{
    Iotrace__MpiioEvents *m = &f->mpiio;
    iotrace__mpiio_events__init(m);
    for (int i = 0; i < N_EV; i++) {
        f->m_func[i] = i == 1 ? IOT_F_MPIIO_MPI_File_read_at_all : IOT_F_MPIIO_MPI_File_write_at;
        f->m_tid[i] = 4242 + (uint32_t)i;
        f->m_callid[i] = (5ull << 40) | (uint64_t)(i + 1);
        f->m_file[i] = 0xfeedfacecafebeefull;
        f->m_off[i] = i == 2 ? -1 : (int64_t)i << 33;
        f->m_bytes[i] = 1u << 20;
        f->m_xfer[i] = i == 1 ? 12345 : 1u << 20;
        f->m_start[i] = mpiio_start[i];
        f->m_dur[i] = 40000 + (uint64_t)i;
        f->m_ret[i] = i == 2 ? -17 : 0;
        f->m_coll[i] = i == 1 ? 9 : 0;
    }
    m->n_func = m->n_tid = m->n_callid = m->n_file = m->n_offset = m->n_bytes = m->n_xfer =
        m->n_t_start = m->n_duration = m->n_ret = m->n_coll_seq = N_EV;
    m->func = f->m_func, m->tid = f->m_tid, m->callid = f->m_callid, m->file = f->m_file;
    m->offset = f->m_off, m->bytes = f->m_bytes, m->xfer = f->m_xfer;
    m->t_start = f->m_start, m->duration = f->m_dur, m->ret = f->m_ret;
    m->coll_seq = f->m_coll;
}

static void fill_posix(struct fixture *f)
{
    Iotrace__PosixEvents *p = &f->posix;
    iotrace__posix_events__init(p);
    for (int i = 0; i < N_EV; i++) {
        f->p_func[i] = i == 1 ? IOT_F_POSIX_pread64 : IOT_F_POSIX_pwrite64;
        f->p_tid[i] = 4242;
        f->p_callid[i] = i == 2 ? 0 : (5ull << 40) | (uint64_t)(i + 1);
        f->p_file[i] = 0xfeedfacecafebeefull;
        f->p_off[i] = i == 2 ? -1 : (int64_t)i << 33;
        f->p_bytes[i] = 1u << 20;
        f->p_start[i] = posix_start[i];
        f->p_dur[i] = 30000;
        f->p_ret[i] = i == 2 ? -5 : 1 << 20;
    }
    p->n_func = p->n_tid = p->n_callid = p->n_file = p->n_offset = p->n_bytes =
        p->n_t_start = p->n_duration = p->n_ret = N_EV;
    p->func = f->p_func, p->tid = f->p_tid, p->callid = f->p_callid, p->file = f->p_file;
    p->offset = f->p_off, p->bytes = f->p_bytes, p->t_start = f->p_start;
    p->duration = f->p_dur, p->ret = f->p_ret;
}

static void fill_disk(struct fixture *f)
{
    Iotrace__DiskEvents *d = &f->disk;
    iotrace__disk_events__init(d);
    f->jobs[0] = "";
    f->jobs[1] = "slurm.1001";
    f->jobs[2] = "slurm.1002";
    for (int i = 0; i < N_EV; i++) {
        f->d_func[i] = i == 1 ? IOT_F_DISK_readv : IOT_F_DISK_writev;
        f->d_tid[i] = 77 + (uint32_t)i;
        f->d_job[i] = (uint32_t)i; /* 0 = none, then both dictionary entries */
        f->d_callid[i] = i == 0 ? 0 : (5ull << 40) | (uint64_t)i;
        f->d_file[i] = 0x1234;
        f->d_off[i] = (int64_t)i * 4096;
        f->d_bytes[i] = 4096;
        f->d_start[i] = disk_start[i];
        f->d_dur[i] = 900;
        f->d_ret[i] = 4096;
    }
    d->n_func = d->n_tid = d->n_job = d->n_callid = d->n_file = d->n_offset = d->n_bytes =
        d->n_t_start = d->n_duration = d->n_ret = N_EV;
    d->func = f->d_func, d->tid = f->d_tid, d->job = f->d_job, d->callid = f->d_callid;
    d->file = f->d_file, d->offset = f->d_off, d->bytes = f->d_bytes;
    d->t_start = f->d_start, d->duration = f->d_dur, d->ret = f->d_ret;
}

static void fill_records(struct fixture *f)
{
    static char *paths[2] = {"/gluster/vol0/out.h5", "/gluster/vol0/ckpt.0"};
    for (int i = 0; i < 2; i++) {
        iotrace__file_name__init(&f->files[i]);
        f->files[i].id = 0xfeedfacecafebeefull + (uint64_t)i;
        f->files[i].path = paths[i];
        f->file_ptrs[i] = &f->files[i];

        iotrace__drop__init(&f->drops[i]);
        f->drops[i].reason = i ? IOTRACE__DROP_REASON__DROP_SEND_FAILED
                               : IOTRACE__DROP_REASON__DROP_BUFFER_FULL;
        f->drops[i].count = 1000 + (uint64_t)i;
        f->drops[i].t_first = 1700000000000000000ull;
        f->drops[i].t_last = 1700000000000100000ull;
        f->drops[i].tid = 4242;
        f->drop_ptrs[i] = &f->drops[i];

        iotrace__clock_sync__init(&f->clock[i]);
        f->clock[i].local_ns = 1700000000000000000 + i;
        f->clock[i].offset_ns = i ? -123456 : 654321;
        f->clock[i].rtt_ns = 80000;
        f->clock[i].peer = "collector:5555";
        f->clock_ptrs[i] = &f->clock[i];
    }
}

/* A body holding every kind of record. */
static void make_fixture(struct fixture *f)
{
    memset(f, 0, sizeof *f);
    iotrace__producer__init(&f->producer);
    f->producer.node = "node17";
    f->producer.pid = 31337;
    f->producer.start_time_ns = 1699999999000000000ull;
    f->producer.kind = IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT;
    f->producer.job = "slurm.1001";
    f->producer.rank = 5;
    fill_mpiio(f);
    fill_posix(f);
    fill_disk(f);
    fill_records(f);
    iotrace__body__init(&f->body);
    f->body.mpiio = &f->mpiio;
    f->body.posix = &f->posix;
    f->body.disk = &f->disk;
    f->body.n_files = 2, f->body.files = f->file_ptrs;
    f->body.n_drops = 2, f->body.drops = f->drop_ptrs;
    f->body.n_clock = 2, f->body.clock = f->clock_ptrs;
    f->body.n_jobs = 3, f->body.jobs = f->jobs;
}

#define ASSERT_COLUMN(a, b, field)                                                       \
    do {                                                                                 \
        assert_int_equal((a)->n_##field, (b)->n_##field);                                \
        for (size_t i_ = 0; i_ < (a)->n_##field; i_++)                                   \
            assert_true((a)->field[i_] == (b)->field[i_]);                               \
    } while (0)

static void assert_mpiio_equal(const Iotrace__MpiioEvents *a, const Iotrace__MpiioEvents *b)
{
    assert_true((a == NULL) == (b == NULL));
    if (!a)
        return;
    ASSERT_COLUMN(a, b, func);
    ASSERT_COLUMN(a, b, tid);
    ASSERT_COLUMN(a, b, callid);
    ASSERT_COLUMN(a, b, file);
    ASSERT_COLUMN(a, b, offset);
    ASSERT_COLUMN(a, b, bytes);
    ASSERT_COLUMN(a, b, xfer);
    ASSERT_COLUMN(a, b, t_start);
    ASSERT_COLUMN(a, b, duration);
    ASSERT_COLUMN(a, b, ret);
    ASSERT_COLUMN(a, b, coll_seq);
}

static void assert_posix_equal(const Iotrace__PosixEvents *a, const Iotrace__PosixEvents *b)
{
    assert_true((a == NULL) == (b == NULL));
    if (!a)
        return;
    ASSERT_COLUMN(a, b, func);
    ASSERT_COLUMN(a, b, tid);
    ASSERT_COLUMN(a, b, callid);
    ASSERT_COLUMN(a, b, file);
    ASSERT_COLUMN(a, b, offset);
    ASSERT_COLUMN(a, b, bytes);
    ASSERT_COLUMN(a, b, t_start);
    ASSERT_COLUMN(a, b, duration);
    ASSERT_COLUMN(a, b, ret);
}

static void assert_disk_equal(const Iotrace__DiskEvents *a, const Iotrace__DiskEvents *b)
{
    assert_true((a == NULL) == (b == NULL));
    if (!a)
        return;
    ASSERT_COLUMN(a, b, func);
    ASSERT_COLUMN(a, b, tid);
    ASSERT_COLUMN(a, b, job);
    ASSERT_COLUMN(a, b, callid);
    ASSERT_COLUMN(a, b, file);
    ASSERT_COLUMN(a, b, offset);
    ASSERT_COLUMN(a, b, bytes);
    ASSERT_COLUMN(a, b, t_start);
    ASSERT_COLUMN(a, b, duration);
    ASSERT_COLUMN(a, b, ret);
}

static void assert_body_equal(const iot_body *a, const iot_body *b)
{
    assert_mpiio_equal(a->mpiio, b->mpiio);
    assert_posix_equal(a->posix, b->posix);
    assert_disk_equal(a->disk, b->disk);
    assert_int_equal(a->n_files, b->n_files);
    for (size_t i = 0; i < a->n_files; i++) {
        assert_true(a->files[i]->id == b->files[i]->id);
        assert_string_equal(a->files[i]->path, b->files[i]->path);
    }
    assert_int_equal(a->n_drops, b->n_drops);
    for (size_t i = 0; i < a->n_drops; i++) {
        assert_int_equal(a->drops[i]->reason, b->drops[i]->reason);
        assert_true(a->drops[i]->count == b->drops[i]->count);
        assert_true(a->drops[i]->t_first == b->drops[i]->t_first);
        assert_true(a->drops[i]->t_last == b->drops[i]->t_last);
        assert_int_equal(a->drops[i]->tid, b->drops[i]->tid);
    }
    assert_int_equal(a->n_clock, b->n_clock);
    for (size_t i = 0; i < a->n_clock; i++) {
        assert_true(a->clock[i]->local_ns == b->clock[i]->local_ns);
        assert_true(a->clock[i]->offset_ns == b->clock[i]->offset_ns);
        assert_true(a->clock[i]->rtt_ns == b->clock[i]->rtt_ns);
        assert_string_equal(a->clock[i]->peer, b->clock[i]->peer);
    }
    assert_int_equal(a->n_jobs, b->n_jobs);
    for (size_t i = 0; i < a->n_jobs; i++)
        assert_string_equal(a->jobs[i], b->jobs[i]);
}

static uint8_t *repack(iot_batch *b, int reseal, size_t *len);

/* The fixture's body as it stands, uncompressed (COMPRESSION_NONE), in a
 * sealed batch of the given version. */
static uint8_t *uncompressed_batch(struct fixture *f, uint32_t version, size_t *len)
{
    size_t raw_len = protobuf_c_message_get_packed_size(&f->body.base);
    uint8_t *raw = malloc(raw_len);
    protobuf_c_message_pack(&f->body.base, raw);
    iot_batch b = IOTRACE__BATCH__INIT;
    b.magic = IOT_WIRE_MAGIC;
    b.version = version;
    b.producer = &f->producer;
    b.event_count = 13;
    b.raw_size = (uint32_t)raw_len;
    b.compression = IOTRACE__COMPRESSION__COMPRESSION_NONE;
    b.body.data = raw;
    b.body.len = raw_len;
    uint8_t *out = repack(&b, 1, len);
    free(raw);
    return out;
}

/* Flat columns as version 3 writes them, worked out here on their own from
 * a table coded in place: every column of all the rows, more than two,
 * whose values after the first are equal, cut to two values; but never
 * every column, so the first stays whole.  `saved` keeps the counts. */
static void cut_flat(ProtobufCMessage *m, size_t saved[16])
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    size_t rows = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        saved[i] = *(size_t *)((char *)m + d->fields[i].quantifier_offset);
        rows = saved[i] > rows ? saved[i] : rows;
    }
    unsigned flat = 0;
    int full = 0, first = -1;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t n = saved[i];
        if (!n)
            continue;
        if (first < 0)
            first = (int)i;
        size_t w = f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_SINT32 ? 4 : 8;
        const char *v = *(char *const *)((const char *)m + f->offset);
        int same = n == rows && rows > 2;
        for (size_t j = 2; same && j < n; j++)
            same = memcmp(v + j * w, v + w, w) == 0;
        if (same)
            flat |= 1u << i;
        else
            full = 1;
    }
    if (!full && first >= 0)
        flat &= ~(1u << first);
    for (unsigned i = 0; i < d->n_fields; i++)
        if (flat >> i & 1)
            *(size_t *)((char *)m + d->fields[i].quantifier_offset) = 2;
}

static void put_back(ProtobufCMessage *m, const size_t saved[16])
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++)
        *(size_t *)((char *)m + d->fields[i].quantifier_offset) = saved[i];
}

/* What protobuf-c writes for a body as a batch of this version carries it
 * (columns coded, flat ones cut), into a new buffer of *len bytes. */
static uint8_t *pack_as_carried(const iot_body *body, size_t *len)
{
    ProtobufCMessage *t[3] = {body->mpiio ? &body->mpiio->base : NULL,
                              body->posix ? &body->posix->base : NULL,
                              body->disk ? &body->disk->base : NULL};
    size_t saved[3][16];
    iot_wire_code_columns(body);
    for (int k = 0; k < 3; k++)
        if (t[k])
            cut_flat(t[k], saved[k]);
    *len = protobuf_c_message_get_packed_size(&body->base);
    uint8_t *out = malloc(*len + 1);
    assert_non_null(out);
    protobuf_c_message_pack(&body->base, out);
    for (int k = 0; k < 3; k++)
        if (t[k])
            put_back(t[k], saved[k]);
    iot_wire_uncode_columns(body, IOT_WIRE_VERSION);
    return out;
}

/* The size of a body as a batch carries it. */
static size_t coded_size(const iot_body *body)
{
    size_t n;
    free(pack_as_carried(body, &n));
    return n;
}

static uint8_t *encode(const struct fixture *f, const iot_body *body, uint64_t seq, size_t *len)
{
    uint8_t *buf = NULL;
    char err[256] = "";
    int rc = iot_wire_encode(&f->producer, 0x0123456789abcdefull, seq, body, &buf, len, err,
                             sizeof err);
    if (rc != 0)
        fail_msg("encode failed: %s", err);
    return buf;
}

/* Opens and decodes a batch that must be valid. */
static iot_body *decode_ok(const uint8_t *buf, size_t len, iot_batch **batch_out)
{
    char err[256] = "";
    iot_batch *b = iot_wire_open(buf, len, err, sizeof err);
    if (!b)
        fail_msg("open failed: %s", err);
    iot_body *body = iot_wire_body(b, err, sizeof err);
    if (!body)
        fail_msg("body failed: %s", err);
    if (batch_out)
        *batch_out = b;
    else
        iot_wire_free_batch(b);
    return body;
}

/* Asserts that a batch is rejected with a message containing `want`. */
static void assert_rejected(const uint8_t *buf, size_t len, const char *want)
{
    char err[256] = "";
    int rc = iot_wire_validate(buf, len, err, sizeof err);
    if (rc == 0)
        fail_msg("batch accepted, expected rejection with '%s'", want);
    if (!strstr(err, want))
        fail_msg("rejected with '%s', expected '%s'", err, want);
}

/* Decoded batches share a block per thread that starts over once all of
 * them are freed: two alive at once, freed in either order, many rounds
 * (the block grows after the first), each still equal to what was sent;
 * and a thread of its own gets a block of its own. */
static void *decode_rounds(void *arg)
{
    const struct fixture *f = arg;
    size_t len;
    uint8_t *buf = encode(f, &f->body, 7, &len);
    for (int round = 0; round < 50; round++) {
        iot_batch *b1, *b2;
        iot_body *one = decode_ok(buf, len, &b1);
        iot_body *two = decode_ok(buf, len, &b2);
        assert_body_equal(one, &f->body);
        assert_body_equal(two, &f->body);
        if (round % 2) {
            iot_wire_free_body(one);
            iot_wire_free_batch(b1);
            assert_body_equal(two, &f->body);
            iot_wire_free_body(two);
            iot_wire_free_batch(b2);
        } else {
            iot_wire_free_batch(b2);
            iot_wire_free_body(two);
            assert_body_equal(one, &f->body);
            iot_wire_free_batch(b1);
            iot_wire_free_body(one);
        }
    }
    free(buf);
    return NULL;
}

static void test_decode_block_reuse(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    decode_rounds(&f);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, decode_rounds, &f), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static void test_round_trip_all_kinds(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    size_t len;
    uint8_t *buf = encode(&f, &f.body, 42, &len);
    iot_batch *b;
    iot_body *body = decode_ok(buf, len, &b);

    assert_int_equal(b->magic, IOT_WIRE_MAGIC);
    assert_int_equal(b->version, IOT_WIRE_VERSION);
    assert_string_equal(b->producer->node, "node17");
    assert_int_equal(b->producer->pid, 31337);
    assert_true(b->producer->start_time_ns == 1699999999000000000ull);
    assert_int_equal(b->producer->kind, IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT);
    assert_string_equal(b->producer->job, "slurm.1001");
    assert_int_equal(b->producer->rank, 5);
    assert_true(b->epoch == 0x0123456789abcdefull);
    assert_true(b->seq == 42);
    assert_int_equal(b->event_count, 3 * N_EV + 2 + 2);
    assert_int_equal(b->compression, IOTRACE__COMPRESSION__COMPRESSION_LZ4);
    assert_int_equal(b->raw_size, coded_size(&f.body));
    assert_body_equal(body, &f.body);

    for (int i = 0; i < N_EV; i++) {
        assert_true(body->mpiio->t_start[i] == mpiio_start[i]);
        assert_true(body->posix->t_start[i] == posix_start[i]);
        assert_true(body->disk->t_start[i] == disk_start[i]);
    }
    char key[256];
    assert_true(iot_wire_batch_key(b, key, sizeof key) > 0);
    assert_string_equal(key, "node17/31337/1699999999000000000");
    assert_int_equal(iot_wire_batch_key(b, key, 10), -1);

    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    free(buf);
}

/* Each kind alone, so that a kind that only survives next to others (or an
 * event count that only adds up by luck) shows. */
static void test_round_trip_each_kind(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    for (int kind = 0; kind < 6; kind++) {
        iot_body one = IOTRACE__BODY__INIT;
        size_t want = 0;
        switch (kind) {
        case 0: one.mpiio = &f.mpiio, want = N_EV; break;
        case 1: one.posix = &f.posix, want = N_EV; break;
        case 2: one.disk = &f.disk, one.n_jobs = 3, one.jobs = f.jobs, want = N_EV; break;
        case 3: one.n_files = 2, one.files = f.file_ptrs; break;
        case 4: one.n_drops = 2, one.drops = f.drop_ptrs, want = 2; break;
        case 5: one.n_clock = 2, one.clock = f.clock_ptrs, want = 2; break;
        }
        size_t len;
        uint8_t *buf = encode(&f, &one, 1, &len);
        iot_batch *b;
        iot_body *body = decode_ok(buf, len, &b);
        assert_int_equal(b->event_count, want);
        assert_body_equal(body, &one);
        iot_wire_free_body(body);
        iot_wire_free_batch(b);
        free(buf);
    }
}

/* A batch with no records at all is valid: zero events. */
/* proto3 leaves zero-valued fields out, so an envelope cut right after its
 * seq field would otherwise open as a valid empty batch and make the real
 * batch with that seq look like a duplicate. Neither side accepts one. */
/* The forwarding agent's node is appended to a batch as it is; the body,
 * its checksum and every other field stay valid, the last stamp wins, and a
 * batch without one names its producer's node as its clock. */
static uint8_t *stamp(const uint8_t *buf, size_t len, const char *via, size_t *out_len)
{
    uint8_t field[IOT_WIRE_VIA_MAX + 3];
    size_t n = iot_wire_via_field(via, field);
    assert_true(n > strlen(via));
    uint8_t *out = malloc(len + n);
    assert_non_null(out);
    memcpy(out, buf, len);
    memcpy(out + len, field, n);
    *out_len = len + n;
    return out;
}

static void test_stamp_via(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    size_t len;
    uint8_t *buf = encode(&f, &f.body, 7, &len);
    iot_batch *b;
    iot_body *body = decode_ok(buf, len, &b);
    assert_string_equal(iot_wire_clock_node(b), "node17");
    iot_wire_free_body(body);
    iot_wire_free_batch(b);

    char longname[201];
    memset(longname, 'n', 200);
    longname[200] = '\0';
    const char *names[] = {"cn1", longname};
    for (int k = 0; k < 2; k++) {
        size_t once_len, twice_len;
        uint8_t *once = stamp(buf, len, "forged", &once_len);
        uint8_t *twice = stamp(once, once_len, names[k], &twice_len);
        body = decode_ok(twice, twice_len, &b);
        assert_string_equal(b->via, names[k]);
        assert_string_equal(iot_wire_clock_node(b), names[k]);
        assert_string_equal(b->producer->node, "node17");
        assert_true(b->seq == 7);
        assert_body_equal(body, &f.body);
        iot_wire_free_body(body);
        iot_wire_free_batch(b);
        free(once);
        free(twice);
    }
    char toolong[300];
    uint8_t field[IOT_WIRE_VIA_MAX + 3];
    memset(toolong, 'x', 299);
    toolong[299] = '\0';
    assert_int_equal(iot_wire_via_field(toolong, field), 0);
    free(buf);
}

/* The agent's sender stamp decodes to exactly what it said, root's zeros
 * included (proto3 would leave them out), and the batch's key then names
 * the user. */
static void test_stamp_sender(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    size_t len;
    uint8_t *buf = encode(&f, &f.body, 7, &len);
    const Iotrace__Sender cases[] = {{.uid = 0, .gid = 0, .pid = 1},
                                     {.uid = 1000, .gid = 100, .pid = 4194304},
                                     {.uid = UINT32_MAX, .gid = UINT32_MAX, .pid = UINT32_MAX}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        uint8_t field[IOT_WIRE_SENDER_MAX];
        size_t n = iot_wire_sender_field(&cases[k], field);
        assert_true(n >= 8 && n <= IOT_WIRE_SENDER_MAX);
        uint8_t *out = malloc(len + n);
        assert_non_null(out);
        memcpy(out, buf, len);
        memcpy(out + len, field, n);
        iot_batch *b;
        iot_body *body = decode_ok(out, len + n, &b);
        assert_non_null(b->sender);
        assert_true(b->sender->uid == cases[k].uid && b->sender->gid == cases[k].gid &&
                    b->sender->pid == cases[k].pid);
        assert_body_equal(body, &f.body);
        char key[256], want[256];
        assert_true(iot_wire_batch_key(b, key, sizeof key) > 0);
        snprintf(want, sizeof want, "node17/31337/1699999999000000000/u%u", cases[k].uid);
        assert_string_equal(key, want);
        iot_wire_free_body(body);
        iot_wire_free_batch(b);
        free(out);
    }
    free(buf);
}

static void test_empty_batch_is_refused(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    iot_body empty = IOTRACE__BODY__INIT;
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[256] = "";
    assert_int_equal(iot_wire_encode(&f.producer, 1, 7, &empty, &buf, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "empty"));
    assert_null(buf);

    iot_batch b = IOTRACE__BATCH__INIT;
    b.magic = IOT_WIRE_MAGIC;
    b.version = IOT_WIRE_VERSION;
    b.producer = &f.producer;
    b.epoch = 1;
    b.seq = 7;
    b.compression = IOTRACE__COMPRESSION__COMPRESSION_LZ4;
    b.checksum = iot_wire_crc32(NULL, 0);
    len = protobuf_c_message_get_packed_size(&b.base);
    buf = malloc(len);
    protobuf_c_message_pack(&b.base, buf);
    assert_rejected(buf, len, "no body");
    free(buf);
}

static void test_delta_coding(void **state)
{
    (void)state;
    int64_t v[] = {100, 250, 240, 240, INT64_MAX, INT64_MIN, 0, -5};
    int64_t orig[sizeof v / sizeof v[0]];
    size_t n = sizeof v / sizeof v[0];
    memcpy(orig, v, sizeof v);
    iot_wire_delta_encode(v, n);
    /* First against 0, then against the previous value, wrapping. */
    assert_true(v[0] == 100);
    assert_true(v[1] == 150);
    assert_true(v[2] == -10);
    assert_true(v[3] == 0);
    assert_true(v[4] == INT64_MAX - 240);
    assert_true(v[5] == 1); /* INT64_MIN - INT64_MAX wraps to 1 */
    assert_true(v[6] == INT64_MIN);
    iot_wire_delta_decode(v, n);
    assert_memory_equal(v, orig, sizeof v);
    iot_wire_delta_encode(v, 0);
    iot_wire_delta_decode(v, 0);
    assert_memory_equal(v, orig, sizeof v);
}

/* An MPI-IO table of n rows over the caller's columns. */
static Iotrace__MpiioEvents mpiio_table(size_t n, uint32_t *func, uint32_t *tid, uint64_t *callid,
                                        uint64_t *file, int64_t *off, uint64_t *bytes,
                                        uint64_t *xfer, int64_t *t, uint64_t *dur, int32_t *ret,
                                        uint64_t *coll)
{
    Iotrace__MpiioEvents m = IOTRACE__MPIIO_EVENTS__INIT;
    m.n_func = m.n_tid = m.n_callid = m.n_file = m.n_offset = m.n_bytes = m.n_xfer = n;
    m.n_t_start = m.n_duration = m.n_ret = m.n_coll_seq = n;
    m.func = func, m.tid = tid, m.callid = callid, m.file = file, m.offset = off;
    m.bytes = bytes, m.xfer = xfer, m.t_start = t, m.duration = dur, m.ret = ret;
    m.coll_seq = coll;
    return m;
}

/* Sequential transfers of one thread become runs of 0 and 1 that LZ4 all
 * but removes: the point of the column coding. */
static void test_column_coding(void **state)
{
    (void)state;
    enum { N = 64 };
    uint32_t func[N], tid[N];
    uint64_t callid[N], file[N], bytes[N], xfer[N], dur[N], coll[N];
    int64_t off[N], t[N], ret64[N];
    int32_t ret[N];
    for (int i = 0; i < N; i++) {
        func[i] = IOT_F_MPIIO_MPI_File_write_at, tid[i] = 31000;
        callid[i] = (7ull << 40) | (uint64_t)(i + 1), file[i] = 0xabcdef;
        bytes[i] = xfer[i] = 4096, dur[i] = 2000 + (uint64_t)i, coll[i] = 0;
        off[i] = (int64_t)i * 4096 + (1ll << 30), t[i] = 1700000000000000000 + i * 2600;
        ret[i] = 0, ret64[i] = 4096;
    }
    Iotrace__MpiioEvents m =
        mpiio_table(N, func, tid, callid, file, off, bytes, xfer, t, dur, ret, coll);
    Iotrace__PosixEvents p = IOTRACE__POSIX_EVENTS__INIT;
    p.n_func = p.n_tid = p.n_callid = p.n_file = p.n_offset = p.n_bytes = N;
    p.n_t_start = p.n_duration = p.n_ret = N;
    uint32_t p_tid[N];
    uint64_t p_callid[N];
    int64_t p_off[N], p_t[N];
    memcpy(p_tid, tid, sizeof p_tid);
    memcpy(p_callid, callid, sizeof p_callid);
    memcpy(p_off, off, sizeof p_off);
    memcpy(p_t, t, sizeof p_t);
    p.func = func, p.tid = p_tid, p.callid = p_callid, p.file = file, p.offset = p_off;
    p.bytes = bytes, p.t_start = p_t, p.duration = dur, p.ret = ret64;
    iot_body body = IOTRACE__BODY__INIT;
    body.mpiio = &m, body.posix = &p;
    size_t plain = protobuf_c_message_get_packed_size(&body.base);
    iot_wire_code_columns(&body);
    size_t coded = protobuf_c_message_get_packed_size(&body.base);
    /* The first value of each column against 0, then against the pattern. */
    assert_true(off[0] == 1ll << 30 && callid[0] == ((7ull << 40) | 1) << 1);
    for (int i = 1; i < N; i++) {
        assert_int_equal(tid[i], 0);
        assert_int_equal(p_tid[i], 0);
        assert_true(callid[i] == 2); /* +1, zig-zag */
        assert_true(off[i] == 0 && p_off[i] == 0);
        assert_true(xfer[i] == 0 && ret64[i] == 0);
        assert_true(t[i] == 2600 && p_t[i] == 2600);
    }
    /* tid, callid, offset, xfer, ret and the times: 11 of 20 bytes an
     * MPI-IO and POSIX pair took are gone before LZ4 even starts. */
    assert_true(coded + N * 11 <= plain);
    iot_wire_uncode_columns(&body, IOT_WIRE_VERSION);
    for (int i = 0; i < N; i++) {
        assert_int_equal(tid[i], 31000);
        assert_int_equal(p_tid[i], 31000);
        assert_true(callid[i] == ((7ull << 40) | (uint64_t)(i + 1)) && p_callid[i] == callid[i]);
        assert_true(off[i] == (int64_t)i * 4096 + (1ll << 30) && p_off[i] == off[i]);
        assert_true(xfer[i] == 4096 && ret64[i] == 4096);
        assert_true(t[i] == 1700000000000000000 + i * 2600 && p_t[i] == t[i]);
    }
}

/* The body of an encoded batch as it travels: columns coded, flat ones as
 * two values (protobuf-c's reading of the raw bytes). */
static iot_body *raw_body(const uint8_t *buf, size_t len)
{
    iot_batch *b;
    iot_wire_free_body(decode_ok(buf, len, &b));
    uint8_t *raw = malloc(b->raw_size);
    assert_non_null(raw);
    assert_int_equal(LZ4_decompress_safe((const char *)b->body.data, (char *)raw,
                                         (int)b->body.len, (int)b->raw_size),
                     (int)b->raw_size);
    iot_body *body = iotrace__body__unpack(NULL, b->raw_size, raw);
    assert_non_null(body);
    free(raw);
    iot_wire_free_batch(b);
    return body;
}

/* Sequential calls: every column but the one that varies goes as two
 * values, and comes back whole; a table that does not vary at all keeps
 * its first column whole, which gives the reader the rows. */
static void test_flat_columns(void **state)
{
    (void)state;
    enum { N = 500 };
    static uint32_t func[N], tid[N], job[N];
    static uint64_t callid[N], file[N], bytes[N], xfer[N], dur[N], same_dur[N], coll[N];
    static int64_t off[N], t[N], ret64[N];
    static int32_t ret[N];
    for (int i = 0; i < N; i++) {
        func[i] = IOT_F_MPIIO_MPI_File_read_at, tid[i] = 31000, job[i] = 1;
        callid[i] = (7ull << 40) | (uint64_t)(i + 1), file[i] = 0xabcdef;
        bytes[i] = xfer[i] = 4096, dur[i] = 2000 + (uint64_t)(i * 7919 % 613), coll[i] = 0;
        same_dur[i] = 900;
        off[i] = (int64_t)i * 4096 + (1ll << 30), t[i] = 1700000000000000000 + i * 2600;
        ret[i] = 0, ret64[i] = 4096;
    }
    xfer[N - 1] = 100; /* a short read at the end: xfer stays whole */
    Iotrace__MpiioEvents m =
        mpiio_table(N, func, tid, callid, file, off, bytes, xfer, t, dur, ret, coll);
    Iotrace__DiskEvents d = IOTRACE__DISK_EVENTS__INIT;
    d.n_func = d.n_tid = d.n_job = d.n_callid = d.n_file = d.n_offset = d.n_bytes = N;
    d.n_t_start = d.n_duration = d.n_ret = N;
    d.func = func, d.tid = tid, d.job = job, d.callid = callid, d.file = file, d.offset = off;
    d.bytes = bytes, d.t_start = t, d.duration = same_dur, d.ret = ret64;
    char *jobs[2] = {"", "slurm.1001"};
    iot_body body = IOTRACE__BODY__INIT;
    body.mpiio = &m, body.disk = &d;
    body.n_jobs = 2, body.jobs = jobs;

    struct fixture f;
    make_fixture(&f);
    size_t len;
    uint8_t *buf = encode(&f, &body, 1, &len);
    iot_body *got = decode_ok(buf, len, NULL);
    assert_mpiio_equal(got->mpiio, &m);
    assert_disk_equal(got->disk, &d);
    iot_wire_free_body(got);

    iot_body *raw = raw_body(buf, len);
    assert_int_equal(raw->mpiio->n_func, 2);
    assert_int_equal(raw->mpiio->n_callid, 2);
    assert_int_equal(raw->mpiio->n_file, 2); /* 8 bytes a row before */
    assert_int_equal(raw->mpiio->n_offset, 2);
    assert_int_equal(raw->mpiio->n_t_start, 2);
    assert_int_equal(raw->mpiio->n_duration, N);
    assert_int_equal(raw->mpiio->n_xfer, N);
    /* Nothing varies in the disk table: its first column stays whole. */
    assert_int_equal(raw->disk->n_func, N);
    assert_int_equal(raw->disk->n_job, 2);
    assert_int_equal(raw->disk->n_duration, 2);
    assert_int_equal(raw->disk->n_ret, 2);
    iotrace__body__free_unpacked(raw, NULL);
    free(buf);
}

/* The library's CRC-32 gives zlib's sums, whole and in pieces, so that
 * stores, batches and agent journals written before it still verify. */
static void test_crc_is_zlibs(void **state)
{
    (void)state;
    static uint8_t buf[70000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    assert_int_equal(iot_wire_crc32((const uint8_t *)"123456789", 9), 0xcbf43926u);
    const size_t lens[] = {0, 1, 7, 8, 15, 16, 63, 64, 65, 255, 4096, 65537, sizeof buf};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k];
        uint32_t want = (uint32_t)crc32(crc32(0, Z_NULL, 0), buf, (uInt)n);
        assert_int_equal(iot_wire_crc32(buf, n), want);
        size_t cut = n / 3;
        assert_int_equal(iot_wire_crc32_update(iot_wire_crc32(buf, cut), buf + cut, n - cut), want);
    }
}

/* Any values at all come back exactly: every step wraps. */
static void test_column_coding_any_values(void **state)
{
    (void)state;
    struct fixture f, want;
    make_fixture(&f);
    make_fixture(&want);
    static const uint64_t edge[] = {0, 1, UINT64_MAX, 1ull << 63, (1ull << 63) - 1, 4096};
    for (int i = 0; i < N_EV; i++) {
        f.m_tid[i] = want.m_tid[i] = i == 1 ? UINT32_MAX : 0;
        f.m_callid[i] = want.m_callid[i] = edge[(i + 2) % 6];
        f.m_off[i] = want.m_off[i] = (int64_t)edge[(i + 1) % 6];
        f.m_bytes[i] = want.m_bytes[i] = edge[(i + 3) % 6];
        f.m_xfer[i] = want.m_xfer[i] = edge[(i + 4) % 6];
        f.m_coll[i] = want.m_coll[i] = edge[(i + 5) % 6];
        f.p_ret[i] = want.p_ret[i] = i == 0 ? INT64_MIN : INT64_MAX;
        f.p_bytes[i] = want.p_bytes[i] = edge[i % 6];
        f.d_off[i] = want.d_off[i] = i == 2 ? INT64_MIN : -1;
    }
    size_t len;
    uint8_t *buf = encode(&f, &f.body, 3, &len);
    assert_body_equal(&f.body, &want.body); /* the caller's columns restored */
    iot_batch *b;
    iot_body *body = decode_ok(buf, len, &b);
    assert_body_equal(body, &want.body);
    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    free(buf);
}

/* Stores written by version 1 (times delta coded, nothing else) read as
 * they always did. */
static void test_version1_is_read(void **state)
{
    (void)state;
    struct fixture f, want;
    make_fixture(&f);
    make_fixture(&want);
    iot_wire_delta_encode(f.m_start, N_EV);
    iot_wire_delta_encode(f.p_start, N_EV);
    iot_wire_delta_encode(f.d_start, N_EV);
    size_t len;
    uint8_t *buf = uncompressed_batch(&f, 1, &len);
    iot_batch *opened;
    iot_body *body = decode_ok(buf, len, &opened);
    assert_int_equal(opened->version, 1);
    assert_body_equal(body, &want.body);
    iot_wire_free_body(body);
    iot_wire_free_batch(opened);
    free(buf);
    /* Nor is a version from the future taken for one it knows. */
    buf = uncompressed_batch(&f, IOT_WIRE_VERSION + 1, &len);
    assert_rejected(buf, len, "unsupported format version 4 (this build reads versions 1 to 3)");
    free(buf);
}

/* A small batch whose every byte a loop can afford to corrupt. */
static uint8_t *small_batch(struct fixture *f, size_t *len)
{
    make_fixture(f);
    f->mpiio.n_func = f->mpiio.n_tid = f->mpiio.n_callid = f->mpiio.n_file =
        f->mpiio.n_offset = f->mpiio.n_bytes = f->mpiio.n_xfer = f->mpiio.n_t_start =
            f->mpiio.n_duration = f->mpiio.n_ret = f->mpiio.n_coll_seq = 1;
    iot_body *body = &f->body;
    body->posix = NULL;
    body->disk = NULL;
    body->n_jobs = 0;
    body->n_clock = 0;
    body->n_files = 1;
    body->n_drops = 1;
    return encode(f, body, 7, len);
}

static uint64_t read_varint(const uint8_t *buf, size_t *p)
{
    uint64_t v = 0;
    for (int s = 0;; s += 7) {
        uint8_t byte = buf[(*p)++];
        v |= (uint64_t)(byte & 0x7f) << s;
        if (!(byte & 0x80))
            return v;
    }
}

/* Which envelope field (protobuf field number) each byte belongs to, tag
 * and length prefix included. */
static void map_fields(const uint8_t *buf, size_t len, int *field_of)
{
    size_t p = 0;
    while (p < len) {
        size_t start = p;
        uint64_t tag = read_varint(buf, &p);
        switch (tag & 7) {
        case 0: read_varint(buf, &p); break;
        case 1: p += 8; break;
        case 2: p += read_varint(buf, &p); break;
        case 5: p += 4; break;
        default: fail_msg("unexpected wire type in a fresh batch");
        }
        for (size_t i = start; i < p && i < len; i++)
            field_of[i] = (int)(tag >> 3);
    }
    assert_int_equal(p, len);
}

/* Every cut of a batch is rejected, including the cuts right after the
 * producer, epoch or seq field, which proto3 would read as a complete
 * envelope with zero-valued remaining fields (see docs/wire-format.md). */
static void test_truncated_every_length(void **state)
{
    (void)state;
    struct fixture f;
    size_t len;
    uint8_t *buf = small_batch(&f, &len);
    for (size_t cut = 0; cut < len; cut++) {
        char err[256] = "";
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        if (iot_wire_validate(copy, cut, err, sizeof err) == 0)
            fail_msg("batch truncated to %zu of %zu bytes was accepted", cut, len);
        assert_true(strlen(err) > 10);
        free(copy);
    }
    free(buf);
}

static void test_flip_every_byte(void **state)
{
    (void)state;
    struct fixture f;
    size_t len;
    uint8_t *buf = small_batch(&f, &len);
    int *field_of = calloc(len, sizeof *field_of);
    map_fields(buf, len, field_of);
    /* Every field is covered: the body by its checksum, the rest by the
     * identity checksum (which covers the body's checksum too). */
    const uint8_t masks[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff};
    uint8_t *copy = malloc(len);
    size_t identity = 0;
    for (size_t pos = 0; pos < len; pos++)
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(copy, buf, len);
            copy[pos] ^= masks[m];
            char err[256] = "";
            int field = field_of[pos];
            if (iot_wire_validate(copy, len, err, sizeof err) == 0)
                fail_msg("flip 0x%02x at byte %zu (field %d) was accepted", masks[m], pos, field);
            assert_true(strlen(err) > 10);
            identity += strstr(err, "identity checksum mismatch") != NULL;
        }
    /* Flips inside the epoch's 8 bytes always unpack, and only the identity
     * checksum can catch them. */
    assert_true(identity >= 8 * 9);
    free(copy);
    free(field_of);
    free(buf);
}

static void test_flip_in_body_is_checksum_mismatch(void **state)
{
    (void)state;
    struct fixture f;
    size_t len;
    uint8_t *buf = small_batch(&f, &len);
    iot_batch *b;
    iot_body *body = decode_ok(buf, len, &b);
    size_t body_len = b->body.len;
    uint8_t b_body[4096];
    assert_true(body_len <= sizeof b_body);
    memcpy(b_body, b->body.data, body_len);
    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    /* Where the body bytes lie in the envelope (the identity checksum,
     * field 13, follows them). */
    const uint8_t *at = memmem(buf, len, b_body, body_len);
    assert_non_null(at);
    for (size_t pos = (size_t)(at - buf); pos < (size_t)(at - buf) + body_len; pos++) {
        buf[pos] ^= 0x10;
        assert_rejected(buf, len, "checksum mismatch");
        buf[pos] ^= 0x10;
    }
    free(buf);
}

/* Re-packs an envelope after a test changed it; `reseal` recomputes the CRC
 * of the (possibly changed) body so that only the intended defect remains. */
static uint8_t *repack(iot_batch *b, int reseal, size_t *len)
{
    if (reseal)
        b->checksum = (uint32_t)crc32(crc32(0, Z_NULL, 0), b->body.data, (uInt)b->body.len);
    iot_wire_set_id_checksum(b);
    *len = iotrace__batch__get_packed_size(b);
    uint8_t *out = malloc(*len);
    iotrace__batch__pack(b, out);
    return out;
}

static iot_batch *open_fixture(struct fixture *f)
{
    make_fixture(f);
    size_t len;
    uint8_t *buf = encode(f, &f->body, 3, &len);
    iot_batch *b = iot_wire_open(buf, len, NULL, 0);
    assert_non_null(b);
    free(buf);
    return b;
}

static void test_envelope_defects(void **state)
{
    (void)state;
    struct fixture f;
    size_t len;
    uint8_t *buf;
    iot_batch *b = open_fixture(&f);
    uint32_t raw_size = b->raw_size, count = b->event_count;

    b->version = IOT_WIRE_VERSION + 1;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "unsupported format version 4 (this build reads versions 1 to 3)");
    free(buf);
    b->version = IOT_WIRE_VERSION;

    b->compression = 7;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "unknown compression");
    free(buf);

    b->compression = IOTRACE__COMPRESSION__COMPRESSION_NONE;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "uncompressed body size does not match the envelope");
    free(buf);
    b->compression = IOTRACE__COMPRESSION__COMPRESSION_LZ4;

    b->raw_size = raw_size + 1;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "LZ4 body does not decompress to the declared");
    free(buf);
    b->raw_size = raw_size - 1;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "LZ4 body does not decompress to the declared");
    free(buf);

    b->raw_size = IOT_WIRE_MAX_RAW + 1;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "declared body size exceeds the limit");
    free(buf);
    b->raw_size = raw_size;

    b->event_count = count + 1;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "body holds 13 events, envelope says 14");
    free(buf);
    b->event_count = count;

    b->checksum ^= 1;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "checksum mismatch");
    free(buf);

    b->magic = 0x12345678;
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "not an iotrace batch (bad magic)");
    free(buf);
    b->magic = IOT_WIRE_MAGIC;

    char *node = b->producer->node;
    b->producer->node = "";
    buf = repack(b, 0, &len);
    assert_rejected(buf, len, "batch has no producer node");
    free(buf);
    b->producer->node = node;

    /* An emptied body, even with a matching CRC, is not the declared body. */
    size_t body_len = b->body.len;
    b->body.len = 0;
    buf = repack(b, 1, &len);
    assert_rejected(buf, len, "batch has no body");
    free(buf);
    b->body.len = body_len;

    iot_wire_free_batch(b);
}

static void test_stray_traffic(void **state)
{
    (void)state;
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    assert_rejected(junk, 0, "batch of 0 bytes is too short");
    assert_rejected(junk, 4, "batch of 4 bytes is too short");
    assert_rejected(junk, sizeof junk, "not an iotrace batch (bad magic)");
    /* Right magic, then nonsense. */
    junk[0] = 0x0d;
    junk[1] = 'I', junk[2] = 'O', junk[3] = 'T', junk[4] = 'R';
    junk[5] = 0x12, junk[6] = 0xff; /* length-delimited field 2, absurd length */
    assert_rejected(junk, sizeof junk, "malformed batch envelope");

    /* Larger than any batch may be: refused before unpacking. */
    size_t huge = (size_t)IOT_WIRE_MAX_BATCH + 1;
    uint8_t *big = calloc(huge, 1);
    memcpy(big, junk, 5);
    assert_rejected(big, huge, "exceeds the limit of 67108864");
    free(big);
}

/* Builds a batch around an arbitrary raw body, correctly compressed and
 * sealed, so that only the body's own defect is left to find. */
static uint8_t *wrap_raw_body_version(struct fixture *f, const iot_body *body, uint32_t count,
                                      uint32_t version, size_t *len)
{
    size_t raw_len = protobuf_c_message_get_packed_size(&body->base);
    uint8_t *raw = malloc(raw_len + 1);
    protobuf_c_message_pack(&body->base, raw);
    int bound = LZ4_compressBound((int)raw_len);
    uint8_t *lz = malloc((size_t)bound);
    int lz_len = LZ4_compress_default((char *)raw, (char *)lz, (int)raw_len, bound);
    iot_batch b = IOTRACE__BATCH__INIT;
    b.magic = IOT_WIRE_MAGIC;
    b.version = version;
    b.producer = &f->producer;
    b.seq = 1;
    b.event_count = count;
    b.raw_size = (uint32_t)raw_len;
    b.compression = IOTRACE__COMPRESSION__COMPRESSION_LZ4;
    b.body.data = lz;
    b.body.len = (size_t)lz_len;
    uint8_t *out = repack(&b, 1, len);
    free(raw);
    free(lz);
    return out;
}

static uint8_t *wrap_raw_body(struct fixture *f, const iot_body *body, uint32_t count,
                              size_t *len)
{
    return wrap_raw_body_version(f, body, count, IOT_WIRE_VERSION, len);
}

static void test_body_defects(void **state)
{
    (void)state;
    struct fixture f;
    size_t len;
    uint8_t *buf;
    char err[256];

    make_fixture(&f);
    f.mpiio.n_xfer = N_EV - 2;
    buf = wrap_raw_body(&f, &f.body, 13, &len);
    assert_rejected(buf, len, "mpiio column 'xfer' has 1 values, expected 3");
    free(buf);
    assert_int_equal(iot_wire_encode(&f.producer, 1, 1, &f.body, &buf, &len, err, sizeof err),
                     -1);
    assert_string_equal(err, "mpiio column 'xfer' has 1 values, expected 3");
    /* Two values of three rows: a flat column since version 3, too short
     * before, and never short in memory. */
    f.mpiio.n_xfer = N_EV - 1;
    buf = wrap_raw_body_version(&f, &f.body, 13, 2, &len);
    assert_rejected(buf, len, "mpiio column 'xfer' has 2 values, expected 3");
    free(buf);
    assert_int_equal(iot_wire_encode(&f.producer, 1, 1, &f.body, &buf, &len, err, sizeof err),
                     -1);
    assert_string_equal(err, "mpiio column 'xfer' has 2 values, expected 3");

    make_fixture(&f);
    f.posix.n_ret = N_EV - 2;
    buf = wrap_raw_body(&f, &f.body, 13, &len);
    assert_rejected(buf, len, "posix column 'ret' has 1 values, expected 3");
    free(buf);

    make_fixture(&f);
    f.disk.n_job = N_EV - 2;
    buf = wrap_raw_body(&f, &f.body, 13, &len);
    assert_rejected(buf, len, "disk column 'job' has 1 values, expected 3");
    free(buf);

    make_fixture(&f);
    f.d_job[2] = 3; /* the dictionary holds 0..2 */
    buf = wrap_raw_body(&f, &f.body, 13, &len);
    assert_rejected(buf, len, "disk event 2 names job index 3 of 3");
    free(buf);
    assert_int_equal(iot_wire_encode(&f.producer, 1, 1, &f.body, &buf, &len, err, sizeof err),
                     -1);

    make_fixture(&f);
    buf = wrap_raw_body(&f, &f.body, 12, &len);
    assert_rejected(buf, len, "body holds 13 events, envelope says 12");
    free(buf);

    /* A body that decompresses fine but is not a Body message. */
    iot_batch b = IOTRACE__BATCH__INIT;
    uint8_t raw[32], lz[64];
    memset(raw, 0xff, sizeof raw);
    int lz_len = LZ4_compress_default((char *)raw, (char *)lz, sizeof raw, sizeof lz);
    b.magic = IOT_WIRE_MAGIC;
    b.version = IOT_WIRE_VERSION;
    b.producer = &f.producer;
    b.raw_size = sizeof raw;
    b.compression = IOTRACE__COMPRESSION__COMPRESSION_LZ4;
    b.body.data = lz;
    b.body.len = (size_t)lz_len;
    buf = repack(&b, 1, &len);
    assert_rejected(buf, len, "malformed batch body");
    free(buf);
}

/* coll_group (field 12) is optional: absent in the fixture (as in every
 * batch before it, read as all 0), else one value per event, which comes
 * back exactly; any other length is refused. */
static void test_coll_group_column(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    uint64_t group[N_EV] = {0, 0x7fffffffffffffffull, 0};
    f.mpiio.n_coll_group = N_EV;
    f.mpiio.coll_group = group;
    size_t len;
    uint8_t *buf = encode(&f, &f.body, 7, &len);
    iot_batch *b;
    iot_body *body = decode_ok(buf, len, &b);
    assert_int_equal(body->mpiio->n_coll_group, N_EV);
    for (int i = 0; i < N_EV; i++)
        assert_true(body->mpiio->coll_group[i] == group[i]);
    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    free(buf);

    char err[256];
    f.mpiio.n_coll_group = 1;
    assert_int_equal(iot_wire_encode(&f.producer, 1, 1, &f.body, &buf, &len, err, sizeof err),
                     -1);
    assert_string_equal(err, "mpiio column 'coll_group' has 1 values, expected 3");
}

/* COMPRESSION_NONE is part of the format (handy for debugging tools): the
 * body is carried as is and must match raw_size. */
static void test_uncompressed_batch(void **state)
{
    (void)state;
    struct fixture f;
    make_fixture(&f);
    iot_wire_code_columns(&f.body);
    size_t len;
    uint8_t *buf = uncompressed_batch(&f, IOT_WIRE_VERSION, &len);
    iot_wire_uncode_columns(&f.body, IOT_WIRE_VERSION);
    iot_body *body = decode_ok(buf, len, NULL);
    assert_body_equal(body, &f.body);
    iot_wire_free_body(body);
    free(buf);
}

static void test_function_table(void **state)
{
    (void)state;
    assert_string_equal(iot_func_name(IOT_F_MPIIO_MPI_File_write_at_all),
                        "MPI_File_write_at_all");
    assert_int_equal(iot_func_kind(IOT_F_POSIX_pwrite64), IOT_KIND_POSIX);
    assert_int_equal(iot_func_lookup(IOT_KIND_DISK, "writev"), IOT_F_DISK_writev);
    assert_int_equal(iot_func_lookup(IOT_KIND_POSIX, "no_such_call"), IOT_F_NONE);
    assert_null(iot_func_name(IOT_F_LIMIT));
    assert_null(iot_func_name(0));
}

/* ---- the body packer: protobuf-c's bytes, exactly ---------------------- */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13; /* xorshift64: reproducible, no libc state */
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* Values of every size a varint can take, negative ones included. */
static uint64_t rnd_value(void)
{
    switch (rnd() % 5) {
    case 0: return 0;
    case 1: return rnd() % 128;
    case 2: return rnd() >> (rnd() % 64);
    case 3: return (uint64_t) - (int64_t)(rnd() % 100000);
    default: return rnd();
    }
}

/* Fills every repeated column of a table with n random values. */
static void *fill_columns(ProtobufCMessage *m, size_t n, void **arrays, size_t *n_arrays)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t k = rnd() % 4 == 0 ? 0 : n; /* some columns empty */
        size_t width = f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_SINT32 ? 4 : 8;
        void *v = calloc(k + 1, width);
        assert_non_null(v);
        for (size_t j = 0; j < k; j++) {
            uint64_t x = rnd_value();
            if (width == 4)
                ((uint32_t *)v)[j] = (uint32_t)x;
            else
                ((uint64_t *)v)[j] = x;
        }
        *(size_t *)((char *)m + f->quantifier_offset) = k;
        *(void **)((char *)m + f->offset) = v;
        arrays[(*n_arrays)++] = v;
    }
    return m;
}

/* The body reader (wire_unpack.c) makes what protobuf-c makes: the two
 * messages pack to the same bytes. */
static void assert_unpacks_alike(const uint8_t *buf, size_t len)
{
    iot_body *want = iotrace__body__unpack(NULL, len, buf);
    iot_body *got = iot_wire_body_unpack(NULL, len, buf);
    assert_true(!want == !got);
    if (!want)
        return;
    size_t n = protobuf_c_message_get_packed_size(&want->base);
    assert_int_equal(protobuf_c_message_get_packed_size(&got->base), n);
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    assert_true(a && b);
    protobuf_c_message_pack(&want->base, a);
    protobuf_c_message_pack(&got->base, b);
    assert_memory_equal(a, b, n);
    free(a);
    free(b);
    iotrace__body__free_unpacked(want, NULL);
    iotrace__body__free_unpacked(got, NULL);
}

/* What the fast reader leaves to protobuf-c reads as protobuf-c reads it:
 * a column written unpacked, a table or a column given twice, a column
 * this build does not know, and damaged bodies of every length. */
static void test_body_unpack_unusual(void **state)
{
    (void)state;
    static const uint8_t unpacked[] = {0x12, 0x04, 0x08, 0x05, 0x08, 0x06};    /* func 5, 6 */
    static const uint8_t twice[] = {0x12, 0x03, 0x0a, 0x01, 0x05,              /* func [5] */
                                    0x12, 0x03, 0x0a, 0x01, 0x06};             /* func [6] */
    static const uint8_t column_twice[] = {0x1a, 0x06, 0x0a, 0x01, 0x05, 0x0a, 0x01, 0x06};
    static const uint8_t unknown[] = {0x22, 0x08, 0xf8, 0x01, 0x07, 0x0a, 0x03, 0x05, 0x81, 0x01,
                                      0x48, 0x2a};                             /* made_through 42 */
    static const uint8_t fixed_odd[] = {0x12, 0x05, 0x22, 0x03, 0x01, 0x02, 0x03};
    static const uint8_t long_varint[] = {0x12, 0x0d, 0x0a, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    /* A length in 8 bytes: protobuf-c takes at most 5 (found by fuzz_wire). */
    static const uint8_t long_length[] = {0x12, 0x00, 0x1a, 0x80, 0x80, 0x80,
                                          0x80, 0x80, 0x80, 0x80, 0x00};
    const struct {
        const uint8_t *b;
        size_t n;
        int ok;
    } cases[] = {
        {long_length, sizeof long_length, 0},   {unpacked, sizeof unpacked, 1},
        {twice, sizeof twice, 1},               {column_twice, sizeof column_twice, 1},
        {unknown, sizeof unknown, 1},           {fixed_odd, sizeof fixed_odd, 0},
        {long_varint, sizeof long_varint, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        iot_body *got = iot_wire_body_unpack(NULL, cases[i].n, cases[i].b);
        if ((got != NULL) != cases[i].ok)
            fail_msg("case %zu: %s", i, got ? "read, protobuf-c refuses it" : "refused");
        if (got)
            iotrace__body__free_unpacked(got, NULL);
        for (size_t cut = 0; cut <= cases[i].n; cut++)
            assert_unpacks_alike(cases[i].b, cut);
    }
    iot_body *b = iot_wire_body_unpack(NULL, sizeof unpacked, unpacked);
    assert_int_equal(b->mpiio->n_func, 2);
    assert_int_equal(b->mpiio->func[1], 6);
    iotrace__body__free_unpacked(b, NULL);
    b = iot_wire_body_unpack(NULL, sizeof unknown, unknown);
    assert_int_equal(b->disk->n_func, 2);
    assert_int_equal(b->disk->func[1], 129);
    assert_true(b->made_through == 42);
    iotrace__body__free_unpacked(b, NULL);
    /* A body from the fixture with each byte in turn changed. */
    struct fixture f;
    make_fixture(&f);
    iot_wire_code_columns(&f.body);
    size_t n = protobuf_c_message_get_packed_size(&f.body.base);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    protobuf_c_message_pack(&f.body.base, buf);
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit += 7) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_unpacks_alike(buf, n);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    free(buf);
}

static void test_body_pack_matches_protobuf_c(void **state)
{
    (void)state;
    for (int round = 0; round < 400; round++) {
        iot_body body = IOTRACE__BODY__INIT;
        Iotrace__MpiioEvents mpiio = IOTRACE__MPIIO_EVENTS__INIT;
        Iotrace__PosixEvents posix = IOTRACE__POSIX_EVENTS__INIT;
        Iotrace__DiskEvents disk = IOTRACE__DISK_EVENTS__INIT;
        Iotrace__FileName file = IOTRACE__FILE_NAME__INIT, *files[1] = {&file};
        Iotrace__Drop drop = IOTRACE__DROP__INIT, *drops[1] = {&drop};
        char *jobs[2] = {"", "job-7"};
        void *arrays[64];
        size_t n_arrays = 0;
        size_t n = round < 10 ? (size_t)round : rnd() % 3000;
        /* Each table absent, present and empty, or filled. */
        if (rnd() % 3)
            body.mpiio = fill_columns(&mpiio.base, rnd() % 3 ? n : 0, arrays, &n_arrays);
        if (rnd() % 3)
            body.posix = fill_columns(&posix.base, rnd() % 3 ? n : 0, arrays, &n_arrays);
        if (rnd() % 3)
            body.disk = fill_columns(&disk.base, rnd() % 3 ? n : 0, arrays, &n_arrays);
        if (rnd() % 2) {
            file.id = rnd();
            file.path = "/data/out.dat";
            body.n_files = 1;
            body.files = files;
        }
        if (rnd() % 2) {
            drop.count = rnd_value();
            body.n_drops = 1;
            body.drops = drops;
        }
        if (rnd() % 2) {
            body.n_jobs = 2;
            body.jobs = jobs;
        }
        body.made_through = rnd() % 2 ? rnd_value() : 0;

        /* Some columns flat: their coded values after the first made equal. */
        if (rnd() % 2) {
            ProtobufCMessage *t[3] = {body.mpiio ? &body.mpiio->base : NULL,
                                      body.posix ? &body.posix->base : NULL,
                                      body.disk ? &body.disk->base : NULL};
            iot_wire_code_columns(&body);
            for (int k = 0; k < 3; k++)
                for (unsigned i = 0; t[k] && i < t[k]->descriptor->n_fields; i++) {
                    const ProtobufCFieldDescriptor *f = &t[k]->descriptor->fields[i];
                    size_t c = *(size_t *)((char *)t[k] + f->quantifier_offset);
                    size_t w = f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_SINT32 ? 4 : 8;
                    char *v = *(char **)((char *)t[k] + f->offset);
                    for (size_t j = 2; rnd() % 2 && j < c; j++)
                        memcpy(v + j * w, v + w, w);
                }
            iot_wire_uncode_columns(&body, IOT_WIRE_VERSION);
        }
        /* What protobuf-c writes for the columns coded, flat ones cut. */
        size_t want_len;
        uint8_t *want = pack_as_carried(&body, &want_len);
        assert_unpacks_alike(want, want_len);
        size_t len;
        uint8_t *fresh = iot_wire_body_pack_new(&body, IOT_WIRE_MAX_RAW, &len);
        assert_int_equal(len, want_len);
        if (want_len)
            assert_memory_equal(fresh, want, want_len);
        else
            assert_null(fresh);
        free(fresh);
        free(want);
        for (size_t i = 0; i < n_arrays; i++)
            free(arrays[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_all_kinds),
        cmocka_unit_test(test_decode_block_reuse),
        cmocka_unit_test(test_round_trip_each_kind),
        cmocka_unit_test(test_stamp_via),
        cmocka_unit_test(test_empty_batch_is_refused),
        cmocka_unit_test(test_delta_coding),
        cmocka_unit_test(test_column_coding),
        cmocka_unit_test(test_column_coding_any_values),
        cmocka_unit_test(test_version1_is_read),
        cmocka_unit_test(test_truncated_every_length),
        cmocka_unit_test(test_flip_every_byte),
        cmocka_unit_test(test_flip_in_body_is_checksum_mismatch),
        cmocka_unit_test(test_envelope_defects),
        cmocka_unit_test(test_stray_traffic),
        cmocka_unit_test(test_body_defects),
        cmocka_unit_test(test_coll_group_column),
        cmocka_unit_test(test_uncompressed_batch),
        cmocka_unit_test(test_function_table),
        cmocka_unit_test(test_stamp_sender),
        cmocka_unit_test(test_body_pack_matches_protobuf_c),
        cmocka_unit_test(test_flat_columns),
        cmocka_unit_test(test_crc_is_zlibs),
        cmocka_unit_test(test_body_unpack_unusual),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
