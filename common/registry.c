#include "registry.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fail.h"

_Static_assert(sizeof(struct iot_reg_header) == 64, "registry header is one cache line");
_Static_assert(sizeof(struct iot_reg_slot) == 128, "registry slots are two cache lines");

/* Where glibc's shm_open keeps its names.  Opening them ourselves adds
 * O_NOFOLLOW and O_NONBLOCK (a FIFO planted under the name must not block
 * us) to what shm_open would do. */
#define SHM_DIR "/dev/shm"
/* A header may claim no more slots than this: a reader must not be led
 * into mapping or probing a huge object. */
#define MAX_SLOTS (1u << 20)
#define OPEN_FLAGS (O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
#define WAIT_TRIES 50 /* of 2 ms: creation takes microseconds */

struct iot_registry {
    struct iot_reg_header *hdr; /* writers: the mapping; readers: NULL */
    struct iot_reg_slot *slots;
    int fd;                     /* readers: what lookups pread; writers: -1 */
    uint32_t mask;
    uint32_t uid;               /* the owner it was checked against */
    size_t size;
    dev_t dev;
    ino_t ino;
};

const char *iot_registry_name(const char *name)
{
    if (!name || !name[0])
        name = getenv("IOTRACE_REGISTRY");
    if (!name)
        return IOT_REGISTRY_DEFAULT;
    if (!name[0] || !strcmp(name, "off"))
        return NULL;
    return name;
}

int iot_registry_user_name(const char *base, uint32_t uid, char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s-%u", base ? base : "", uid);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int is_path(const char *name) { return strchr(name + 1, '/') != NULL; }

static int object_path(const char *name, char *out, size_t outlen, char *err, size_t errlen)
{
    if (!name || !name[0] || (name[0] != '/' && !is_path(name)))
        return iot_fail(err, errlen, "registry name '%s' must start with '/'", name ? name : "");
    int n = is_path(name) ? snprintf(out, outlen, "%s", name)
                          : snprintf(out, outlen, SHM_DIR "%s", name);
    if (n < 0 || (size_t)n >= outlen)
        return iot_fail(err, errlen, "registry name '%s' is too long", name);
    return 0;
}

static size_t registry_size(uint32_t slots)
{
    return sizeof(struct iot_reg_header) + (size_t)slots * sizeof(struct iot_reg_slot);
}

static void pause_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* posix_fallocate and fallocate may be interrupted by a signal (tmpfs
 * gives up a large reservation then); they return an error number. */
static int fallocate_whole(int fd, size_t size, int emulate)
{
    int e;
    do
        if (emulate)
            e = posix_fallocate(fd, 0, (off_t)size);
        else
            e = fallocate(fd, 0, 0, (off_t)size) < 0 ? errno : 0;
    while (e == EINTR);
    return e;
}

/* Makes the registry of `uid` unless it exists (0 either way).  It gets
 * its final owner and mode before anything else, and the magic last, so
 * that whoever sees the magic sees a complete table that is already its
 * owner's.  Every page is reserved before the magic: a sparse table on a
 * tmpfs that someone else fills up would raise SIGBUS in the first rank
 * that touches one of its holes, and a registry that cannot be reserved
 * is not made.  Where the file system has no fallocate, posix_fallocate
 * writes every block (nobody writes the table before the magic).  Written
 * with pwrite: its owner may truncate it meanwhile, and a mapping would
 * then raise SIGBUS here. */
static int create_object(const char *path, const char *name, uint32_t uid, uint32_t gid,
                         char *err, size_t errlen)
{
    /* Only root can give a registry away; others do not make one for a
     * user who could not use it. */
    if (uid != (uint32_t)geteuid() && geteuid() != 0)
        return 0;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | OPEN_FLAGS, 0600);
    if (fd < 0)
        return errno == EEXIST ? 0 : iot_fail(err, errlen, "cannot create registry %s: %s",
                                              name, strerror(errno));
    struct iot_reg_header h = {.version = IOT_REGISTRY_VERSION, .slots = IOT_REGISTRY_SLOTS,
                               .slot_size = sizeof(struct iot_reg_slot)};
    uint32_t magic = IOT_REGISTRY_MAGIC;
    const char *step = NULL;
    int e = 0;
    if (uid != (uint32_t)geteuid() && fchown(fd, (uid_t)uid, (gid_t)gid) < 0)
        step = "give away";
    else if (fchmod(fd, 0600) < 0) /* the umask may have taken the owner's bits */
        step = "protect";
    else if ((e = fallocate_whole(fd, registry_size(IOT_REGISTRY_SLOTS), 1)) != 0)
        step = "reserve";
    else if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
             pwrite(fd, &magic, sizeof magic, 0) != (ssize_t)sizeof magic)
        step = "write";
    if (step && !e)
        e = errno;
    close(fd);
    if (!step)
        return 0;
    unlink(path); /* a half-made registry would be refused by everyone */
    return iot_fail(err, errlen, "cannot %s registry %s: %s", step, name, strerror(e));
}

