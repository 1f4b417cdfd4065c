/* libFuzzer target: the wire decoder, as the agent and the collector run it
 * on whatever reaches their sockets (envelope checks, LZ4, body decoding,
 * column checks), and the store's readers on what they read back.  The
 * input is also read as a bare body by the fast reader (wire_unpack.c) and
 * by protobuf-c: the two must accept the same bodies and make the same
 * message of them.  What iot_wire_open takes, the store's readers'
 * iot_wire_open_stored takes too.  A body that decodes, of any version,
 * encoded again (this version: coded, flat columns) decodes to the same
 * values. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static uint8_t *packed(const iot_body *body, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(&body->base);
    uint8_t *out = malloc(*len + 1);
    if (!out)
        abort();
    protobuf_c_message_pack(&body->base, out);
    return out;
}

/* Aborts unless two bodies hold the same message, byte for byte packed. */
static void assert_same_body(const iot_body *x, const iot_body *y)
{
    size_t na, nb;
    uint8_t *a = packed(x, &na), *b = packed(y, &nb);
    if (na != nb || memcmp(a, b, na) != 0)
        abort();
    free(a);
    free(b);
}

static void compare_body_readers(const uint8_t *data, size_t size)
{
    iot_body *want = iotrace__body__unpack(NULL, size, data);
    iot_body *got = iot_wire_body_unpack(NULL, size, data);
    if (!want != !got)
        abort();
    if (want) {
        assert_same_body(want, got);
        iotrace__body__free_unpacked(want, NULL);
        iotrace__body__free_unpacked(got, NULL);
    }
}

static void compare_round_trip(const iot_batch *b, const iot_body *body)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    if (iot_wire_encode(b->producer, b->epoch, b->seq, body, &buf, &len, err, sizeof err) < 0)
        return; /* empty, or too large to encode: refused, not misread */
    iot_batch *again = iot_wire_open(buf, len, err, sizeof err);
    iot_body *copy = again ? iot_wire_body(again, err, sizeof err) : NULL;
    if (!copy)
        abort();
    assert_same_body(body, copy);
    iot_wire_free_body(copy);
    iot_wire_free_batch(again);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    iot_batch *b = iot_wire_open(data, size, err, sizeof err);
    iot_batch *stored = iot_wire_open_stored(data, size, err, sizeof err);
    if (b && !stored)
        abort();
    iot_wire_free_batch(stored);
    if (b) {
        iot_body *body = iot_wire_body(b, err, sizeof err);
        if (body) {
            (void)iot_wire_event_count(body);
            compare_round_trip(b, body);
        }
        iot_wire_free_body(body);
        iot_wire_free_batch(b);
    }
    (void)iot_wire_validate(data, size, err, sizeof err);
    compare_body_readers(data, size);
    return 0;
}
