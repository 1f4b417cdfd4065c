/* Process-wide state of libiotrace-client: configuration from the
 * environment, per-thread rings, file and descriptor tables, fork and exit. */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "wire.h"

IOT_HIDDEN struct iot_global iot_g = {.rank = -1, .callid_rank = 0xffffffull << 40};
IOT_HIDDEN IOT_TLS struct iot_tls iot_t;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#define SEEN_SLOTS 8192
static uint64_t seen_ids[SEEN_SLOTS]; /* file ids whose names were queued */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t ring_key;

/* ---- environment ---------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t min, uint64_t max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max) {
        iot_debug_log("ignoring %s=%s (expected %llu..%llu)", name, s,
                      (unsigned long long)min, (unsigned long long)max);
        return dflt;
    }
    return v;
}

static int env_flag(const char *name, int dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    return !(strcmp(s, "0") == 0 || strcasecmp(s, "no") == 0 || strcasecmp(s, "false") == 0 ||
             strcasecmp(s, "off") == 0);
}

/* The scheduling policy of the library's own threads (the sender and
 * ZeroMQ's I/O thread).  Normal by default: under SCHED_BATCH the sender,
 * which then waits for its turn instead of preempting the application when
 * it wakes, fell behind ranks that poll inside collective calls and their
 * rings overflowed (3 362 of 4.7 M events dropped, and counted, in an
 * IOR-like run at np=2; docs/performance.md, "IOR-like bandwidth"). */
static int env_policy(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s || strcmp(s, "normal") == 0)
        return SCHED_OTHER;
    if (strcmp(s, "batch") == 0)
        return SCHED_BATCH;
    if (strcmp(s, "idle") == 0)
        return SCHED_IDLE;
    iot_debug_log("ignoring %s=%s (expected normal, batch or idle)", name, s);
    return SCHED_OTHER;
}

static uint64_t round_pow2(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static void read_config(struct iot_config *c)
{
    c->verbose = env_flag("IOTRACE_VERBOSE", 0);
    c->disabled = env_flag("IOTRACE_DISABLE", 0);
    const char *posix = getenv("IOTRACE_POSIX");
    c->trace_posix = posix && strcmp(posix, "outside") == 0 ? IOT_POSIX_OUTSIDE
                     : env_flag("IOTRACE_POSIX", 1)             ? IOT_POSIX_ALL
                                                                : IOT_POSIX_OFF;
    c->trace_mpiio = env_flag("IOTRACE_MPIIO", 1);
    c->trace_sync = env_flag("IOTRACE_SYNC", 0);
    c->agent = getenv("IOTRACE_AGENT");
    /* One default, in /run: a process that ends while the agent is
     * stopped finds its drop box there (RuntimeDirectoryPreserve=yes).  No
     * second place to look in /tmp, which any user could have taken first
     * (agenttrust.h refuses such a socket anyway). */
    if (!c->agent || !*c->agent)
        c->agent = IOT_AGENT_DEFAULT_ENDPOINT;
    c->dropbox = getenv("IOTRACE_DROPBOX");
    c->node = getenv("IOTRACE_NODE");
    c->job = getenv("IOTRACE_JOB_ID");
    /* 64-byte records: 4 MiB per rank thread.  With 16384, ranks on every
     * core of a node with the daemons beside them overran it while the
     * sender waited for a core (5 367 of 3.1 M events dropped in an
     * IOR-like run; docs/performance.md, "IOR-like bandwidth").  A storage
     * server records from many threads at a time (its io-threads), each
     * far below a rank's rate: 1 MiB each there. */
    c->ring_events = round_pow2(env_u64("IOTRACE_BUFFER_EVENTS",
                                        iot_g.kind == IOT_PRODUCER_SERVER ? 16384 : 65536, 64,
                                        1u << 24));
    /* A ring that fills while the sender waits for a core is handed to it
     * whole, and the thread goes on in a fresh one, rather than drop what
     * it records next: 64 MiB, a million records, is a second of a loop of
     * a million calls a second with no core for the sender
     * (docs/performance.md, "When loss begins"). */
    c->overflow_bytes = env_u64("IOTRACE_OVERFLOW_MB", 64, 0, 1u << 20) << 20;
    c->batch_events = env_u64("IOTRACE_BATCH_EVENTS", 8192, 16, 1u << 20);
    c->flush_ms = env_u64("IOTRACE_FLUSH_MS", 50, 1, 60000);
    c->linger_ms = env_u64("IOTRACE_LINGER_MS", 1000, 0, 600000);
    c->send_queue = env_u64("IOTRACE_SEND_QUEUE", 64, 1, 100000);
    c->sender_policy = env_policy("IOTRACE_SENDER_SCHED");
    /* A batch, but at most half what makes a thread wake the sender
     * (IOT_RING_KICK), so that a call sends its records before that. */
    uint64_t at = c->ring_events / 8 < c->batch_events ? c->ring_events / 8 : c->batch_events;
    c->help_at = env_flag("IOTRACE_INLINE_SEND", 1) && iot_g.kind != IOT_PRODUCER_SERVER ? at : 0;
    iot_paths_configure();
}

/* ---- identity --------------------------------------------------------- */

static void set_identity(void)
{
    iot_g.pid = (uint32_t)getpid();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    iot_g.start_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t e;
    if (getrandom(&e, sizeof e, GRND_NONBLOCK) != (ssize_t)sizeof e)
        e = iot_g.start_ns ^ ((uint64_t)iot_g.pid << 32);
    iot_g.epoch = e;
}

static void set_node(void)
{
    if (iot_g.cfg.node && *iot_g.cfg.node) {
        snprintf(iot_g.node, sizeof iot_g.node, "%s", iot_g.cfg.node);
        return;
    }
    if (gethostname(iot_g.node, sizeof iot_g.node - 1) != 0)
        snprintf(iot_g.node, sizeof iot_g.node, "localhost");
    iot_g.node[sizeof iot_g.node - 1] = '\0';
    char *dot = strchr(iot_g.node, '.');
    if (dot)
        *dot = '\0';
}

/* A job id the launcher gives every rank alike; without one, MPI_Init asks
 * rank 0 (see mpiio.c). */
static void set_job_from_environment(void)
{
    static const char *const vars[] = {"IOTRACE_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID",
                                       "LSB_JOBID", "FLUX_JOB_ID", "COBALT_JOBID", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            const char *step = i == 1 ? getenv("SLURM_STEP_ID") : NULL;
            if (step && *step)
                snprintf(iot_g.job, sizeof iot_g.job, "%s.%s", v, step);
            else
                snprintf(iot_g.job, sizeof iot_g.job, "%s", v);
            return;
        }
    }
}