/* Opens an existing registry; a writer waits out the moment in which a
 * privileged creator has not yet given the new object to its user. */
static int open_object(const char *path, const char *name, int writer, char *err, size_t errlen)
{
    for (int tries = 0;; tries++) {
        int fd = open(path, (writer ? O_RDWR : O_RDONLY) | OPEN_FLAGS);
        if (fd >= 0)
            return fd;
        if (errno != EACCES || !writer || tries == WAIT_TRIES)
            return iot_fail(err, errlen, "cannot open registry %s: %s", name, strerror(errno));
        pause_ms(2);
    }
}

enum header_state { HDR_OK, HDR_SHORT, HDR_MAGIC, HDR_VERSION, HDR_GEOMETRY };

static enum header_state read_header(int fd, const struct stat *st, struct iot_reg_header *h)
{
    if ((size_t)st->st_size < sizeof *h || pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h)
        return HDR_SHORT;
    if (atomic_load_explicit(&h->magic, memory_order_relaxed) != IOT_REGISTRY_MAGIC)
        return HDR_MAGIC;
    if (h->version != IOT_REGISTRY_VERSION)
        return HDR_VERSION;
    if (h->slots == 0 || h->slots > MAX_SLOTS || (h->slots & (h->slots - 1)) ||
        h->slot_size != sizeof(struct iot_reg_slot))
        return HDR_GEOMETRY;
    return HDR_OK;
}

/* Is this the complete registry of `uid`, that only `uid` (and root) can
 * write?  A writer waits briefly for a creator to finish; a reader does
 * not (it retries later), so that a junk object cannot stall it. */
static int check_object(int fd, const char *name, uint32_t uid, int wait, struct stat *st,
                        uint32_t *slots, char *err, size_t errlen)
{
    struct iot_reg_header h;
    enum header_state hs;
    for (int tries = 0;; tries++) {
        if (fstat(fd, st) < 0)
            return iot_fail(err, errlen, "cannot stat registry %s: %s", name, strerror(errno));
        if (!S_ISREG(st->st_mode))
            return iot_fail(err, errlen, "registry %s is not a regular file", name);
        if ((hs = read_header(fd, st, &h)) == HDR_OK || !wait || tries == WAIT_TRIES)
            break;
        pause_ms(2);
    }
    if (st->st_uid != (uid_t)uid)
        return iot_fail(err, errlen, "registry %s belongs to uid %u, not %u", name,
                        (unsigned)st->st_uid, uid);
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return iot_fail(err, errlen, "registry %s may be written by other users (mode %03o)",
                        name, (unsigned)(st->st_mode & 07777));
    switch (hs) {
    case HDR_OK:
        break;
    case HDR_SHORT:
        return iot_fail(err, errlen, "registry %s is too small (%lld bytes)", name,
                        (long long)st->st_size);
    case HDR_MAGIC:
        return iot_fail(err, errlen, "%s is not an iotrace registry (bad magic)", name);
    case HDR_VERSION:
        return iot_fail(err, errlen, "registry %s has version %u, this build reads %u", name,
                        h.version, IOT_REGISTRY_VERSION);
    case HDR_GEOMETRY:
        return iot_fail(err, errlen, "registry %s has a bad geometry (%u slots of %u bytes)",
                        name, h.slots, h.slot_size);
    }
    if ((size_t)st->st_size < registry_size(h.slots))
        return iot_fail(err, errlen, "registry %s is truncated (%lld of %zu bytes)", name,
                        (long long)st->st_size, registry_size(h.slots));
    if ((size_t)st->st_size > registry_size(h.slots))
        return iot_fail(err, errlen, "registry %s has %lld bytes, not %zu", name,
                        (long long)st->st_size, registry_size(h.slots));
    *slots = h.slots;
    return 0;
}

/* A writer maps the table and may touch any of its pages; on a tmpfs
 * that is full, a page without storage raises SIGBUS when touched.  The
 * creator reserved them all, but an older iotrace, or another process of
 * the owner's, may have left holes: reserve them again (fallocate is
 * idempotent, keeps what is written and needs only write access).  Where
 * the file system has no fallocate, accept only a file whose blocks cover
 * its size (blocks are 512 bytes in st_blocks): the emulation in
 * posix_fallocate writes a zero into every block where it reads one,
 * which races the stores of the other ranks. */
