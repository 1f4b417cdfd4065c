/* Packing a batch body: the event columns coded against their patterns
 * (docs/wire-format.md, "Column coding") and written in one pass.
 *
 * A body is mostly its event tables: messages of repeated packed scalar
 * columns.  protobuf-c packs those through its generic, descriptor-walking
 * code, a size pass and a pack pass with a call and a switch per value:
 * about 350 instructions per event, more than half of a client's sender
 * thread (docs/performance.md, "Where the CPU of one event goes").  Here
 * the same descriptors say which columns a table has, and each column is
 * coded and written by a loop specialised for its type and coding, straight
 * into the output, after room for a length prefix of the size guessed, so
 * that no pass sizes the values first (a column is moved only when its
 * length took another size).  Everything
 * else in a body (file names, drops, clock samples, the job dictionary,
 * agent counters) is small and left to protobuf-c.  The bytes are those
 * protobuf-c writes for the coded columns (the test wire.unit compares 400
 * random bodies); iot_wire_code_columns() codes the same way in place, and
 * iot_wire_uncode_columns() undoes it, from the same table of codings.
 *
 * Since version 3 a column whose coded values after the first are all the
 * same (a file, a transfer size, a thread, one more CallID each row) is
 * written as those two values, a "flat" column: it costs a look at each
 * value instead of writing each, and leaves LZ4 the columns that vary
 * (docs/wire-format.md, "Flat columns"); iot_wire_expand_columns() makes
 * it whole again before anything else reads it. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 16

static inline uint32_t zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}

/* With the flat columns gone, what is left to write is mostly times of two
 * or three bytes: those without the loop. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    if (v < 0x80) {
        *p = (uint8_t)v;
        return p + 1;
    }
    if (v < 0x4000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7);
        return p + 2;
    }
    if (v < 0x200000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7 | 0x80);
        p[2] = (uint8_t)(v >> 14);
        return p + 3;
    }
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A table this file can pack: every field a repeated, packed scalar of a
 * type below (checked once per descriptor, so that a change to the .proto
 * that breaks the assumption falls back to protobuf-c instead of writing
 * wrong bytes). */
static int is_columns(const ProtobufCMessageDescriptor *d)
{
    if (d->n_fields > MAX_COLUMNS)
        return 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label != PROTOBUF_C_LABEL_REPEATED || !(f->flags & PROTOBUF_C_FIELD_FLAG_PACKED))
            return 0;
        switch (f->type) {
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_FIXED64: break;
        default: return 0;
        }
    }
    return 1;
}

static size_t count_of(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    return *(const size_t *)((const char *)m + f->quantifier_offset);
}

static void *values_of(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    return *(void *const *)((const char *)m + f->offset);
}

/* ---- the codings -------------------------------------------------------- */

enum coding {
    PLAIN,      /* as it is */
    DELTA,      /* against the previous value (unsigned types: zig-zag) */
    SEQ,        /* offset: against where the previous record ended */
    LESS_BYTES, /* ret: minus bytes asked for */
    BYTES_LESS, /* xfer: bytes asked for minus it */
};

/* Which columns are coded how: by name, the same in every table that has
 * the column (names as data, so that a column added to a table later is
 * coded like its namesakes or, if new, carried as it is). */
static enum coding coding_of(const ProtobufCFieldDescriptor *f)
{
    static const struct {
        const char *name;
        enum coding how;
        ProtobufCType type;
    } rules[] = {
        {"tid", DELTA, PROTOBUF_C_TYPE_UINT32},
        {"callid", DELTA, PROTOBUF_C_TYPE_UINT64},
        {"t_start", DELTA, PROTOBUF_C_TYPE_SINT64},
        {"coll_seq", DELTA, PROTOBUF_C_TYPE_UINT64},
        {"offset", SEQ, PROTOBUF_C_TYPE_SINT64},
        {"ret", LESS_BYTES, PROTOBUF_C_TYPE_SINT64}, /* not MPI-IO's sint32 return code */
        {"xfer", BYTES_LESS, PROTOBUF_C_TYPE_UINT64},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (f->type == rules[i].type && strcmp(f->name, rules[i].name) == 0)
            return rules[i].how;
    return PLAIN;
}

struct table_coding {
    enum coding how[MAX_COLUMNS];
    const uint64_t *bytes; /* the table's bytes column, which SEQ and the others need */
    size_t bytes_n;
};

/* How column i of n values is coded.  A body whose columns differ in
 * length is refused by iot_wire_check_body before it is packed or read;
 * this keeps the coder inside the bytes column for any other caller. */
static enum coding column_coding(const struct table_coding *tc, unsigned i, size_t n)
{
    return tc->how[i] >= SEQ && n > tc->bytes_n ? PLAIN : tc->how[i];
}

/* 0 when the table cannot be coded this way (more columns than expected,
 * or a coding that needs a bytes column it lacks). */
static int plan_coding(const ProtobufCMessage *m, struct table_coding *tc)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (d->n_fields > MAX_COLUMNS)
        return 0;
    tc->bytes = NULL;
    tc->bytes_n = 0;
    for (unsigned i = 0; i < d->n_fields; i++)
        if (d->fields[i].type == PROTOBUF_C_TYPE_UINT64 && !strcmp(d->fields[i].name, "bytes")) {
            tc->bytes = values_of(m, &d->fields[i]);
            tc->bytes_n = count_of(m, &d->fields[i]);
        }
    for (unsigned i = 0; i < d->n_fields; i++) {
        tc->how[i] = coding_of(&d->fields[i]);
        if (tc->how[i] >= SEQ && !tc->bytes)
            return 0;
    }
    return 1;
}

