/* Reading a batch body: the event tables' columns decoded by loops
 * specialised for their type, the rest of the body by protobuf-c.
 *
 * protobuf-c unpacks a packed column value by value through its generic
 * field parser; for the collector's live analysis that was the largest
 * single cost of an event (docs/performance.md, "Live analysis in the
 * collector").  The event tables (Body fields 2-4) are only repeated packed
 * scalars, which a loop per column reads into one array each; everything
 * else in a body is small and copied aside for protobuf-c.  The result is
 * the message protobuf-c would have made, allocated with the same
 * allocator so that iotrace__body__free_unpacked() frees it.  Anything
 * this reader does not expect (a column written unpacked, which protobuf
 * allows, a table or a column given twice, a column this build does not
 * know, a malformed value) sends the whole body to protobuf-c instead, so
 * what is accepted, and how, stays protobuf-c's. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* A varint of at most `most` bytes at *p before end; 0 when longer, or
 * cut short.  Tags and lengths have at most 5 (protobuf-c's limit), values
 * 10. */
static int get_varint_n(const uint8_t **p, const uint8_t *end, uint64_t *v, int most)
{
    uint64_t x = 0;
    for (int i = 0; i < most && *p < end; i++) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (b < 0x80) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    return get_varint_n(p, end, v, 10);
}

static int get_tag_or_length(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    return get_varint_n(p, end, v, 5);
}

/* Past one field's value of the given wire type; 0 if it does not fit or
 * is a group (not in this format). */
static int skip_value(const uint8_t **p, const uint8_t *end, unsigned wire_type)
{
    uint64_t len;
    switch (wire_type) {
    case PROTOBUF_C_WIRE_TYPE_VARINT: return get_varint(p, end, &len);
    case PROTOBUF_C_WIRE_TYPE_64BIT: len = 8; break;
    case PROTOBUF_C_WIRE_TYPE_32BIT: len = 4; break;
    case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
        if (!get_tag_or_length(p, end, &len))
            return 0;
        break;
    default: return 0;
    }
    if (len > (uint64_t)(end - *p))
        return 0;
    *p += len;
    return 1;
}

static void *take(ProtobufCAllocator *alp, size_t size)
{
    return alp ? alp->alloc(alp->allocator_data, size) : malloc(size);
}

static void give_back(ProtobufCAllocator *alp, void *p)
{
    if (alp)
        alp->free(alp->allocator_data, p);
    else
        free(p);
}

static size_t element_size(ProtobufCType type)
{
    return type == PROTOBUF_C_TYPE_UINT32 || type == PROTOBUF_C_TYPE_SINT32 ? 4 : 8;
}

/* The varints between p and end into u; how many, or -1 if one is cut
 * short or longer than 10 bytes. */
static ptrdiff_t get_varints(const uint8_t *p, const uint8_t *end, uint64_t *u)
{
    uint64_t *start = u;
    /* While a longest value fits, no byte needs a bounds check. */
    while (end - p >= 10) {
        uint64_t b = *p++, v = b & 0x7f;
        for (int shift = 7; b >= 0x80; shift += 7) {
            if (shift > 63)
                return -1;
            b = *p++;
            v |= (b & 0x7f) << shift;
        }
        *u++ = v;
    }
    while (p < end) {
        uint64_t b = *p++, v = b & 0x7f;
        for (int shift = 7; b >= 0x80; shift += 7) {
            if (p == end || shift > 63)
                return -1;
            b = *p++;
            v |= (b & 0x7f) << shift;
        }
        *u++ = v;
    }
    return u - start;
}

/* One packed column's values, as protobuf-c reads them, into out, which
 * has room for a value per byte; how many, or -1 if malformed. */
static ptrdiff_t read_column(const ProtobufCFieldDescriptor *f, const uint8_t *p,
                             const uint8_t *end, void *out)
{
    uint64_t *u = out;
    uint32_t *w = out;
    size_t len = (size_t)(end - p);
    if (f->type == PROTOBUF_C_TYPE_FIXED64) {
        if (len % 8)
            return -1;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(out, p, len);
#else
        for (size_t i = 0; i < len / 8; i++, p += 8) {
            uint64_t v = 0;
            for (int k = 7; k >= 0; k--)
                v = v << 8 | p[k];
            u[i] = v;
        }
#endif
        return (ptrdiff_t)(len / 8);
    }
    if (f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_SINT64) {
        ptrdiff_t n = get_varints(p, end, u);
        if (n > 0 && f->type == PROTOBUF_C_TYPE_SINT64)
            for (ptrdiff_t i = 0; i < n; i++)
                u[i] = u[i] >> 1 ^ (uint64_t) - (u[i] & 1);
        return n;
    }
    /* 32-bit columns: a stretch at a time through a 64-bit buffer. */
    ptrdiff_t n = 0;
    uint64_t tmp[64];
    while (p < end) {
        const uint8_t *stop = end - p > 64 ? p + 64 : end;
        while (stop < end && stop[-1] >= 0x80) /* a stretch ends where a value does */
            stop++;
        ptrdiff_t k = get_varints(p, stop, tmp);
        if (k < 0)
            return -1;
        if (f->type == PROTOBUF_C_TYPE_SINT32)
            for (ptrdiff_t i = 0; i < k; i++)
                w[n + i] = (uint32_t)tmp[i] >> 1 ^ (uint32_t) - ((uint32_t)tmp[i] & 1);
        else
            for (ptrdiff_t i = 0; i < k; i++)
                w[n + i] = (uint32_t)tmp[i];
        n += k;
        p = stop;
    }
    return n;
}

