/* Bursts of pwrite and lseek after quiet spells, as fast as the calls go
 * (lseek, the cheapest call the library records, makes them faster): the test
 * client.posix_and_fork checks that no record is dropped with the default
 * buffers, although each burst fills a buffer faster than the library's
 * sender thread sleeps after a quiet spell.
 * usage: burst FILE BURSTS CALLS QUIET_MS */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE BURSTS CALLS QUIET_MS\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    long bursts = atol(argv[2]), calls = atol(argv[3]), quiet_ms = atol(argv[4]);
    struct timespec quiet = {quiet_ms / 1000, quiet_ms % 1000 * 1000000};
    char buf[8] = "iotrace";
    for (long b = 0; b < bursts; b++) {
        nanosleep(&quiet, NULL);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < calls; i++)
            if (i & 1 ? lseek(fd, (i & 4095) * 8, SEEK_SET) < 0
                      : pwrite(fd, buf, sizeof buf, (i & 4095) * 8) != (ssize_t)sizeof buf) {
                perror("burst");
                return 1;
            }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("burst %ld: %ld calls in %.1f ms\n", b, calls,
               (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    close(fd);
    return 0;
}