static inline uint64_t zz64(uint64_t d)
{
    return d << 1 ^ (uint64_t) - (int64_t)(d >> 63);
}

static inline uint64_t unzz64(uint64_t v)
{
    return v >> 1 ^ (uint64_t) - (int64_t)(v & 1);
}

static inline uint32_t zz32(uint32_t d)
{
    return d << 1 ^ (uint32_t) - (int32_t)(d >> 31);
}

static inline uint32_t unzz32(uint32_t v)
{
    return v >> 1 ^ (uint32_t) - (int32_t)(v & 1);
}

/* In place, both ways.  A sint64 column holds its coded value as a signed
 * number (its field type zig-zags it on the wire); an unsigned one holds it
 * zig-zagged. */
static void code_column(const ProtobufCFieldDescriptor *f, void *v, size_t n, enum coding how,
                        const uint64_t *bytes, int decode)
{
    uint64_t *u = v, prev = 0;
    uint32_t *w = v, prev32 = 0;
    switch (how) {
    case PLAIN: return;
    case DELTA:
        if (f->type == PROTOBUF_C_TYPE_UINT32) {
            for (size_t i = 0; i < n; i++) {
                uint32_t cur = decode ? prev32 + unzz32(w[i]) : w[i];
                w[i] = decode ? cur : zz32(cur - prev32);
                prev32 = cur;
            }
        } else {
            int zz = f->type == PROTOBUF_C_TYPE_UINT64;
            for (size_t i = 0; i < n; i++) {
                uint64_t cur = decode ? prev + (zz ? unzz64(u[i]) : u[i]) : u[i];
                u[i] = decode ? cur : zz ? zz64(cur - prev) : cur - prev;
                prev = cur;
            }
        }
        return;
    case SEQ:
        for (size_t i = 0; i < n; i++) {
            uint64_t cur = decode ? u[i] + prev : u[i];
            u[i] = decode ? cur : cur - prev;
            prev = cur + bytes[i];
        }
        return;
    case LESS_BYTES:
        for (size_t i = 0; i < n; i++)
            u[i] = decode ? u[i] + bytes[i] : u[i] - bytes[i];
        return;
    case BYTES_LESS:
        for (size_t i = 0; i < n; i++)
            u[i] = bytes[i] - u[i];
        return;
    }
}

static void code_tables(const iot_body *b, int decode)
{
    const ProtobufCMessage *t[3] = {b->mpiio ? &b->mpiio->base : NULL,
                                    b->posix ? &b->posix->base : NULL,
                                    b->disk ? &b->disk->base : NULL};
    for (int k = 0; k < 3; k++) {
        struct table_coding tc;
        if (!t[k] || !plan_coding(t[k], &tc))
            continue;
        const ProtobufCMessageDescriptor *d = t[k]->descriptor;
        for (unsigned i = 0; i < d->n_fields; i++) {
            size_t n = count_of(t[k], &d->fields[i]);
            code_column(&d->fields[i], values_of(t[k], &d->fields[i]), n,
                        column_coding(&tc, i, n), tc.bytes, decode);
        }
    }
}

void iot_wire_code_columns(const iot_body *b)
{
    code_tables(b, 0);
}

