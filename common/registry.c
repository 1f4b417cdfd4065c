#include "registry.h"

#include <errno.h>
#include <fcntl.h>
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

struct iot_registry {
    struct iot_reg_header *hdr;
    struct iot_reg_slot *slots;
    uint32_t mask;
    int writable;
    size_t map_size;
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

static int is_path(const char *name) { return strchr(name + 1, '/') != NULL; }

static int open_object(const char *name, int flags)
{
    return is_path(name) ? open(name, flags | O_CLOEXEC, 0666) : shm_open(name, flags, 0666);
}

static size_t registry_size(uint32_t slots)
{
    return sizeof(struct iot_reg_header) + (size_t)slots * sizeof(struct iot_reg_slot);
}

/* The creator sizes the object, then publishes the header with the magic
 * last, so an opener that sees the magic sees a complete table. */
static int create_object(const char *name, int *fd_out, char *err, size_t errlen)
{
    int fd = open_object(name, O_RDWR | O_CREAT | O_EXCL);
    if (fd < 0)
        return errno == EEXIST ? 0 : iot_fail(err, errlen, "cannot create registry %s: %s", name,
                                          strerror(errno));
    size_t size = registry_size(IOT_REGISTRY_SLOTS);
    /* The umask must not keep ranks of other users from writing it. */
    if (fchmod(fd, 0666) < 0 || ftruncate(fd, (off_t)size) < 0) {
        int e = errno;
        close(fd);
        return iot_fail(err, errlen, "cannot size registry %s: %s", name, strerror(e));
    }
    struct iot_reg_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
        int e = errno;
        close(fd);
        return iot_fail(err, errlen, "cannot map registry %s: %s", name, strerror(e));
    }
    h->version = IOT_REGISTRY_VERSION;
    h->slots = IOT_REGISTRY_SLOTS;
    h->slot_size = sizeof(struct iot_reg_slot);
    atomic_store_explicit(&h->magic, IOT_REGISTRY_MAGIC, memory_order_release);
    munmap(h, sizeof *h);
    *fd_out = fd;
    return 1;
}

static void pause_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (briefly: creation takes microseconds) until a creator racing with
 * us has sized and published the table, and checks that it is one. */
static int check_object(int fd, const char *name, size_t *size_out, char *err, size_t errlen)
{
    struct stat st;
    for (int tries = 0;; tries++) {
        if (fstat(fd, &st) < 0)
            return iot_fail(err, errlen, "cannot stat registry %s: %s", name, strerror(errno));
        if ((size_t)st.st_size >= sizeof(struct iot_reg_header))
            break;
        if (tries == 50)
            return iot_fail(err, errlen, "registry %s is too small (%lld bytes)", name,
                        (long long)st.st_size);
        pause_ms(2);
    }
    struct iot_reg_header h;
    for (int tries = 0;; tries++) {
        if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
            return iot_fail(err, errlen, "cannot read registry %s: %s", name, strerror(errno));
        if (h.magic == IOT_REGISTRY_MAGIC)
            break;
        if (tries == 50)
            return iot_fail(err, errlen, "%s is not an iotrace registry (bad magic)", name);
        pause_ms(2);
    }
    if (h.version != IOT_REGISTRY_VERSION)
        return iot_fail(err, errlen, "registry %s has version %u, this build reads %u", name,
                    h.version, IOT_REGISTRY_VERSION);
    if (h.slots == 0 || (h.slots & (h.slots - 1)) || h.slot_size != sizeof(struct iot_reg_slot))
        return iot_fail(err, errlen, "registry %s has a bad geometry (%u slots of %u bytes)", name,
                    h.slots, h.slot_size);
    if ((size_t)st.st_size < registry_size(h.slots))
        return iot_fail(err, errlen, "registry %s is truncated (%lld of %zu bytes)", name,
                    (long long)st.st_size, registry_size(h.slots));
    *size_out = registry_size(h.slots);
    return 0;
}