static void free_table(ProtobufCAllocator *alp, ProtobufCMessage *m)
{
    if (m)
        protobuf_c_message_free_unpacked(m, alp);
}

/* A table message from its bytes; NULL to let protobuf-c read the body. */
static ProtobufCMessage *read_table(ProtobufCAllocator *alp, const ProtobufCMessageDescriptor *d,
                                    const uint8_t *p, const uint8_t *end)
{
    ProtobufCMessage *m = take(alp, d->sizeof_message);
    if (!m)
        return NULL;
    protobuf_c_message_init(d, m);
    uint32_t seen = 0; /* by field index; tables have fewer than 32 columns */
    while (p < end) {
        uint64_t tag;
        if (!get_tag_or_length(&p, end, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
            goto fallback;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        /* A column this build does not know: protobuf-c keeps it aside. */
        if (!f)
            goto fallback;
        unsigned idx = (unsigned)(f - d->fields);
        if ((tag & 7) != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED || idx >= 32 || seen >> idx & 1 ||
            f->label != PROTOBUF_C_LABEL_REPEATED)
            goto fallback;
        seen |= 1u << idx;
        uint64_t len;
        if (!get_tag_or_length(&p, end, &len) || len > (uint64_t)(end - p))
            goto fallback;
        const uint8_t *col = p, *col_end = p + len;
        p = col_end;
        switch (f->type) {
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_SINT64: break;
        default: goto fallback;
        }
        if (!len) /* protobuf-c leaves an empty column's array NULL */
            continue;
        /* Room for a value per byte: more than needed, but one pass. */
        void *values = take(alp, len * element_size(f->type));
        if (!values)
            goto fallback;
        *(void **)((char *)m + f->offset) = values;
        ptrdiff_t n = read_column(f, col, col_end, values);
        if (n <= 0)
            goto fallback;
        *(size_t *)((char *)m + f->quantifier_offset) = (size_t)n;
    }
    return m;
fallback:
    free_table(alp, m);
    return NULL;
}

iot_body *iot_wire_body_unpack(ProtobufCAllocator *alp, size_t len, const uint8_t *raw)
{
    /* Body fields 2, 3 and 4: MpiioEvents, PosixEvents, DiskEvents. */
    static const ProtobufCMessageDescriptor *const table_desc[3] = {
        &iotrace__mpiio_events__descriptor, &iotrace__posix_events__descriptor,
        &iotrace__disk_events__descriptor};
    /* Each table's field (tag and length included) and its contents. */
    const uint8_t *field_at[3] = {NULL, NULL, NULL}, *span[3][2] = {{NULL, NULL}};
    size_t rest_len = len;
    const uint8_t *p = raw, *end = raw + len;
    while (p < end) {
        const uint8_t *field = p;
        uint64_t tag;
        if (!get_tag_or_length(&p, end, &tag))
            goto protobuf_c;
        uint64_t id = tag >> 3;
        if (id >= 2 && id <= 4 && (tag & 7) == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) {
            uint64_t n;
            if (field_at[id - 2] || !get_tag_or_length(&p, end, &n) || n > (uint64_t)(end - p))
                goto protobuf_c; /* a table given twice is merged: protobuf-c's job */
            field_at[id - 2] = field;
            span[id - 2][0] = p;
            span[id - 2][1] = p += n;
            rest_len -= (size_t)(p - field);
        } else if (!skip_value(&p, end, (unsigned)(tag & 7)))
            goto protobuf_c;
    }
    /* The other fields, in their order, for protobuf-c. */
    uint8_t *rest = take(alp, rest_len ? rest_len : 1);
    if (!rest)
        goto protobuf_c;
    uint8_t *r = rest;
    for (p = raw; p < end;) {
        const uint8_t *next = end;
        int k_next = -1;
        for (int k = 0; k < 3; k++)
            if (field_at[k] && field_at[k] >= p && field_at[k] < next)
                next = field_at[k], k_next = k;
        memcpy(r, p, (size_t)(next - p));
        r += next - p;
        p = k_next < 0 ? end : span[k_next][1];
    }
    iot_body *body = iotrace__body__unpack(alp, rest_len, rest);
    give_back(alp, rest);
    if (!body)
        return NULL;
    ProtobufCMessage *t[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++)
        if (span[k][0] && !(t[k] = read_table(alp, table_desc[k], span[k][0], span[k][1]))) {
            iotrace__body__free_unpacked(body, alp);
            for (int j = 0; j < k; j++)
                free_table(alp, t[j]);
            goto protobuf_c;
        }
    body->mpiio = (Iotrace__MpiioEvents *)t[0];
    body->posix = (Iotrace__PosixEvents *)t[1];
    body->disk = (Iotrace__DiskEvents *)t[2];
    return body;
protobuf_c:
    return iotrace__body__unpack(alp, len, raw);
}
