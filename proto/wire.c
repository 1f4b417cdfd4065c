#include "wire.h"

#include <libdeflate.h>
#include <lz4.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"

/* ---- decoding arena ----------------------------------------------------
 *
 * Unpacking a batch makes a few dozen allocations (the body's bytes, one
 * array per column, the decompressed body) that all go together.  Taken
 * one by one from malloc, a daemon decoding hundreds of batches a second
 * spends more on malloc and on the pages the heap gives back and takes
 * again than on decoding.  Each thread has one block instead: allocations
 * are cut from it while anything decoded is alive, it starts over when
 * everything is freed, and it grows (only then) to the largest batch seen.
 * What does not fit goes to malloc. */

struct wire_arena {
    char *base;
    size_t cap, used;
    size_t live; /* allocations cut from the block and not yet freed */
    size_t span; /* bytes asked for since the block was last empty */
};

#define ARENA_MAX ((size_t)IOT_WIRE_MAX_RAW + IOT_WIRE_MAX_BATCH)

static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void arena_destroy(void *p)
{
    struct wire_arena *a = p;
    free(a->base);
    free(a);
}

static void arena_key_make(void)
{
    (void)pthread_key_create(&arena_key, arena_destroy);
}

static struct wire_arena *arena_get(void)
{
    pthread_once(&arena_once, arena_key_make);
    struct wire_arena *a = pthread_getspecific(arena_key);
    if (!a && (a = calloc(1, sizeof *a)) && pthread_setspecific(arena_key, a) != 0) {
        free(a);
        a = NULL;
    }
    return a;
}

static void *arena_alloc(void *data, size_t size)
{
    struct wire_arena *a = data;
    size_t need = (size + 15) & ~(size_t)15;
    if (need < size)
        return NULL;
    if (a->live == 0) {
        if (a->span > a->cap && a->span <= ARENA_MAX) {
            size_t cap = (a->span + 0xffff) & ~(size_t)0xffff;
            char *b = malloc(cap); /* not realloc: nothing in it needs keeping */
            if (b) {
                free(a->base);
                a->base = b;
                a->cap = cap;
            }
        }
        a->used = a->span = 0;
    }
    a->span += need;
    if (need <= a->cap - a->used) {
        void *p = a->base + a->used;
        a->used += need;
        a->live++;
        return p;
    }
    return malloc(size);
}

