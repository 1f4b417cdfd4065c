/* A stand-in for Darshan, for the tests only (client.other_tool): a
 * preloaded interposer that behaves as Darshan 3.4's runtime does towards
 * the other tools of a process.
 *
 * - It defines MPI_File_* wrappers for a representative set of functions,
 *   with the PMPI_ name of each as an alias of the wrapper, and forwards to
 *   the next PMPI_ definition (dlsym(RTLD_NEXT)).
 * - A per-thread guard counts a call once, however the call comes back to it.
 * - Inside its wrappers it asks MPI things of its own, as Darshan does:
 *   PMPI_Type_size, MPI_File_get_position before an access through the
 *   individual file pointer, and after every access MPI_File_get_byte_offset
 *   (by its MPI_ name, as Darshan 3.4 does) and PMPI_File_get_position.
 * - Like mpiP or Recorder (not Darshan), it wraps MPI_Wait, MPI_Waitall and
 *   MPI_Waitany too, forwarding to PMPI_ (no PMPI_ aliases for these: ROMIO
 *   calls PMPI_Waitall itself).
 * - It wraps POSIX open, close, read, write, pread, pwrite (and their 64
 *   names) with dlsym(RTLD_NEXT) too, and counts those on files whose path
 *   contains $FAKE_TOOL_MATCH, made on the process's main thread.
 * - Built with FAKE_WRAP_QUERIES (fake_recorder), it also wraps the
 *   MPI_File_get_* queries, as Recorder does (Darshan does not), with PMPI_
 *   aliases and forwarding to PMPI_; its own queries above then pass through
 *   these wrappers too (by their MPI_ names), and its MPI_File_get_size asks
 *   MPI_File_get_position of its own before forwarding.
 *
 * At MPI_Finalize each rank writes what it saw, as one JSON object, to
 * $FAKE_TOOL_OUT.<rank>. */
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define FUNCS(X)                                                                                   \
    X(MPI_File_open)                                                                               \
    X(MPI_File_close)                                                                              \
    X(MPI_File_sync)                                                                               \
    X(MPI_File_set_size)                                                                           \
    X(MPI_File_set_view)                                                                           \
    X(MPI_File_read_at)                                                                            \
    X(MPI_File_read_at_all)                                                                        \
    X(MPI_File_write_at)                                                                           \
    X(MPI_File_write_at_all)                                                                       \
    X(MPI_File_read)                                                                               \
    X(MPI_File_read_all)                                                                           \
    X(MPI_File_write)                                                                              \
    X(MPI_File_write_all)                                                                          \
    X(MPI_File_read_shared)                                                                        \
    X(MPI_File_write_shared)                                                                       \
    X(MPI_File_read_ordered)                                                                       \
    X(MPI_File_write_ordered)                                                                      \
    X(MPI_File_iread_at)                                                                           \
    X(MPI_File_iwrite_at)                                                                          \
    X(MPI_File_iread)                                                                              \
    X(MPI_File_iwrite)                                                                             \
    X(MPI_File_iwrite_at_all)                                                                      \
    X(MPI_File_iread_all)                                                                          \
    X(MPI_File_write_at_all_begin)                                                                 \
    X(MPI_File_read_all_begin)                                                                     \
    X(MPI_Wait)                                                                                    \
    X(MPI_Waitall)                                                                                 \
    X(MPI_Waitany)                                                                                 \
    QUERY_FUNCS(X)

#ifdef FAKE_WRAP_QUERIES
#define QUERY_FUNCS(X)                                                                             \
    X(MPI_File_get_size)                                                                           \
    X(MPI_File_get_position)                                                                       \
    X(MPI_File_get_position_shared)                                                                \
    X(MPI_File_get_byte_offset)                                                                    \
    X(MPI_File_get_view)                                                                           \
    X(MPI_File_get_info)                                                                           \
    X(MPI_File_get_amode)                                                                          \
    X(MPI_File_get_group)
#else
#define QUERY_FUNCS(X)
#endif

#define POSIX(X)                                                                                   \
    X(open) X(open64) X(close) X(read) X(write) X(pread) X(pread64) X(pwrite) X(pwrite64)

