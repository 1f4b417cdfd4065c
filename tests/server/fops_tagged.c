/* Every kind of disk operation the GlusterFS translators record, caused
 * through a FUSE mount by a thread that publishes a CallID for each step in
 * the CallID registry, as the client library does inside an MPI-IO call.
 *
 * usage: fops_tagged REGISTRY JOB DIR
 *
 * REGISTRY is the registry's base name (this user's is opened, created if
 * needed); DIR a new directory's path on the mount.  Step i runs with
 * CallID 0x100 + i published and prints "0xCALLID STEP" (the names
 * tests/integration/test_gluster.py maps to the operations expected on the
 * bricks).  Opens and closes that are not steps run with none.  Exit 0 when
 * every step did what it should, 1 otherwise. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate, copy_file_range */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "registry.h"

static struct iot_reg_slot *slot;
static uint64_t callid = 0x100;
static int failed;

/* Runs one step: rc is the system call's result, evaluated between begin
 * and end so that the request it makes carries the CallID. */
#define STEP(name, call)                                                        \
    do {                                                                        \
        iot_registry_begin(slot, callid);                                       \
        long rc_ = (long)(call);                                                \
        int errno_ = errno;                                                     \
        iot_registry_end(slot);                                                 \
        if (rc_ < 0) {                                                          \
            fprintf(stderr, "fops_tagged: %s: %s\n", name, strerror(errno_));   \
            failed = 1;                                                         \
        }                                                                       \
        printf("0x%llx %s\n", (unsigned long long)callid++, name);              \
    } while (0)

static char *join(const char *dir, const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: fops_tagged REGISTRY JOB DIR\n");
        return 2;
    }
    const char *dir = argv[3];
    char name[256], err[256];
    iot_registry *reg = NULL;
    if (iot_registry_user_name(argv[1], (uint32_t)geteuid(), name, sizeof name) == 0)
        reg = iot_registry_open(name, 1, err, sizeof err);
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    if (!reg || !(slot = iot_registry_claim(reg, tid, (uint32_t)getpid(), argv[2], 0))) {
        fprintf(stderr, "fops_tagged: no registry slot: %s\n", reg ? "full" : err);
        return 1;
    }
    if (mkdir(dir, 0755) < 0) {
        fprintf(stderr, "fops_tagged: mkdir %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char *f = join(dir, "f"), *g = join(dir, "g"), *h = join(dir, "h"), *d = join(dir, "d"),
         *p = join(dir, "p"), *src = join(dir, "src"), *dst = join(dir, "dst");
    static char buf[16384];
    memset(buf, 'x', sizeof buf);
    int fd;

    STEP("create", fd = open(f, O_CREAT | O_EXCL | O_RDWR, 0644));
    STEP("close", close(fd));
    STEP("open", fd = open(f, O_RDWR));
    STEP("pwrite", pwrite(fd, buf, 8192, 0));
    STEP("pwrite", pwrite(fd, buf, 1000, 5000));
    STEP("pread", pread(fd, buf, 4096, 0));
    STEP("fsync", fsync(fd));
    STEP("fdatasync", fdatasync(fd));
    STEP("ftruncate", ftruncate(fd, 6000));
    STEP("fallocate", fallocate(fd, 0, 0, 16384));
    STEP("punch_hole", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
    STEP("zero_range", fallocate(fd, FALLOC_FL_ZERO_RANGE, 4096, 4096));
    STEP("fchmod", fchmod(fd, 0600));
    STEP("close", close(fd));
    STEP("truncate", truncate(f, 100));
    STEP("chmod", chmod(f, 0644));
    STEP("link", link(f, g));
    STEP("rename", rename(g, h));
    STEP("unlink", unlink(h));
    STEP("mkdir", mkdir(d, 0755));
    STEP("rmdir", rmdir(d));
    STEP("mkfifo", mkfifo(p, 0644));
    STEP("unlink", unlink(p));

    int in = open(src, O_CREAT | O_RDWR, 0644), out = open(dst, O_CREAT | O_RDWR, 0644);
    if (in < 0 || out < 0 || pwrite(in, buf, 8192, 0) != 8192) {
        fprintf(stderr, "fops_tagged: copy_file_range's files: %s\n", strerror(errno));
        return 1;
    }
    loff_t off_in = 0, off_out = 0;
    STEP("copy_file_range", copy_file_range(in, &off_in, out, &off_out, 8192, 0));
    close(in);
    close(out);
    iot_registry_release(slot, tid);
    iot_registry_close(reg);
    free(f), free(g), free(h), free(d), free(p), free(src), free(dst);
    return failed;
}