/* The job's name, when the batch system says it. */
static void set_job_name_from_environment(void)
{
    static const char *const vars[] = {"IOTRACE_JOB_NAME", "SLURM_JOB_NAME", "PBS_JOBNAME",
                                       "LSB_JOBNAME", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            snprintf(iot_g.job_name, sizeof iot_g.job_name, "%s", v);
            return;
        }
    }
}

void iot_set_job(const char *job) { snprintf(iot_g.job, sizeof iot_g.job, "%s", job); }

void iot_set_rank(int rank)
{
    iot_g.rank = rank;
    iot_g.callid_rank = (uint64_t)(rank < 0 ? 0xffffff : rank & 0xffffff) << 40;
}

/* ---- lifecycle ---------------------------------------------------------- */

static void ring_thread_exit(void *arg)
{
    struct iot_ring *r = arg;
    atomic_store_explicit(&r->dead, 1, memory_order_release);
}

static void fork_prepare(void) { iot_sender_fork_prepare(); }
static void fork_parent(void) { iot_sender_fork_parent(); }

static void fork_child(void)
{
    /* The child starts afresh as a producer of its own: the parent's
     * unsent records are the parent's to send. */
    set_identity();
    memset(seen_ids, 0, sizeof seen_ids); /* names go out again under the new identity */
    pthread_mutex_init(&seen_lock, NULL);
    iot_t.ring = NULL;
    iot_t.tid = 0;
    iot_callreg_after_fork_child();
    iot_t.callid_next = iot_t.callid_end = 0;
    iot_sender_after_fork_child();
}

static struct iot_producer_setup setup = {.kind = IOT_PRODUCER_CLIENT};

void iot_producer_configure(const struct iot_producer_setup *how) { setup = *how; }

/* What the linking library asked for wins over the environment. */
static void apply_setup(void)
{
    iot_g.kind = setup.kind;
    if (setup.agent && setup.agent[0])
        iot_g.cfg.agent = setup.agent;
    if (setup.node && setup.node[0])
        iot_g.cfg.node = setup.node;
    if (setup.server)
        snprintf(iot_g.server, sizeof iot_g.server, "%s", setup.server);
}

