#include "export_out.h"

#include <string.h>

static int is_stdout(const char *path)
{
    return strcmp(path, "-") == 0;
}

FILE *xp_output_open(const char *path)
{
    return is_stdout(path) ? stdout : fopen(path, "w");
}

const char *xp_output_name(const char *path)
{
    return is_stdout(path) ? "standard output" : path;
}

int xp_output_close(FILE *out)
{
    if (out == stdout)
        return fflush(out) == 0 && !ferror(out) ? 0 : -1;
    return fclose(out) == 0 ? 0 : -1;
}
