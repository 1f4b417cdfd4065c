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

enum iot_rec_kind {
    IOT_REC_MPIIO = 1,
    IOT_REC_POSIX = 2,
    IOT_REC_MPIIO_LONG = 3, /* MPI-IO; the next slot holds t1, coll_seq in full, coll_group */
    IOT_REC_DISK = 4,       /* libiotrace-server; `pad` slots of job id text follow */
};

/* One event as the application thread writes it: times are raw clock
 * readings (see clock.h), converted by the sender; the thread id is the
 * ring's.  A record is one cache line and starts on one, so that writing it
 * touches a single line, the one iot_rec_commit fetched ahead (80-byte
 * records straddled two, shared with their neighbours). */
struct iot_rec {
    uint64_t t0;
    uint64_t callid;
    uint64_t file;
    int64_t offset;
    uint64_t bytes;
    union {
        struct { /* IOT_REC_POSIX */
            uint64_t t1;
            int64_t ret;
        };
        struct {           /* IOT_REC_MPIIO */
            uint64_t xfer;
            uint32_t ticks;    /* t1 - t0; longer calls are IOT_REC_MPIIO_LONG */
            uint32_t coll_seq; /* larger ones too */
        };
    };
    union {
        int32_t mpi_ret;   /* IOT_REC_MPIIO */
        uint32_t disk_uid; /* IOT_REC_DISK: the user its job's tag named, IOT_UID_UNKNOWN */
    };
    uint16_t func;
    uint8_t kind;
    uint8_t pad;
};

/* (uid_t)-1 is no user's uid: a disk operation whose user is not known. */
#define IOT_UID_UNKNOWN UINT32_MAX

/* The slot after an IOT_REC_MPIIO_LONG record. */
struct iot_rec_long {
    uint64_t t1;
    uint64_t coll_seq;
    uint64_t coll_group; /* the handle's communicator, 0: all of MPI_COMM_WORLD */
    uint8_t unused[40];
};

/* Job ids of disk records: up to IOT_JOB_SLOTS slots of text, not
 * NUL-terminated when full. */
#define IOT_JOB_SLOTS 2
#define IOT_JOB_MAX (IOT_JOB_SLOTS * 64)

union iot_slot {
    struct iot_rec rec;
    struct iot_rec_long more;
    char text[64];
};

_Static_assert(sizeof(union iot_slot) == 64, "a ring slot is one cache line");

/* Single-producer (the owning thread) single-consumer ring: the consumer is
 * whoever holds the sender's right to send (the sender thread, or an MPI-IO
 * call of the owning thread itself, sender.c), one at a time.
 * The first line is the producer's: the hot path reads and writes nothing
 * else of the header, and the sender writes nothing in it. */
struct iot_ring {
    _Atomic uint64_t head;
    uint64_t mask;
    /* Producer only: the head at which it looks at the consumer's tail
     * again: cfg.help_at past the tail it last read (there an MPI-IO call
     * sends the ring itself), IOT_RING_KICK past it (there it wakes the
     * sender, iot_ring_room), or a whole ring past it (full: drop). */
    uint64_t mark;
    char pad0[40];
    _Atomic uint64_t tail;
    char pad1[56];
    _Atomic uint64_t dropped;  /* records lost because the ring was full */
    uint64_t dropped_reported; /* consumer only */
    _Atomic int dead;          /* owning thread exited, or the ring was handed over full */
    int handed_over;           /* full, replaced by a fresh ring (iot_ring_room): its map
                                  counts against cfg.overflow_bytes until the sender frees it */
    uint32_t tid;
    size_t map_size;
    struct iot_ring *next;
    /* The ring this one replaced when it was handed over full, while the
     * sender has not freed it (then NULL): its records come first.  Read
     * and cleared only by the token's holder. */
    struct iot_ring *older;
    union iot_slot slots[] __attribute__((aligned(64))); /* the map is page-aligned */
};

/* Aligned so that what the wrappers use (all but tid) is one cache line:
 * after a system call every line the wrapper touches again may have to be
 * fetched. */