void iot_wire_uncode_columns(const iot_body *b, uint32_t version)
{
    if (version >= 2) {
        code_tables(b, 1);
        return;
    }
    /* Version 1 coded the times only. */
    if (b->mpiio)
        iot_wire_delta_decode(b->mpiio->t_start, b->mpiio->n_t_start);
    if (b->posix)
        iot_wire_delta_decode(b->posix->t_start, b->posix->n_t_start);
    if (b->disk)
        iot_wire_delta_decode(b->disk->t_start, b->disk->n_t_start);
}

/* ---- flat columns (version 3) ------------------------------------------- */

static size_t value_size(const ProtobufCFieldDescriptor *f)
{
    return f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_SINT32 ? 4 : 8;
}

/* Whether expr (of index k) XOR d is 0 for every k from 2 to n, looked at
 * in blocks of FLAT_BLOCK without a branch inside one, which the compiler
 * turns into vector instructions at -O2 (a fixed count): under two
 * instructions a value, where writing one took about seven.  A column
 * that varies is told by its first block. */
#define FLAT_BLOCK 32
#define FLAT_SCAN(T, expr, d)                                                  \
    do {                                                                       \
        size_t k = 2;                                                          \
        for (; k + FLAT_BLOCK <= n; k += FLAT_BLOCK) {                         \
            T acc_ = 0;                                                        \
            /* counted by b_, not by k: so GCC vectorizes it */              \
            for (size_t b_ = 0; b_ < FLAT_BLOCK; b_++, k++)                    \
                acc_ |= (T)(expr) ^ (d);                                       \
            k -= FLAT_BLOCK;                                                   \
            if (acc_)                                                          \
                return 0;                                                      \
        }                                                                      \
        T acc_ = 0;                                                            \
        for (; k < n; k++)                                                     \
            acc_ |= (T)(expr) ^ (d);                                           \
        return acc_ == 0;                                                      \
    } while (0)

/* 1 when the coded values of a column of n > 2 after the first are all
 * equal.  Each coding's difference is compared as it is, before zig-zag,
 * which maps equal differences to equal values. */
static int column_flat(const ProtobufCFieldDescriptor *f, const void *v, size_t n,
                       enum coding how, const uint64_t *bytes)
{
    const uint64_t *u = v;
    const uint32_t *w = v;
    if (value_size(f) == 4) { /* PLAIN or DELTA: the only codings of 32-bit columns */
        if (how == DELTA)
            FLAT_SCAN(uint32_t, w[k] - w[k - 1], w[1] - w[0]);
        FLAT_SCAN(uint32_t, w[k], w[1]);
    }
    switch (how) {
    case PLAIN: FLAT_SCAN(uint64_t, u[k], u[1]);
    case DELTA: FLAT_SCAN(uint64_t, u[k] - u[k - 1], u[1] - u[0]);
    case SEQ: FLAT_SCAN(uint64_t, u[k] - u[k - 1] - bytes[k - 1], u[1] - u[0] - bytes[0]);
    case LESS_BYTES: FLAT_SCAN(uint64_t, u[k] - bytes[k], u[1] - bytes[1]);
    case BYTES_LESS: FLAT_SCAN(uint64_t, bytes[k] - u[k], bytes[1] - u[1]);
    }
    return 0;
}

/* The rows of a table: its longest column. */
static size_t table_rows(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    size_t rows = 0;
    for (unsigned i = 0; i < d->n_fields; i++)
        if (count_of(m, &d->fields[i]) > rows)
            rows = count_of(m, &d->fields[i]);
    return rows;
}

/* Which columns of a table go flat (bit i: column i): those of every row,
 * more than two, whose coded values after the first are equal, but never
 * all of them, so that a column in full gives the reader the rows. */
static unsigned flat_columns(const ProtobufCMessage *m, const struct table_coding *tc)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    size_t rows = table_rows(m);
    unsigned flat = 0, full = 0, first = 0;
    if (rows <= 2)
        return 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t n = count_of(m, f);
        if (!n)
            continue;
        if (!flat && !full)
            first = i;
        if (n == rows && column_flat(f, values_of(m, f), n, column_coding(tc, i, n), tc->bytes))
            flat |= 1u << i;
        else
            full = 1;
    }
    return full ? flat : flat & ~(1u << first);
}

