/* POSIX and stdio interposition.
 *
 * Only descriptors the process opened by path are traced (see the fd table
 * in core.c); sockets, pipes, terminals and ZeroMQ's own descriptors pass
 * straight through, which is also how iotrace never records its own I/O.
 * Each record carries the CallID of the MPI-IO call running on the thread,
 * 0 outside MPI-IO. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "iot_functions.h"

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);

static inline int posix_tracing(void) { return iot_posix_recording(); }

/* What posix_tracing() tests, as the enum iot_posix_mode (0: not tracing). */
static inline int posix_mode(void)
{
    return iot_t.internal ? IOT_POSIX_OFF
                          : atomic_load_explicit(&iot_g.posix_on, memory_order_relaxed);
}

/* A shared-file-pointer MPI-IO call learns where it landed from its
 * first transfer on its own file; mpi_offset is negative only while such a
 * call waits for it (mpiio.c, begin_scope). */
static inline void follow_mpi_offset(uint64_t file, int64_t off, uint64_t bytes)
{
    if (IOT_UNLIKELY(iot_t.mpi_offset < 0) && file == iot_t.mpi_file && off >= 0 && bytes)
        iot_t.mpi_offset = off;
}

/* IOTRACE_POSIX=outside: a call made for an MPI-IO call (it has its
 * CallID, on the call's thread or on an aio worker) is followed as before,
 * file names, positions and offsets included, but not recorded. */
static inline int made_for_mpiio_unrecorded(void)
{
    return IOT_UNLIKELY(iot_t.callid) &&
           atomic_load_explicit(&iot_g.posix_on, memory_order_relaxed) == IOT_POSIX_OUTSIDE;
}

static inline void put_record(unsigned func, uint64_t file, int64_t off, uint64_t bytes,
                              uint64_t t0, uint64_t t1, int64_t ret)
{
    struct iot_wr w;
    struct iot_rec *r = iot_rec_begin(&w, 1);
    if (!r)
        return;
    r->t0 = t0;
    r->callid = iot_t.callid;
    r->file = file;
    r->offset = off;
    r->bytes = bytes;
    r->t1 = t1;
    r->ret = ret;
    r->func = (uint16_t)func;
    r->kind = IOT_REC_POSIX;
    iot_rec_end(&w, 1);
}

static inline void posix_record(unsigned func, uint64_t file, int64_t off, uint64_t bytes,
                                uint64_t t0, uint64_t t1, int64_t ret)
{
    follow_mpi_offset(file, off, bytes);
    if (!made_for_mpiio_unrecorded())
        put_record(func, file, off, bytes, t0, t1, ret);
}

static uint64_t iov_bytes(const struct iovec *iov, int n)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++)
        b += iov[i].iov_len;
    return b;
}

/* ---- opening -------------------------------------------------------------- */

static int wants_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }

static int opened(unsigned func, const char *path, int flags, uint64_t t0, int fd)
{
    int saved = errno;
    uint64_t t1 = iot_clock_raw();
    uint64_t file = 0;
    if (fd < 0) {
        /* A failed open of a file left out (hwloc probing /sys) is left
         * out too. */
        iot_t.internal++;
        int excluded = iot_file_excluded(path);
        iot_t.internal--;
        if (excluded) {
            errno = saved;
            return fd;
        }
    } else {
        iot_t.internal++;
        file = iot_file_register(path);
        iot_t.internal--;
        /* A file left out is not followed at all: its descriptor stays
         * untraced, and its open is not recorded either. */
        if (file == IOT_FILE_UNTRACED) {
            iot_fd_open(fd, 0, 0);
            errno = saved;
            return fd;
        }
        iot_fd_open(fd, file, flags & O_APPEND);
    }
    posix_record(func, file, -1, 0, t0, t1, fd < 0 ? -saved : fd);
    errno = saved;
    return fd;
}