static int reserve_object(int fd, const struct stat *st, size_t size, const char *name,
                          char *err, size_t errlen)
{
    int e = fallocate_whole(fd, size, 0);
    if (e == 0)
        return 0;
    if ((e == EOPNOTSUPP || e == ENOSYS) && (uint64_t)st->st_blocks * 512u >= size)
        return 0;
    if (e == EOPNOTSUPP || e == ENOSYS)
        return iot_fail(err, errlen, "registry %s is sparse (%lld of %zu bytes allocated) and "
                        "cannot be reserved here", name, (long long)st->st_blocks * 512, size);
    return iot_fail(err, errlen, "cannot reserve registry %s: %s", name, strerror(e));
}

static iot_registry *open_registry(const char *name, uint32_t uid, uint32_t gid, int create,
                                   int writer, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (object_path(name, path, sizeof path, err, errlen) < 0)
        return NULL;
    if (create && create_object(path, name, uid, gid, err, errlen) < 0)
        return NULL;
    int fd = open_object(path, name, writer, err, errlen);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint32_t slots = 0;
    iot_registry *r = NULL;
    if (check_object(fd, name, uid, writer, &st, &slots, err, errlen) < 0 ||
        (writer && reserve_object(fd, &st, registry_size(slots), name, err, errlen) < 0))
        goto out;
    if (!(r = calloc(1, sizeof *r))) {
        iot_fail(err, errlen, "cannot open registry %s: out of memory", name);
        goto out;
    }
    *r = (iot_registry){.fd = -1, .mask = slots - 1, .uid = uid, .size = registry_size(slots),
                        .dev = st.st_dev, .ino = st.st_ino};
    if (!writer) {
        r->fd = fd; /* pread: a hole reads as zeros, a truncation as a short read */
        return r;
    }
    void *map = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        iot_fail(err, errlen, "cannot map registry %s: %s", name, strerror(errno));
        free(r);
        r = NULL;
        goto out;
    }
    r->hdr = map;
    r->slots = (struct iot_reg_slot *)(r->hdr + 1);
out:
    close(fd);
    return r;
}

iot_registry *iot_registry_open(const char *name, int create, char *err, size_t errlen)
{
    return open_registry(name, (uint32_t)geteuid(), (uint32_t)getegid(), create, 1, err, errlen);
}

iot_registry *iot_registry_open_reader(const char *name, uint32_t uid, uint32_t gid, int create,
                                       char *err, size_t errlen)
{
    return open_registry(name, uid, gid, create, 0, err, errlen);
}

