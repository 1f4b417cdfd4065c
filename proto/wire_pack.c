/* Packing a batch body, byte for byte as protobuf_c_message_pack() would.
 *
 * A body is mostly its event tables: messages of repeated packed scalar
 * columns.  protobuf-c packs those through its generic, descriptor-walking
 * code, a size pass and a pack pass with a call and a switch per value:
 * about 350 instructions per event, more than half of a client's sender
 * thread (docs/performance.md, "Where the CPU of one event goes").  Here
 * the same descriptors say which columns a table has, and each column is
 * sized and written by a loop specialised for its type.  Everything else
 * in a body (file names, drops, clock samples, the job dictionary, agent
 * counters) is small and left to protobuf-c.  The test wire.pack checks the
 * bytes against protobuf-c's for random bodies. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 16

struct column_sizes {
    size_t data[MAX_COLUMNS]; /* bytes of each column's values */
    size_t total;             /* of the whole message: tags, lengths and values */
};

/* Bytes of a varint by its number of leading zero bits: a table lookup
 * costs a third of the division by 7 it replaces, once per value. */
static const uint8_t varint_bytes[65] = {
    10, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 5, 5, 5, 5,
    5,  5, 5, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};

static inline size_t varint_size(uint64_t v)
{
    return varint_bytes[__builtin_clzll(v | 1)];
}

static inline uint64_t zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline uint32_t zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
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

static const void *values_of(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    return *(const void *const *)((const char *)m + f->offset);
}

static size_t column_bytes(const ProtobufCFieldDescriptor *f, const void *v, size_t n)
{
    size_t b = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_UINT32:
        for (size_t i = 0; i < n; i++)
            b += varint_size(((const uint32_t *)v)[i]);
        return b;
    case PROTOBUF_C_TYPE_UINT64:
        for (size_t i = 0; i < n; i++)
            b += varint_size(((const uint64_t *)v)[i]);
        return b;
    case PROTOBUF_C_TYPE_SINT32:
        for (size_t i = 0; i < n; i++)
            b += varint_size(zigzag32(((const int32_t *)v)[i]));
        return b;
    case PROTOBUF_C_TYPE_SINT64:
        for (size_t i = 0; i < n; i++)
            b += varint_size(zigzag64(((const int64_t *)v)[i]));
        return b;
    default: return n * 8; /* FIXED64 */
    }
}

static uint8_t *put_column(uint8_t *p, const ProtobufCFieldDescriptor *f, const void *v, size_t n)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_UINT32:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, ((const uint32_t *)v)[i]);
        return p;
    case PROTOBUF_C_TYPE_UINT64:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, ((const uint64_t *)v)[i]);
        return p;
    case PROTOBUF_C_TYPE_SINT32:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, zigzag32(((const int32_t *)v)[i]));
        return p;
    case PROTOBUF_C_TYPE_SINT64:
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, zigzag64(((const int64_t *)v)[i]));
        return p;
    default: /* FIXED64: little-endian on the wire */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(p, v, n * 8);
        return p + n * 8;
#else
        for (size_t i = 0; i < n; i++) {
            uint64_t x = ((const uint64_t *)v)[i];
            for (int k = 0; k < 8; k++)
                *p++ = (uint8_t)(x >> (8 * k));
        }
        return p;
#endif
    }
}

static void size_columns(const ProtobufCMessage *m, struct column_sizes *s)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    s->total = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t n = count_of(m, f);
        s->data[i] = n ? column_bytes(f, values_of(m, f), n) : 0;
        if (n) /* protobuf-c leaves an empty repeated field out */
            s->total += varint_size((uint64_t)f->id << 3) + varint_size(s->data[i]) + s->data[i];
    }
}

static uint8_t *put_columns(uint8_t *p, const ProtobufCMessage *m, const struct column_sizes *s)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t n = count_of(m, f);
        if (!n)
            continue;
        p = put_varint(p, (uint64_t)f->id << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
        p = put_varint(p, s->data[i]);
        p = put_column(p, f, values_of(m, f), n);
    }
    return p;
}

/* The body in three parts, in field-number order as protobuf-c writes
 * them: the fields before the event tables, the tables (2, 3, 4), the
 * fields after them. */
struct body_plan {
    iot_body head, tail;
    const ProtobufCMessage *table[3];
    uint32_t table_id[3];
    struct column_sizes sizes[3];
    size_t head_len, tail_len, len;
    int fast;
};

static void plan_body(const iot_body *b, struct body_plan *pl)
{
    const ProtobufCMessage *t[3] = {b->mpiio ? &b->mpiio->base : NULL,
                                    b->posix ? &b->posix->base : NULL,
                                    b->disk ? &b->disk->base : NULL};
    pl->fast = 1;
    for (int i = 0; i < 3; i++)
        if (t[i] && !is_columns(t[i]->descriptor))
            pl->fast = 0;
    if (!pl->fast) {
        pl->len = protobuf_c_message_get_packed_size(&b->base);
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
    pl->head_len = protobuf_c_message_get_packed_size(&pl->head.base);
    pl->tail_len = protobuf_c_message_get_packed_size(&pl->tail.base);
    pl->len = pl->head_len + pl->tail_len;
    static const uint32_t ids[3] = {2, 3, 4}; /* Body.mpiio, .posix, .disk */
    for (int i = 0; i < 3; i++) {
        pl->table[i] = t[i];
        pl->table_id[i] = ids[i];
        if (!t[i])
            continue;
        size_columns(t[i], &pl->sizes[i]);
        pl->len += 1 + varint_size(pl->sizes[i].total) + pl->sizes[i].total;
    }
}

static size_t pack_planned(const iot_body *b, const struct body_plan *pl, uint8_t *out)
{
    if (!pl->fast)
        return protobuf_c_message_pack(&b->base, out);
    uint8_t *p = out + protobuf_c_message_pack(&pl->head.base, out);
    for (int i = 0; i < 3; i++) {
        if (!pl->table[i])
            continue;
        p = put_varint(p, (uint64_t)pl->table_id[i] << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
        p = put_varint(p, pl->sizes[i].total);
        p = put_columns(p, pl->table[i], &pl->sizes[i]);
    }
    p += protobuf_c_message_pack(&pl->tail.base, p);
    return (size_t)(p - out);
}

size_t iot_wire_body_size(const iot_body *b)
{
    struct body_plan pl;
    plan_body(b, &pl);
    return pl.len;
}

size_t iot_wire_body_pack(const iot_body *b, uint8_t *out)
{
    struct body_plan pl;
    plan_body(b, &pl);
    return pack_planned(b, &pl, out);
}

uint8_t *iot_wire_body_pack_new(const iot_body *b, size_t max, size_t *len)
{
    struct body_plan pl;
    plan_body(b, &pl);
    *len = pl.len;
    if (pl.len == 0 || pl.len > max)
        return NULL;
    uint8_t *out = malloc(pl.len);
    if (out)
        pack_planned(b, &pl, out);
    return out;
}
