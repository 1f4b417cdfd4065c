/* MPI-IO bookkeeping: CallIDs, file handles, offsets through views and file
 * pointers, collective sequence numbers, split collectives, non-blocking
 * requests and their completion in the MPI_Wait and MPI_Test families, and
 * MPI_Init/MPI_Finalize.
 *
 * Queries iotrace makes of MPI itself go to the next PMPI_ names, found at
 * run time, so that they are never recorded (iotrace defines the PMPI_File_
 * names too) and the library needs no link-time dependency on MPI (it is
 * preloaded into non-MPI processes too). */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "clock.h"
#include "iot_functions.h"
#include "mpi_info_text.h"
#include "mpiio.h"
#include "registry.h"

/* ---- PMPI entry points ------------------------------------------------- */

static struct {
    int (*type_size_x)(MPI_Datatype, MPI_Count *);
    int (*get_byte_offset)(MPI_File, MPI_Offset, MPI_Offset *);
    int (*get_position)(MPI_File, MPI_Offset *);
    int (*get_elements_x)(const MPI_Status *, MPI_Datatype, MPI_Count *);
    int (*comm_rank)(MPI_Comm, int *);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*initialized)(int *);
    /* IOTRACE_SYNC: a communicator's members, kept as an attribute. */
    int (*comm_size)(MPI_Comm, int *);
    int (*comm_group)(MPI_Comm, MPI_Group *);
    int (*group_translate_ranks)(MPI_Group, int, const int[], MPI_Group, int[]);
    int (*group_free)(MPI_Group *);
    int (*comm_create_keyval)(MPI_Comm_copy_attr_function *, MPI_Comm_delete_attr_function *,
                              int *, void *);
    int (*comm_get_attr)(MPI_Comm, int, void *, int *);
    int (*comm_set_attr)(MPI_Comm, int, void *);
    int (*comm_test_inter)(MPI_Comm, int *);
    int (*test_cancelled)(const MPI_Status *, int *);
    /* The hints an MPI-IO call was given. */
    int (*info_get_nkeys)(MPI_Info, int *);
    int (*info_get_nthkey)(MPI_Info, int, char *);
    int (*info_get_valuelen)(MPI_Info, const char *, int *, int *);
    int (*info_get)(MPI_Info, const char *, int, char *, int *);
    int resolved;
} pmpi;

/* The MPI library's own definitions, not RTLD_DEFAULT: the first
 * PMPI_File_get_byte_offset in the process may be iotrace's own, or that of
 * a tool loaded before it, which would count iotrace's queries as the
 * application's; and not RTLD_NEXT either where the MPI library can be
 * named, since a tool loaded after iotrace that wraps the queries under
 * their PMPI_ names too (Recorder) would count them as the application's.
 * RTLD_NEXT where it cannot (no PMPI_Get_library_version). */
static void *pmpi_library;
#define PMPI_NEXT(name) pmpi_sym(name)

static void *pmpi_sym(const char *name)
{
    void *p = pmpi_library ? dlsym(pmpi_library, name) : NULL;
    return p ? p : dlsym(RTLD_NEXT, name);
}

static void *mpi_library_handle(void)
{
    Dl_info info;
    void *f = dlsym(RTLD_NEXT, "PMPI_Get_library_version");
    /* Loaded already (it defines the function): a handle, no load. */
    return f && dladdr(f, &info) && info.dli_fname ? dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)
                                                   : NULL;
}

static void resolve_pmpi(void)
{
    if (pmpi.resolved)
        return;
    pmpi_library = mpi_library_handle();
    pmpi.type_size_x = (int (*)(MPI_Datatype, MPI_Count *))PMPI_NEXT("PMPI_Type_size_x");
    pmpi.get_byte_offset =
        (int (*)(MPI_File, MPI_Offset, MPI_Offset *))PMPI_NEXT("PMPI_File_get_byte_offset");
    pmpi.get_position = (int (*)(MPI_File, MPI_Offset *))PMPI_NEXT("PMPI_File_get_position");
    pmpi.get_elements_x = (int (*)(const MPI_Status *, MPI_Datatype, MPI_Count *))PMPI_NEXT(
        "PMPI_Get_elements_x");
    pmpi.comm_rank = (int (*)(MPI_Comm, int *))PMPI_NEXT("PMPI_Comm_rank");
    pmpi.bcast = (int (*)(void *, int, MPI_Datatype, int, MPI_Comm))PMPI_NEXT("PMPI_Bcast");
    pmpi.initialized = (int (*)(int *))PMPI_NEXT("PMPI_Initialized");
    pmpi.comm_size = (int (*)(MPI_Comm, int *))PMPI_NEXT("PMPI_Comm_size");
    pmpi.comm_group = (int (*)(MPI_Comm, MPI_Group *))PMPI_NEXT("PMPI_Comm_group");
    pmpi.group_translate_ranks = (int (*)(MPI_Group, int, const int[], MPI_Group, int[]))PMPI_NEXT(
        "PMPI_Group_translate_ranks");
    pmpi.group_free = (int (*)(MPI_Group *))PMPI_NEXT("PMPI_Group_free");
    pmpi.comm_create_keyval = (int (*)(MPI_Comm_copy_attr_function *,
                                       MPI_Comm_delete_attr_function *, int *, void *))PMPI_NEXT(
        "PMPI_Comm_create_keyval");
    pmpi.comm_get_attr = (int (*)(MPI_Comm, int, void *, int *))PMPI_NEXT("PMPI_Comm_get_attr");
    pmpi.comm_set_attr = (int (*)(MPI_Comm, int, void *))PMPI_NEXT("PMPI_Comm_set_attr");
    pmpi.comm_test_inter = (int (*)(MPI_Comm, int *))PMPI_NEXT("PMPI_Comm_test_inter");
    pmpi.test_cancelled = (int (*)(const MPI_Status *, int *))PMPI_NEXT("PMPI_Test_cancelled");
    pmpi.info_get_nkeys = (int (*)(MPI_Info, int *))PMPI_NEXT("PMPI_Info_get_nkeys");
    pmpi.info_get_nthkey = (int (*)(MPI_Info, int, char *))PMPI_NEXT("PMPI_Info_get_nthkey");
    pmpi.info_get_valuelen =
        (int (*)(MPI_Info, const char *, int *, int *))PMPI_NEXT("PMPI_Info_get_valuelen");
    pmpi.info_get = (int (*)(MPI_Info, const char *, int, char *, int *))PMPI_NEXT("PMPI_Info_get");
    pmpi.resolved = 1;
}

void *iot_mpi_next(const char *name)
{
    if (!atomic_load_explicit(&iot_g.initialised, memory_order_acquire))
        iot_init();
    return iot_next_symbol(name);
}

/* ---- other tools ------------------------------------------------------------ */

/* Who calls a wrapper, by the object its return address lies in:
 * - the MPI library itself (MPICH's MPI_Finalize calls
 *   PMPI_File_set_errhandler, ROMIO PMPI_Waitall): through a PMPI_ name,
 *   MPI's own business, passed through;
 * - another tool: an object that defines MPI_File_open itself (Darshan).
 *   What it asks MPI in its own wrappers (MPI_File_get_byte_offset,
 *   get_position) is not the application's: the query rows of the table are
 *   not recorded when called from there;
 * - the application (and any library of its, HDF5, MPI's Fortran binding).
 * Not by what calls what: a tool's wrapper that ends in a tail call to
 * PMPI_ leaves its caller's return address.  See docs/client.md, "Next to
 * other tools".  The objects met so far are kept as address spans, appended
 * under a lock and read without one (an entry is written before the count
 * that publishes it). */
enum caller_kind { CALLER_APP, CALLER_TOOL, CALLER_MPI };

struct span {
    uintptr_t lo, hi;
    enum caller_kind kind;
};

#define SPANS_MAX 32
static struct span spans[SPANS_MAX];
static _Atomic int spans_n;
static pthread_mutex_t spans_lock = PTHREAD_MUTEX_INITIALIZER;

static inline int in_span(const struct span *s, const void *addr)
{
    return (uintptr_t)addr - s->lo < s->hi - s->lo;
}

/* The span of the loaded segments of the object that holds addr, from its
 * program headers (mapped with its first segment).  Not dl_iterate_phdr:
 * common/link.h hides <link.h>. */
static int object_span(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fbase)
        return -1;
    const Elf64_Ehdr *eh = info.dli_fbase;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return -1;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)eh + eh->e_phoff);
    uintptr_t first = UINTPTR_MAX, end = 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        if (ph[i].p_vaddr < first)
            first = ph[i].p_vaddr;
        if (ph[i].p_vaddr + ph[i].p_memsz > end)
            end = ph[i].p_vaddr + ph[i].p_memsz;
    }
    if (!end)
        return -1;
    /* dli_fbase is where the first segment's page is mapped. */
    uintptr_t bias = (uintptr_t)info.dli_fbase - (first & ~(uintptr_t)(getpagesize() - 1));
    *lo = (uintptr_t)info.dli_fbase;
    *hi = bias + end;
    return (uintptr_t)addr >= *lo && (uintptr_t)addr < *hi ? 0 : -1;
}

static void *object_base(const void *addr)
{
    Dl_info info;
    return dladdr(addr, &info) ? info.dli_fbase : NULL;
}

/* Whether the object based at `base`, of file `name`, defines `sym` itself. */
static int defines(void *base, const char *name, const char *sym)
{
    void *h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    void *p = dlsym(h ? h : RTLD_DEFAULT, sym);
    if (h)
        dlclose(h);
    return p && object_base(p) == base;
}

/* The MPI library is the object of a PMPI_ function no tool has a reason to
 * wrap: PMPI_Get_library_version (MPI 3), else PMPI_Initialized. */
static void *mpi_library_base(void)
{
    void *f = dlsym(RTLD_NEXT, "PMPI_Get_library_version");
    if (!f)
        f = dlsym(RTLD_NEXT, "PMPI_Initialized");
    return f ? object_base(f) : NULL;
}

