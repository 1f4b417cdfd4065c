#include "export_out.h"

#include <string.h>

FILE *xp_output_open(const char *path)
{
    return strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
}

int xp_output_close(FILE *out)
{
    if (out == stdout)
        return fflush(out) == 0 && !ferror(out) ? 0 : -1;
    return fclose(out) == 0 ? 0 : -1;
}