#define IOT_OPEN_WRAPPER(name, id)                                                  \
    int name(const char *path, int flags, ...)                                      \
    {                                                                               \
        mode_t mode = 0;                                                            \
        if (wants_mode(flags)) {                                                    \
            va_list ap;                                                             \
            va_start(ap, flags);                                                    \
            mode = va_arg(ap, mode_t);                                              \
            va_end(ap);                                                             \
        }                                                                           \
        IOT_NEXT(name, -1);                                                         \
        if (!posix_tracing())                                                       \
            return next_##name(path, flags, mode);                                  \
        uint64_t t0 = iot_clock_raw();                                              \
        return opened(id, path, flags, t0, next_##name(path, flags, mode));         \
    }

IOT_OPEN_WRAPPER(open, IOT_F_POSIX_open)
IOT_OPEN_WRAPPER(open64, IOT_F_POSIX_open64)

/* A name relative to another directory (hwloc walks /sys that way) is made
 * absolute from that directory's own path, so that it is named, and left
 * out by IOTRACE_EXCLUDE, like any other; only then is a system call made,
 * and errno is kept. */
static const char *at_path(int dirfd, const char *path, int fd, char *full)
{
    if (fd < 0 || dirfd == AT_FDCWD || !path || path[0] == '/')
        return path;
    int saved = errno;
    char link[32];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(link, full, 4096 - 2);
    size_t len = strlen(path);
    errno = saved;
    if (n <= 0 || (size_t)n + 1 + len >= 4096)
        return path;
    full[n] = '/';
    memcpy(full + n + 1, path, len + 1);
    return full;
}

#define IOT_OPENAT_WRAPPER(name, id)                                                \
    int name(int dirfd, const char *path, int flags, ...)                           \
    {                                                                               \
        mode_t mode = 0;                                                            \
        if (wants_mode(flags)) {                                                    \
            va_list ap;                                                             \
            va_start(ap, flags);                                                    \
            mode = va_arg(ap, mode_t);                                              \
            va_end(ap);                                                             \
        }                                                                           \
        IOT_NEXT(name, -1);                                                         \
        if (!posix_tracing())                                                       \
            return next_##name(dirfd, path, flags, mode);                           \
        uint64_t t0 = iot_clock_raw();                                              \
        int fd = next_##name(dirfd, path, flags, mode);                             \
        char full[4096];                                                            \
        return opened(id, at_path(dirfd, path, fd, full), flags, t0, fd);           \
    }

IOT_OPENAT_WRAPPER(openat, IOT_F_POSIX_openat)
IOT_OPENAT_WRAPPER(openat64, IOT_F_POSIX_openat64)

#define IOT_OPEN2_WRAPPER(name, id)                                                 \
    int name(const char *path, int flags)                                           \
    {                                                                               \
        IOT_NEXT(name, -1);                                                         \
        if (!posix_tracing())                                                       \
            return next_##name(path, flags);                                        \
        uint64_t t0 = iot_clock_raw();                                              \
        return opened(id, path, flags, t0, next_##name(path, flags));               \
    }

IOT_OPEN2_WRAPPER(__open_2, IOT_F_POSIX_open_2)
IOT_OPEN2_WRAPPER(__open64_2, IOT_F_POSIX_open64_2)

#define IOT_CREAT_WRAPPER(name, id)                                                 \
    int name(const char *path, mode_t mode)                                         \
    {                                                                               \
        IOT_NEXT(name, -1);                                                         \
        if (!posix_tracing())                                                       \
            return next_##name(path, mode);                                         \
        uint64_t t0 = iot_clock_raw();                                              \
        return opened(id, path, O_CREAT | O_WRONLY | O_TRUNC, t0, next_##name(path, mode)); \
    }

IOT_CREAT_WRAPPER(creat, IOT_F_POSIX_creat)
IOT_CREAT_WRAPPER(creat64, IOT_F_POSIX_creat64)

int close(int fd)
{
    IOT_NEXT(close, -1);
    /* The library's connection to the agent: not the program's to close,
     * and, for the program, not open (fdguard.c). */
    if (IOT_UNLIKELY(fd >= 0 && fd == iot_sender_fd())) {
        errno = EBADF;
        return -1;
    }
    uint64_t file = iot_fd_file(fd);
    if (IOT_LIKELY(!file) || !posix_tracing())
        return next_close(fd);
    iot_fd_close(fd);
    uint64_t t0 = iot_clock_raw();
    int ret = next_close(fd);
    int saved = errno;
    posix_record(IOT_F_POSIX_close, file, -1, 0, t0, iot_clock_raw(), ret < 0 ? -saved : ret);
    errno = saved;
    return ret;
}

/* ---- data transfer and the rest -------------------------------------------- */

/* moves: 1 when the call advances the descriptor's position (read, write,
 * readv, writev, and the v2 forms at offset -1).
 * errno is read only when the call failed: recording leaves it alone (see
 * iot_rec_reserve), and __errno_location is a call through the PLT. */
#define IOT_FD_WRAPPER(ret_t, name, id, params, args, fd, off_expr, bytes_expr, moves) \
    ret_t name params                                                               \
    {                                                                               \
        IOT_NEXT(name, (ret_t)-1);                                                  \
        uint64_t file = iot_fd_file(fd);                                            \
        int mode;                                                                   \
        if (IOT_LIKELY(!file) || !(mode = posix_mode()))                            \
            return next_##name args;                                                \
        int64_t off = (off_expr);                                                   \
        if (IOT_UNLIKELY(mode == IOT_POSIX_OUTSIDE) && iot_t.callid) {              \
            /* made_for_mpiio_unrecorded(), with no clock reading */               \
            follow_mpi_offset(file, off, (bytes_expr));                             \
            ret_t ret = next_##name args;                                           \
            if ((moves) && ret > 0 && off >= 0)                                     \
                iot_fd_set_pos(fd, off + (int64_t)ret);                             \
            return ret;                                                             \
        }                                                                           \
        uint64_t t0 = iot_clock_raw();                                              \
        ret_t ret = next_##name args;                                               \
        uint64_t t1 = iot_clock_raw();                                              \
        int64_t res = IOT_UNLIKELY(ret < 0) ? -(int64_t)errno : (int64_t)ret;       \
        if ((moves) && ret > 0 && off >= 0)                                         \
            iot_fd_set_pos(fd, off + (int64_t)ret);                                 \
        uint64_t bytes = (bytes_expr);                                              \
        follow_mpi_offset(file, off, bytes);                                        \
        put_record(id, file, off, bytes, t0, t1, res);                              \
        return ret;                                                                 \
    }

IOT_FD_WRAPPER(ssize_t, read, IOT_F_POSIX_read, (int fd, void *buf, size_t n), (fd, buf, n), fd,
               iot_fd_pos(fd), n, 1)
IOT_FD_WRAPPER(ssize_t, write, IOT_F_POSIX_write, (int fd, const void *buf, size_t n),
               (fd, buf, n), fd, iot_fd_pos(fd), n, 1)
IOT_FD_WRAPPER(ssize_t, pread, IOT_F_POSIX_pread, (int fd, void *buf, size_t n, off_t o),
               (fd, buf, n, o), fd, o, n, 0)
IOT_FD_WRAPPER(ssize_t, pread64, IOT_F_POSIX_pread64, (int fd, void *buf, size_t n, off64_t o),
               (fd, buf, n, o), fd, o, n, 0)
IOT_FD_WRAPPER(ssize_t, pwrite, IOT_F_POSIX_pwrite, (int fd, const void *buf, size_t n, off_t o),
               (fd, buf, n, o), fd, o, n, 0)
IOT_FD_WRAPPER(ssize_t, pwrite64, IOT_F_POSIX_pwrite64,
               (int fd, const void *buf, size_t n, off64_t o), (fd, buf, n, o), fd, o, n, 0)
IOT_FD_WRAPPER(ssize_t, readv, IOT_F_POSIX_readv, (int fd, const struct iovec *iov, int cnt),
               (fd, iov, cnt), fd, iot_fd_pos(fd), iov_bytes(iov, cnt), 1)
IOT_FD_WRAPPER(ssize_t, writev, IOT_F_POSIX_writev, (int fd, const struct iovec *iov, int cnt),
               (fd, iov, cnt), fd, iot_fd_pos(fd), iov_bytes(iov, cnt), 1)
IOT_FD_WRAPPER(ssize_t, preadv, IOT_F_POSIX_preadv,
               (int fd, const struct iovec *iov, int cnt, off_t o), (fd, iov, cnt, o), fd, o,
               iov_bytes(iov, cnt), 0)
IOT_FD_WRAPPER(ssize_t, preadv64, IOT_F_POSIX_preadv64,
               (int fd, const struct iovec *iov, int cnt, off64_t o), (fd, iov, cnt, o), fd, o,
               iov_bytes(iov, cnt), 0)
IOT_FD_WRAPPER(ssize_t, pwritev, IOT_F_POSIX_pwritev,
               (int fd, const struct iovec *iov, int cnt, off_t o), (fd, iov, cnt, o), fd, o,
               iov_bytes(iov, cnt), 0)
IOT_FD_WRAPPER(ssize_t, pwritev64, IOT_F_POSIX_pwritev64,
               (int fd, const struct iovec *iov, int cnt, off64_t o), (fd, iov, cnt, o), fd, o,
               iov_bytes(iov, cnt), 0)
IOT_FD_WRAPPER(ssize_t, preadv2, IOT_F_POSIX_preadv2,
               (int fd, const struct iovec *iov, int cnt, off_t o, int fl),
               (fd, iov, cnt, o, fl), fd, o == -1 ? iot_fd_pos(fd) : o, iov_bytes(iov, cnt),
               o == -1)
IOT_FD_WRAPPER(ssize_t, pwritev2, IOT_F_POSIX_pwritev2,
               (int fd, const struct iovec *iov, int cnt, off_t o, int fl),
               (fd, iov, cnt, o, fl), fd, o == -1 ? iot_fd_pos(fd) : o, iov_bytes(iov, cnt),
               o == -1)
IOT_FD_WRAPPER(ssize_t, preadv64v2, IOT_F_POSIX_preadv64v2,
               (int fd, const struct iovec *iov, int cnt, off64_t o, int fl),
               (fd, iov, cnt, o, fl), fd, o == -1 ? iot_fd_pos(fd) : o, iov_bytes(iov, cnt),
               o == -1)
IOT_FD_WRAPPER(ssize_t, pwritev64v2, IOT_F_POSIX_pwritev64v2,
               (int fd, const struct iovec *iov, int cnt, off64_t o, int fl),
               (fd, iov, cnt, o, fl), fd, o == -1 ? iot_fd_pos(fd) : o, iov_bytes(iov, cnt),
               o == -1)
IOT_FD_WRAPPER(int, fsync, IOT_F_POSIX_fsync, (int fd), (fd), fd, -1, 0, 0)
IOT_FD_WRAPPER(int, fdatasync, IOT_F_POSIX_fdatasync, (int fd), (fd), fd, -1, 0, 0)
IOT_FD_WRAPPER(int, ftruncate, IOT_F_POSIX_ftruncate, (int fd, off_t len), (fd, len), fd, len, 0, 0)
IOT_FD_WRAPPER(int, ftruncate64, IOT_F_POSIX_ftruncate64, (int fd, off64_t len), (fd, len), fd,
               len, 0, 0)

#define IOT_SEEK_WRAPPER(name, id, off_type)                                        \
    off_type name(int fd, off_type off, int whence)                                 \
    {                                                                               \
        IOT_NEXT(name, (off_type)-1);                                               \
        uint64_t file = iot_fd_file(fd);                                            \
        if (IOT_LIKELY(!file) || !posix_tracing())                                  \
            return next_##name(fd, off, whence);                                    \
        uint64_t t0 = iot_clock_raw();                                              \
        off_type ret = next_##name(fd, off, whence);                                \
        uint64_t t1 = iot_clock_raw();                                              \
        int64_t res = IOT_UNLIKELY(ret < 0) ? -(int64_t)errno : (int64_t)ret;       \
        if (ret >= 0)                                                               \
            iot_fd_set_pos(fd, ret);                                                \
        posix_record(id, file, ret >= 0 ? ret : -1, 0, t0, t1, res);                \
        return ret;                                                                 \
    }

IOT_SEEK_WRAPPER(lseek, IOT_F_POSIX_lseek, off_t)
IOT_SEEK_WRAPPER(lseek64, IOT_F_POSIX_lseek64, off64_t)

/* ---- stdio ------------------------------------------------------------------ */

#define IOT_FOPEN_WRAPPER(name, id)                                                 \
    FILE *name(const char *path, const char *mode)                                  \
    {                                                                               \
        IOT_NEXT(name, NULL);                                                       \
        if (!posix_tracing())                                                       \
            return next_##name(path, mode);                                         \
        uint64_t t0 = iot_clock_raw();                                              \
        FILE *fp = next_##name(path, mode);                                         \
        int append = mode && mode[0] == 'a';                                        \
        opened(id, path, append ? O_APPEND : 0, t0, fp ? fileno(fp) : -1);          \
        return fp;                                                                  \
    }

IOT_FOPEN_WRAPPER(fopen, IOT_F_POSIX_fopen)
IOT_FOPEN_WRAPPER(fopen64, IOT_F_POSIX_fopen64)

/* stdio buffers, so the file position is not known without asking the
 * library (which may seek): stdio records have no offset. */
#define IOT_STDIO_WRAPPER(name, id, buf_type)                                       \
    size_t name(buf_type buf, size_t size, size_t n, FILE *fp)                      \
    {                                                                               \
        IOT_NEXT(name, 0);                                                          \
        uint64_t file = iot_fd_file(fileno(fp));                           \
        if (IOT_LIKELY(!file) || !posix_tracing())                                  \
            return next_##name(buf, size, n, fp);                                   \
        uint64_t t0 = iot_clock_raw();                                              \
        size_t ret = next_##name(buf, size, n, fp);                                 \
        uint64_t t1 = iot_clock_raw();                                              \
        int saved = errno;                                                          \
        posix_record(id, file, -1, (uint64_t)size * n, t0, t1, (int64_t)(ret * size)); \
        errno = saved;                                                              \
        return ret;                                                                 \
    }

IOT_STDIO_WRAPPER(fread, IOT_F_POSIX_fread, void *)
IOT_STDIO_WRAPPER(fwrite, IOT_F_POSIX_fwrite, const void *)

int fclose(FILE *fp)
{
    IOT_NEXT(fclose, EOF);
    int fd = fileno(fp);
    uint64_t file = iot_fd_file(fd);
    if (IOT_LIKELY(!file) || !posix_tracing())
        return next_fclose(fp);
    iot_fd_close(fd);
    uint64_t t0 = iot_clock_raw();
    int ret = next_fclose(fp);
    int saved = errno;
    posix_record(IOT_F_POSIX_fclose, file, -1, 0, t0, iot_clock_raw(), ret == EOF ? -saved : ret);
    errno = saved;
    return ret;
}