static __attribute__((noinline, cold)) enum caller_kind classify_caller(const void *caller)
{
    enum caller_kind kind = CALLER_APP;
    iot_t.internal++;
    pthread_mutex_lock(&spans_lock);
    int n = atomic_load_explicit(&spans_n, memory_order_relaxed);
    Dl_info info;
    struct span s;
    for (int i = 0; i < n; i++)
        if (in_span(&spans[i], caller)) {
            kind = spans[i].kind;
            goto out;
        }
    if (object_span(caller, &s.lo, &s.hi) != 0 || !dladdr(caller, &info))
        goto out; /* not an object's code: taken as the application's, again next time */
    if (info.dli_fbase == mpi_library_base())
        kind = CALLER_MPI;
    else if (info.dli_fbase != object_base((const void *)classify_caller) &&
             defines(info.dli_fbase, info.dli_fname, "MPI_File_open"))
        kind = CALLER_TOOL;
    if (n < SPANS_MAX) {
        s.kind = kind;
        spans[n] = s;
        atomic_store_explicit(&spans_n, n + 1, memory_order_release);
    }
    iot_debug_log("calls from %s (%#lx-%#lx): %s", info.dli_fname ? info.dli_fname : "?",
                  (unsigned long)s.lo, (unsigned long)s.hi,
                  kind == CALLER_MPI    ? "MPI"
                  : kind == CALLER_TOOL ? "another tool"
                                        : "application");
out:
    pthread_mutex_unlock(&spans_lock);
    iot_t.internal--;
    return kind;
}