static void init_once_fn(void)
{
    iot_t.internal++;
    read_config(&iot_g.cfg);
    apply_setup();
    if (!iot_g.cfg.disabled) {
        set_identity();
        set_node();
        /* A storage server serves many jobs; its own environment's job id
         * (a brick started inside a batch job) names none of them. */
        if (iot_g.kind == IOT_PRODUCER_CLIENT) {
            set_job_from_environment();
            set_job_name_from_environment();
        }
        iot_clock_init(getenv("IOTRACE_CLOCK"));
        pthread_key_create(&ring_key, ring_thread_exit);
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        atomic_store(&iot_g.active, 1);
        atomic_store(&iot_g.posix_on, iot_g.cfg.trace_posix);
        atomic_store(&iot_g.mpiio_on, iot_g.cfg.trace_mpiio ? IOT_MPIIO_ON : IOT_MPIIO_OFF);
        iot_debug_log("tracing to %s as node %s (clock: %s)", iot_g.cfg.agent, iot_g.node,
                      iot_g.use_tsc ? "tsc" : "clock_gettime");
    }
    atomic_store(&iot_g.initialised, 1);
    iot_t.internal--;
}

void iot_init(void) { pthread_once(&init_once, init_once_fn); }

/* Preloaded, the library starts itself; linked by a server, it waits for
 * iot_server_open(). */
#ifndef IOT_SERVER_LIB
__attribute__((constructor)) static void iot_constructor(void) { iot_init(); }
#endif

__attribute__((destructor)) static void iot_destructor(void)
{
    if (!atomic_load(&iot_g.initialised) || iot_g.cfg.disabled)
        return;
    iot_t.internal++;
    iot_callreg_release_all();
    iot_sender_stop();
    iot_t.internal--;
}

void iot_disable_after_error(const char *what)
{
    /* Catamount's rule: on an internal error stop tracing and let the
     * application go on untouched. */
    atomic_store(&iot_g.posix_on, 0);
    atomic_store(&iot_g.mpiio_on, IOT_MPIIO_OFF);
    if (atomic_exchange(&iot_g.active, 0))
        iot_debug_log("tracing stopped: %s", what);
}

void iot_debug_log(const char *fmt, ...)
{
    if (!iot_g.cfg.verbose)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    iot_t.internal++;
    fprintf(stderr, "iotrace-client[%d]: %s\n", (int)getpid(), msg);
    iot_t.internal--;
}

uint32_t iot_gettid(void)
{
    iot_t.tid = (uint32_t)syscall(SYS_gettid);
    return iot_t.tid;
}

void *iot_next_symbol(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p)
        iot_debug_log("no next definition of %s", name);
    return p;
}

/* A new, empty ring for this thread; NULL without memory.  mmap, not
 * malloc: a full ring is replaced from inside a wrapper that may run in a
 * signal handler. */
static struct iot_ring *ring_new(void)
{
    size_t n = iot_g.cfg.ring_events;
    size_t size = sizeof(struct iot_ring) + n * sizeof(union iot_slot);
    struct iot_ring *r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    r->mask = n - 1;
    r->mark = iot_g.cfg.help_at ? iot_g.cfg.help_at : IOT_RING_KICK(n);
    r->map_size = size;
    r->tid = iot_tid();
    return r;
}

static struct iot_ring *ring_attach(void)
{
    if (!atomic_load_explicit(&iot_g.initialised, memory_order_acquire))
        iot_init();
    if (!atomic_load(&iot_g.active) || iot_t.internal)
        return NULL;
    iot_t.internal++;
    struct iot_ring *r = ring_new();
    if (!r) {
        iot_disable_after_error("cannot allocate an event buffer");
        iot_t.internal--;
        return NULL;
    }
    pthread_setspecific(ring_key, r);
    iot_sender_register_ring(r);
    iot_t.ring = r;
    iot_sender_start();
    iot_t.internal--;
    return r;
}