#define ENUM(name) F_##name,
#define PENUM(name) P_##name,
enum { FUNCS(ENUM) F_COUNT };
enum { POSIX(PENUM) P_COUNT };
#define NAME(name) #name,
static const char *const func_names[] = {FUNCS(NAME)};
static const char *const posix_names[] = {POSIX(NAME)};

static unsigned long seen[F_COUNT], posix_seen[P_COUNT], queries;
static __thread int depth;

static void *next_of(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "fake_darshan: no next %s\n", name);
        abort();
    }
    return p;
}

/* What Darshan asks after an access (MPIIO_RECORD_READ/WRITE). */
static void ask_after(MPI_File fh, MPI_Offset offset, MPI_Datatype type)
{
    int size;
    MPI_Offset disp, pos;
    PMPI_Type_size(type, &size);
    MPI_File_get_byte_offset(fh, offset, &disp);
    PMPI_File_get_position(fh, &pos);
    queries += 2;
}

/* And before an access through the individual file pointer. */
static MPI_Offset ask_before(MPI_File fh)
{
    MPI_Offset pos = 0;
    MPI_File_get_position(fh, &pos);
    queries++;
    return pos;
}

#define ENTER(name, next_args)                                                                     \
    static __typeof__(&P##name) next;                                                             \
    if (!next)                                                                                     \
        next = (__typeof__(&P##name))next_of("P" #name);                                           \
    if (depth)                                                                                     \
        return next next_args;                                                                     \
    depth++

#define LEAVE(name)                                                                                \
    seen[F_##name]++;                                                                              \
    depth--;                                                                                       \
    return ret

#define ALIAS(name, params) int P##name params __attribute__((alias(#name)));

#define RW_AT(name, q, last)                                                                       \
    int name(MPI_File fh, MPI_Offset offset, q void *buf, int count, MPI_Datatype type, last *x)   \
    {                                                                                              \
        ENTER(name, (fh, offset, buf, count, type, x));                                            \
        int ret = next(fh, offset, buf, count, type, x);                                           \
        ask_after(fh, offset, type);                                                               \
        LEAVE(name);                                                                               \
    }                                                                                              \
    ALIAS(name, (MPI_File, MPI_Offset, q void *, int, MPI_Datatype, last *))

#define RW_IND(name, q, last)                                                                      \
    int name(MPI_File fh, q void *buf, int count, MPI_Datatype type, last *x)                      \
    {                                                                                              \
        ENTER(name, (fh, buf, count, type, x));                                                    \
        MPI_Offset pos = ask_before(fh);                                                           \
        int ret = next(fh, buf, count, type, x);                                                   \
        ask_after(fh, pos, type);                                                                  \
        LEAVE(name);                                                                               \
    }                                                                                              \
    ALIAS(name, (MPI_File, q void *, int, MPI_Datatype, last *))

RW_AT(MPI_File_read_at, , MPI_Status)
RW_AT(MPI_File_read_at_all, , MPI_Status)
RW_AT(MPI_File_write_at, const, MPI_Status)
RW_AT(MPI_File_write_at_all, const, MPI_Status)
RW_AT(MPI_File_iread_at, , MPI_Request)
RW_AT(MPI_File_iwrite_at, const, MPI_Request)
RW_AT(MPI_File_iwrite_at_all, const, MPI_Request)
RW_IND(MPI_File_read, , MPI_Status)
RW_IND(MPI_File_read_all, , MPI_Status)
RW_IND(MPI_File_write, const, MPI_Status)
RW_IND(MPI_File_write_all, const, MPI_Status)
RW_IND(MPI_File_read_shared, , MPI_Status)
RW_IND(MPI_File_write_shared, const, MPI_Status)
RW_IND(MPI_File_read_ordered, , MPI_Status)
RW_IND(MPI_File_write_ordered, const, MPI_Status)
RW_IND(MPI_File_iread, , MPI_Request)
RW_IND(MPI_File_iwrite, const, MPI_Request)
RW_IND(MPI_File_iread_all, , MPI_Request)

int MPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                                MPI_Datatype type)
{
    ENTER(MPI_File_write_at_all_begin, (fh, offset, buf, count, type));
    int ret = next(fh, offset, buf, count, type);
    ask_after(fh, offset, type);
    LEAVE(MPI_File_write_at_all_begin);
}
ALIAS(MPI_File_write_at_all_begin, (MPI_File, MPI_Offset, const void *, int, MPI_Datatype))

int MPI_File_read_all_begin(MPI_File fh, void *buf, int count, MPI_Datatype type)
{
    ENTER(MPI_File_read_all_begin, (fh, buf, count, type));
    MPI_Offset pos = ask_before(fh);
    int ret = next(fh, buf, count, type);
    ask_after(fh, pos, type);
    LEAVE(MPI_File_read_all_begin);
}
ALIAS(MPI_File_read_all_begin, (MPI_File, void *, int, MPI_Datatype))

int MPI_File_open(MPI_Comm comm, const char *path, int amode, MPI_Info info, MPI_File *fh)
{
    ENTER(MPI_File_open, (comm, path, amode, info, fh));
    int ret = next(comm, path, amode, info, fh);
    int size;
    PMPI_Comm_size(comm, &size);
    LEAVE(MPI_File_open);
}
ALIAS(MPI_File_open, (MPI_Comm, const char *, int, MPI_Info, MPI_File *))

int MPI_File_close(MPI_File *fh)
{
    ENTER(MPI_File_close, (fh));
    int ret = next(fh);
    LEAVE(MPI_File_close);
}
ALIAS(MPI_File_close, (MPI_File *))

int MPI_File_sync(MPI_File fh)
{
    ENTER(MPI_File_sync, (fh));
    int ret = next(fh);
    LEAVE(MPI_File_sync);
}
ALIAS(MPI_File_sync, (MPI_File))

int MPI_File_set_size(MPI_File fh, MPI_Offset size)
{
    ENTER(MPI_File_set_size, (fh, size));
    int ret = next(fh, size);
    LEAVE(MPI_File_set_size);
}
ALIAS(MPI_File_set_size, (MPI_File, MPI_Offset))

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                      const char *datarep, MPI_Info info)
{
    ENTER(MPI_File_set_view, (fh, disp, etype, filetype, datarep, info));
    int ret = next(fh, disp, etype, filetype, datarep, info);
    LEAVE(MPI_File_set_view);
}
ALIAS(MPI_File_set_view, (MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char *, MPI_Info))

#ifdef FAKE_WRAP_QUERIES
/* Queries, as Recorder wraps them: counted when the application asks,
 * forwarded to PMPI_ by a call (not a tail call: the count comes after). */
#define QUERY(name, params, args)                                                                  \
    int name params                                                                                \
    {                                                                                              \
        ENTER(name, args);                                                                         \
        int ret = next args;                                                                       \
        LEAVE(name);                                                                               \
    }                                                                                              \
    ALIAS(name, params)

QUERY(MPI_File_get_position, (MPI_File fh, MPI_Offset *x), (fh, x))
QUERY(MPI_File_get_position_shared, (MPI_File fh, MPI_Offset *x), (fh, x))
QUERY(MPI_File_get_byte_offset, (MPI_File fh, MPI_Offset off, MPI_Offset *disp), (fh, off, disp))
QUERY(MPI_File_get_view,
      (MPI_File fh, MPI_Offset *disp, MPI_Datatype *etype, MPI_Datatype *filetype, char *rep),
      (fh, disp, etype, filetype, rep))
QUERY(MPI_File_get_info, (MPI_File fh, MPI_Info *info), (fh, info))
QUERY(MPI_File_get_amode, (MPI_File fh, int *amode), (fh, amode))
QUERY(MPI_File_get_group, (MPI_File fh, MPI_Group *group), (fh, group))

/* With a query of its own inside, through its own wrapper (which the guard
 * sends straight on to PMPI_File_get_position). */
int MPI_File_get_size(MPI_File fh, MPI_Offset *size)
{
    ENTER(MPI_File_get_size, (fh, size));
    ask_before(fh);
    int ret = next(fh, size);
    LEAVE(MPI_File_get_size);
}
ALIAS(MPI_File_get_size, (MPI_File, MPI_Offset *))
#endif

/* Completion: no guard needed, nothing of ours runs inside. */
#define COMPLETION(name, params, args)                                                             \
    int name params                                                                                \
    {                                                                                              \
        static __typeof__(&P##name) next;                                                         \
        if (!next)                                                                                 \
            next = (__typeof__(&P##name))next_of("P" #name);                                       \
        if (!depth)                                                                                \
            seen[F_##name]++;                                                                      \
        return next args;                                                                          \
    }

COMPLETION(MPI_Wait, (MPI_Request * r, MPI_Status *st), (r, st))
COMPLETION(MPI_Waitall, (int n, MPI_Request r[], MPI_Status st[]), (n, r, st))
COMPLETION(MPI_Waitany, (int n, MPI_Request r[], int *i, MPI_Status *st), (n, r, i, st))

static void report(void)
{
    const char *out = getenv("FAKE_TOOL_OUT");
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!out)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", out, rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\"rank\": %d, \"queries\": %lu, \"mpi\": {", rank, queries);
    const char *sep = "";
    for (int i = 0; i < F_COUNT; i++, sep = ", ")
        fprintf(f, "%s\"%s\": %lu", sep, func_names[i], seen[i]);
    fprintf(f, "}, \"posix\": {");
    sep = "";
    for (int i = 0; i < P_COUNT; i++, sep = ", ")
        fprintf(f, "%s\"%s\": %lu", sep, posix_names[i], posix_seen[i]);
    fprintf(f, "}}\n");
    fclose(f);
}

int MPI_Finalize(void)
{
    static __typeof__(&PMPI_Finalize) next;
    if (!next)
        next = (__typeof__(&PMPI_Finalize))next_of("PMPI_Finalize");
    report();
    return next();
}
int PMPI_Finalize(void) __attribute__((alias("MPI_Finalize")));

/* ---- POSIX ---------------------------------------------------------------- */

#define FDS 4096
static unsigned char watched[FDS];

static int counted(int fd)
{
    return fd >= 0 && fd < FDS && watched[fd] && gettid() == getpid();
}

static void opened(int fd, const char *path, int func)
{
    const char *match = getenv("FAKE_TOOL_MATCH");
    if (fd < 0 || fd >= FDS || !match || !*match || !strstr(path, match))
        return;
    watched[fd] = 1;
    if (gettid() == getpid())
        posix_seen[func]++;
}

#define OPEN(name)                                                                                 \
    int name(const char *path, int flags, ...)                                                     \
    {                                                                                              \
        static int (*next)(const char *, int, ...);                                                \
        if (!next)                                                                                 \
            next = (int (*)(const char *, int, ...))next_of(#name);                                \
        mode_t mode = 0;                                                                           \
        if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {                               \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            mode = va_arg(ap, mode_t);                                                             \
            va_end(ap);                                                                            \
        }                                                                                          \
        int fd = next(path, flags, mode);                                                          \
        opened(fd, path, P_##name);                                                                \
        return fd;                                                                                 \
    }

OPEN(open)
OPEN(open64)

int close(int fd)
{
    static int (*next)(int);
    if (!next)
        next = (int (*)(int))next_of("close");
    if (counted(fd))
        posix_seen[P_close]++;
    if (fd >= 0 && fd < FDS)
        watched[fd] = 0;
    return next(fd);
}

#define XFER(name, q)                                                                              \
    ssize_t name(int fd, q void *buf, size_t n)                                                    \
    {                                                                                              \
        static ssize_t (*next)(int, q void *, size_t);                                             \
        if (!next)                                                                                 \
            next = (ssize_t(*)(int, q void *, size_t))next_of(#name);                              \
        if (counted(fd))                                                                           \
            posix_seen[P_##name]++;                                                                \
        return next(fd, buf, n);                                                                   \
    }

#define PXFER(name, q, off_type)                                                                   \
    ssize_t name(int fd, q void *buf, size_t n, off_type off)                                      \
    {                                                                                              \
        static ssize_t (*next)(int, q void *, size_t, off_type);                                   \
        if (!next)                                                                                 \
            next = (ssize_t(*)(int, q void *, size_t, off_type))next_of(#name);                    \
        if (counted(fd))                                                                           \
            posix_seen[P_##name]++;                                                                \
        return next(fd, buf, n, off);                                                              \
    }

XFER(read, )
XFER(write, const)
PXFER(pread, , off_t)
PXFER(pwrite, const, off_t)
PXFER(pread64, , off64_t)
PXFER(pwrite64, const, off64_t)