static int expand_table(ProtobufCMessage *m, ProtobufCAllocator *alp, size_t *budget)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    size_t rows = table_rows(m);
    if (rows <= 2 || !is_columns(d))
        return 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (count_of(m, f) != 2)
            continue;
        if (rows > *budget)
            return -1;
        *budget -= rows;
        size_t size = value_size(f);
        char *old = values_of(m, f);
        char *v = alp ? alp->alloc(alp->allocator_data, rows * size) : malloc(rows * size);
        if (!v)
            return -1;
        if (size == 4) {
            uint32_t *to = (uint32_t *)v, first = ((uint32_t *)old)[0], rest = ((uint32_t *)old)[1];
            to[0] = first;
            for (size_t r = 1; r < rows; r++)
                to[r] = rest;
        } else {
            uint64_t *to = (uint64_t *)v, first = ((uint64_t *)old)[0], rest = ((uint64_t *)old)[1];
            to[0] = first;
            for (size_t r = 1; r < rows; r++)
                to[r] = rest;
        }
        alp ? alp->free(alp->allocator_data, old) : free(old);
        *(void **)((char *)m + f->offset) = v;
        *(size_t *)((char *)m + f->quantifier_offset) = rows;
    }
    return 0;
}

int iot_wire_expand_columns(iot_body *b, ProtobufCAllocator *alp, uint32_t version)
{
    if (version < 3)
        return 0;
    ProtobufCMessage *t[3] = {b->mpiio ? &b->mpiio->base : NULL,
                              b->posix ? &b->posix->base : NULL,
                              b->disk ? &b->disk->base : NULL};
    /* At most as many values as a body of the largest size could hold
     * written in full, so that a small batch cannot make a vast one. */
    size_t budget = IOT_WIRE_MAX_RAW;
    for (int k = 0; k < 3; k++)
        if (t[k] && expand_table(t[k], alp, &budget) < 0)
            return -1;
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

/* Writes one column, coded, from the caller's values (left untouched). */
static uint8_t *put_column(uint8_t *p, const ProtobufCFieldDescriptor *f, const void *v, size_t n,
                           enum coding how, const uint64_t *bytes)
{
    const uint64_t *u = v;
    const uint32_t *w = v;
    uint64_t prev = 0;
    uint32_t prev32 = 0;
    switch (how) {
    case DELTA:
        if (f->type == PROTOBUF_C_TYPE_UINT32)
            for (size_t i = 0; i < n; prev32 = w[i++])
                p = put_varint(p, zz32(w[i] - prev32));
        else /* uint64 zig-zagged here, sint64 by its type: the same bytes */
            for (size_t i = 0; i < n; prev = u[i++])
                p = put_varint(p, zz64(u[i] - prev));
        return p;
    case SEQ:
        for (size_t i = 0; i < n; prev = u[i] + bytes[i], i++)
            p = put_varint(p, zz64(u[i] - prev));
        return p;
    case LESS_BYTES:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, zz64(u[i] - bytes[i]));
        return p;
    case BYTES_LESS:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, bytes[i] - u[i]);
        return p;
    case PLAIN: break;
    }
    switch (f->type) {
    case PROTOBUF_C_TYPE_UINT32:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, w[i]);
        return p;
    case PROTOBUF_C_TYPE_UINT64:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, u[i]);
        return p;
    case PROTOBUF_C_TYPE_SINT32:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, zigzag32((int32_t)w[i]));
        return p;
    case PROTOBUF_C_TYPE_SINT64:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, zz64(u[i]));
        return p;
    default: /* FIXED64: little-endian on the wire */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(p, v, n * 8);
        return p + n * 8;
#else
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 8; k++)
                *p++ = (uint8_t)(u[i] >> (8 * k));
        return p;
#endif
    }
}

/* A length-delimited field whose length is known only once it is written:
 * its bytes go after room for the length of the size guessed, and move
 * only when the guess took a length of another size, so that a column is
 * written once and mostly not moved.  Any length below 2^35 fits in
 * LEN_ROOM, which the bounds reserve; a body is at most IOT_WIRE_MAX_RAW. */
#define LEN_ROOM 5

static inline size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *close_delimited(uint8_t *p, uint8_t *data, uint8_t *end)
{
    size_t len = (size_t)(end - data), room = varint_size(len);
    if (p + room != data)
        memmove(p + room, data, len);
    put_varint(p, len);
    return p + room + len;
}

/* A coded column's values mostly take a byte or two: a guess that gives
 * the length prefix its right size for all but unusual columns.  A fixed64
 * column's length is known. */
static size_t column_guess(const ProtobufCFieldDescriptor *f, size_t n)
{
    return f->type == PROTOBUF_C_TYPE_FIXED64 ? n * 8 : n + n / 2;
}