static int open_existing(const char *name, int *writable, char *err, size_t errlen)
{
    int fd = open_object(name, O_RDWR);
    *writable = 1;
    if (fd < 0 && errno == EACCES) {
        fd = open_object(name, O_RDONLY);
        *writable = 0;
    }
    if (fd < 0)
        return iot_fail(err, errlen, "cannot open registry %s: %s", name, strerror(errno));
    return fd;
}

iot_registry *iot_registry_open(const char *name, int create, char *err, size_t errlen)
{
    if (!name || !name[0] || (name[0] != '/' && !is_path(name))) {
        iot_fail(err, errlen, "registry name '%s' must start with '/'", name ? name : "");
        return NULL;
    }
    int fd = -1, writable = 1;
    if (create && create_object(name, &fd, err, errlen) < 0)
        return NULL;
    if (fd < 0 && (fd = open_existing(name, &writable, err, errlen)) < 0)
        return NULL;
    size_t size = 0;
    if (check_object(fd, name, &size, err, errlen) < 0) {
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    iot_registry *r = map == MAP_FAILED ? NULL : calloc(1, sizeof *r);
    if (!r) {
        if (map != MAP_FAILED)
            munmap(map, size);
        iot_fail(err, errlen, "cannot map registry %s: %s", name, strerror(map == MAP_FAILED ? e : ENOMEM));
        return NULL;
    }
    r->hdr = map;
    r->slots = (struct iot_reg_slot *)(r->hdr + 1);
    r->mask = r->hdr->slots - 1;
    r->writable = writable;
    r->map_size = size;
    return r;
}

void iot_registry_close(iot_registry *r)
{
    if (!r)
        return;
    munmap(r->hdr, r->map_size);
    free(r);
}

static uint32_t home_slot(const iot_registry *r, uint32_t tid)
{
    return (uint32_t)(((uint64_t)tid * 0x9E3779B97F4A7C15ull) >> 32) & r->mask;
}

static struct iot_reg_slot *slot_at(iot_registry *r, uint32_t tid, uint32_t i)
{
    return &r->slots[(home_slot(r, tid) + i) & r->mask];
}

static int process_gone(uint32_t pid)
{
    return pid != 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
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
    if (!r || !r->writable || tid == 0)
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

/* Copies a slot consistently: job, rank and pid are rewritten under seq. */
static int read_slot(struct iot_reg_slot *s, uint32_t tid, struct iot_reg_entry *out)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (seq & 1)
            continue;
        out->pid = s->pid;
        out->rank = s->rank;
        memcpy(out->job, s->job, sizeof out->job);
        out->callid = atomic_load_explicit(&s->callid, memory_order_acquire);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != seq)
            continue;
        if (atomic_load_explicit(&s->tid, memory_order_relaxed) != tid)
            return 0;
        out->job[sizeof out->job - 1] = '\0';
        out->tid = tid;
        return 1;
    }
    return 0;
}

int iot_registry_lookup(iot_registry *r, uint32_t tid, struct iot_reg_entry *out)
{
    if (!r || tid == 0)
        return 0;
    for (uint32_t i = 0; i < IOT_REGISTRY_PROBE && i <= r->mask; i++) {
        struct iot_reg_slot *s = slot_at(r, tid, i);
        if (atomic_load_explicit(&s->tid, memory_order_acquire) != tid)
            continue;
        if (!read_slot(s, tid, out) || out->callid == 0)
            return 0;
        /* A process killed inside an MPI-IO call leaves its CallID behind;
         * a new thread that reuses the tid must not inherit it. */
        if (process_gone(out->pid)) {
            if (r->writable)
                atomic_compare_exchange_strong(&s->tid, &tid, 0);
            return 0;
        }
        return 1;
    }
    return 0;
}

unsigned iot_registry_sweep(iot_registry *r)
{
    unsigned freed = 0;
    if (!r || !r->writable)
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
    return r ? atomic_load_explicit(&r->hdr->full, memory_order_relaxed) : 0;
}
