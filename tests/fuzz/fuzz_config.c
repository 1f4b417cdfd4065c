/* libFuzzer target: config files (the agent's and collector's, --config), parsed
 * with an option of every type. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "opts.h"

static char path[64];
static char *s_opt;
static long i_opt;
static uint64_t z_opt;
static int f_opt;

static const struct iot_opt opts[] = {
    {"listen", 'l', IOT_OPT_STRING, &s_opt, "ADDR", "a string"},
    {"credit", 0, IOT_OPT_INT, &i_opt, "N", "an integer"},
    {"segment-size", 0, IOT_OPT_SIZE, &z_opt, "BYTES", "a size"},
    {"analysis", 0, IOT_OPT_FLAG, &f_opt, NULL, "a flag"},
};

static const struct iot_opts_spec spec = {
    .program = "fuzz_config", .synopsis = "", .description = "", .opts = opts,
    .n_opts = (int)(sizeof opts / sizeof opts[0]), .allow_config = 1};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/iot-fuzz-config-XXXXXX");
        int fd = mkstemp(path);
        FILE *quiet = fopen("/dev/null", "w");
        if (fd < 0 || !quiet)
            abort();
        close(fd);
        /* The parser's messages go through stdio's stderr, sanitizer and
         * libFuzzer reports straight to descriptor 2, which stays. */
        stderr = quiet;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    (void)iot_opts_load_config(&spec, path);
    return 0;
}