static uint8_t *put_table(uint8_t *p, uint32_t id, const ProtobufCMessage *m,
                          const struct table_coding *tc)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    unsigned flat = flat_columns(m, tc);
    size_t guess = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        size_t g = column_guess(&d->fields[i], flat >> i & 1 ? 2 : count_of(m, &d->fields[i]));
        guess += g ? 1 + varint_size(g) + g : 0;
    }
    p = put_varint(p, (uint64_t)id << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
    uint8_t *table = p + varint_size(guess), *q = table;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t n = count_of(m, f);
        if (!n) /* protobuf-c leaves an empty repeated field out */
            continue;
        /* A flat column's first two values, coded as the whole column is. */
        size_t w = flat >> i & 1 ? 2 : n;
        q = put_varint(q, (uint64_t)f->id << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
        uint8_t *data = q + varint_size(column_guess(f, w));
        q = close_delimited(
            q, data, put_column(data, f, values_of(m, f), w, column_coding(tc, i, n), tc->bytes));
    }
    return close_delimited(p, table, q);
}

/* Most bytes a table can take: every value at its longest, every prefix
 * with its room. */
static size_t table_bound(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    size_t b = 2 + LEN_ROOM;
    for (unsigned i = 0; i < d->n_fields; i++)
        b += 2 + LEN_ROOM + count_of(m, &d->fields[i]) * 10;
    return b;
}

/* The body in three parts, in field-number order as protobuf-c writes
 * them: the fields before the event tables, the tables (2, 3, 4), the
 * fields after them. */
struct body_plan {
    iot_body head, tail;
    const ProtobufCMessage *table[3];
    struct table_coding coding[3];
    size_t bound;
    int fast;
};

static void plan_body(const iot_body *b, struct body_plan *pl)
{
    const ProtobufCMessage *t[3] = {b->mpiio ? &b->mpiio->base : NULL,
                                    b->posix ? &b->posix->base : NULL,
                                    b->disk ? &b->disk->base : NULL};
    pl->fast = 1;
    for (int i = 0; i < 3; i++)
        if (t[i] && (!is_columns(t[i]->descriptor) || !plan_coding(t[i], &pl->coding[i])))
            pl->fast = 0;
    if (!pl->fast) {
        iot_wire_code_columns(b);
        pl->bound = protobuf_c_message_get_packed_size(&b->base);
        iot_wire_uncode_columns(b, IOT_WIRE_VERSION);
        return;
    }
    pl->head = (iot_body)IOTRACE__BODY__INIT;
    pl->head.n_files = b->n_files;
    pl->head.files = b->files;
    pl->tail = *b;
    pl->tail.n_files = 0;
    pl->tail.files = NULL;
    pl->tail.mpiio = NULL;
    pl->tail.posix = NULL;
    pl->tail.disk = NULL;
    pl->bound = protobuf_c_message_get_packed_size(&pl->head.base) +
                protobuf_c_message_get_packed_size(&pl->tail.base);
    for (int i = 0; i < 3; i++)
        if ((pl->table[i] = t[i]))
            pl->bound += table_bound(t[i]);
}

/* Into `out` of at least pl->bound bytes; the length written. */
static size_t pack_planned(const iot_body *b, const struct body_plan *pl, uint8_t *out)
{
    if (!pl->fast) { /* coded in place while protobuf-c packs */
        iot_wire_code_columns(b);
        size_t n = protobuf_c_message_pack(&b->base, out);
        iot_wire_uncode_columns(b, IOT_WIRE_VERSION);
        return n;
    }
    static const uint32_t ids[3] = {2, 3, 4}; /* Body.mpiio, .posix, .disk */
    uint8_t *p = out + protobuf_c_message_pack(&pl->head.base, out);
    for (int i = 0; i < 3; i++)
        if (pl->table[i])
            p = put_table(p, ids[i], pl->table[i], &pl->coding[i]);
    p += protobuf_c_message_pack(&pl->tail.base, p);
    return (size_t)(p - out);
}

uint8_t *iot_wire_body_pack_new(const iot_body *b, size_t max, size_t *len)
{
    struct body_plan pl;
    plan_body(b, &pl);
    uint8_t *out = malloc(pl.bound ? pl.bound : 1);
    *len = out ? pack_planned(b, &pl, out) : pl.bound;
    if (*len == 0 || *len > max) {
        free(out);
        return NULL;
    }
    return out;
}
