/* A program that replaces itself: bash runs a script's last command with
 * exec, `exec cmd` and every execvp() after a fork do the same.  The old
 * image's records would vanish with it, so each exec function first hands
 * them over (iot_sender_before_exec).  glibc's exec functions call execve
 * internally, past any wrapper, so each one is wrapped; the list-argument
 * ones are rebuilt on their vector forms. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "client.h"

int execve(const char *path, char *const argv[], char *const envp[])
{
    IOT_NEXT(execve, -1);
    iot_sender_before_exec();
    return next_execve(path, argv, envp);
}

int execv(const char *path, char *const argv[])
{
    IOT_NEXT(execv, -1);
    iot_sender_before_exec();
    return next_execv(path, argv);
}

int execvp(const char *file, char *const argv[])
{
    IOT_NEXT(execvp, -1);
    iot_sender_before_exec();
    return next_execvp(file, argv);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
    IOT_NEXT(execvpe, -1);
    iot_sender_before_exec();
    return next_execvpe(file, argv, envp);
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
    IOT_NEXT(fexecve, -1);
    iot_sender_before_exec();
    return next_fexecve(fd, argv, envp);
}

int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    IOT_NEXT(execveat, -1);
    iot_sender_before_exec();
    return next_execveat(dirfd, path, argv, envp, flags);
}

/* The arguments of execl, execlp and execle up to their NULL, as a vector
 * on the stack (as glibc builds it); NULL when there are too many. */
#define MAX_LIST_ARGS 4096

/* glibc declares the first argument non-null, but a program may pass NULL
 * (an empty argv), which execve takes; asked through a function, the
 * compiler does not assume it away. */
static int present(const char *arg) { return arg != NULL; }

static size_t count_args(const char *arg0, va_list ap)
{
    size_t n = 1;
    if (present(arg0))
        while (va_arg(ap, const char *) && n < MAX_LIST_ARGS)
            n++;
    return n;
}

/* In a list-argument exec function: argv, the arguments from arg0 up to
 * their NULL, on the stack (as glibc builds it); E2BIG past MAX_LIST_ARGS.
 * ap is left after the arguments, for execle's envp; the caller ends it. */
#define LIST_ARGV(arg0, ap)                                                         \
    va_list ap;                                                                 \
    va_start(ap, arg0);                                                         \
    size_t n_ = count_args(arg0, ap);                                           \
    va_end(ap);                                                                 \
    if (n_ >= MAX_LIST_ARGS) {                                                  \
        errno = E2BIG;                                                          \
        return -1;                                                              \
    }                                                                           \
    char *argv[n_ + 1];                                                         \
    va_start(ap, arg0);                                                         \
    argv[0] = (char *)(arg0);                                                   \
    for (size_t i_ = 1; i_ < n_; i_++)                                          \
        argv[i_] = va_arg(ap, char *);                                          \
    argv[present(arg0) ? n_ : 0] = NULL

int execl(const char *path, const char *arg0, ...)
{
    LIST_ARGV(arg0, ap);
    va_end(ap);
    return execv(path, argv);
}

int execlp(const char *file, const char *arg0, ...)
{
    LIST_ARGV(arg0, ap);
    va_end(ap);
    return execvp(file, argv);
}

int execle(const char *path, const char *arg0, ...)
{
    LIST_ARGV(arg0, ap);
    if (present(arg0))
        (void)va_arg(ap, char *); /* the NULL after the arguments */
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
