/* libiotrace-faultfs.so: fault injection for the store, preloaded into a
 * collector by tests only (tests/store_faults_test.py), never built into
 * it.  It wraps the calls the store makes and fails the ones that touch a
 * file under one directory the way a sick disk would, at a chosen call or
 * with a probability, in the manner of SQLite's test VFS.
 *
 *   IOTRACE_FAULT_DIR=DIR   only files under DIR (and DIR itself) are touched
 *   IOTRACE_FAULT=RULE[,RULE...]
 *       RULE = OP:ERR[:after=N][:count=M][:p=P][:file=TEXT][:torn][:dirty]
 *       OP   = open, create (an open with O_EXCL), write, pwrite, fdatasync,
 *              fsync, ftruncate, rename
 *       ERR  = EIO, ENOSPC, EDQUOT, EROFS, or HANG: the call never returns
 *              (the test kills the process at that very point)
 *       after=N  the first N calls of OP on files under DIR (whose path
 *                contains TEXT, with file=) succeed (default 0)
 *       count=M  then M calls fail (default 1; 0: every one from then on)
 *       p=P      each of those calls fails with probability P (default 1),
 *                drawn from IOTRACE_FAULT_SEED (default 1)
 *       torn     a failing write or pwrite first writes half its bytes, as
 *                a short write followed by an error leaves them
 *       dirty    a sync counts only if this process wrote to the descriptor
 *                since its last sync (a sync of a group, not of a file just
 *                opened)
 *   IOTRACE_FAULT_LOG=FILE  what the test needs to know what a power cut
 *       would leave of the files, one line an event, appended:
 *         fault PID OP ERR PATH CALL   a fault injected into the CALL-th OP
 *         create PID PATH              a file made by an open with O_EXCL
 *         sync PID PATH SIZE           a sync of a file succeeded
 *         syncfail PID PATH SIZE       it failed (injected or not)
 *         dirsync PID PATH             a sync of a directory succeeded
 *         truncate PID PATH LEN        an ftruncate succeeded
 *         unlink PID PATH
 *
 * Calls on other files pass straight through: the wrappers cost a table
 * lookup by descriptor. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FDS 4096
#define MAX_RULES 16

enum op { OP_OPEN, OP_CREATE, OP_WRITE, OP_PWRITE, OP_FDATASYNC, OP_FSYNC, OP_FTRUNCATE,
          OP_RENAME, N_OPS };

static const char *const op_names[N_OPS] = {"open", "create", "write", "pwrite",
                                            "fdatasync", "fsync", "ftruncate", "rename"};

#define ERR_HANG (-1)

struct rule {
    enum op op;
    int err; /* an errno, or ERR_HANG */
    uint64_t after, count, calls, faults;
    double p;
    int torn, dirty;
    char file[64];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char dir[PATH_MAX];
static size_t dir_len;
static struct rule rules[MAX_RULES];
static int n_rules;
static int log_fd = -1;
static uint64_t rng = 1;
static char *paths[MAX_FDS]; /* of the descriptors open on files under dir */
static unsigned char written[MAX_FDS]; /* since the descriptor's last sync */

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_rename)(const char *, const char *);
static int (*real_unlink)(const char *);

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "faultfs: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    abort();
}

static int parse_err(const char *s)
{
    static const struct {
        const char *name;
        int err;
    } errs[] = {{"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS},
                {"HANG", ERR_HANG}};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (strcmp(s, errs[i].name) == 0)
            return errs[i].err;
    die("unknown error '%s' (EIO, ENOSPC, EDQUOT, EROFS, HANG)", s);
    return 0;
}

static void parse_rule(char *text)
{
    if (n_rules == MAX_RULES)
        die("more than 16 rules in '%s'", text);
    struct rule *r = &rules[n_rules++];
    *r = (struct rule){.count = 1, .p = 1.0};
    char *save, *field = strtok_r(text, ":", &save);
    int i;
    for (i = 0; i < N_OPS && field && strcmp(field, op_names[i]) != 0; i++)
        ;
    if (i == N_OPS || !field)
        die("unknown operation in rule '%s'", field ? field : "");
    r->op = (enum op)i;
    if (!(field = strtok_r(NULL, ":", &save)))
        die("rule for %s without an error", op_names[r->op]);
    r->err = parse_err(field);
    while ((field = strtok_r(NULL, ":", &save))) {
        if (strncmp(field, "after=", 6) == 0)
            r->after = strtoull(field + 6, NULL, 10);
        else if (strncmp(field, "count=", 6) == 0)
            r->count = strtoull(field + 6, NULL, 10);
        else if (strncmp(field, "p=", 2) == 0)
            r->p = strtod(field + 2, NULL);
        else if (strncmp(field, "file=", 5) == 0)
            snprintf(r->file, sizeof r->file, "%s", field + 5);
        else if (strcmp(field, "torn") == 0)
            r->torn = 1;
        else if (strcmp(field, "dirty") == 0)
            r->dirty = 1;
        else
            die("unknown rule field '%s'", field);
    }
}

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f)
        die("no %s to wrap", name);
    return f;
}