/* The sender sleeps as long as the rate it last saw allows (sender.c).  A
 * thread that records faster than that, in a burst after a quiet spell,
 * wakes it when its ring is a quarter full, and gives up its core for a
 * moment: woken onto the core of the thread that woke it, the sender could
 * otherwise wait for the scheduler's next tick (4 ms, 12 000 records at
 * the rate of a loop of system calls), and the rest of the ring must cover
 * that time.  Outside bursts the sender looks before a ring gets that
 * full, so this costs a system call or two per quarter ring of a burst.
 *
 * Before that, with IOTRACE_INLINE_SEND, an MPI-IO call whose ring holds
 * cfg.help_at records sends them itself (iot_sender_help); a POSIX call
 * made inside one leaves that to the MPI-IO call's own record, next. */
/* The ring is full and the sender has not come for it: on a node whose
 * ranks take every core it may wait long for one.  Rather than drop what
 * the thread records next, the full ring is handed to the sender whole
 * (marked dead, as at thread exit: the sender drains it and frees it) and
 * the thread goes on in a fresh one, placed after it so that the sender
 * takes the older records first.  Bounded by IOTRACE_OVERFLOW_MB for the
 * whole process; past that, or while the sender holds its list's lock, the
 * record is dropped and counted as before.  No heap, no waiting: a POSIX
 * wrapper may be in a signal handler.  1 when iot_t.ring is a fresh ring. */
static int hand_over_full(struct iot_ring *r)
{
    uint64_t limit = iot_g.cfg.overflow_bytes;
    if (!limit || r != iot_t.ring ||
        atomic_load_explicit(&iot_g.overflow_used, memory_order_relaxed) + r->map_size > limit)
        return 0;
    int saved = errno;
    struct iot_ring *fresh = ring_new();
    if (fresh)
        fresh->older = r;
    if (fresh && iot_sender_insert_ring(r, fresh) != 0) {
        munmap(fresh, fresh->map_size);
        fresh = NULL;
    }
    errno = saved;
    if (!fresh)
        return 0;
    atomic_fetch_add(&iot_g.overflow_used, r->map_size);
    r->handed_over = 1;
    iot_t.ring = fresh;
    pthread_setspecific(ring_key, fresh); /* thread exit marks the ring in use dead */
    atomic_store_explicit(&r->dead, 1, memory_order_release);
    iot_sender_kick();
    return 1;
}

int iot_ring_room(struct iot_ring *r, uint64_t h, uint64_t n, int help)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire), size = r->mask + 1;
    uint64_t kick = IOT_RING_KICK(size), at = iot_g.cfg.help_at;
    if (h + n - tail > size) {
        if (n <= size && hand_over_full(r))
            return 1;
        r->mark = tail + size;
        atomic_store_explicit(&r->dropped,
                              atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return 0;
    }
    if (h + n - tail > kick) {
        iot_sender_kick();
        sched_yield(); /* never fails, errno untouched */
        /* Not again before the ring looks full: kicking and yielding at
         * every further quarter while the sender drains dropped more (2
         * runs of 4 with rings of 8 192 records, against none of 5). */
        r->mark = tail + size;
    } else if (at && h + n - tail > at) {
        if (help && iot_sender_help(r, 0))
            r->mark = atomic_load_explicit(&r->tail, memory_order_acquire) + at;
        else if (help) /* the sender is at work: try again a little later */
            r->mark = h + n + 64 < tail + kick ? h + n + 64 : tail + kick;
        else if (iot_t.mpi_depth)
            r->mark = h + n;
        else
            r->mark = tail + kick;
    } else {
        r->mark = tail + (at ? at : kick);
    }
    return 1;
}

/* Runs inside the wrappers after the wrapped call: errno must stay what
 * that call left (mmap, the sender's start and its allocations may set it). */
struct iot_ring *iot_ring_attach(void)
{
    int saved = errno;
    struct iot_ring *r = ring_attach();
    errno = saved;
    return r;
}

/* ---- files ---------------------------------------------------------- */