static inline enum caller_kind caller_kind(const void *caller)
{
    int n = atomic_load_explicit(&spans_n, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (in_span(&spans[i], caller))
            return spans[i].kind;
    return classify_caller(caller);
}

/* A PMPI_ name called outside any traced call: whether the MPI library made
 * the call (then it is not the application's). */
static inline int iot_mpi_from_mpi(const void *caller)
{
    return caller_kind(caller) == CALLER_MPI;
}

/* A query that comes from another tool's code is the application's when
 * the tool is forwarding it: the tool's frames on the stack were entered
 * from the application, through the tool's own definition of this very
 * query (MPI_File_get_size reached the tool's MPI_File_get_size, which
 * calls PMPI_File_get_size).  Entered through anything else (the tool's
 * MPI_File_write_at asking MPI_File_get_byte_offset, even through the
 * tool's own wrapper of that query), or from MPI, the query is the tool's.
 * Only the outermost tool frame tells: the one just below it holds the
 * return address the caller passed when it called into the tool. */
struct tool_walk {
    const void *caller; /* return address into the tool, where the walk starts */
    const void *outer;  /* return address in the outermost tool frame so far */
    enum caller_kind beyond;
    int started, ended;
};

static _Unwind_Reason_Code tool_frame(struct _Unwind_Context *ctx, void *arg)
{
    struct tool_walk *w = arg;
    const void *ip = (const void *)_Unwind_GetIP(ctx);
    if (!ip)
        return _URC_END_OF_STACK;
    if (!w->started) { /* iotrace's own frames, up to the one the tool called */
        w->started = ip == w->caller;
        if (!w->started)
            return _URC_NO_REASON;
    }
    enum caller_kind kind = caller_kind(ip);
    if (kind == CALLER_TOOL) {
        w->outer = ip;
        return _URC_NO_REASON;
    }
    w->beyond = kind;
    w->ended = 1;
    return _URC_END_OF_STACK;
}

/* The function of a tool's that holds a return address, "" if it has no
 * exported name.  Kept like the spans, per return address: dladdr reads the
 * object's symbol table, a fifth of the walk's time. */
#define OUTERS_MAX 64
static struct {
    const void *ip;
    const char *sym;
} outers[OUTERS_MAX];
static _Atomic int outers_n;

static const char *tool_function(const void *ip)
{
    int n = atomic_load_explicit(&outers_n, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (outers[i].ip == ip)
            return outers[i].sym;
    Dl_info info;
    /* ip - 1: inside the call instruction, so that a call that ends a
     * function is named after that function. */
    const char *sym = dladdr((const char *)ip - 1, &info) && info.dli_sname ? info.dli_sname : "";
    pthread_mutex_lock(&spans_lock);
    n = atomic_load_explicit(&outers_n, memory_order_relaxed);
    if (n < OUTERS_MAX) {
        outers[n].ip = ip;
        outers[n].sym = sym;
        atomic_store_explicit(&outers_n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&spans_lock);
    return sym;
}

/* The MPI function a tool's function is the wrapper of (its PMPI_ alias
 * named as the MPI_ name), or NULL for a function of other name. */
static const char *mpi_name(const char *sym)
{
    if (strncmp(sym, "PMPI_", 5) == 0)
        return sym + 1;
    return strncmp(sym, "MPI_", 4) == 0 ? sym : NULL;
}

static __attribute__((noinline, cold)) int tool_forwards(const void *caller, const char *name)
{
    iot_t.internal++;
    /* Called from the tool's wrapper of another MPI function (Darshan's
     * queries inside its MPI_File_write_at, twice per access): the tool's
     * own, without the walk, which costs about a microsecond.  Only a tool
     * whose wrapper of this query reached it through its wrapper of another
     * MPI function could be told wrong so. */
    const char *own = mpi_name(tool_function(caller));
    const char *sym = "";
    if (!own || strcmp(own, name) == 0) {
        struct tool_walk w = {.caller = caller, .outer = caller};
        _Unwind_Backtrace(tool_frame, &w);
        /* Without the application beyond the tool (no unwind information,
         * the tool's own thread, MPI calling the tool), the query is not
         * the application's. */
        if (w.ended && w.beyond == CALLER_APP)
            sym = tool_function(w.outer);
    }
    iot_t.internal--;
    const char *outer = mpi_name(sym);
    return outer && strcmp(outer, name) == 0;
}

/* Whether a query (get_size, get_byte_offset, ...) outside any traced call
 * is the application's, by either name: from the application's code (its
 * own call, or a tool's wrapper that forwarded it with a tail call), or
 * forwarded by another tool (tool_forwards); not from MPI itself. */
static inline int iot_mpi_app_query(const void *caller, const char *name)
{
    enum caller_kind kind = caller_kind(caller);
    return kind == CALLER_APP || (kind == CALLER_TOOL && tool_forwards(caller, name));
}

/* ---- file handles ------------------------------------------------------- */

struct iot_fh {
    MPI_File fh;
    uint64_t file;
    uint64_t coll_seq;
    uint64_t coll_group; /* its communicator (comm_group()), for its collectives */
    int trivial_view; /* displacement 0, etype and filetype MPI_BYTE */
    /* The individual file pointer is at the view's first etype: nothing
     * moved it since the open, MPI_File_set_view or seek to 0 that put it
     * there (view_offset). */
    int at_start;
    /* the split collective in progress on this handle */
    uint64_t split_callid, split_coll_seq, split_bytes;
    int64_t split_offset;
};

#define FH_SLOTS 1024
#define FH_TOMBSTONE ((MPI_File)(uintptr_t)1)
static struct iot_fh fh_table[FH_SLOTS];
static pthread_mutex_t fh_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t fh_hash(MPI_File fh) { return ((uintptr_t)fh >> 4) * 2654435761u; }

/* Lookups run without the lock: MPI forbids using a handle while it is
 * being opened or closed, so a slot in use does not change under a reader. */
static __attribute__((noinline)) struct iot_fh *fh_probe(MPI_File fh, size_t h)
{
    for (size_t i = 1; i < FH_SLOTS; i++) {
        struct iot_fh *e = &fh_table[(h + i) & (FH_SLOTS - 1)];
        MPI_File cur = __atomic_load_n(&e->fh, __ATOMIC_ACQUIRE);
        if (cur == fh)
            return e;
        if (cur == MPI_FILE_NULL)
            return NULL;
    }
    return NULL;
}

/* A handle is almost always in its home slot: that test is inline, the
 * probing after it is not. */
static inline __attribute__((always_inline)) struct iot_fh *fh_lookup(MPI_File fh)
{
    if (fh == MPI_FILE_NULL)
        return NULL;
    size_t h = fh_hash(fh);
    struct iot_fh *e = &fh_table[h & (FH_SLOTS - 1)];
    MPI_File cur = __atomic_load_n(&e->fh, __ATOMIC_ACQUIRE);
    if (IOT_LIKELY(cur == fh))
        return e;
    if (cur == MPI_FILE_NULL)
        return NULL;
    return fh_probe(fh, h);
}

static struct iot_fh *fh_insert(MPI_File fh, uint64_t file, uint64_t coll_group)
{
    struct iot_fh *slot = NULL;
    pthread_mutex_lock(&fh_lock);
    size_t h = fh_hash(fh);
    for (size_t i = 0; i < FH_SLOTS && !slot; i++) {
        struct iot_fh *e = &fh_table[(h + i) & (FH_SLOTS - 1)];
        if (e->fh == MPI_FILE_NULL || e->fh == FH_TOMBSTONE || e->fh == fh)
            slot = e;
    }
    if (slot) {
        *slot = (struct iot_fh){.file = file, .coll_seq = 1, .coll_group = coll_group,
                                .trivial_view = 1, .at_start = 1};
        __atomic_store_n(&slot->fh, fh, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&fh_lock);
    return slot;
}

static void fh_remove(struct iot_fh *e)
{
    pthread_mutex_lock(&fh_lock);
    __atomic_store_n(&e->fh, FH_TOMBSTONE, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fh_lock);
}

/* ---- non-blocking requests ----------------------------------------------- */

struct iot_req {
    MPI_Request req;
    int used; /* 0: never used since the last sweep (a probe stops), 1: live, 2: removed */
    unsigned func;
    uint64_t callid, file, bytes, coll_seq, coll_group;
    int64_t offset;
};

#define REQ_SLOTS 4096
static struct iot_req req_table[REQ_SLOTS];
static atomic_flag req_lock = ATOMIC_FLAG_INIT;
static _Atomic int req_count;
static int req_removed; /* slots marked removed, under req_lock */

static void req_lock_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&req_lock, memory_order_acquire))
        ;
}

static void req_lock_release(void) { atomic_flag_clear_explicit(&req_lock, memory_order_release); }

static size_t req_hash(MPI_Request r) { return ((size_t)(unsigned)r * 2654435761u) & (REQ_SLOTS - 1); }

static void req_forget(const struct iot_req *e);

/* Adds a request.  MPI reuses handles: a live entry with the same one is
 * stale (its request ended where it could not be seen, MPI_Request_free or
 * a completion passed straight through) and is replaced; returns 1 with
 * it in *stale. */
static int req_add(MPI_Request r, const struct iot_mpi_call *c, struct iot_req *stale)
{
    int replaced = 0;
    req_lock_acquire();
    size_t h = req_hash(r);
    struct iot_req *slot = NULL;
    for (size_t i = 0; i < REQ_SLOTS; i++) {
        struct iot_req *e = &req_table[(h + i) & (REQ_SLOTS - 1)];
        if (e->used == 1 && e->req == r) {
            *stale = *e;
            slot = e;
            replaced = 1;
            break;
        }
        if (e->used != 1 && !slot)
            slot = e;
        if (e->used == 0)
            break;
    }
    if (slot) {
        if (!replaced) {
            req_removed -= slot->used == 2;
            atomic_fetch_add(&req_count, 1);
        }
        *slot = (struct iot_req){.req = r, .used = 1, .func = c->func, .callid = c->callid,
                                 .file = c->file, .bytes = c->bytes, .coll_seq = c->coll_seq,
                                 .coll_group = c->coll_group, .offset = c->offset};
    }
    req_lock_release();
    return replaced;
}

/* Finds (and with `take`, removes) the entry of a request.  A probe stops
 * at a slot never used: removed ones are marked, and all are cleared at
 * once when the table is empty and a quarter of it is marked. */
static int req_find(MPI_Request r, struct iot_req *out, int take)
{
    int found = 0;
    req_lock_acquire();
    size_t h = req_hash(r);
    for (size_t i = 0; i < REQ_SLOTS; i++) {
        struct iot_req *e = &req_table[(h + i) & (REQ_SLOTS - 1)];
        if (e->used == 0)
            break;
        if (e->used == 1 && e->req == r) {
            *out = *e;
            found = 1;
            if (take) {
                e->used = 2;
                req_removed++;
                if (atomic_fetch_sub(&req_count, 1) == 1 && req_removed > REQ_SLOTS / 4) {
                    memset(req_table, 0, sizeof req_table);
                    req_removed = 0;
                }
            }
            break;
        }
    }
    req_lock_release();
    return found;
}

/* ---- CallIDs, sizes, offsets ------------------------------------------------ */

/* The helpers from here to the wrappers run on every traced call: the
 * common case is inline (IOT_HOT), whatever needs MPI itself or runs once
 * per thread or process is out of line (IOT_COLD). */
#define IOT_HOT static inline __attribute__((always_inline))
#define IOT_COLD static __attribute__((noinline, cold))

static void ensure_rank(void)
{
    if (iot_g.rank >= 0)
        return;
    resolve_pmpi();
    int init = 0, rank = -1;
    if (pmpi.initialized && pmpi.initialized(&init) == MPI_SUCCESS && init && pmpi.comm_rank &&
        pmpi.comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS)
        iot_set_rank(rank);
}

IOT_COLD void set_up_slow(void)
{
    resolve_pmpi();
    ensure_rank();
    /* Not if tracing was stopped meanwhile. */
    int on = IOT_MPIIO_ON;
    if (iot_g.rank >= 0)
        atomic_compare_exchange_strong_explicit(&iot_g.mpiio_on, &on, IOT_MPIIO_READY,
                                                memory_order_release, memory_order_relaxed);
}

/* Until both are known: the PMPI entry points, and the rank (MPI_Init).
 * `on` is what iot_mpi_tracing() returned. */
IOT_HOT void set_up(int on)
{
    if (IOT_UNLIKELY(on != IOT_MPIIO_READY))
        set_up_slow();
}

/* Threads take counter values in blocks, so the hot path needs no atomic
 * read-modify-write. */
#define CALLID_BLOCK 256

IOT_COLD uint64_t callid_refill(void)
{
    uint64_t base =
        atomic_fetch_add_explicit(&iot_g.call_counter, CALLID_BLOCK, memory_order_relaxed);
    iot_t.callid_end = base + 1 + CALLID_BLOCK;
    return base + 1;
}

IOT_HOT uint64_t new_callid(void)
{
    uint64_t n = iot_t.callid_next;
    if (IOT_UNLIKELY(n == iot_t.callid_end))
        n = callid_refill();
    iot_t.callid_next = n + 1;
    return iot_g.callid_rank | (n & ((1ull << 40) - 1));
}

IOT_COLD uint64_t type_bytes(MPI_Count count, MPI_Datatype type)
{
    MPI_Count size = 0;
    if (pmpi.type_size_x(type, &size) != MPI_SUCCESS || size < 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

IOT_HOT uint64_t bytes_of(MPI_Count count, MPI_Datatype type)
{
    if (count <= 0)
        return 0;
    if (type == MPI_BYTE || type == MPI_CHAR)
        return (uint64_t)count;
    if (type == MPI_DATATYPE_NULL || !pmpi.type_size_x)
        return 0;
    return type_bytes(count, type);
}

/* Byte offset of the view's k-th etype, or -1.  Only what MPI computed:
 * for a negative k, which its MPI_File_get_position can report (see
 * view_offset), ROMIO (MPICH 4.0) raises an error through the file's
 * error handler (fatal under MPI_ERRORS_ARE_FATAL) and answers
 * MPI_SUCCESS without writing the result, so it is not asked.  The result
 * starts as -1, the trace's "not known", and whatever is still negative
 * afterwards is no offset. */
static int64_t view_byte(MPI_File fh, MPI_Offset k)
{
    MPI_Offset b = -1;
    if (k < 0 || !pmpi.get_byte_offset || pmpi.get_byte_offset(fh, k, &b) != MPI_SUCCESS ||
        b < 0)
        return -1;
    return (int64_t)b;
}

static int64_t byte_offset(struct iot_fh *e, MPI_File fh, MPI_Offset off)
{
    if (e && e->trivial_view)
        return off < 0 ? -1 : off;
    return view_byte(fh, off);
}

/* Where an access through a view or the individual file pointer starts.
 * Under a view of some resized filetypes (an int whose lower bound is the
 * next int, MPICH's test/mpi/io/resized.c) ROMIO reports the position as
 * -1 while the pointer is at the view's first etype; the pointer is known
 * to be there until an access or a seek moves it, and ROMIO's byte offset
 * of etype 0 is right. */
IOT_COLD int64_t view_offset(struct iot_fh *e, unsigned flags, MPI_File fh, MPI_Offset off)
{
    if (flags & IOT_MF_AT)
        return byte_offset(e, fh, off);
    MPI_Offset pos = -1;
    if (!pmpi.get_position || pmpi.get_position(fh, &pos) != MPI_SUCCESS || pos < 0)
        pos = e && e->at_start ? 0 : -1;
    if (e)
        e->at_start = 0; /* this access moves the pointer */
    return byte_offset(e, fh, pos);
}

/* Where the access starts, in bytes from the start of the file.  Shared
 * file pointer accesses learn it from their first inner transfer.  An
 * explicit offset under the default view is already one. */
IOT_HOT int64_t access_offset(struct iot_fh *e, unsigned flags, MPI_File fh, MPI_Offset off)
{
    if ((flags & IOT_MF_AT) && e && e->trivial_view)
        return off;
    if (flags & (IOT_MF_AT | IOT_MF_IND))
        return view_offset(e, flags, fh, off);
    return -1;
}

static inline uint64_t xfer_of(int ret, const MPI_Status *st)
{
    if (ret != MPI_SUCCESS || !st || st == MPI_STATUS_IGNORE)
        return 0;
#ifdef MPICH
    /* ROMIO stores the byte count in the status; reading it directly saves
     * a call on every data access (MPICH's MPIR_STATUS_GET_COUNT). */
    return (uint64_t)(unsigned)st->count_lo |
           ((uint64_t)(unsigned)st->count_hi_and_cancelled >> 1) << 32;
#endif
    if (!pmpi.get_elements_x)
        return 0;
    MPI_Count n = 0;
    if (pmpi.get_elements_x(st, MPI_BYTE, &n) != MPI_SUCCESS || n < 0 || n == MPI_UNDEFINED)
        return 0;
    return (uint64_t)n;
}

/* ---- enter / leave ------------------------------------------------------- */

/* The registry shows the CallID of the innermost call running, as the
 * POSIX records do. */
static inline void publish(uint64_t callid)
{
    struct iot_reg_slot *slot = iot_t.reg;
    if (IOT_UNLIKELY(!slot))
        slot = iot_callreg_attach();
    iot_registry_begin(slot, callid);
}

IOT_HOT void begin_scope(struct iot_mpi_call *c)
{
    c->prev_callid = iot_t.callid;
    iot_t.callid = c->callid;
    publish(c->callid);
    iot_t.mpi_depth++;
    if (c->flags & IOT_MF_SHARED) { /* see posix_record */
        iot_t.mpi_file = c->file;
        iot_t.mpi_offset = -1;
    }
    c->t0 = iot_clock_raw();
}

IOT_HOT void iot_mpi_enter(struct iot_mpi_call *c, int on, unsigned func, unsigned flags,
                           MPI_File fh, MPI_Offset offset, MPI_Count count, MPI_Datatype type)
{
    set_up(on);
    c->func = func;
    c->flags = flags;
    c->fhe = fh_lookup(fh);
    c->file = c->fhe ? c->fhe->file : 0;
    c->callid = new_callid();
    c->bytes = bytes_of(count, type);
    c->offset = (flags & (IOT_MF_READ | IOT_MF_WRITE)) ? access_offset(c->fhe, flags, fh, offset) : -1;
    c->coll_seq = (flags & IOT_MF_COLL) && c->fhe ? ++c->fhe->coll_seq : 0;
    c->coll_group = c->coll_seq ? c->fhe->coll_group : 0;
    begin_scope(c);
}

static void iot_mpi_enter_path(struct iot_mpi_call *c, unsigned func, unsigned flags,
                               const char *filename)
{
    resolve_pmpi();
    ensure_rank();
    c->func = func;
    c->flags = flags;
    c->fhe = NULL;
    iot_t.internal++;
    c->file = iot_file_register(filename);
    if (c->file == IOT_FILE_UNTRACED) /* its calls are still recorded, without a file */
        c->file = 0;
    iot_t.internal--;
    c->callid = new_callid();
    c->bytes = 0;
    c->offset = -1;
    c->coll_seq = (flags & IOT_MF_COLL) ? 1 : 0; /* opening is a handle's first collective */
    c->coll_group = 0; /* MPI_File_open sets its communicator's */
    begin_scope(c);
}

/* The end of a split collective continues the call its begin started. */
static void iot_mpi_enter_end(struct iot_mpi_call *c, unsigned func, unsigned flags, MPI_File fh)
{
    resolve_pmpi();
    c->func = func;
    c->flags = flags;
    c->fhe = fh_lookup(fh);
    c->file = c->fhe ? c->fhe->file : 0;
    if (c->fhe && c->fhe->split_callid) {
        c->callid = c->fhe->split_callid;
        c->coll_seq = c->fhe->split_coll_seq;
        c->coll_group = c->coll_seq ? c->fhe->coll_group : 0;
        c->bytes = c->fhe->split_bytes;
        c->offset = c->fhe->split_offset;
        c->fhe->split_callid = 0;
    } else {
        c->callid = new_callid();
        c->coll_seq = c->coll_group = 0;
        c->bytes = 0;
        c->offset = -1;
    }
    begin_scope(c);
}

/* A failed call (an open the file system refused) is often the last
 * before MPI_Abort, after which the launcher kills the other ranks with
 * what they recorded, within milliseconds: it goes to the agent before the
 * call returns, on this thread (the sender thread, woken, may not get a
 * core in time on a loaded node: 1 run in 3 of client.mpi_abort lost a
 * rank's failed open so).  Never waits: when the sender is at work, it is
 * woken instead. */
static void send_failed_now(struct iot_ring *r)
{
    if (!iot_sender_help(r, 1))
        iot_sender_kick();
}

/* A call that took 2^32 ticks or more (over a second), a sequence number
 * of 2^32 or more, or a collective of a handle whose communicator is not
 * all of MPI_COMM_WORLD (its coll_group) takes a second slot for them.  The call comes by
 * value: were its address to escape, the wrappers would keep it in memory
 * and reload its constant fields after the call. */
IOT_COLD void record_long(struct iot_mpi_call c, uint64_t t1, int ret, uint64_t xfer)
{
    struct iot_wr w;
    struct iot_rec *r = iot_rec_begin_at(&w, 2, 1);
    if (!r)
        return;
    *r = (struct iot_rec){.t0 = c.t0, .callid = c.callid, .file = c.file, .offset = c.offset,
                          .bytes = c.bytes, .xfer = xfer, .mpi_ret = ret,
                          .func = (uint16_t)c.func, .kind = IOT_REC_MPIIO_LONG};
    struct iot_rec_long *more = &w.r->slots[(w.h + 1) & w.r->mask].more;
    more->t1 = t1;
    more->coll_seq = c.coll_seq;
    more->coll_group = c.coll_group;
    iot_rec_end(&w, 2);
    if (IOT_UNLIKELY(ret != MPI_SUCCESS)) /* as in record() */
        send_failed_now(w.r);
}

IOT_HOT void record(const struct iot_mpi_call *c, uint64_t t1, int ret, uint64_t xfer)
{
    uint64_t ticks = t1 - c->t0; /* t1 < t0 wraps, so goes the long way */
    if (IOT_UNLIKELY(ticks > UINT32_MAX || c->coll_seq > UINT32_MAX || c->coll_group)) {
        record_long(*c, t1, ret, xfer);
        return;
    }
    struct iot_wr w;
    struct iot_rec *r = iot_rec_begin_at(&w, 1, 1);
    if (!r)
        return;
    r->t0 = c->t0;
    r->callid = c->callid;
    r->file = c->file;
    r->offset = c->offset;
    r->bytes = c->bytes;
    r->xfer = xfer;
    r->ticks = (uint32_t)ticks;
    r->coll_seq = (uint32_t)c->coll_seq;
    r->mpi_ret = ret;
    r->func = (uint16_t)c->func;
    r->kind = IOT_REC_MPIIO;
    iot_rec_end(&w, 1);
    if (IOT_UNLIKELY(ret != MPI_SUCCESS))
        send_failed_now(w.r);
}

IOT_HOT uint64_t end_scope(struct iot_mpi_call *c)
{
    uint64_t t1 = iot_clock_raw();
    iot_t.mpi_depth--;
    iot_t.callid = c->prev_callid;
    publish(c->prev_callid);
    if (c->flags & IOT_MF_SHARED) {
        if (c->offset < 0)
            c->offset = iot_t.mpi_offset;
        iot_t.mpi_offset = 0;
    }
    return t1;
}

IOT_HOT void iot_mpi_leave(struct iot_mpi_call *c, int ret, const MPI_Status *status)
{
    uint64_t t1 = end_scope(c);
    record(c, t1, ret, xfer_of(ret, status));
}

static void iot_mpi_leave_open(struct iot_mpi_call *c, int ret, MPI_File fh)
{
    uint64_t t1 = end_scope(c);
    if (ret == MPI_SUCCESS && fh != MPI_FILE_NULL)
        fh_insert(fh, c->file, c->coll_group);
    record(c, t1, ret, 0);
}

static void iot_mpi_leave_close(struct iot_mpi_call *c, int ret, MPI_File closed)
{
    (void)closed;
    uint64_t t1 = end_scope(c);
    if (ret == MPI_SUCCESS && c->fhe)
        fh_remove(c->fhe);
    record(c, t1, ret, 0);
}

/* ---- access mode and hints ------------------------------------------------- */

/* Appends s to the text, with '\\', ';' and '=' escaped. */
static size_t put_escaped(char *out, size_t o, size_t cap, const char *s)
{
    for (; *s && o + 2 < cap; s++) {
        if (*s == '\\' || *s == ';' || *s == '=')
            out[o++] = '\\';
        out[o++] = *s;
    }
    return o;
}

/* The access mode (amode >= 0: MPI_File_open) and the hints of `info` as
 * one text, "amode=RDWR|CREATE;cb_nodes=1;...", in the name dictionary;
 * its id goes in the call's offset column (docs/client.md, "Access mode and
 * hints").  -1 when there is nothing to say. */
int64_t iot_mpi_info_id(MPI_Info info, int amode)
{
    char text[2048];
    size_t o = 0;
    if (amode >= 0) {
        o += (size_t)snprintf(text, sizeof text, "amode=");
        const char *sep = "";
        for (size_t i = 0; i < IOT_N_AMODE_NAMES; i++)
            if (amode & iot_amode_names[i].flag) {
                o += (size_t)snprintf(text + o, sizeof text - o, "%s%s", sep,
                                      iot_amode_names[i].name);
                sep = "|";
            }
    }
    int nkeys = 0;
    resolve_pmpi();
    if (info != MPI_INFO_NULL && pmpi.info_get_nkeys && pmpi.info_get_nthkey &&
        pmpi.info_get_valuelen && pmpi.info_get &&
        pmpi.info_get_nkeys(info, &nkeys) == MPI_SUCCESS) {
        for (int k = 0; k < nkeys && o + 4 < sizeof text; k++) {
            char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
            int len = 0, flag = 0;
            if (pmpi.info_get_nthkey(info, k, key) != MPI_SUCCESS ||
                pmpi.info_get_valuelen(info, key, &len, &flag) != MPI_SUCCESS || !flag ||
                len > MPI_MAX_INFO_VAL ||
                pmpi.info_get(info, key, MPI_MAX_INFO_VAL, value, &flag) != MPI_SUCCESS || !flag)
                continue;
            if (o)
                text[o++] = ';';
            o = put_escaped(text, o, sizeof text, key);
            text[o++] = '=';
            o = put_escaped(text, o, sizeof text, value);
        }
    }
    if (!o)
        return -1;
    iot_t.internal++;
    uint64_t id = iot_text_register(text, o < sizeof text ? o : sizeof text - 1);
    iot_t.internal--;
    return (int64_t)id;
}

/* ---- what a file view looks like ------------------------------------------ */

/* Whether etypes j*kb .. j*kb + kb - 1 lie where blocks of b bytes every s
 * bytes from f0 would put them (both ends of the block). */
static int block_fits(MPI_File fh, MPI_Offset j, MPI_Offset kb, int64_t f0, int64_t b, int64_t s,
                      int64_t e)
{
    return view_byte(fh, j * kb) == f0 + j * s && view_byte(fh, j * kb + kb - 1) == f0 + j * s + b - e;
}

/* The view as the trace records it on its MPI_File_set_view row, so that a
 * replay can set the same pattern (docs/client.md, "File views"): offset =
 * the byte of its first etype (displacement plus where the filetype's data
 * starts), bytes = length of its blocks of data, xfer = the distance from
 * one block to the next; bytes = xfer for a contiguous view, 0 and 0 for a
 * filetype that is not a regular pattern of equal blocks at equal
 * distances, tiling the file.  Asked of MPI itself, through the view just
 * set: the block length is found by bisection (the first etype that does
 * not follow its predecessor), then checked at both ends of blocks in this
 * and the next filetype; some 2 log2(n) + 24 MPI_File_get_byte_offset calls,
 * once per set_view. */
IOT_COLD void view_pattern(struct iot_mpi_call *c, uint64_t *stride, MPI_File fh,
                           MPI_Datatype etype, MPI_Datatype filetype)
{
    MPI_Count esz = 0, fsz = 0;
    if (!pmpi.get_byte_offset || !pmpi.type_size_x ||
        pmpi.type_size_x(etype, &esz) != MPI_SUCCESS ||
        pmpi.type_size_x(filetype, &fsz) != MPI_SUCCESS || esz <= 0 || fsz < esz ||
        fsz % esz)
        return;
    int64_t e = (int64_t)esz, f0 = view_byte(fh, 0);
    MPI_Offset n = (MPI_Offset)(fsz / esz); /* etypes per filetype */
    if (f0 < 0)
        return;
    c->offset = f0;
    /* First etype in [1, n] not right after the one before it; n + 1: none. */
    MPI_Offset lo = 1, hi = n + 1;
    while (lo < hi) {
        MPI_Offset mid = lo + (hi - lo) / 2;
        if (view_byte(fh, mid) != f0 + mid * e)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == n + 1) { /* one block, and the next filetype right after it */
        c->bytes = *stride = (uint64_t)fsz;
        return;
    }
    MPI_Offset kb = lo, m = n / kb; /* etypes per block, blocks per filetype */
    int64_t b = kb * e, s = view_byte(fh, kb) - f0;
    if (n % kb || s <= b)
        return;
    const MPI_Offset probe[] = {1, 2, m / 2, m - 1, m, m + 1, 2 * m - 1, 2 * m};
    for (size_t i = 0; i < sizeof probe / sizeof *probe; i++)
        if (probe[i] > 0 && !block_fits(fh, probe[i], kb, f0, b, s, e))
            return;
    c->bytes = (uint64_t)b;
    *stride = (uint64_t)s;
}

static void iot_mpi_leave_view(struct iot_mpi_call *c, int ret, MPI_File fh, MPI_Offset disp,
                               MPI_Datatype etype, MPI_Datatype filetype)
{
    uint64_t t1 = end_scope(c), stride = 0;
    c->bytes = 0;
    if (ret == MPI_SUCCESS && c->fhe) {
        c->fhe->at_start = 1; /* MPI_File_set_view resets the file pointers */
        c->fhe->trivial_view = disp == 0 && etype == MPI_BYTE && filetype == MPI_BYTE;
        if (c->fhe->trivial_view) {
            c->offset = 0;
            c->bytes = stride = 1;
        } else {
            view_pattern(c, &stride, fh, etype, filetype);
        }
    }
    record(c, t1, ret, stride);
}

/* Seeking the individual file pointer to 0 puts it at the view's first
 * etype, any other seek somewhere view_offset cannot tell. */
static void iot_mpi_leave_seek(struct iot_mpi_call *c, int ret, MPI_Offset offset, int whence)
{
    uint64_t t1 = end_scope(c);
    if (ret == MPI_SUCCESS && c->fhe)
        c->fhe->at_start = whence == MPI_SEEK_SET && offset == 0;
    record(c, t1, ret, 0);
}

static void iot_mpi_leave_request(struct iot_mpi_call *c, int ret, const MPI_Request *req)
{
    uint64_t t1 = end_scope(c);
    struct iot_req stale;
    if (ret == MPI_SUCCESS && req && *req != MPI_REQUEST_NULL && req_add(*req, c, &stale))
        req_forget(&stale);
    record(c, t1, ret, 0);
}

static void iot_mpi_leave_begin(struct iot_mpi_call *c, int ret)
{
    uint64_t t1 = end_scope(c);
    if (ret == MPI_SUCCESS && c->fhe) {
        c->fhe->split_callid = c->callid;
        c->fhe->split_coll_seq = c->coll_seq;
        c->fhe->split_bytes = c->bytes;
        c->fhe->split_offset = c->offset;
    }
    record(c, t1, ret, 0);
}

/* ---- the MPI_File_* wrappers ------------------------------------------------ */

/* Generated by gen_wrappers.py from mpiio_functions.tsv.  Compiled here
 * rather than as a unit of its own so that the helpers above inline into
 * every wrapper: with the calls, their register saves and argument passing
 * (and the helpers' own calls) a wrapper ran about 270 instructions of its
 * own on an MPI_File_write_at, inline about 165. */
#include "mpiio_wrappers.inc"

/* ---- completion: MPI_Wait and MPI_Test families --------------------------- */

/* Runs a Wait/Test call with the CallID of the first outstanding file
 * request it covers, so that I/O done on that request's behalf during
 * completion carries its CallID. */
struct completion {
    struct iot_mpi_call c;
    int active;
};

static void completion_begin(struct completion *cp, unsigned func, int count,
                             const MPI_Request *reqs)
{
    cp->active = 0;
    if (atomic_load_explicit(&req_count, memory_order_relaxed) == 0 || !iot_recording())
        return;
    struct iot_req e;
    for (int i = 0; i < count; i++)
        if (reqs[i] != MPI_REQUEST_NULL && req_find(reqs[i], &e, 0)) {
            cp->active = 1;
            cp->c = (struct iot_mpi_call){.callid = e.callid, .func = func};
            begin_scope(&cp->c);
            return;
        }
}

static void record_irecv(const struct iot_req *e, uint64_t t0, uint64_t t1, int ret,
                         const MPI_Status *st);

static void completion_record(struct completion *cp, unsigned func, MPI_Request req, int ret,
                              const MPI_Status *st, uint64_t t1)
{
    struct iot_req e;
    if (req == MPI_REQUEST_NULL || !req_find(req, &e, 1))
        return;
    if (e.func == IOT_F_MPIIO_MPI_Irecv) { /* a message, recorded where it arrived */
        record_irecv(&e, cp->c.t0, t1, ret, st);
        return;
    }
    struct iot_mpi_call c = {.t0 = cp->c.t0, .callid = e.callid, .file = e.file,
                             .offset = e.offset, .bytes = e.bytes, .coll_seq = e.coll_seq,
                             .coll_group = e.coll_group, .func = func};
    record(&c, t1, ret, xfer_of(ret, st));
}

static uint64_t completion_end(struct completion *cp)
{
    return end_scope(&cp->c);
}

#define NEXT(name)                                                              \
    static __typeof__(&name) next_##name;                                       \
    if (IOT_UNLIKELY(!next_##name))                                             \
        next_##name = (__typeof__(&name))iot_mpi_next(#name);                   \
    if (IOT_UNLIKELY(!next_##name))                                             \
        return MPI_ERR_INTERN

/* A tool loaded before iotrace that wraps MPI_Wait forwards to PMPI_Wait.
 * Through the PMPI_ names pass straight on: calls while nothing can be
 * completed, nested calls (a tool after iotrace, ROMIO inside a traced call)
 * and the MPI library's own (ROMIO calls PMPI_Waitall and PMPI_Test). */
static inline int pmpi_completion_passes(const void *caller)
{
    return atomic_load_explicit(&req_count, memory_order_relaxed) == 0 || iot_t.mpi_depth ||
           !iot_recording() || iot_mpi_from_mpi(caller);
}

#define COMPLETION_ENTRIES(name, body, params, args)                            \
    int name params                                                             \
    {                                                                           \
        NEXT(name);                                                             \
        return body##_body(next_##name, IOT_UNPAREN args);                      \
    }                                                                           \
    int P##name params                                                          \
    {                                                                           \
        NEXT(P##name);                                                          \
        if (pmpi_completion_passes(__builtin_return_address(0)))                \
            return next_P##name args;                                           \
        return body##_body(next_P##name, IOT_UNPAREN args);                     \
    }

#define IOT_UNPAREN(...) __VA_ARGS__

/* ---- generalized requests: ROMIO's non-blocking collectives -------------- */

#ifdef MPICH
/* ROMIO (MPICH 4.0) carries out MPI_File_iwrite_all, iread_all,
 * iwrite_at_all and iread_at_all as generalized requests of a class of its
 * own (MPIX_Grequest_class_create), whose poll and wait functions MPI calls
 * inside MPI_Wait*, MPI_Test* to move a request on: most of its reads and
 * writes happen there, for whichever request is being polled.  One
 * Waitall completing several of them runs under one CallID (completion_begin:
 * the first request's), so each request's I/O would carry the first one's.
 * Instead, the library gives ROMIO a class of its own functions: a request
 * allocated inside a traced call gets, as its state, a note of that call's
 * CallID and the state ROMIO gave, and each poll or wait runs with that
 * CallID published (nested in the Wait/Test call's, as a traced call in
 * another), then hands ROMIO its state.  A request allocated outside any
 * traced call goes to a second class with ROMIO's functions themselves, so
 * that it costs nothing. */
struct greq_class {
    MPIX_Grequest_class wrapped, plain; /* what ROMIO was given; the same as ROMIO's */
    MPI_Grequest_query_function *query_fn;
    MPI_Grequest_free_function *free_fn;
    MPI_Grequest_cancel_function *cancel_fn;
    MPIX_Grequest_poll_function *poll_fn;
    MPIX_Grequest_wait_function *wait_fn;
};

/* A request's state as MPI sees it. */
struct greq {
    void *state;
    uint64_t callid;
    const struct greq_class *cls;
};

/* ROMIO makes three classes (non-blocking collective reads, writes, and
 * POSIX AIO); more than this many are passed through unchanged.  Appended
 * under the lock, read without it (an entry is written before the count). */
#define GREQ_CLASSES 16
static struct greq_class greq_classes[GREQ_CLASSES];
static _Atomic int greq_classes_n;
static pthread_mutex_t greq_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct greq_class *greq_class_of(MPIX_Grequest_class cls)
{
    int n = atomic_load_explicit(&greq_classes_n, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (greq_classes[i].wrapped == cls)
            return &greq_classes[i];
    return NULL;
}

static int greq_query(void *extra, MPI_Status *status)
{
    struct greq *g = extra;
    return g->cls->query_fn(g->state, status);
}

static int greq_free(void *extra)
{
    struct greq *g = extra;
    int ret = g->cls->free_fn(g->state);
    free(g);
    return ret;
}

static int greq_cancel(void *extra, int complete)
{
    struct greq *g = extra;
    return g->cls->cancel_fn(g->state, complete);
}

static int greq_poll(void *extra, MPI_Status *status)
{
    struct greq *g = extra;
    struct iot_mpi_call c = {.callid = g->callid};
    begin_scope(&c);
    int ret = g->cls->poll_fn(g->state, status);
    end_scope(&c);
    return ret;
}

static double greq_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* MPI passes a class's wait function the states of several requests at
 * once when it pokes them (MPIR_Grequest_progress_poke, from MPI_Test* and
 * MPI_Wait*), so that one call moves them all on; ROMIO's waits for each
 * in turn, in the order given, until it is done.  So the states are handed
 * over one at a time, in that order, each with its own CallID: the same
 * waits, each under the right CallID.  A timeout (MPICH passes none, 0)
 * goes on running across them. */
static int greq_wait(int count, void **states, double timeout, MPI_Status *status)
{
    double start = timeout > 0 ? greq_now() : 0;
    for (int i = 0; i < count; i++) {
        struct greq *g = states[i];
        double left = timeout;
        if (timeout > 0 && (left = timeout - (greq_now() - start)) <= 0)
            break;
        struct iot_mpi_call c = {.callid = g->callid};
        begin_scope(&c);
        int ret = g->cls->wait_fn(1, &g->state, left, status);
        end_scope(&c);
        if (ret != MPI_SUCCESS)
            return ret;
    }
    return MPI_SUCCESS;
}

static int greq_class_create(__typeof__(&MPIX_Grequest_class_create) next,
                             MPI_Grequest_query_function *query_fn,
                             MPI_Grequest_free_function *free_fn,
                             MPI_Grequest_cancel_function *cancel_fn,
                             MPIX_Grequest_poll_function *poll_fn,
                             MPIX_Grequest_wait_function *wait_fn, MPIX_Grequest_class *cls)
{
    if (!iot_recording() || !query_fn || !free_fn || !cancel_fn || (!poll_fn && !wait_fn))
        return next(query_fn, free_fn, cancel_fn, poll_fn, wait_fn, cls);
    pthread_mutex_lock(&greq_lock);
    int n = atomic_load_explicit(&greq_classes_n, memory_order_relaxed), ret;
    struct greq_class *k = &greq_classes[n < GREQ_CLASSES ? n : 0];
    if (n == GREQ_CLASSES ||
        (ret = next(query_fn, free_fn, cancel_fn, poll_fn, wait_fn, &k->plain)) != MPI_SUCCESS) {
        pthread_mutex_unlock(&greq_lock);
        return next(query_fn, free_fn, cancel_fn, poll_fn, wait_fn, cls);
    }
    k->query_fn = query_fn;
    k->free_fn = free_fn;
    k->cancel_fn = cancel_fn;
    k->poll_fn = poll_fn;
    k->wait_fn = wait_fn;
    /* MPI tells a class without a poll or a wait function by its NULL. */
    ret = next(greq_query, greq_free, greq_cancel, poll_fn ? greq_poll : NULL,
               wait_fn ? greq_wait : NULL, &k->wrapped);
    if (ret == MPI_SUCCESS) {
        atomic_store_explicit(&greq_classes_n, n + 1, memory_order_release);
        *cls = k->wrapped;
    } else {
        *cls = k->plain;
        ret = MPI_SUCCESS;
    }
    pthread_mutex_unlock(&greq_lock);
    return ret;
}

static int greq_class_allocate(__typeof__(&MPIX_Grequest_class_allocate) next,
                               MPIX_Grequest_class cls, void *state, MPI_Request *request)
{
    const struct greq_class *k = greq_class_of(cls);
    if (!k)
        return next(cls, state, request);
    uint64_t callid = iot_t.callid;
    struct greq *g = callid ? malloc(sizeof *g) : NULL;
    if (!g)
        return next(k->plain, state, request);
    *g = (struct greq){.state = state, .callid = callid, .cls = k};
    int ret = next(cls, g, request);
    if (ret != MPI_SUCCESS)
        free(g);
    return ret;
}

/* ROMIO calls the PMPIX_ names; an application may call either. */
#define GREQ_CLASS_CREATE(name)                                                 \
    int name(MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn, \
             MPI_Grequest_cancel_function *cancel_fn, MPIX_Grequest_poll_function *poll_fn, \
             MPIX_Grequest_wait_function *wait_fn, MPIX_Grequest_class *cls)   \
    {                                                                           \
        NEXT(name);                                                             \
        return greq_class_create(next_##name, query_fn, free_fn, cancel_fn, poll_fn, wait_fn, \
                                 cls);                                          \
    }

#define GREQ_CLASS_ALLOCATE(name)                                               \
    int name(MPIX_Grequest_class cls, void *state, MPI_Request *request)        \
    {                                                                           \
        NEXT(name);                                                             \
        return greq_class_allocate(next_##name, cls, state, request);           \
    }

GREQ_CLASS_CREATE(MPIX_Grequest_class_create)
GREQ_CLASS_CREATE(PMPIX_Grequest_class_create)
GREQ_CLASS_ALLOCATE(MPIX_Grequest_class_allocate)
GREQ_CLASS_ALLOCATE(PMPIX_Grequest_class_allocate)
#endif

/* ---- synchronisation: MPI_Barrier, with IOTRACE_SYNC=1 ---------------------- */

/* What orders one rank's I/O after another's, for iotrace-replay (MPIOR's
 * point: only the MPI calls that matter to I/O).  A barrier's row: offset =
 * the communicator's id (a hash of its members' ranks in MPI_COMM_WORLD, in
 * order: the same on every member), bytes = its size, coll_seq = the
 * barrier's number on it.  Kept per communicator as an attribute, so it
 * goes when the communicator is freed and a reused handle gets its own. */
struct sync_comm {
    int64_t id;
    uint64_t size, seq;
    _Atomic int refs; /* the communicator's attribute, and each MPI_Irecv in flight */
    int world[];      /* the members' ranks in MPI_COMM_WORLD, by rank in the communicator */
};

static void sync_comm_release(struct sync_comm *sc)
{
    if (sc && atomic_fetch_sub(&sc->refs, 1) == 1)
        free(sc);
}

/* What a request's entry holds besides figures: an MPI_Irecv's
 * communicator (MPI lets a communicator be freed before its operations
 * complete, so the entry keeps it). */
static void req_forget(const struct iot_req *e)
{
    if (e->func == IOT_F_MPIIO_MPI_Irecv)
        sync_comm_release((struct sync_comm *)(uintptr_t)e->file);
}

static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER; /* see sync_comm_of() */
static int sync_keyval = MPI_KEYVAL_INVALID;

static int sync_comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    sync_comm_release(attr);
    return MPI_SUCCESS;
}

/* A communicator's id: a hash (FNV-1a) of its members' ranks in
 * MPI_COMM_WORLD, in the order of their ranks in it, so that every member
 * works out the same without a message. */
static int64_t members_id(const int *world, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++)
            h = (h ^ (((uint32_t)world[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

static struct sync_comm *sync_comm_new(MPI_Comm comm)
{
    int size = 0;
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    if (!pmpi.comm_size || !pmpi.comm_group || !pmpi.group_translate_ranks || !pmpi.group_free ||
        !pmpi.comm_set_attr || pmpi.comm_size(comm, &size) != MPI_SUCCESS || size <= 0)
        return NULL;
    int *mine = malloc((size_t)size * sizeof *mine);
    struct sync_comm *sc = calloc(1, sizeof *sc + (size_t)size * sizeof sc->world[0]);
    int *theirs = sc ? sc->world : NULL;
    int ok = mine && theirs && sc && pmpi.comm_group(comm, &group) == MPI_SUCCESS &&
             pmpi.comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS;
    if (ok) {
        for (int i = 0; i < size; i++)
            mine[i] = i;
        ok = pmpi.group_translate_ranks(group, size, mine, world, theirs) == MPI_SUCCESS;
    }
    if (ok) {
        sc->id = members_id(theirs, size);
        sc->size = (uint64_t)size;
        atomic_init(&sc->refs, 1);
        ok = pmpi.comm_set_attr(comm, sync_keyval, sc) == MPI_SUCCESS;
    }
    if (group != MPI_GROUP_NULL)
        pmpi.group_free(&group);
    if (world != MPI_GROUP_NULL)
        pmpi.group_free(&world);
    free(mine);
    if (!ok) {
        free(sc);
        return NULL;
    }
    return sc;
}

static struct sync_comm *sync_comm_of(MPI_Comm comm)
{
    resolve_pmpi();
    if (!pmpi.comm_create_keyval || !pmpi.comm_get_attr)
        return NULL;
    pthread_mutex_lock(&sync_lock);
    if (sync_keyval == MPI_KEYVAL_INVALID &&
        pmpi.comm_create_keyval(MPI_COMM_NULL_COPY_FN, sync_comm_delete, &sync_keyval, NULL) !=
            MPI_SUCCESS)
        sync_keyval = MPI_KEYVAL_INVALID;
    int keyval = sync_keyval;
    pthread_mutex_unlock(&sync_lock);
    if (keyval == MPI_KEYVAL_INVALID)
        return NULL;
    struct sync_comm *sc = NULL;
    int found = 0, inter = 1;
    /* Threads that look up one communicator at once (each opening a file
     * on MPI_COMM_SELF) make its entry once: a second one set as the
     * attribute would free the first under its finder. */
    pthread_mutex_lock(&comm_lock);
    if (pmpi.comm_get_attr(comm, keyval, &sc, &found) != MPI_SUCCESS || !found) {
        sc = NULL;
        /* An intercommunicator's peers are ranks of its remote group, which
         * the replay has no way to make: not recorded. */
        if (pmpi.comm_test_inter && pmpi.comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter)
            sc = sync_comm_new(comm);
    }
    pthread_mutex_unlock(&comm_lock);
    return sc;
}

/* MPI requires every member of a file handle's communicator to call its
 * collectives in the same order, so equal (file, sequence number) name one
 * collective only among those members: ranks that each open the file on
 * MPI_COMM_SELF (Darshan's tst_mpio_pthread) make independent calls that
 * merely share the numbers.  A handle's collectives therefore carry its
 * communicator's id, and the analysis groups only calls with the same one.
 * 0 for a communicator of every rank (the common case, which costs one
 * MPI_Comm_size per open and nothing per call); else members_id(), for
 * MPI_COMM_SELF from the rank alone, for others kept as the
 * communicator's attribute, worked out at its first open. */
uint64_t iot_mpi_comm_group(MPI_Comm comm)
{
    static int world_size;
    int size = 0;
    resolve_pmpi();
    if (!pmpi.comm_size || pmpi.comm_size(comm, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    if (!world_size && pmpi.comm_size(MPI_COMM_WORLD, &world_size) != MPI_SUCCESS)
        world_size = 0;
    if (size >= world_size)
        return 0;
    int64_t id;
    if (size == 1 && comm == MPI_COMM_SELF && iot_g.rank >= 0) {
        id = members_id(&iot_g.rank, 1);
    } else {
        struct sync_comm *sc = sync_comm_of(comm);
        if (!sc)
            return 0; /* grouped as before: by file and sequence number alone */
        id = sc->id;
    }
    return id ? (uint64_t)id : 1;
}

/* By its MPI_ name only: the barriers iotrace-replay adds, and those a tool
 * or the MPI library makes through PMPI_Barrier, are not the program's. */
/* With IOTRACE_SYNC on and a call to record (not nested, an
 * intracommunicator): its communicator, with the call begun; NULL: pass
 * the call on. */
static struct sync_comm *sync_begin(struct iot_mpi_call *c, unsigned func, MPI_Comm comm,
                                    uint64_t bytes)
{
    int on = iot_mpi_tracing();
    struct sync_comm *sc;
    if (!on || !(sc = sync_comm_of(comm)))
        return NULL;
    set_up(on);
    *c = (struct iot_mpi_call){.func = func, .callid = new_callid(), .offset = sc->id,
                               .bytes = bytes};
    if (func == IOT_F_MPIIO_MPI_Barrier) {
        c->bytes = sc->size;
        c->coll_seq = ++sc->seq;
    }
    begin_scope(c);
    return sc;
}

int MPI_Barrier(MPI_Comm comm)
{
    NEXT(MPI_Barrier);
    struct iot_mpi_call c;
    if (IOT_LIKELY(!iot_g.cfg.trace_sync) || !sync_begin(&c, IOT_F_MPIIO_MPI_Barrier, comm, 0))
        return next_MPI_Barrier(comm);
    int ret = next_MPI_Barrier(comm);
    uint64_t t1 = end_scope(&c);
    record(&c, t1, ret, 0);
    return ret;
}

/* Blocking point-to-point messages, with IOTRACE_SYNC=1: a rank that waits
 * for a neighbour's "done" before it reads is ordered by the message.  A
 * row: offset = the communicator's id, bytes = the message's bytes, xfer =
 * the peer's rank in MPI_COMM_WORLD (the actual source of a receive, also
 * for MPI_ANY_SOURCE), coll_seq = the tag (the actual one). */
static int message_peer(const struct sync_comm *sc, int rank)
{
    return rank >= 0 && (uint64_t)rank < sc->size ? sc->world[rank] : -1;
}

static void record_message(struct iot_mpi_call *c, const struct sync_comm *sc, int ret,
                           int peer, int tag)
{
    uint64_t t1 = end_scope(c);
    c->coll_seq = tag < 0 ? 0 : (uint64_t)tag;
    int world = message_peer(sc, peer);
    record(c, t1, ret, world < 0 ? UINT64_MAX : (uint64_t)world);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    NEXT(MPI_Send);
    /* IOTRACE_SYNC first: off, a message costs one load and one test. */
    struct iot_mpi_call c;
    struct sync_comm *sc;
    if (IOT_LIKELY(!iot_g.cfg.trace_sync) || dest < 0 ||
        !(sc = sync_begin(&c, IOT_F_MPIIO_MPI_Send, comm, bytes_of(count, type))))
        return next_MPI_Send(buf, count, type, dest, tag, comm);
    int ret = next_MPI_Send(buf, count, type, dest, tag, comm);
    record_message(&c, sc, ret, dest, tag);
    return ret;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    NEXT(MPI_Recv);
    struct iot_mpi_call c;
    struct sync_comm *sc;
    if (IOT_LIKELY(!iot_g.cfg.trace_sync) || source == MPI_PROC_NULL ||
        !(sc = sync_begin(&c, IOT_F_MPIIO_MPI_Recv, comm, 0)))
        return next_MPI_Recv(buf, count, type, source, tag, comm, status);
    MPI_Status local;
    if (status == MPI_STATUS_IGNORE)
        status = &local;
    int ret = next_MPI_Recv(buf, count, type, source, tag, comm, status);
    c.bytes = ret == MPI_SUCCESS ? xfer_of(ret, status) : 0;
    record_message(&c, sc, ret, ret == MPI_SUCCESS ? status->MPI_SOURCE : source,
                   ret == MPI_SUCCESS ? status->MPI_TAG : tag);
    return ret;
}

/* A non-blocking send orders from where it is posted; a non-blocking
 * receive where it completes (MPI_Wait*, MPI_Test*), so it is recorded
 * there, as an MPI_Irecv row with the source and tag that arrived. */
int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    NEXT(MPI_Isend);
    struct iot_mpi_call c;
    struct sync_comm *sc;
    if (IOT_LIKELY(!iot_g.cfg.trace_sync) || dest < 0 ||
        !(sc = sync_begin(&c, IOT_F_MPIIO_MPI_Isend, comm, bytes_of(count, type))))
        return next_MPI_Isend(buf, count, type, dest, tag, comm, request);
    int ret = next_MPI_Isend(buf, count, type, dest, tag, comm, request);
    record_message(&c, sc, ret, dest, tag);
    return ret;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    NEXT(MPI_Irecv);
    if (IOT_LIKELY(!iot_g.cfg.trace_sync))
        return next_MPI_Irecv(buf, count, type, source, tag, comm, request);
    int on = iot_mpi_tracing();
    struct sync_comm *sc;
    int ret = next_MPI_Irecv(buf, count, type, source, tag, comm, request);
    if (ret == MPI_SUCCESS && on && source != MPI_PROC_NULL && *request != MPI_REQUEST_NULL &&
        (sc = sync_comm_of(comm))) {
        set_up(on);
        struct iot_mpi_call c = {.func = IOT_F_MPIIO_MPI_Irecv, .callid = new_callid(),
                                 .offset = sc->id, .file = (uint64_t)(uintptr_t)sc};
        atomic_fetch_add(&sc->refs, 1);
        struct iot_req stale;
        if (req_add(*request, &c, &stale))
            req_forget(&stale);
    }
    return ret;
}

static void record_irecv(const struct iot_req *e, uint64_t t0, uint64_t t1, int ret,
                         const MPI_Status *st)
{
    struct sync_comm *sc = (struct sync_comm *)(uintptr_t)e->file;
    int cancelled = 0;
    if (ret == MPI_SUCCESS && pmpi.test_cancelled)
        pmpi.test_cancelled(st, &cancelled);
    if (cancelled) { /* no message came */
        sync_comm_release(sc);
        return;
    }
    struct iot_mpi_call c = {.t0 = t0, .callid = e->callid, .offset = e->offset,
                             .bytes = xfer_of(ret, st), .func = IOT_F_MPIIO_MPI_Irecv,
                             .coll_seq = ret == MPI_SUCCESS && st->MPI_TAG >= 0
                                             ? (uint64_t)st->MPI_TAG
                                             : 0};
    int world = ret == MPI_SUCCESS ? message_peer(sc, st->MPI_SOURCE) : -1;
    sync_comm_release(sc);
    record(&c, t1, ret, world < 0 ? UINT64_MAX : (uint64_t)world);
}

/* A request freed before anyone waits for it is never seen to complete:
 * its entry goes with it. */
int MPI_Request_free(MPI_Request *request)
{
    NEXT(MPI_Request_free);
    if (IOT_LIKELY(atomic_load_explicit(&req_count, memory_order_relaxed) == 0) || !request)
        return next_MPI_Request_free(request);
    MPI_Request r = *request;
    int ret = next_MPI_Request_free(request);
    struct iot_req e;
    if (ret == MPI_SUCCESS && req_find(r, &e, 1))
        req_forget(&e);
    return ret;
}

IOT_HOT int wait_body(__typeof__(&MPI_Wait) next, MPI_Request *request, MPI_Status *status)
{
    struct completion cp;
    completion_begin(&cp, IOT_F_MPIIO_MPI_Wait, 1, request);
    if (!cp.active)
        return next(request, status);
    MPI_Request saved = *request;
    MPI_Status local;
    if (status == MPI_STATUS_IGNORE)
        status = &local;
    int ret = next(request, status);
    uint64_t t1 = completion_end(&cp);
    completion_record(&cp, IOT_F_MPIIO_MPI_Wait, saved, ret, status, t1);
    return ret;
}

COMPLETION_ENTRIES(MPI_Wait, wait, (MPI_Request *request, MPI_Status *status), (request, status))

IOT_HOT int test_body(__typeof__(&MPI_Test) next, MPI_Request *request, int *flag,
                      MPI_Status *status)
{
    struct completion cp;
    completion_begin(&cp, IOT_F_MPIIO_MPI_Test, 1, request);
    if (!cp.active)
        return next(request, flag, status);
    MPI_Request saved = *request;
    MPI_Status local;
    if (status == MPI_STATUS_IGNORE)
        status = &local;
    int ret = next(request, flag, status);
    uint64_t t1 = completion_end(&cp);
    if (*flag)
        completion_record(&cp, IOT_F_MPIIO_MPI_Test, saved, ret, status, t1);
    return ret;
}

COMPLETION_ENTRIES(MPI_Test, test,
                   (MPI_Request *request, int *flag, MPI_Status *status),
                   (request, flag, status))

/* Array forms keep copies of the requests (completed ones become
 * MPI_REQUEST_NULL) and supply statuses when the caller ignores them. */
struct req_copy {
    MPI_Request small_reqs[64];
    MPI_Status small_st[64];
    MPI_Request *reqs;
    MPI_Status *st;
};

static int copy_requests(struct req_copy *rc, int count, const MPI_Request *reqs,
                         MPI_Status **statuses)
{
    rc->reqs = count <= 64 ? rc->small_reqs : malloc(sizeof(MPI_Request) * (size_t)count);
    rc->st = count <= 64 ? rc->small_st : malloc(sizeof(MPI_Status) * (size_t)count);
    if (!rc->reqs || !rc->st) {
        if (rc->reqs != rc->small_reqs)
            free(rc->reqs);
        if (rc->st != rc->small_st)
            free(rc->st);
        return -1;
    }
    memcpy(rc->reqs, reqs, sizeof(MPI_Request) * (size_t)count);
    if (*statuses == MPI_STATUSES_IGNORE)
        *statuses = rc->st;
    return 0;
}

static void free_requests(struct req_copy *rc)
{
    if (rc->reqs != rc->small_reqs)
        free(rc->reqs);
    if (rc->st != rc->small_st)
        free(rc->st);
}

IOT_HOT int waitall_body(__typeof__(&MPI_Waitall) next, int count, MPI_Request reqs[],
                         MPI_Status statuses[])
{
    struct completion cp;
    struct req_copy rc;
    completion_begin(&cp, IOT_F_MPIIO_MPI_Waitall, count, reqs);
    if (!cp.active || copy_requests(&rc, count, reqs, &statuses) != 0) {
        if (cp.active)
            completion_end(&cp);
        return next(count, reqs, statuses);
    }
    int ret = next(count, reqs, statuses);
    uint64_t t1 = completion_end(&cp);
    for (int i = 0; i < count; i++)
        completion_record(&cp, IOT_F_MPIIO_MPI_Waitall, rc.reqs[i], ret, &statuses[i], t1);
    free_requests(&rc);
    return ret;
}

COMPLETION_ENTRIES(MPI_Waitall, waitall,
                   (int count, MPI_Request reqs[], MPI_Status statuses[]),
                   (count, reqs, statuses))

IOT_HOT int testall_body(__typeof__(&MPI_Testall) next, int count, MPI_Request reqs[], int *flag,
                         MPI_Status statuses[])
{
    struct completion cp;
    struct req_copy rc;
    completion_begin(&cp, IOT_F_MPIIO_MPI_Testall, count, reqs);
    if (!cp.active || copy_requests(&rc, count, reqs, &statuses) != 0) {
        if (cp.active)
            completion_end(&cp);
        return next(count, reqs, flag, statuses);
    }
    int ret = next(count, reqs, flag, statuses);
    uint64_t t1 = completion_end(&cp);
    for (int i = 0; *flag && i < count; i++)
        completion_record(&cp, IOT_F_MPIIO_MPI_Testall, rc.reqs[i], ret, &statuses[i], t1);
    free_requests(&rc);
    return ret;
}

COMPLETION_ENTRIES(MPI_Testall, testall,
                   (int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]),
                   (count, reqs, flag, statuses))

IOT_HOT int waitany_body(__typeof__(&MPI_Waitany) next, int count, MPI_Request reqs[], int *index,
                         MPI_Status *status)
{
    struct completion cp;
    struct req_copy rc;
    MPI_Status *unused = MPI_STATUSES_IGNORE;
    completion_begin(&cp, IOT_F_MPIIO_MPI_Waitany, count, reqs);
    if (!cp.active || copy_requests(&rc, count, reqs, &unused) != 0) {
        if (cp.active)
            completion_end(&cp);
        return next(count, reqs, index, status);
    }
    MPI_Status local;
    if (status == MPI_STATUS_IGNORE)
        status = &local;
    int ret = next(count, reqs, index, status);
    uint64_t t1 = completion_end(&cp);
    if (*index != MPI_UNDEFINED && *index >= 0 && *index < count)
        completion_record(&cp, IOT_F_MPIIO_MPI_Waitany, rc.reqs[*index], ret, status, t1);
    free_requests(&rc);
    return ret;
}

COMPLETION_ENTRIES(MPI_Waitany, waitany,
                   (int count, MPI_Request reqs[], int *index, MPI_Status *status),
                   (count, reqs, index, status))

IOT_HOT int testany_body(__typeof__(&MPI_Testany) next, int count, MPI_Request reqs[], int *index,
                         int *flag, MPI_Status *status)
{
    struct completion cp;
    struct req_copy rc;
    MPI_Status *unused = MPI_STATUSES_IGNORE;
    completion_begin(&cp, IOT_F_MPIIO_MPI_Testany, count, reqs);
    if (!cp.active || copy_requests(&rc, count, reqs, &unused) != 0) {
        if (cp.active)
            completion_end(&cp);
        return next(count, reqs, index, flag, status);
    }
    MPI_Status local;
    if (status == MPI_STATUS_IGNORE)
        status = &local;
    int ret = next(count, reqs, index, flag, status);
    uint64_t t1 = completion_end(&cp);
    if (*flag && *index != MPI_UNDEFINED && *index >= 0 && *index < count)
        completion_record(&cp, IOT_F_MPIIO_MPI_Testany, rc.reqs[*index], ret, status, t1);
    free_requests(&rc);
    return ret;
}

COMPLETION_ENTRIES(MPI_Testany, testany,
                   (int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status),
                   (count, reqs, index, flag, status))

static int some_common(unsigned func, int incount, MPI_Request reqs[], int *outcount,
                       int indices[], MPI_Status statuses[],
                       int (*next)(int, MPI_Request *, int *, int *, MPI_Status *))
{
    struct completion cp;
    struct req_copy rc;
    completion_begin(&cp, func, incount, reqs);
    if (!cp.active || copy_requests(&rc, incount, reqs, &statuses) != 0) {
        if (cp.active)
            completion_end(&cp);
        return next(incount, reqs, outcount, indices, statuses);
    }
    int ret = next(incount, reqs, outcount, indices, statuses);
    uint64_t t1 = completion_end(&cp);
    for (int k = 0; *outcount != MPI_UNDEFINED && k < *outcount; k++)
        if (indices[k] >= 0 && indices[k] < incount)
            completion_record(&cp, func, rc.reqs[indices[k]], ret, &statuses[k], t1);
    free_requests(&rc);
    return ret;
}

#define SOME_ENTRIES(name, body)                                                \
    IOT_HOT int body##_body(__typeof__(&name) next, int incount, MPI_Request reqs[], \
                            int *outcount, int indices[], MPI_Status statuses[])    \
    {                                                                           \
        return some_common(IOT_F_MPIIO_##name, incount, reqs, outcount, indices,  \
                           statuses, next);                                     \
    }                                                                           \
    COMPLETION_ENTRIES(name, body,                                              \
                       (int incount, MPI_Request reqs[], int *outcount, int indices[], \
                        MPI_Status statuses[]),                                 \
                       (incount, reqs, outcount, indices, statuses))

SOME_ENTRIES(MPI_Waitsome, waitsome)
SOME_ENTRIES(MPI_Testsome, testsome)

/* ---- MPI_Init / MPI_Finalize ----------------------------------------------- */

/* Without a launcher-provided job id, rank 0 names the job and tells the
 * others.  Every rank passes through here when the library is preloaded into
 * all of them, which is how it is meant to be used. */
static void agree_on_job(void)
{
    if (iot_g.job[0] || !pmpi.bcast)
        return;
    char id[128] = "";
    if (iot_g.rank == 0) {
        char host[64] = "localhost";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        char *dot = strchr(host, '.');
        if (dot)
            *dot = '\0';
        snprintf(id, sizeof id, "%s.%d.%lld", host, (int)getpid(), (long long)time(NULL));
    }
    if (pmpi.bcast(id, (int)sizeof id, MPI_CHAR, 0, MPI_COMM_WORLD) == MPI_SUCCESS)
        iot_set_job(id);
}

/* Once however MPI_Init is reached: a tool loaded before iotrace calls
 * PMPI_Init, one linked after it may call both names. */
static void after_init(void)
{
    static atomic_flag done = ATOMIC_FLAG_INIT;
    if (!iot_recording() || atomic_flag_test_and_set(&done))
        return;
    iot_t.internal++;
    resolve_pmpi();
    ensure_rank();
    agree_on_job();
    iot_t.internal--;
    iot_debug_log("rank %d of job %s", iot_g.rank, iot_g.job);
    /* What was sent before names no rank: the batch that names it goes out
     * now rather than at the next flush, in case the launcher kills the
     * rank before then (sender.c, renamed()). */
    iot_sender_kick();
}

/* Both names of each: a tool loaded before iotrace forwards MPI_Init and
 * MPI_Finalize to the PMPI_ names, and iotrace must still see them. */
#define INIT_WRAPPER(name)                                                      \
    int name(int *argc, char ***argv)                                           \
    {                                                                           \
        NEXT(name);                                                             \
        int ret = next_##name(argc, argv);                                      \
        if (ret == MPI_SUCCESS)                                                 \
            after_init();                                                       \
        return ret;                                                             \
    }

#define INIT_THREAD_WRAPPER(name)                                               \
    int name(int *argc, char ***argv, int required, int *provided)              \
    {                                                                           \
        NEXT(name);                                                             \
        int ret = next_##name(argc, argv, required, provided);                  \
        if (ret == MPI_SUCCESS)                                                 \
            after_init();                                                       \
        return ret;                                                             \
    }

#define FINALIZE_WRAPPER(name)                                                  \
    int name(void)                                                              \
    {                                                                           \
        NEXT(name);                                                             \
        int ret = next_##name();                                                \
        if (atomic_load(&iot_g.active))                                         \
            iot_sender_flush(2000);                                             \
        return ret;                                                             \
    }

/* MPI_Abort ends this process and, through the launcher, every other of
 * the job, without the exit handlers that hand over what the rank recorded
 * (MPICH's PMI abort, then the launcher's signals): what it recorded would
 * vanish uncounted.  So it goes out first, as at exit: the last sweep, the
 * agent's reading of it within IOTRACE_LINGER_MS and the running total in
 * the drop box; only then does the abort go on.  Through either name, once
 * (a tool's MPI_Abort forwarding to PMPI_Abort finds the sender stopped). */
#define ABORT_WRAPPER(name)                                                     \
    int name(MPI_Comm comm, int errorcode)                                      \
    {                                                                           \
        NEXT(name);                                                             \
        if (atomic_load(&iot_g.initialised) && !iot_g.cfg.disabled) {           \
            iot_t.internal++;                                                   \
            ensure_rank();                                                      \
            iot_debug_log("MPI_Abort(%d): handing over what was recorded",     \
                          errorcode);                                           \
            iot_sender_stop();                                                  \
            iot_t.internal--;                                                   \
        }                                                                       \
        return next_##name(comm, errorcode);                                    \
    }

INIT_WRAPPER(MPI_Init)
INIT_WRAPPER(PMPI_Init)
INIT_THREAD_WRAPPER(MPI_Init_thread)
INIT_THREAD_WRAPPER(PMPI_Init_thread)
FINALIZE_WRAPPER(MPI_Finalize)
FINALIZE_WRAPPER(PMPI_Finalize)
ABORT_WRAPPER(MPI_Abort)
ABORT_WRAPPER(PMPI_Abort)
