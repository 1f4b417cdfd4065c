/* libFuzzer target: the SLOG-2 reader (iotrace-export --dump-slog2) on any
 * file, ours or another writer's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "slog2_read.h"

static char path[64];
static FILE *sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/iot-fuzz-slog2-XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0 || !(sink = fopen("/dev/null", "w")))
            abort();
        close(fd);
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    char err[512];
    (void)iot_slog2_dump(sink, path, err, sizeof err);
    return 0;
}
