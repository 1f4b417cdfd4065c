/* Calls each traced POSIX and stdio function on one file, in a parent and a
 * forked child, so the tests can check every wrapper and fork safety.
 * usage: posix_mix DIR */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void io_round(const char *path)
{
    char buf[64], a[16], b[16];
    memset(buf, 'x', sizeof buf);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0)
        die("open");
    if (write(fd, buf, 10) != 10 || write(fd, buf, 6) != 6)       /* offsets 0, 10 */
        die("write");
    if (pwrite(fd, buf, 8, 100) != 8 || pread(fd, buf, 8, 100) != 8)
        die("pwrite/pread");
    struct iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
    if (lseek(fd, 200, SEEK_SET) != 200)
        die("lseek");
    if (writev(fd, iov, 2) != 32)                                    /* offset 200 */
        die("writev");
    if (pwritev(fd, iov, 2, 300) != 32 || preadv(fd, iov, 2, 300) != 32)
        die("pwritev/preadv");
    if (pwritev2(fd, iov, 2, 400, 0) != 32 || preadv2(fd, iov, 2, 400, 0) != 32)
        die("pwritev2/preadv2");
    if (lseek(fd, 0, SEEK_SET) != 0 || read(fd, buf, 16) != 16 || readv(fd, iov, 2) != 32)
        die("read/readv");                                           /* offsets 0, 16 */
    if (fsync(fd) || fdatasync(fd) || ftruncate(fd, 1000))
        die("sync/truncate");
    if (close(fd))
        die("close");
    FILE *f = fopen(path, "r+");
    if (!f || fwrite(buf, 1, 20, f) != 20 || fseek(f, 0, SEEK_SET) || fread(buf, 4, 5, f) != 5)
        die("stdio");
    fclose(f);
    char rel[256];
    snprintf(rel, sizeof rel, "%s.creat", path);
    fd = creat(rel, 0644);
    if (fd < 0)
        die("creat");
    close(fd);
    fd = openat(AT_FDCWD, rel, O_RDONLY);
    if (fd < 0)
        die("openat");
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char parent[512], child[512];
    snprintf(parent, sizeof parent, "%s/parent.dat", argv[1]);
    snprintf(child, sizeof child, "%s/child.dat", argv[1]);
    io_round(parent);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        io_round(child);
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    io_round(parent);
    printf("posix_mix: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