struct iot_tls {
    struct iot_ring *ring;
    uint64_t callid;    /* CallID of the MPI-IO call running on this thread */
    uint64_t mpi_file;  /* a shared file pointer call's file, for its offset */
    /* -1 while a shared file pointer call waits for its first inner transfer
     * on mpi_file, which sets it; otherwise not negative, so that other
     * POSIX records pay a single test for it. */
    int64_t mpi_offset;
    int mpi_depth;      /* > 0 while inside a traced MPI-IO call */
    int internal;       /* > 0 inside iotrace's own code: nothing is recorded */
    uint64_t callid_next, callid_end; /* this thread's block of CallID counters */
    struct iot_reg_slot *reg;         /* its CallID registry slot, NULL until claimed */
    uint32_t tid;
} __attribute__((aligned(64)));

struct iot_config {
    int disabled;
    int trace_posix; /* enum iot_posix_mode */
    int trace_mpiio;
    int trace_sync; /* IOTRACE_SYNC: record MPI_Barrier too */
    int verbose;
    const char *agent;
    const char *dropbox; /* IOTRACE_DROPBOX; NULL: beside the agent's socket */
    const char *node;
    const char *job;
    uint64_t ring_events;
    uint64_t overflow_bytes; /* IOTRACE_OVERFLOW_MB: full rings waiting for the sender */
    uint64_t batch_events;
    uint64_t flush_ms;
    uint64_t linger_ms;
    uint64_t send_queue;
    int sender_policy; /* IOTRACE_SENDER_SCHED: the library threads' SCHED_ policy */
    /* Records in its ring at which an MPI-IO call sends them itself
     * (IOTRACE_INLINE_SEND, iot_sender_help); 0: never. */
    uint64_t help_at;
};

/* iot_g.mpiio_on.  READY lets the MPI-IO wrappers skip, with the same test,
 * the check that mpiio.c has found MPI's PMPI entry points and the rank. */
enum iot_mpiio_state { IOT_MPIIO_OFF = 0, IOT_MPIIO_ON = 1, IOT_MPIIO_READY = 2 };

enum iot_producer_kind { IOT_PRODUCER_CLIENT = 1, IOT_PRODUCER_SERVER = 2 };

/* What a library that links the producer core (rather than being preloaded)
 * sets before iot_init(); NULL fields fall back to the environment. */
struct iot_producer_setup {
    enum iot_producer_kind kind;
    const char *server;
    const char *agent;
    const char *node;
};

struct iot_global {
    /* What every wrapper reads, in one line: active together with
     * cfg.trace_posix / cfg.trace_mpiio (iot_disable_after_error clears
     * them with active; mpiio_on is an enum iot_mpiio_state), the raw clock
     * (clock.h), and the rank's part of every CallID (iot_set_rank). */
    _Atomic int posix_on;
    _Atomic int mpiio_on;
    int use_tsc;
    uint64_t callid_rank;
    struct iot_config cfg;
    enum iot_producer_kind kind;
    char server[128];       /* server producers: their identity */
    _Atomic int active;     /* recording on: initialised, not disabled, not failed */
    _Atomic int initialised;
    int32_t rank;           /* -1 until MPI_Init */
    char job[128];
    char job_name[128]; /* from the launcher, "" if none */
    char node[128];
    uint32_t pid;
    uint64_t start_ns;
    uint64_t epoch;
    _Atomic uint64_t call_counter;
    _Atomic uint64_t overflow_used; /* bytes of rings handed over full, not yet freed */
} __attribute__((aligned(64)));

extern IOT_HIDDEN struct iot_global iot_g;
extern IOT_HIDDEN IOT_TLS struct iot_tls iot_t;

/* core.c */
IOT_HIDDEN void iot_init(void);
IOT_HIDDEN void iot_producer_configure(const struct iot_producer_setup *setup);
/* Id of a storage object name (taken as it is), its name queued once. */
IOT_HIDDEN uint64_t iot_object_register(const char *name);
/* A string for the name dictionary that is not a path (an MPI-IO call's
 * access mode and hints): never anonymized; its id fits an int64_t offset
 * (non-negative, not 0). */
IOT_HIDDEN uint64_t iot_text_register(const char *text, size_t len);
/* The agent's socket (fdguard.c): whether fd is it, and moving it off fd
 * before the program makes fd its own. */
IOT_HIDDEN int iot_sender_fd(void);
IOT_HIDDEN int iot_sender_vacate_fd(int fd);
/* Records dropped so far by all rings (full buffers). */
IOT_HIDDEN uint64_t iot_dropped_total(void);
/* Gives this thread its ring (NULL: record nothing); keeps errno. */
IOT_HIDDEN struct iot_ring *iot_ring_attach(void);
IOT_HIDDEN uint32_t iot_gettid(void);
IOT_HIDDEN void *iot_next_symbol(const char *name);
/* In a wrapper of `name`: next_name, the next definition of it (the one
 * the program would have called), looked up once; ENOSYS when none. */
