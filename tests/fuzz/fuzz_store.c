/* libFuzzer target: the store reader on a damaged segment file, as
 * iotrace-export and the collector's start-up scan read it.  The input is
 * the whole content of the store's one segment. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "store.h"

static char dir[64];

static int count(void *ctx, const uint8_t *batch, size_t len, uint64_t recv_ns)
{
    (void)batch;
    (void)recv_ns;
    *(size_t *)ctx += len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/iot-fuzz-store-XXXXXX");
        if (!mkdtemp(dir))
            abort();
        iot_log_init("fuzz_store", IOT_LOG_ERROR);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/segment-00000001.iots", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
        abort();
    close(fd);
    char err[512];
    size_t bytes = 0;
    struct iot_store_scan_info info;
    (void)iot_store_scan_info(dir, count, &bytes, &info, err, sizeof err);
    struct iot_store_pos pos = {0, 0}, end = {1, size};
    (void)iot_store_read_range(dir, &pos, &end, count, &bytes, err, sizeof err);
    return 0;
}
