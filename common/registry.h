/* The node-local CallID registry: while an MPI-IO call runs, the thread that
 * makes it is listed here as tid -> (job, CallID, rank), so that a file
 * system client on the same node (the GlusterFS iotrace-client translator)
 * can tag the requests that thread causes.
 *
 * It is a fixed-size table in shared memory.  Writers never lock: a thread
 * claims a slot once (compare-and-swap on the tid), then publishes and
 * clears CallIDs with single atomic stores.  Readers copy a slot under a
 * sequence counter and check that its process is still alive, so slots of
 * processes that died without clearing them are ignored and reclaimed.
 * Layout and rules: docs/registry.md. */
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
 * default.  "off" (or an empty value) means none: returns NULL. */
const char *iot_registry_name(const char *name);

/* Maps the registry, creating it (mode 0666, so ranks of any user can write
 * it) when `create` is set and it does not exist.  A name with a '/' after
 * the first character is a file path, otherwise a POSIX shared-memory name. */
iot_registry *iot_registry_open(const char *name, int create, char *err, size_t errlen);
void iot_registry_close(iot_registry *r);

/* Writer side.  Claims a slot for `tid` of process `pid` (one per thread,
 * not on the hot path) and writes its job and rank; NULL when the table is
 * full around that tid (counted in the header). */
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

/* Reader side.  1 and *out filled when `tid` is inside an MPI-IO call, 0
 * when it is not (or its process is gone: the slot is then freed). */
int iot_registry_lookup(iot_registry *r, uint32_t tid, struct iot_reg_entry *out);

/* Frees every slot whose process no longer exists; returns how many. */
unsigned iot_registry_sweep(iot_registry *r);

/* Claims that found the table full, since it was created. */
uint64_t iot_registry_full_count(const iot_registry *r);

#endif
