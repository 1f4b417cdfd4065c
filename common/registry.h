/* The node-local CallID registry: while an MPI-IO call runs, the thread that
 * makes it is listed here as tid -> (job, CallID, rank), so that a file
 * system client on the same node (the GlusterFS iotrace-client translator)
 * can tag the requests that thread causes.
 *
 * It is a fixed-size table in shared memory, one per user: whoever can
 * write it can truncate it, and a truncated mapping raises SIGBUS, so no
 * process maps a registry another user can write. Writers (the ranks of
 * its owner) map it and never lock: a thread claims a slot once
 * (compare-and-swap on the tid), then publishes and clears CallIDs with
 * single atomic stores. Every page of it is reserved (fallocate) before it
 * is mapped: anyone can fill /dev/shm, and touching a page that has no
 * storage then raises SIGBUS. Readers never map it: they pread slots and
 * take a copy only when a second one matches it, so a registry truncated
 * or scribbled on under them only costs tags. Slots of processes that died
 * without clearing them are ignored, and reclaimed by writers.
 * Layout, naming and rules: docs/registry.md. */
#ifndef IOT_REGISTRY_H
#define IOT_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define IOT_REGISTRY_DEFAULT "/iotrace-registry"
#define IOT_REGISTRY_MAGIC 0x47455249u /* "IREG" little-endian */
#define IOT_REGISTRY_VERSION 1u
#define IOT_REGISTRY_SLOTS 8192u
#define IOT_REGISTRY_PROBE 32u /* slots a tid may live in, from its hash on */
#define IOT_REGISTRY_JOB_MAX 95 /* longest job id that fits a slot */

struct iot_reg_header {
    _Atomic uint32_t magic; /* written last by the creator */
    uint32_t version;
    uint32_t slots;         /* a power of two */
    uint32_t slot_size;
    _Atomic uint64_t full;  /* claims that found no free slot in their window */
    char pad[40];
};

struct iot_reg_slot {
    _Atomic uint32_t tid;    /* 0: free */
    _Atomic uint32_t seq;    /* odd while job/rank/pid are being rewritten */
    uint32_t pid;
    int32_t rank;
    _Atomic uint64_t callid; /* 0: no MPI-IO call running on this thread */
    uint64_t reserved;
    char job[IOT_REGISTRY_JOB_MAX + 1];
};

typedef struct iot_registry iot_registry;

/* What a reader sees for a thread inside an MPI-IO call. */
struct iot_reg_entry {
    uint64_t callid;
    uint32_t tid, pid;
    int32_t rank;
    char job[IOT_REGISTRY_JOB_MAX + 1];
};

/* The registry to use: `name` if given, else $IOTRACE_REGISTRY, else the
 * default.  "off" (or an empty value) means none: returns NULL.  This is
 * the base of the per-user names, see iot_registry_user_name. */
const char *iot_registry_name(const char *name);

/* The registry of user `uid`: `base` followed by "-<uid>" (shared-memory
 * name or path alike).  0, or -1 when it does not fit `outlen`. */
int iot_registry_user_name(const char *base, uint32_t uid, char *out, size_t outlen);

/* Writer side: maps the registry `name` read-write for the calling
 * process, creating it (mode 0600, whatever the umask) when `create` is set
 * and it does not exist.  Refuses anything but a complete registry in a
 * regular file that belongs to the caller's effective uid, has exactly the
 * registry's size and that neither group nor others may write; refuses it
 * too when its pages cannot all be given storage (fallocate; where there
 * is none, its blocks must cover its size): on a full tmpfs, touching a
 * mapped page without storage raises SIGBUS.  A name with
 * a '/' after the first character is a file path, otherwise a POSIX
 * shared-memory name (in /dev/shm).  Waits up to about 0.1 s for a
 * registry another process is creating. */
iot_registry *iot_registry_open(const char *name, int create, char *err, size_t errlen);

/* Reader side, for a file system client that serves many users (usually
 * root): opens the registry `name` of user `uid`, refusing what
 * iot_registry_open would refuse with `uid` as the caller.  When `create`
 * is set and it does not exist it is made for that user (owned by
 * uid:gid, mode 0600, every page reserved), so that the user's first
 * ranks find it there.
 * Lookups read it through its descriptor, never through a mapping: its
 * owner can truncate it.  Never waits. */
iot_registry *iot_registry_open_reader(const char *name, uint32_t uid, uint32_t gid, int create,
                                       char *err, size_t errlen);
void iot_registry_close(iot_registry *r);

/* 1 when `name` no longer leads to the object `r` uses (removed, replaced)
 * or that object has changed size, owner or write permissions: time to
 * open it again. */
int iot_registry_stale(const iot_registry *r, const char *name);

/* Writer side (a handle from iot_registry_open).  Claims a slot for `tid`
 * of process `pid` (one per thread, not on the hot path) and writes its job
 * and rank; NULL when the table is full around that tid (counted in the
 * header) or `r` is a reader's. */
struct iot_reg_slot *iot_registry_claim(iot_registry *r, uint32_t tid, uint32_t pid,
                                        const char *job, int32_t rank);
/* Rewrites job and rank of a claimed slot (a rank learns them in MPI_Init). */
void iot_registry_update(struct iot_reg_slot *s, const char *job, int32_t rank);
/* Frees a slot: the thread or process is going away. */
void iot_registry_release(struct iot_reg_slot *s, uint32_t tid);

/* The hot path: one release store each. */
static inline void iot_registry_begin(struct iot_reg_slot *s, uint64_t callid)
{
    atomic_store_explicit(&s->callid, callid, memory_order_release);
}

static inline void iot_registry_end(struct iot_reg_slot *s)
{
    atomic_store_explicit(&s->callid, 0, memory_order_release);
}

/* 1 and *out filled when `tid` is inside an MPI-IO call, 0 when it is
 * not, its process is gone, or the registry cannot be read.  Never writes:
 * what it returns is attribution data that any writer of this registry
 * (its owner's processes) could have put there. */
int iot_registry_lookup(const iot_registry *r, uint32_t tid, struct iot_reg_entry *out);

/* Writer side: frees every slot whose process no longer exists; returns
 * how many. */
unsigned iot_registry_sweep(iot_registry *r);

/* Claims that found the table full, since it was created. */
uint64_t iot_registry_full_count(const iot_registry *r);

#endif