#define IOT_NEXT(name, on_missing)                                                  \
    static __typeof__(&name) next_##name;                                           \
    if (IOT_UNLIKELY(!next_##name)) {                                               \
        next_##name = (__typeof__(&name))iot_next_symbol(#name);                    \
        if (!next_##name) {                                                         \
            errno = ENOSYS;                                                         \
            return on_missing;                                                      \
        }                                                                           \
    }
IOT_HIDDEN void iot_disable_after_error(const char *what);
IOT_HIDDEN void iot_debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Registers a path (made absolute) and returns its file id; queues its
 * name for the sender the first time it is seen. */
/* The file id for `path` (its name queued for the next batch the first
 * time), 0 when unknown, IOT_FILE_UNTRACED when IOTRACE_EXCLUDE/INCLUDE
 * leave it out. */
#define IOT_FILE_UNTRACED UINT64_MAX
IOT_HIDDEN uint64_t iot_file_register(const char *path);
/* Whether IOTRACE_EXCLUDE/INCLUDE leave `path` out (for opens that failed). */
IOT_HIDDEN int iot_file_excluded(const char *path);

/* paths.c: IOTRACE_EXCLUDE, IOTRACE_INCLUDE, IOTRACE_ANONYMIZE. */
IOT_HIDDEN void iot_paths_configure(void);
IOT_HIDDEN int iot_path_traced(const char *abs_path);
/* Rewrites the absolute path in place as it is to be recorded (hashed
 * components when anonymising); returns its new length. */
IOT_HIDDEN size_t iot_path_name(char *path, size_t len, size_t cap);
IOT_HIDDEN uint64_t iot_file_id(const char *abs_path, size_t len);
IOT_HIDDEN void iot_set_rank(int rank);
IOT_HIDDEN void iot_set_job(const char *job);

/* fd table: which file each descriptor opened by path refers to, and the
 * file position we track without system calls.  The lookups are inline:
 * every read and write of the application passes through iot_fd_file. */
#define IOT_FD_SLOTS 65536
#define IOT_POS_UNKNOWN INT64_MIN

struct iot_fd_slot {
    uint64_t file; /* 0: not traced */
    int64_t pos;
};

extern IOT_HIDDEN struct iot_fd_slot iot_fds[IOT_FD_SLOTS];

IOT_HIDDEN void iot_fd_open(int fd, uint64_t file, int append);
IOT_HIDDEN void iot_fd_close(int fd);

static inline uint64_t iot_fd_file(int fd)
{
    if (IOT_UNLIKELY((unsigned)fd >= IOT_FD_SLOTS))
        return 0;
    return __atomic_load_n(&iot_fds[fd].file, __ATOMIC_ACQUIRE);
}

/* Only for descriptors iot_fd_file found. */
static inline int64_t iot_fd_pos(int fd)
{
    int64_t p = __atomic_load_n(&iot_fds[fd].pos, __ATOMIC_RELAXED);
    return p == IOT_POS_UNKNOWN ? -1 : p;
}

static inline void iot_fd_set_pos(int fd, int64_t pos)
{
    __atomic_store_n(&iot_fds[fd].pos, pos < 0 ? IOT_POS_UNKNOWN : pos, __ATOMIC_RELAXED);
}

/* callreg.c: the thread's CallID registry slot (see docs/registry.md). */
struct iot_reg_slot;
IOT_HIDDEN struct iot_reg_slot *iot_callreg_attach(void);
IOT_HIDDEN void iot_callreg_release_all(void);
IOT_HIDDEN void iot_callreg_after_fork_child(void);

/* sender.c */
IOT_HIDDEN void iot_sender_start(void);
IOT_HIDDEN void iot_sender_register_ring(struct iot_ring *ring);
IOT_HIDDEN void iot_sender_flush(int timeout_ms);
IOT_HIDDEN void iot_sender_stop(void);
/* Puts `ring` right after `after` in the sender's list, so that the sender
 * drains `after` (older records) first; -1 when the list's lock is taken
 * (the caller may be a signal handler: it never waits for it). */
IOT_HIDDEN int iot_sender_insert_ring(struct iot_ring *after, struct iot_ring *ring);
IOT_HIDDEN void iot_sender_before_exec(void);
/* Wakes the sender thread if it sleeps; any thread, never blocks, keeps
 * errno. */
IOT_HIDDEN void iot_sender_kick(void);
IOT_HIDDEN void iot_sender_after_fork_child(void);
IOT_HIDDEN void iot_sender_queue_name(uint64_t id, const char *path, size_t len);
IOT_HIDDEN void iot_sender_fork_prepare(void);
IOT_HIDDEN void iot_sender_fork_parent(void);
/* An MPI-IO call drains its thread's ring and sends what it holds, unless
 * the sender is busy; never waits, keeps errno.  1 when it did. */
IOT_HIDDEN int iot_sender_help(struct iot_ring *r, int now);

/* The hot path.  A record is written between iot_rec_begin, which returns
 * the first of n free slots of this thread's ring (NULL when the record
 * must be dropped, already counted), and iot_rec_end, which publishes them.
 * The caller keeps the ring and head in `w`, so that publishing reloads
 * neither.  Neither touches errno, so wrappers need not save it on the fast
 * path. */
struct iot_wr {
    struct iot_ring *r;
    uint64_t h;
};

/* A quarter of a ring of `size` slots: how full it gets before its thread
 * wakes the sender. */
#define IOT_RING_KICK(size) ((size) / 4)

/* Out of line: the head has reached r->mark (cfg.help_at records waiting,
 * a quarter full, or full, by the producer's last view of the tail).  A
 * full ring may be replaced by a fresh one (iot_t.ring) for the sender to
 * drain whole.
 * `help`: the caller is an MPI-IO call's own record, which may send the
 * ring's records itself. */
IOT_HIDDEN int iot_ring_room(struct iot_ring *r, uint64_t h, uint64_t n, int help);

/* `help` is a constant at every call site: the hot path pays nothing for
 * it. */
static inline struct iot_rec *iot_rec_begin_at(struct iot_wr *w, uint64_t n, int help)
{
    struct iot_ring *r = iot_t.ring;
    if (IOT_UNLIKELY(!r)) {
        r = iot_ring_attach();
        if (!r)
            return NULL;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (IOT_UNLIKELY(h + n > r->mark)) {
        if (!iot_ring_room(r, h, n, help))
            return NULL;
        r = iot_t.ring; /* a fresh one when this one was full */
        h = atomic_load_explicit(&r->head, memory_order_relaxed);
    }
    w->r = r;
    w->h = h;
    return &r->slots[h & r->mask].rec;
}

static inline struct iot_rec *iot_rec_begin(struct iot_wr *w, uint64_t n)
{
    return iot_rec_begin_at(w, n, 0);
}

static inline void iot_rec_end(const struct iot_wr *w, uint64_t n)
{
    union iot_slot *slot = &w->r->slots[w->h & w->r->mask];
    atomic_store_explicit(&w->r->head, w->h + n, memory_order_release);
    /* A slot was last read by the sender a lap ago, from another core's
     * cache: writing it cold stalled each record by about 20 ns.  Fetching
     * it a few records ahead lets the fetch overlap the calls in between.
     * Past the end of the ring the hint is wasted once a lap (a prefetch
     * never faults), which is cheaper than wrapping the index every time. */
    __builtin_prefetch(slot + n + 2, 1, 3);
}

/* The same for callers that do not keep the reservation: the first of n
 * slots (more than one for libiotrace-server's job text), published by
 * iot_rec_commit(n). */
static inline struct iot_rec *iot_rec_reserve(uint64_t n)
{
    struct iot_wr w;
    return iot_rec_begin(&w, n);
}

static inline void iot_rec_commit(uint64_t n)
{
    struct iot_wr w = {iot_t.ring, atomic_load_explicit(&iot_t.ring->head, memory_order_relaxed)};
    iot_rec_end(&w, n);
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

/* IOTRACE_POSIX: iot_g.posix_on and cfg.trace_posix. */
enum iot_posix_mode { IOT_POSIX_OFF = 0, IOT_POSIX_ALL = 1, IOT_POSIX_OUTSIDE = 2 };

/* iot_recording() && cfg.trace_posix, with one flag. */
static inline int iot_posix_recording(void)
{
    return atomic_load_explicit(&iot_g.posix_on, memory_order_relaxed) && !iot_t.internal;
}

#endif