static void arena_free(void *data, void *p)
{
    struct wire_arena *a = data;
    if (!p)
        return;
    if (a->base && (char *)p >= a->base && (char *)p < a->base + a->cap)
        a->live--;
    else
        free(p);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WIRE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define WIRE_ASAN 1
#endif

/* The calling thread's allocator (NULL, meaning malloc, if there is none).
 * Sanitized builds use malloc, so that a read past a column is caught. */
static ProtobufCAllocator *wire_allocator(ProtobufCAllocator *out)
{
#ifdef WIRE_ASAN
    (void)out;
    return NULL;
#endif
    struct wire_arena *a = arena_get();
    if (!a)
        return NULL;
    *out = (ProtobufCAllocator){.alloc = arena_alloc, .free = arena_free, .allocator_data = a};
    return out;
}

/* zlib's CRC-32, computed by libdeflate, which folds with carry-less
 * multiplication where the CPU has it: every batch is summed by its
 * producer, its agent, the collector and the store (on write and on each
 * read), about 5 instructions a byte with zlib's own crc32(), a tenth of
 * that here (docs/performance.md, "Flat columns"). */
uint32_t iot_wire_crc32_update(uint32_t crc, const void *data, size_t len)
{
    return libdeflate_crc32(crc, data, len);
}

uint32_t iot_wire_crc32(const uint8_t *data, size_t len)
{
    return libdeflate_crc32(0, data, len);
}

size_t iot_wire_table_events(const iot_body *body)
{
    return (body->mpiio ? body->mpiio->n_func : 0) + (body->posix ? body->posix->n_func : 0) +
           (body->disk ? body->disk->n_func : 0);
}

size_t iot_wire_event_count(const iot_body *body)
{
    return iot_wire_table_events(body) + body->n_drops + body->n_clock;
}

#define SAME_LEN(tbl, field)                                                             \
    do {                                                                                 \
        if ((tbl)->n_##field != n)                                                       \
            return iot_fail(err, errlen, "%s column '%s' has %zu values, expected %zu",      \
                        table, #field, (size_t)(tbl)->n_##field, n);                     \
    } while (0)

static int check_mpiio(const Iotrace__MpiioEvents *t, char *err, size_t errlen)
{
    const char *table = "mpiio";
    size_t n = t->n_func;
    SAME_LEN(t, tid);
    SAME_LEN(t, callid);
    SAME_LEN(t, file);
    SAME_LEN(t, offset);
    SAME_LEN(t, bytes);
    SAME_LEN(t, xfer);
    SAME_LEN(t, t_start);
    SAME_LEN(t, duration);
    SAME_LEN(t, ret);
    SAME_LEN(t, coll_seq);
    if (t->n_coll_group) /* absent: all 0 (batches before the column, or none in a group) */
        SAME_LEN(t, coll_group);
    return 0;
}

static int check_posix(const Iotrace__PosixEvents *t, char *err, size_t errlen)
{
    const char *table = "posix";
    size_t n = t->n_func;
    SAME_LEN(t, tid);
    SAME_LEN(t, callid);
    SAME_LEN(t, file);
    SAME_LEN(t, offset);
    SAME_LEN(t, bytes);
    SAME_LEN(t, t_start);
    SAME_LEN(t, duration);
    SAME_LEN(t, ret);
    return 0;
}

static int check_disk(const Iotrace__DiskEvents *t, size_t n_jobs, char *err, size_t errlen)
{
    const char *table = "disk";
    size_t n = t->n_func;
    SAME_LEN(t, tid);
    SAME_LEN(t, job);
    SAME_LEN(t, callid);
    SAME_LEN(t, file);
    SAME_LEN(t, offset);
    SAME_LEN(t, bytes);
    SAME_LEN(t, t_start);
    SAME_LEN(t, duration);
    SAME_LEN(t, ret);
    for (size_t i = 0; i < n; i++)
        if (t->job[i] != 0 && t->job[i] >= n_jobs)
            return iot_fail(err, errlen, "disk event %zu names job index %u of %zu", i,
                        t->job[i], n_jobs);
    return 0;
}

int iot_wire_check_body(const iot_body *body, char *err, size_t errlen)
{
    if (body->mpiio && check_mpiio(body->mpiio, err, errlen) < 0)
        return -1;
    if (body->posix && check_posix(body->posix, err, errlen) < 0)
        return -1;
    if (body->disk && check_disk(body->disk, body->n_jobs, err, errlen) < 0)
        return -1;
    if (body->n_job_uid && body->n_job_uid != body->n_jobs)
        return iot_fail(err, errlen, "job_uid has %zu entries, jobs %zu", body->n_job_uid,
                        body->n_jobs);
    return 0;
}

int iot_wire_encode(const iot_producer *producer, uint64_t epoch, uint64_t seq,
                    const iot_body *body, uint8_t **out, size_t *out_len, char *err,
                    size_t errlen)
{
    if (iot_wire_check_body(body, err, errlen) < 0)
        return -1;
    size_t raw_len;
    uint8_t *raw = iot_wire_body_pack_new(body, IOT_WIRE_MAX_RAW, &raw_len);
    if (!raw && raw_len == 0)
        return iot_fail(err, errlen, "refusing to encode an empty batch");
    if (!raw && raw_len > IOT_WIRE_MAX_RAW)
        return iot_fail(err, errlen, "body of %zu bytes exceeds the limit of %u", raw_len,
                    IOT_WIRE_MAX_RAW);
    int bound = LZ4_compressBound((int)raw_len);
    uint8_t *lz = raw ? malloc(bound > 0 ? (size_t)bound : 1) : NULL;
    if (!raw || !lz) {
        free(raw);
        free(lz);
        return iot_fail(err, errlen, "out of memory encoding a batch");
    }
    int lz_len = LZ4_compress_fast((const char *)raw, (char *)lz, (int)raw_len, bound,
                                   IOT_WIRE_LZ4_ACCELERATION);
    free(raw);
    if (lz_len <= 0 && raw_len > 0) {
        free(lz);
        return iot_fail(err, errlen, "LZ4 compression failed");
    }

    iot_batch b = IOTRACE__BATCH__INIT;
    b.magic = IOT_WIRE_MAGIC;
    b.version = IOT_WIRE_VERSION;
    b.producer = (iot_producer *)producer;
    b.epoch = epoch;
    b.seq = seq;
    b.event_count = (uint32_t)iot_wire_event_count(body);
    b.raw_size = (uint32_t)raw_len;
    b.compression = IOTRACE__COMPRESSION__COMPRESSION_LZ4;
    b.body.data = lz;
    b.body.len = (size_t)(lz_len > 0 ? lz_len : 0);
    b.checksum = iot_wire_crc32(b.body.data, b.body.len);
    iot_wire_set_id_checksum(&b);

    size_t len = protobuf_c_message_get_packed_size(&b.base);
    uint8_t *buf = malloc(len);
    if (!buf) {
        free(lz);
        return iot_fail(err, errlen, "out of memory encoding a batch");
    }
    protobuf_c_message_pack(&b.base, buf);
    free(lz);
    *out = buf;
    *out_len = len;
    return 0;
}

static uint32_t crc_u64(uint32_t crc, uint64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    return iot_wire_crc32_update(crc, le, 8);
}

/* Strings go in with their length first, so that moving bytes from one
 * field to the next changes the sum. */
static uint32_t crc_str(uint32_t crc, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    crc = crc_u64(crc, n);
    return n ? iot_wire_crc32_update(crc, s, n) : crc;
}

uint32_t iot_wire_id_checksum(const iot_batch *b)
{
    uint32_t c = 0;
    const iot_producer *p = b->producer;
    c = crc_u64(c, b->magic);
    c = crc_u64(c, b->version);
    c = crc_str(c, p ? p->node : NULL);
    c = crc_u64(c, p ? p->pid : 0);
    c = crc_u64(c, p ? p->start_time_ns : 0);
    c = crc_u64(c, p ? (uint64_t)p->kind : 0);
    c = crc_str(c, p ? p->job : NULL);
    c = crc_u64(c, p ? (uint64_t)(int64_t)p->rank : 0);
    c = crc_str(c, p ? p->server : NULL);
    /* Added after the fields above: covered when present, so that batches
     * without one keep their checksum. */
    if (p && p->job_name && p->job_name[0])
        c = crc_str(c, p->job_name);
    c = crc_u64(c, b->epoch);
    c = crc_u64(c, b->seq);
    c = crc_u64(c, b->event_count);
    c = crc_u64(c, b->raw_size);
    c = crc_u64(c, (uint64_t)b->compression);
    return crc_u64(c, b->checksum);
}

void iot_wire_set_id_checksum(iot_batch *b)
{
    b->id_checksum = 1ull << 32 | iot_wire_id_checksum(b);
}

static iot_batch *open_batch(const uint8_t *buf, size_t len, int body_crc, char *err,
                             size_t errlen)
{
    if (len < 5) {
        iot_fail(err, errlen, "batch of %zu bytes is too short", len);
        return NULL;
    }
    if (len > IOT_WIRE_MAX_BATCH) {
        iot_fail(err, errlen, "batch of %zu bytes exceeds the limit of %u", len,
             IOT_WIRE_MAX_BATCH);
        return NULL;
    }
    /* The envelope starts with field 1 (fixed32 magic): tag byte 0x0d. Checking
     * it before unpacking rejects stray traffic cheaply and clearly. */
    uint32_t magic = (uint32_t)buf[1] | (uint32_t)buf[2] << 8 | (uint32_t)buf[3] << 16 |
                     (uint32_t)buf[4] << 24;
    if (buf[0] != 0x0d || magic != IOT_WIRE_MAGIC) {
        iot_fail(err, errlen, "not an iotrace batch (bad magic)");
        return NULL;
    }
    ProtobufCAllocator al;
    ProtobufCAllocator *alp = wire_allocator(&al);
    iot_batch *b = iotrace__batch__unpack(alp, len, buf);
    if (!b) {
        iot_fail(err, errlen, "malformed batch envelope");
        return NULL;
    }
    const char *why = NULL;
    int known = b->version >= IOT_WIRE_VERSION_MIN && b->version <= IOT_WIRE_VERSION;
    if (!known)
        why = "unsupported format version";
    else if (!b->producer || !b->producer->node || !b->producer->node[0])
        why = "batch has no producer node";
    else if (b->compression != IOTRACE__COMPRESSION__COMPRESSION_LZ4 &&
             b->compression != IOTRACE__COMPRESSION__COMPRESSION_NONE)
        why = "unknown compression";
    /* proto3 omits zero-valued fields, so an envelope cut short after its
     * seq field unpacks as an empty batch. Storing it would make the real
     * batch with that seq a "duplicate"; no producer sends empty batches. */
    else if (b->raw_size == 0 || b->body.len == 0)
        why = "batch has no body (truncated?)";
    else if (b->raw_size > IOT_WIRE_MAX_RAW)
        why = "declared body size exceeds the limit";
    else if (b->compression == IOTRACE__COMPRESSION__COMPRESSION_NONE &&
             b->body.len != b->raw_size)
        why = "uncompressed body size does not match the envelope";
    else if (body_crc && iot_wire_crc32(b->body.data, b->body.len) != b->checksum)
        why = "checksum mismatch";
    else if (b->id_checksum >> 32 != 1)
        why = "batch has no identity checksum";
    else if (iot_wire_id_checksum(b) != (uint32_t)b->id_checksum)
        why = "identity checksum mismatch (producer, epoch, seq or sizes damaged)";
    if (why) {
        if (!known)
            iot_fail(err, errlen, "%s %u (this build reads versions %u to %u)", why, b->version,
                     IOT_WIRE_VERSION_MIN, IOT_WIRE_VERSION);
        else
            iot_fail(err, errlen, "%s", why);
        iotrace__batch__free_unpacked(b, alp);
        return NULL;
    }
    return b;
}

iot_batch *iot_wire_open(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    return open_batch(buf, len, 1, err, errlen);
}

iot_batch *iot_wire_open_stored(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    return open_batch(buf, len, 0, err, errlen);
}

iot_body *iot_wire_body(const iot_batch *batch, char *err, size_t errlen)
{
    ProtobufCAllocator al;
    ProtobufCAllocator *alp = wire_allocator(&al);
    const uint8_t *raw = batch->body.data;
    uint8_t *tmp = NULL;
    if (batch->compression == IOTRACE__COMPRESSION__COMPRESSION_LZ4) {
        size_t size = batch->raw_size ? batch->raw_size : 1;
        tmp = alp ? alp->alloc(alp->allocator_data, size) : malloc(size);
        if (!tmp) {
            iot_fail(err, errlen, "out of memory decoding a batch");
            return NULL;
        }
        int got = batch->raw_size == 0 && batch->body.len == 0
                      ? 0
                      : LZ4_decompress_safe((const char *)batch->body.data, (char *)tmp,
                                            (int)batch->body.len, (int)batch->raw_size);
        if (got < 0 || (uint32_t)got != batch->raw_size) {
            alp ? alp->free(alp->allocator_data, tmp) : free(tmp);
            iot_fail(err, errlen, "LZ4 body does not decompress to the declared %u bytes",
                 batch->raw_size);
            return NULL;
        }
        raw = tmp;
    }
    iot_body *body = iot_wire_body_unpack(alp, batch->raw_size, raw);
    if (tmp)
        alp ? alp->free(alp->allocator_data, tmp) : free(tmp);
    if (!body) {
        iot_fail(err, errlen, "malformed batch body");
        return NULL;
    }
    if (iot_wire_expand_columns(body, alp, batch->version) < 0) {
        iot_fail(err, errlen, "flat columns expand past %u values, or out of memory",
                 IOT_WIRE_MAX_RAW);
        iotrace__body__free_unpacked(body, alp);
        return NULL;
    }
    if (iot_wire_check_body(body, err, errlen) < 0) {
        iotrace__body__free_unpacked(body, alp);
        return NULL;
    }
    size_t n = iot_wire_event_count(body);
    if (n != batch->event_count) {
        iot_fail(err, errlen, "body holds %zu events, envelope says %u", n,
             batch->event_count);
        iotrace__body__free_unpacked(body, alp);
        return NULL;
    }
    iot_wire_uncode_columns(body, batch->version);
    return body;
}

int iot_wire_validate(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    iot_batch *b = iot_wire_open(buf, len, err, errlen);
    if (!b)
        return -1;
    iot_body *body = iot_wire_body(b, err, errlen);
    iot_wire_free_batch(b);
    if (!body)
        return -1;
    iot_wire_free_body(body);
    return 0;
}

/* Freed by the thread that decoded them (the arena is the thread's). */
void iot_wire_free_batch(iot_batch *batch)
{
    ProtobufCAllocator al;
    if (batch)
        iotrace__batch__free_unpacked(batch, wire_allocator(&al));
}

void iot_wire_free_body(iot_body *body)
{
    ProtobufCAllocator al;
    if (body)
        iotrace__body__free_unpacked(body, wire_allocator(&al));
}

void iot_wire_delta_encode(int64_t *v, size_t n)
{
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t cur = v[i];
        v[i] = (int64_t)((uint64_t)cur - (uint64_t)prev);
        prev = cur;
    }
}

void iot_wire_delta_decode(int64_t *v, size_t n)
{
    int64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (int64_t)((uint64_t)acc + (uint64_t)v[i]);
        v[i] = acc;
    }
}

int iot_wire_producer_key(const iot_producer *p, const Iotrace__Sender *sender, char *buf,
                          size_t len)
{
    int n = sender ? snprintf(buf, len, "%s/%u/%llu/u%u", p->node ? p->node : "", p->pid,
                              (unsigned long long)p->start_time_ns, sender->uid)
                   : snprintf(buf, len, "%s/%u/%llu", p->node ? p->node : "", p->pid,
                              (unsigned long long)p->start_time_ns);
    return (n < 0 || (size_t)n >= len) ? -1 : n;
}

int iot_wire_batch_key(const iot_batch *b, char *buf, size_t len)
{
    return iot_wire_producer_key(b->producer, b->sender, buf, len);
}

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

size_t iot_wire_sender_field(const Iotrace__Sender *sender, uint8_t out[IOT_WIRE_SENDER_MAX])
{
    /* Field 12, length-delimited (tag 0x62), holding fields 1-3 as varints,
     * every one written even when 0 (root), which proto3 would leave out. */
    uint8_t inner[IOT_WIRE_SENDER_MAX - 2];
    size_t n = 0;
    inner[n++] = 0x08;
    n += put_varint(inner + n, sender->uid);
    inner[n++] = 0x10;
    n += put_varint(inner + n, sender->gid);
    inner[n++] = 0x18;
    n += put_varint(inner + n, sender->pid);
    size_t job = sender->job ? strlen(sender->job) : 0;
    if (job && job <= IOT_WIRE_LAUNCHER_JOB_MAX) { /* field 4, length-delimited */
        inner[n++] = 0x22;
        inner[n++] = (uint8_t)job;
        memcpy(inner + n, sender->job, job);
        n += job;
    }
    out[0] = 0x62;
    out[1] = (uint8_t)n;
    memcpy(out + 2, inner, n);
    return n + 2;
}

size_t iot_wire_via_field(const char *via, uint8_t out[IOT_WIRE_VIA_MAX + 3])
{
    size_t n = strlen(via);
    if (n > IOT_WIRE_VIA_MAX)
        return 0;
    /* Field 11, wire type 2 (length-delimited): tag 0x5a, then a varint
     * length of one or two bytes. */
    size_t head = n < 128 ? 2 : 3;
    out[0] = 0x5a;
    if (n < 128)
        out[1] = (uint8_t)n;
    else {
        out[1] = (uint8_t)(0x80 | (n & 0x7f));
        out[2] = (uint8_t)(n >> 7);
    }
    memcpy(out + head, via, n);
    return head + n;
}

const char *iot_wire_clock_node(const iot_batch *b)
{
    return b->via && b->via[0] ? b->via : b->producer->node;
}

/* Seeded apart from the identity checksum, so that neither sum can stand
 * for the other. */
uint32_t iot_wire_stamp_checksum(const char *via, const Iotrace__Sender *sender)
{
    uint32_t c = crc_u64(0, 0x504d5453u); /* "STMP" */
    c = crc_str(c, via);
    c = crc_u64(c, sender != NULL);
    if (sender) {
        c = crc_u64(c, sender->uid);
        c = crc_u64(c, sender->gid);
        c = crc_u64(c, sender->pid);
        /* Added after the fields above: covered when present. */
        if (sender->job && sender->job[0])
            c = crc_str(c, sender->job);
    }
    return c;
}

size_t iot_wire_stamp_field(const char *via, const Iotrace__Sender *sender,
                            uint8_t out[IOT_WIRE_STAMP_MAX])
{
    /* Field 14, wire type 1 (fixed64): tag 0x71, then 8 bytes little-endian. */
    uint64_t v = 1ull << 32 | iot_wire_stamp_checksum(via, sender);
    out[0] = 0x71;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (uint8_t)(v >> (8 * i));
    return IOT_WIRE_STAMP_MAX;
}

int iot_wire_stamp_ok(const iot_batch *b)
{
    const char *via = b->via && b->via[0] ? b->via : NULL;
    if (!via && !b->sender && !b->stamp_checksum)
        return 1;
    return b->stamp_checksum >> 32 == 1 &&
           (uint32_t)b->stamp_checksum == iot_wire_stamp_checksum(via, b->sender);
}