void iot_registry_close(iot_registry *r)
{
    if (!r)
        return;
    if (r->hdr)
        munmap(r->hdr, r->size);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

int iot_registry_stale(const iot_registry *r, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    if (!r || object_path(name, path, sizeof path, NULL, 0) < 0 || lstat(path, &st) < 0)
        return 1;
    return st.st_dev != r->dev || st.st_ino != r->ino || (size_t)st.st_size != r->size ||
           st.st_uid != (uid_t)r->uid || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

static uint32_t home_slot(const iot_registry *r, uint32_t tid)
{
    return (uint32_t)(((uint64_t)tid * 0x9E3779B97F4A7C15ull) >> 32) & r->mask;
}

static struct iot_reg_slot *slot_at(iot_registry *r, uint32_t tid, uint32_t i)
{
    return &r->slots[(home_slot(r, tid) + i) & r->mask];
}

/* A pid no process can have counts as gone (kill() would take it for a
 * process group). */
static int process_gone(uint32_t pid)
{
    return pid != 0 && (pid > INT_MAX || (kill((pid_t)pid, 0) < 0 && errno == ESRCH));
}

static void write_fields(struct iot_reg_slot *s, uint32_t pid, const char *job, int32_t rank)
{
    uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    s->pid = pid;
    s->rank = rank;
    snprintf(s->job, sizeof s->job, "%s", job ? job : "");
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

enum take { TAKE_OWN, TAKE_FREE, TAKE_DEAD };

/* In this order of preference: a slot that already names this tid (tids
 * are unique among live threads, so its former owner is gone), a free one,
 * one whose process died without freeing it. */
static int take_slot(struct iot_reg_slot *s, uint32_t tid, enum take how)
{
    uint32_t cur = atomic_load_explicit(&s->tid, memory_order_acquire);
    if (how == TAKE_OWN || cur == tid)
        return cur == tid;
    if (cur != 0 && !(how == TAKE_DEAD && process_gone(s->pid)))
        return 0;
    return atomic_compare_exchange_strong(&s->tid, &cur, tid);
}

struct iot_reg_slot *iot_registry_claim(iot_registry *r, uint32_t tid, uint32_t pid,
                                        const char *job, int32_t rank)
{
    if (!r || !r->hdr || tid == 0)
        return NULL;
    for (enum take how = TAKE_OWN; how <= TAKE_DEAD; how++)
        for (uint32_t i = 0; i < IOT_REGISTRY_PROBE && i <= r->mask; i++) {
            struct iot_reg_slot *s = slot_at(r, tid, i);
            if (!take_slot(s, tid, how))
                continue;
            atomic_store_explicit(&s->callid, 0, memory_order_relaxed);
            write_fields(s, pid, job, rank);
            return s;
        }
    atomic_fetch_add_explicit(&r->hdr->full, 1, memory_order_relaxed);
    return NULL;
}

void iot_registry_update(struct iot_reg_slot *s, const char *job, int32_t rank)
{
    if (s)
        write_fields(s, s->pid, job, rank);
}

void iot_registry_release(struct iot_reg_slot *s, uint32_t tid)
{
    if (!s)
        return;
    atomic_store_explicit(&s->callid, 0, memory_order_release);
    atomic_compare_exchange_strong(&s->tid, &tid, 0);
}

/* Copies slots [first, first + n) out of the table: from a writer's own
 * mapping, or with pread for a reader, for which a truncated object is a
 * short read where a mapping would raise SIGBUS. */
static int copy_slots(const iot_registry *r, uint32_t first, struct iot_reg_slot *out, uint32_t n)
{
    size_t off = sizeof(struct iot_reg_header) + (size_t)first * sizeof *out;
    size_t len = (size_t)n * sizeof *out;
    if (r->hdr) {
        /* Orders this copy after an earlier one (read_entry compares them). */
        atomic_thread_fence(memory_order_acquire);
        memcpy(out, (const char *)r->hdr + off, len);
        return 0;
    }
    ssize_t got;
    do
        got = pread(r->fd, out, len, (off_t)off);
    while (got < 0 && errno == EINTR);
    return got == (ssize_t)len ? 0 : -1;
}

/* A copy of a slot is its state at one moment when a later copy is
 * identical and shows no rewrite under way: `seq` is odd during a rewrite
 * and has grown after one, and any field that changed between two copies
 * differs.  This needs no atomic access, so it works on pread copies.
 * `callid` is compared too: the thread looked up is blocked in the request
 * being tagged, so it holds still, and a torn copy of it is caught. */
static int read_entry(const iot_registry *r, uint32_t idx, struct iot_reg_slot *seen,
                      uint32_t tid, struct iot_reg_entry *out)
{
    struct iot_reg_slot again;
    for (int attempt = 0; attempt < 8; attempt++) {
        if (copy_slots(r, idx, &again, 1) < 0)
            return 0;
        uint32_t seq = atomic_load_explicit(&again.seq, memory_order_relaxed);
        if (memcmp(seen, &again, sizeof again) != 0 || (seq & 1)) {
            memcpy(seen, &again, sizeof again);
            continue;
        }
        if (atomic_load_explicit(&again.tid, memory_order_relaxed) != tid)
            return 0;
        out->callid = atomic_load_explicit(&again.callid, memory_order_relaxed);
        out->tid = tid;
        out->pid = again.pid;
        out->rank = again.rank;
        memcpy(out->job, again.job, sizeof out->job);
        out->job[sizeof out->job - 1] = '\0';
        /* A process killed inside an MPI-IO call leaves its CallID behind;
         * a new thread that reuses the tid must not inherit it. */
        return out->callid != 0 && out->pid != 0 && !process_gone(out->pid);
    }
    return 0;
}

int iot_registry_lookup(const iot_registry *r, uint32_t tid, struct iot_reg_entry *out)
{
    if (!r || tid == 0)
        return 0;
    struct iot_reg_slot window[IOT_REGISTRY_PROBE];
    uint32_t n = IOT_REGISTRY_PROBE <= r->mask ? IOT_REGISTRY_PROBE : r->mask + 1;
    uint32_t home = home_slot(r, tid);
    uint32_t before_end = r->mask + 1 - home < n ? r->mask + 1 - home : n;
    if (copy_slots(r, home, window, before_end) < 0 ||
        (before_end < n && copy_slots(r, 0, window + before_end, n - before_end) < 0))
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load_explicit(&window[i].tid, memory_order_relaxed) == tid)
            return read_entry(r, (home + i) & r->mask, &window[i], tid, out);
    return 0;
}

unsigned iot_registry_sweep(iot_registry *r)
{
    unsigned freed = 0;
    if (!r || !r->hdr)
        return 0;
    for (uint32_t i = 0; i <= r->mask; i++) {
        struct iot_reg_slot *s = &r->slots[i];
        uint32_t tid = atomic_load_explicit(&s->tid, memory_order_acquire);
        if (tid && process_gone(s->pid) && atomic_compare_exchange_strong(&s->tid, &tid, 0))
            freed++;
    }
    return freed;
}

uint64_t iot_registry_full_count(const iot_registry *r)
{
    struct iot_reg_header h;
    if (!r)
        return 0;
    if (r->hdr)
        return atomic_load_explicit(&r->hdr->full, memory_order_relaxed);
    if (pread(r->fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return 0;
    return atomic_load_explicit(&h.full, memory_order_relaxed);
}
