/* gfapi_forge VOLFILE LOGFILE PATH COUNT: a storage client of its own,
 * as an ordinary user would run it: libgfapi with the graph of VOLFILE
 * (protocol/client to a brick and, above it, a translator of the user's
 * choosing, e.g. forge_tag_xlator.c), COUNT writes of 4096 bytes to PATH
 * (an existing file of the volume) at offsets 0, 4096, ... . Prints
 * "COUNT writes" and exits 0 when all were made. Used by gluster.forged_tags
 * as user nobody. */
#include <glusterfs/api/glfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gfapi_forge VOLFILE LOGFILE PATH COUNT\n");
        return 2;
    }
    int count = atoi(argv[4]);
    glfs_t *fs = glfs_new("forge");
    if (!fs || glfs_set_volfile(fs, argv[1]) != 0 || glfs_set_logging(fs, argv[2], 7) != 0) {
        fprintf(stderr, "gfapi_forge: cannot set up gfapi: %s\n", strerror(errno));
        return 1;
    }
    if (glfs_init(fs) != 0) {
        fprintf(stderr, "gfapi_forge: glfs_init: %s (see %s)\n", strerror(errno), argv[2]);
        return 1;
    }
    glfs_fd_t *fd = glfs_open(fs, argv[3], O_WRONLY);
    if (!fd) {
        fprintf(stderr, "gfapi_forge: open %s: %s\n", argv[3], strerror(errno));
        glfs_fini(fs);
        return 1;
    }
    static char buf[4096];
    memset(buf, 'f', sizeof buf);
    int made = 0;
    for (int i = 0; i < count; i++) {
        ssize_t n = glfs_pwrite(fd, buf, sizeof buf, (off_t)i * (off_t)sizeof buf, 0, NULL, NULL);
        if (n != (ssize_t)sizeof buf) {
            fprintf(stderr, "gfapi_forge: write %d: %s\n", i, n < 0 ? strerror(errno) : "short");
            break;
        }
        made++;
    }
    glfs_close(fd);
    glfs_fini(fs);
    printf("%d writes\n", made);
    return made == count ? 0 : 1;
}
