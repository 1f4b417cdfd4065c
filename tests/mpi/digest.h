/* A digest of a file read back with plain stdio, for the test programs
 * whose traced runs are compared with untraced ones. */
#ifndef IOT_TEST_MPI_DIGEST_H
#define IOT_TEST_MPI_DIGEST_H

#include <stdint.h>
#include <stdio.h>

/* FNV-1a of the whole file, and its length in *bytes. */
static inline uint64_t file_digest(const char *path, long *bytes)
{
    FILE *f = fopen(path, "rb");
    uint64_t h = 1469598103934665603ull;
    long n = 0;
    int c;
    while (f && (c = getc(f)) != EOF) {
        h = (h ^ (unsigned char)c) * 1099511628211ull;
        n++;
    }
    if (f)
        fclose(f);
    *bytes = n;
    return h;
}

#endif
