/* Internals of libiotrace-client.so shared by its modules.
 *
 * The application's threads only ever write fixed-size records into their
 * own ring (struct iot_ring); everything else (time conversion, encoding,
 * compression, sending) happens on the sender thread.  See docs/client.md. */
#ifndef IOT_CLIENT_H
#define IOT_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define IOT_LIKELY(x) __builtin_expect(!!(x), 1)
#define IOT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define IOT_TLS __thread __attribute__((tls_model("initial-exec")))
#define IOT_HIDDEN __attribute__((visibility("hidden")))

enum iot_rec_kind { IOT_REC_MPIIO = 1, IOT_REC_POSIX = 2 };

/* One event as the application thread writes it: times are raw clock
 * readings (see clock.h), converted by the sender. */
struct iot_rec {
    uint64_t t0, t1;
    uint64_t callid;
    uint64_t file;
    int64_t offset;
    uint64_t bytes;
    uint64_t xfer;
    int64_t ret;
    uint64_t coll_seq;
    uint16_t func;
    uint8_t kind;
    uint8_t pad;
    uint32_t tid;
};

/* Single-producer (the owning thread) single-consumer (the sender) ring. */
struct iot_ring {
    _Atomic uint64_t head;
    char pad0[56];
    _Atomic uint64_t tail;
    char pad1[56];
    _Atomic uint64_t dropped;  /* records lost because the ring was full */
    uint64_t dropped_reported; /* sender only */
    _Atomic int dead;          /* owning thread exited */
    uint32_t tid;
    uint64_t mask;
    size_t map_size;
    struct iot_ring *next;
    struct iot_rec recs[];
};

struct iot_tls {
    struct iot_ring *ring;
    uint64_t callid;    /* CallID of the MPI-IO call running on this thread */
    uint64_t mpi_file;  /* its file, for offsets taken from inner POSIX I/O */
    int64_t mpi_offset; /* first inner transfer's offset, -1 until seen */
    int mpi_depth;      /* > 0 while inside a traced MPI-IO call */
    int internal;       /* > 0 inside iotrace's own code: nothing is recorded */
    uint64_t callid_next, callid_end; /* this thread's block of CallID counters */
    uint32_t tid;
};

struct iot_config {
    int disabled;
    int trace_posix;
    int trace_mpiio;
    int verbose;
    const char *agent;
    const char *node;
    const char *job;
    uint64_t ring_events;
    uint64_t batch_events;
    uint64_t flush_ms;
    uint64_t linger_ms;
    uint64_t send_queue;
};

struct iot_global {
    struct iot_config cfg;
    _Atomic int active;     /* recording on: initialised, not disabled, not failed */
    _Atomic int initialised;
    int32_t rank;           /* -1 until MPI_Init */
    char job[128];
    char node[128];
    uint32_t pid;
    uint64_t start_ns;
    uint64_t epoch;
    _Atomic uint64_t call_counter;
};

extern IOT_HIDDEN struct iot_global iot_g;
extern IOT_HIDDEN IOT_TLS struct iot_tls iot_t;

/* core.c */
IOT_HIDDEN void iot_init(void);
IOT_HIDDEN struct iot_ring *iot_ring_attach(void);
IOT_HIDDEN uint32_t iot_gettid(void);
IOT_HIDDEN void *iot_next_symbol(const char *name);
IOT_HIDDEN void iot_disable_after_error(const char *what);
IOT_HIDDEN void iot_debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Registers a path (made absolute) and returns its file id; queues its
 * name for the sender the first time it is seen. */
IOT_HIDDEN uint64_t iot_file_register(const char *path);
IOT_HIDDEN uint64_t iot_file_id(const char *abs_path, size_t len);
IOT_HIDDEN void iot_set_rank(int rank);
IOT_HIDDEN void iot_set_job(const char *job);

/* fd table: which file each descriptor opened by path refers to, and the
 * file position we track without system calls. */
IOT_HIDDEN void iot_fd_open(int fd, uint64_t file, int append);
IOT_HIDDEN void iot_fd_close(int fd);
IOT_HIDDEN uint64_t iot_fd_file(int fd);
IOT_HIDDEN int64_t iot_fd_pos(int fd);
IOT_HIDDEN void iot_fd_set_pos(int fd, int64_t pos);

/* sender.c */
IOT_HIDDEN void iot_sender_start(void);
IOT_HIDDEN void iot_sender_register_ring(struct iot_ring *ring);
IOT_HIDDEN void iot_sender_flush(int timeout_ms);
IOT_HIDDEN void iot_sender_stop(void);
IOT_HIDDEN void iot_sender_after_fork_child(void);
IOT_HIDDEN void iot_sender_queue_name(uint64_t id, const char *path, size_t len);
IOT_HIDDEN void iot_sender_fork_prepare(void);
IOT_HIDDEN void iot_sender_fork_parent(void);

/* The hot path.  Returns a free slot of this thread's ring, or NULL when the
 * record must be dropped (already counted).  iot_rec_commit publishes it. */
static inline struct iot_rec *iot_rec_reserve(void)
{
    struct iot_ring *r = iot_t.ring;
    if (IOT_UNLIKELY(!r)) {
        r = iot_ring_attach();
        if (!r)
            return NULL;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (IOT_UNLIKELY(h - t > r->mask)) {
        atomic_store_explicit(&r->dropped,
                              atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return NULL;
    }
    return &r->recs[h & r->mask];
}

static inline void iot_rec_commit(void)
{
    struct iot_ring *r = iot_t.ring;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

static inline uint32_t iot_tid(void)
{
    uint32_t tid = iot_t.tid;
    return IOT_LIKELY(tid) ? tid : iot_gettid();
}

static inline int iot_recording(void)
{
    return atomic_load_explicit(&iot_g.active, memory_order_relaxed) && !iot_t.internal;
}

#endif