uint64_t iot_file_id(const char *path, size_t len)
{
    /* FNV-1a: ids only need to be stable and distinct per path. */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)path[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* True the first time an id is offered. */
static int first_sighting(uint64_t id)
{
    int first = 1;
    pthread_mutex_lock(&seen_lock);
    for (size_t i = 0; i < SEEN_SLOTS; i++) {
        size_t s = (id + i) & (SEEN_SLOTS - 1);
        if (seen_ids[s] == id) {
            first = 0;
            break;
        }
        if (seen_ids[s] == 0) {
            seen_ids[s] = id;
            break;
        }
    }
    pthread_mutex_unlock(&seen_lock);
    return first;
}

/* A name goes to the collector once per process, with the first batch
 * after it was first seen. */
static uint64_t queue_once(uint64_t id, const char *name, size_t len)
{
    if (first_sighting(id))
        iot_sender_queue_name(id, name, len);
    return id;
}

static uint64_t name_of(const char *name, size_t len)
{
    return queue_once(iot_file_id(name, len), name, len);
}

/* ROMIO accepts "ufs:/path"; the file system prefix is not part of the name. */
static const char *strip_fs_prefix(const char *path)
{
    const char *p = path;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')
        p++;
    return (p - path >= 2 && *p == ':') ? p + 1 : path;
}

/* Drops empty and "." components and takes ".." back one component, in
 * place, without looking at the file system: "/proc/self/../1/maps" and
 * "/tmp//x/./f" get the names their files are known by, so that the exclude
 * and include patterns and the file ids see one name per path however it was
 * spelt (symbolic links are not followed: that would cost a system call per
 * component at every open). */
static size_t normalize(char *buf, size_t len)
{
    size_t o = 0; /* buf[0..o) is the result; it starts with '/' */
    for (size_t i = 0; i < len;) {
        while (i < len && buf[i] == '/')
            i++;
        size_t j = i;
        while (j < len && buf[j] != '/')
            j++;
        size_t n = j - i;
        if (n == 0 || (n == 1 && buf[i] == '.')) {
            /* nothing to keep */
        } else if (n == 2 && buf[i] == '.' && buf[i + 1] == '.') {
            while (o > 0 && buf[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else {
            buf[o++] = '/';
            memmove(buf + o, buf + i, n);
            o += n;
        }
        i = j;
    }
    if (o == 0)
        buf[o++] = '/';
    buf[o] = '\0';
    return o;
}

/* The absolute form of `path` in buf (the working directory before a
 * relative one), normalized; its length, or 0 when it cannot be known. */
static size_t absolute(const char *path, char *buf, size_t cap)
{
    path = strip_fs_prefix(path);
    size_t len;
    if (path[0] == '/') {
        len = strnlen(path, cap - 1);
        memcpy(buf, path, len);
    } else {
        if (!getcwd(buf, cap - 2))
            return 0;
        len = strlen(buf);
        if (path[0] == '.' && path[1] == '/')
            path += 2;
        int n = snprintf(buf + len, cap - len, "%s%s", len > 1 ? "/" : "", path);
        if (n < 0)
            return 0;
        len = strnlen(buf, cap - 1);
    }
    buf[len] = '\0';
    return normalize(buf, len);
}

int iot_file_excluded(const char *path)
{
    char buf[4096];
    return path && absolute(path, buf, sizeof buf) && !iot_path_traced(buf);
}

uint64_t iot_file_register(const char *path)
{
    char buf[4096];
    size_t len = path ? absolute(path, buf, sizeof buf) : 0;
    if (!len)
        return 0;
    if (!iot_path_traced(buf))
        return IOT_FILE_UNTRACED;
    return name_of(buf, iot_path_name(buf, len, sizeof buf));
}

/* A storage server's object names are paths inside its storage (or
 * "<gfid:...>" names): IOTRACE_ANONYMIZE hashes them component by component
 * like the ranks' paths, so that a site that must not store paths stores
 * none from its servers either. */
uint64_t iot_object_register(const char *name)
{
    char buf[4096];
    size_t len = strnlen(name, sizeof buf - 1);
    memcpy(buf, name, len);
    buf[len] = '\0';
    return name_of(buf, iot_path_name(buf, len, sizeof buf));
}

uint64_t iot_text_register(const char *text, size_t len)
{
    uint64_t id = iot_file_id(text, len) >> 1;
    return queue_once(id ? id : 1, text, len);
}

/* ---- descriptors ------------------------------------------------------ */

IOT_HIDDEN struct iot_fd_slot iot_fds[IOT_FD_SLOTS];

void iot_fd_open(int fd, uint64_t file, int append)
{
    if (fd < 0 || fd >= IOT_FD_SLOTS)
        return;
    __atomic_store_n(&iot_fds[fd].pos, append ? IOT_POS_UNKNOWN : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&iot_fds[fd].file, file, __ATOMIC_RELEASE);
}

void iot_fd_close(int fd)
{
    if (fd >= 0 && fd < IOT_FD_SLOTS)
        __atomic_store_n(&iot_fds[fd].file, 0, __ATOMIC_RELAXED);
}
