/* libFuzzer target: the wire decoder, as the agent and the collector run it
 * on whatever reaches their sockets (envelope checks, LZ4, body decoding,
 * column checks), and the store's readers on what they read back. */
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    iot_batch *b = iot_wire_open(data, size, err, sizeof err);
    if (b) {
        iot_body *body = iot_wire_body(b, err, sizeof err);
        if (body) {
            (void)iot_wire_event_count(body);
        }
        iot_wire_free_body(body);
        iot_wire_free_batch(b);
    }
    (void)iot_wire_validate(data, size, err, sizeof err);
    return 0;
}
