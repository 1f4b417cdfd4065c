/* The program's descriptors are the program's.  The library holds one of
 * its own, its connection to the agent (common/zpush.h), which the program
 * never opened and must not be able to close or overwrite: shells do
 * `exec 7>file` (dup2 onto 7), daemons close every descriptor, programs
 * call closefrom(3) or close_range(3, ~0U, 0) before exec.  These wrappers,
 * with the check in close() (posix.c), make the library's descriptor
 * invisible to such calls: closing it says EBADF, as for a number that is
 * not open, a range leaves it out, and a dup2()/dup3() that names it for
 * one of the program's files first moves the socket elsewhere
 * (iot_sender_vacate_fd), so that the program gets the number it asked
 * for and the library keeps its connection.  fcntl() and dup() of it say
 * EBADF too: bash asks fcntl(N, F_GETFD) before `exec N>file`, and saves
 * and then restores a number it finds open, which untraced is not. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client.h"

/* The number was the library's and was moved off for the program, but the
 * program's call then failed: close the old copy, or the program would find
 * open a number that, untraced, it would not have. */
static void undo_vacate(int fd)
{
    int saved = errno;
    syscall(SYS_close, fd);
    errno = saved;
}

int dup2(int oldfd, int newfd)
{
    IOT_NEXT(dup2, -1);
    int ours = iot_sender_fd();
    if (IOT_LIKELY(ours < 0) || (oldfd != ours && newfd != ours))
        return next_dup2(oldfd, newfd);
    if (oldfd == ours) {
        errno = EBADF;
        return -1;
    }
    int moved = iot_sender_vacate_fd(newfd);
    int ret = next_dup2(oldfd, newfd);
    if (ret < 0 && moved)
        undo_vacate(newfd);
    return ret;
}

int dup3(int oldfd, int newfd, int flags)
{
    IOT_NEXT(dup3, -1);
    int ours = iot_sender_fd();
    if (IOT_LIKELY(ours < 0) || (oldfd != ours && newfd != ours))
        return next_dup3(oldfd, newfd, flags);
    if (oldfd == ours) {
        errno = EBADF;
        return -1;
    }
    int moved = iot_sender_vacate_fd(newfd);
    int ret = next_dup3(oldfd, newfd, flags);
    if (ret < 0 && moved)
        undo_vacate(newfd);
    return ret;
}

int dup(int oldfd)
{
    IOT_NEXT(dup, -1);
    if (IOT_UNLIKELY(oldfd >= 0 && oldfd == iot_sender_fd())) {
        errno = EBADF;
        return -1;
    }
    return next_dup(oldfd);
}

/* Every command's third argument fits a register, int or pointer, as the
 * x86-64 and AArch64 calling conventions pass both. */
#define IOT_FCNTL_WRAPPER(name)                                                     \
    int name(int fd, int cmd, ...)                                              \
    {                                                                           \
        IOT_NEXT(name, -1);                                                     \
        va_list ap;                                                             \
        va_start(ap, cmd);                                                      \
        void *arg = va_arg(ap, void *);                                         \
        va_end(ap);                                                             \
        if (IOT_UNLIKELY(fd >= 0 && fd == iot_sender_fd())) {                   \
            errno = EBADF;                                                      \
            return -1;                                                          \
        }                                                                       \
        return next_##name(fd, cmd, arg);                                       \
    }

IOT_FCNTL_WRAPPER(fcntl)
IOT_FCNTL_WRAPPER(fcntl64)

/* close_range(2) of [first, last] without `ours`, as two ranges. */
static int range_without(unsigned first, unsigned last, int flags, int ours,
                         int (*closer)(unsigned, unsigned, int))
{
    if (ours < 0 || (unsigned)ours < first || (unsigned)ours > last)
        return closer(first, last, flags);
    int ret = 0;
    if ((unsigned)ours > first)
        ret = closer(first, (unsigned)ours - 1, flags);
    if (ret == 0 && (unsigned)ours < last)
        ret = closer((unsigned)ours + 1, last, flags);
    return ret;
}

int close_range(unsigned first, unsigned last, int flags)
{
    IOT_NEXT(close_range, -1);
    return range_without(first, last, flags, iot_sender_fd(), next_close_range);
}

static int sys_close_range(unsigned first, unsigned last, int flags)
{
    return (int)syscall(SYS_close_range, first, last, flags);
}

/* glibc's closefrom() calls the system call itself, past any wrapper of
 * close_range(); before Linux 5.9 it falls back on closing what
 * /proc/self/fd lists, which the library's own fallback leaves to it. */
void closefrom(int lowfd)
{
    IOT_NEXT(closefrom, );
    int ours = iot_sender_fd();
    if (IOT_LIKELY(ours < 0) || lowfd < 0 || ours < lowfd) {
        next_closefrom(lowfd);
        return;
    }
    int saved = errno;
    if (range_without((unsigned)lowfd, ~0U, 0, ours, sys_close_range) != 0 && errno == ENOSYS) {
        for (int fd = lowfd; fd < ours; fd++)
            syscall(SYS_close, fd);
        next_closefrom(ours + 1);
    }
    errno = saved;
}