static void init(void)
{
    real_open = next("open");
    real_open64 = next("open64");
    real_openat = next("openat");
    real_openat64 = next("openat64");
    real_close = next("close");
    real_write = next("write");
    real_pwrite = next("pwrite");
    real_pwrite64 = next("pwrite64");
    real_fdatasync = next("fdatasync");
    real_fsync = next("fsync");
    real_ftruncate = next("ftruncate");
    real_ftruncate64 = next("ftruncate64");
    real_rename = next("rename");
    real_unlink = next("unlink");
    const char *d = getenv("IOTRACE_FAULT_DIR"), *spec = getenv("IOTRACE_FAULT");
    const char *log = getenv("IOTRACE_FAULT_LOG"), *seed = getenv("IOTRACE_FAULT_SEED");
    if (!d || d[0] != '/')
        die("IOTRACE_FAULT_DIR must be an absolute directory, not '%s'", d ? d : "");
    snprintf(dir, sizeof dir, "%s", d);
    dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/')
        dir[--dir_len] = '\0';
    if (spec && spec[0]) {
        char *copy = strdup(spec), *save, *text;
        for (text = strtok_r(copy, ",", &save); text; text = strtok_r(NULL, ",", &save)) {
            char rule[256];
            snprintf(rule, sizeof rule, "%s", text);
            parse_rule(rule);
        }
        free(copy);
    }
    if (seed)
        rng = strtoull(seed, NULL, 10) * 2654435761u + 1;
    if (log && (log_fd = real_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
        die("cannot open %s", log);
}

static void setup(void)
{
    pthread_once(&once, init);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One write() a line, O_APPEND: lines of processes that follow one another
 * stay in order and whole. */
static void note(const char *fmt, ...)
{
    if (log_fd < 0)
        return;
    char line[PATH_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof line - 1)
        return;
    line[n++] = '\n';
    if (real_write(log_fd, line, (size_t)n) != n)
        die("cannot write to the log%s", "");
}

static int under_dir(const char *path)
{
    return path && strncmp(path, dir, dir_len) == 0 &&
           (path[dir_len] == '\0' || path[dir_len] == '/');
}

static const char *path_of(int fd)
{
    return fd >= 0 && fd < MAX_FDS ? __atomic_load_n(&paths[fd], __ATOMIC_ACQUIRE) : NULL;
}

static double draw(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* The error to fail this call with (0: none), counting it against every
 * rule for OP; dirty: the descriptor was written to since its last sync. */
static int fault(enum op op, const char *path, int dirty, int *torn)
{
    int err = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_rules; i++) {
        struct rule *r = &rules[i];
        if (r->op != op || (r->file[0] && !strstr(path, r->file)) || (r->dirty && !dirty))
            continue;
        uint64_t call = r->calls++;
        if (err || call < r->after || (r->count && r->faults >= r->count) ||
            (r->p < 1.0 && draw() >= r->p))
            continue;
        r->faults++;
        err = r->err;
        *torn = r->torn;
        note("fault %d %s %s %s %llu", (int)getpid(), op_names[op],
             err == ERR_HANG ? "HANG" : strerrorname_np(err), path, (unsigned long long)call);
    }
    pthread_mutex_unlock(&lock);
    if (err == ERR_HANG)
        for (;;)
            pause();
    return err;
}

static uint64_t size_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* ---- opening and closing ------------------------------------------------- */

static void track(int fd, const char *path, int flags)
{
    if (fd < 0 || fd >= MAX_FDS)
        return;
    char *copy = strdup(path);
    char *old = __atomic_exchange_n(&paths[fd], copy, __ATOMIC_ACQ_REL);
    free(old);
    written[fd] = 0;
    if (flags & O_EXCL)
        note("create %d %s", (int)getpid(), path);
}

static int do_open(int (*real)(const char *, int, ...), const char *path, int flags,
                   mode_t mode)
{
    if (!under_dir(path))
        return real(path, flags, mode);
    int torn, err = fault(OP_OPEN, path, 0, &torn);
    if (!err && (flags & O_CREAT) && (flags & O_EXCL))
        err = fault(OP_CREATE, path, 0, &torn);
    if (err) {
        errno = err;
        return -1;
    }
    int fd = real(path, flags, mode);
    track(fd, path, flags);
    return fd;
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

/* The mode argument of an open that may create, then setup(), which comes
 * before real_* is read. */
#define TAKE_MODE(flags, mode)                                                                \
    va_list ap;                                                                                \
    va_start(ap, flags);                                                                       \
    mode_t mode = mode_arg(flags, ap);                                                         \
    va_end(ap);                                                                                \
    setup()

/* The store names its files by absolute path; openat is wrapped for those
 * only. */
#define WRAP_OPEN(name, real_name, at_name, real_at_name)                                     \
    int name(const char *path, int flags, ...)                                                 \
    {                                                                                          \
        TAKE_MODE(flags, mode);                                                                \
        return do_open(real_name, path, flags, mode);                                          \
    }                                                                                          \
    int at_name(int dirfd, const char *path, int flags, ...)                                   \
    {                                                                                          \
        TAKE_MODE(flags, mode);                                                                \
        if (path[0] != '/')                                                                    \
            return real_at_name(dirfd, path, flags, mode);                                     \
        return do_open(real_name, path, flags, mode);                                          \
    }

WRAP_OPEN(open, real_open, openat, real_openat)
WRAP_OPEN(open64, real_open64, openat64, real_openat64)

int close(int fd)
{
    setup();
    if (fd >= 0 && fd < MAX_FDS && paths[fd])
        free(__atomic_exchange_n(&paths[fd], NULL, __ATOMIC_ACQ_REL));
    return real_close(fd);
}

/* ---- writing ------------------------------------------------------------- */

static ssize_t do_write(enum op op, int fd, const void *buf, size_t len, off_t off)
{
    const char *path = path_of(fd);
    if (!path)
        return op == OP_WRITE ? real_write(fd, buf, len) : real_pwrite(fd, buf, len, off);
    written[fd] = 1;
    int torn = 0, err = fault(op, path, 0, &torn);
    if (err) {
        if (torn && len > 1) {
            if (op == OP_WRITE)
                (void)real_write(fd, buf, len / 2);
            else
                (void)real_pwrite(fd, buf, len / 2, off);
        }
        errno = err;
        return -1;
    }
    return op == OP_WRITE ? real_write(fd, buf, len) : real_pwrite(fd, buf, len, off);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    setup();
    return do_write(OP_WRITE, fd, buf, len, 0);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    setup();
    return do_write(OP_PWRITE, fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    setup();
    return do_write(OP_PWRITE, fd, buf, len, off);
}

/* ---- syncing ------------------------------------------------------------- */

static int do_sync(enum op op, int fd)
{
    const char *path = path_of(fd);
    if (!path)
        return op == OP_FDATASYNC ? real_fdatasync(fd) : real_fsync(fd);
    struct stat st;
    int is_dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    int torn, err = fault(op, path, written[fd], &torn);
    int rc = err ? -1 : op == OP_FDATASYNC ? real_fdatasync(fd) : real_fsync(fd);
    int saved = err ? err : errno;
    if (rc == 0)
        written[fd] = 0;
    if (is_dir && rc == 0)
        note("dirsync %d %s", (int)getpid(), path);
    else if (!is_dir)
        note("%s %d %s %llu", rc == 0 ? "sync" : "syncfail", (int)getpid(), path,
             (unsigned long long)size_of(fd));
    errno = saved;
    return rc;
}

int fdatasync(int fd)
{
    setup();
    return do_sync(OP_FDATASYNC, fd);
}

int fsync(int fd)
{
    setup();
    return do_sync(OP_FSYNC, fd);
}

static int do_ftruncate(int (*real)(int, off_t), int fd, off_t len)
{
    const char *path = path_of(fd);
    int torn, err = path ? fault(OP_FTRUNCATE, path, 0, &torn) : 0;
    if (err) {
        errno = err;
        return -1;
    }
    int rc = real(fd, len);
    if (rc == 0 && path)
        note("truncate %d %s %lld", (int)getpid(), path, (long long)len);
    return rc;
}

int ftruncate(int fd, off_t len)
{
    setup();
    return do_ftruncate(real_ftruncate, fd, len);
}

int ftruncate64(int fd, off_t len)
{
    setup();
    return do_ftruncate(real_ftruncate64, fd, len);
}

/* ---- names --------------------------------------------------------------- */

int rename(const char *from, const char *to)
{
    setup();
    int torn, err = under_dir(from) || under_dir(to) ? fault(OP_RENAME, from, 0, &torn) : 0;
    if (err) {
        errno = err;
        return -1;
    }
    return real_rename(from, to);
}

int unlink(const char *path)
{
    setup();
    int rc = real_unlink(path);
    if (rc == 0 && under_dir(path))
        note("unlink %d %s", (int)getpid(), path);
    return rc;
}
