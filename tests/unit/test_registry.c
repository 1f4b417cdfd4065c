/* The CallID registry: claim, publish, look up, clear; tids that collide;
 * a full window; processes that die inside a call; concurrent rewrites
 * read consistently, through a mapping and through pread; bad registry
 * objects refused; per-user names and ownership: a registry of another
 * user, or one others may write, is refused, other users can neither
 * write nor truncate one, and a reader survives its truncation; on a full
 * tmpfs, no writer is given a table with pages that have no storage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "registry.h"

static char dir[] = "/tmp/iotrace-registry-test.XXXXXX";
static char path[256];

static int setup(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "%s/registry", dir);
    unlink(path);
    return 0;
}

static iot_registry *open_ok(int create)
{
    char err[256] = "";
    iot_registry *r = iot_registry_open(path, create, err, sizeof err);
    if (!r)
        fail_msg("open %s: %s", path, err);
    return r;
}

static void test_name_resolution(void **state)
{
    (void)state;
    unsetenv("IOTRACE_REGISTRY");
    assert_string_equal(iot_registry_name(NULL), IOT_REGISTRY_DEFAULT);
    assert_string_equal(iot_registry_name("/x"), "/x");
    setenv("IOTRACE_REGISTRY", "/from-env", 1);
    assert_string_equal(iot_registry_name(NULL), "/from-env");
    assert_string_equal(iot_registry_name("/option-wins"), "/option-wins");
    setenv("IOTRACE_REGISTRY", "off", 1);
    assert_null(iot_registry_name(NULL));
    unsetenv("IOTRACE_REGISTRY");

    char name[32];
    assert_int_equal(iot_registry_user_name(IOT_REGISTRY_DEFAULT, 1000, name, sizeof name), 0);
    assert_string_equal(name, "/iotrace-registry-1000");
    assert_int_equal(iot_registry_user_name("/run/x/reg", 0, name, sizeof name), 0);
    assert_string_equal(name, "/run/x/reg-0");
    assert_int_equal(iot_registry_user_name("/a-rather-long-base-name", 4000000000u, name,
                                            sizeof name), -1);
}

static void test_publish_and_clear(void **state)
{
    (void)state;
    iot_registry *w = open_ok(1), *r = open_ok(0);
    struct iot_reg_slot *s = iot_registry_claim(w, 4242, (uint32_t)getpid(), "job-a", 3);
    assert_non_null(s);
    struct iot_reg_entry e;
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 0); /* claimed, no call running */

    iot_registry_begin(s, 0x300000000007ull);
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 1);
    assert_true(e.callid == 0x300000000007ull);
    assert_string_equal(e.job, "job-a");
    assert_int_equal(e.rank, 3);
    assert_int_equal(e.tid, 4242);
    assert_int_equal(e.pid, getpid());
    assert_int_equal(iot_registry_lookup(r, 4243, &e), 0);

    iot_registry_update(s, "job-b", 5);
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 1);
    assert_string_equal(e.job, "job-b");
    assert_int_equal(e.rank, 5);

    iot_registry_end(s);
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 0);
    iot_registry_begin(s, 9);
    iot_registry_release(s, 4242);
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 0);

    /* Claiming again after a release, or twice, gives one slot per tid. */
    struct iot_reg_slot *a = iot_registry_claim(w, 4242, (uint32_t)getpid(), "j", 0);
    struct iot_reg_slot *b = iot_registry_claim(w, 4242, (uint32_t)getpid(), "j", 0);
    assert_ptr_equal(a, b);
    iot_registry_close(w);
    iot_registry_close(r);
}

static void test_long_job_is_cut_not_overrun(void **state)
{
    (void)state;
    iot_registry *w = open_ok(1);
    char job[300];
    memset(job, 'x', sizeof job - 1);
    job[sizeof job - 1] = '\0';
    struct iot_reg_slot *s = iot_registry_claim(w, 77, (uint32_t)getpid(), job, 0);
    iot_registry_begin(s, 1);
    struct iot_reg_entry e;
    assert_int_equal(iot_registry_lookup(w, 77, &e), 1);
    assert_int_equal(strlen(e.job), IOT_REGISTRY_JOB_MAX);
    iot_registry_close(w);
}

/* Many threads at once (more than one probe window's worth per hash
 * neighbourhood is impossible to force portably, so fill by brute force). */
static void test_many_threads_and_full_window(void **state)
{
    (void)state;
    iot_registry *w = open_ok(1);
    uint32_t n = IOT_REGISTRY_SLOTS;
    uint32_t claimed = 0;
    for (uint32_t tid = 1; tid <= n; tid++) {
        struct iot_reg_slot *s = iot_registry_claim(w, tid, (uint32_t)getpid(), "j", (int)tid);
        if (s) {
            iot_registry_begin(s, tid);
            claimed++;
        }
    }
    assert_true(claimed > n * 9 / 10);
    assert_int_equal(iot_registry_full_count(w), n - claimed);
    struct iot_reg_entry e;
    uint32_t found = 0;
    for (uint32_t tid = 1; tid <= n; tid++)
        if (iot_registry_lookup(w, tid, &e)) {
            assert_true(e.callid == tid);
            assert_int_equal(e.rank, (int)tid);
            found++;
        }
    assert_int_equal(found, claimed);
    iot_registry_close(w);
}

/* A process killed inside an MPI-IO call cannot clear its slot; readers
 * must not hand its CallID to a new thread that reuses the tid. */
static void test_dead_process_is_ignored_and_reclaimed(void **state)
{
    (void)state;
    iot_registry *w = open_ok(1);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    if (child == 0) {
        iot_registry *c = iot_registry_open(path, 0, NULL, 0);
        struct iot_reg_slot *s = iot_registry_claim(c, 5555, (uint32_t)getpid(), "dead", 1);
        iot_registry_begin(s, 0xdead);
        (void)!write(ready[1], "x", 1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    struct iot_reg_entry e;
    assert_int_equal(iot_registry_lookup(w, 5555, &e), 1);
    assert_true(e.callid == 0xdead);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_int_equal(iot_registry_lookup(w, 5555, &e), 0);

    /* Readers never write; sweep (and claims) free slots of dead processes. */
    pid_t other = fork();
    if (other == 0) {
        iot_registry *c2 = iot_registry_open(path, 0, NULL, 0);
        iot_registry_claim(c2, 6666, (uint32_t)getpid(), "dead", 1);
        _exit(0);
    }
    waitpid(other, NULL, 0);
    assert_int_equal(iot_registry_sweep(w), 2);
    assert_int_equal(iot_registry_sweep(w), 0);
    close(ready[0]);
    close(ready[1]);
    iot_registry_close(w);
}

struct race {
    iot_registry *r;
    struct iot_reg_slot *slot;
    _Atomic int stop;
    long torn;
    long reads;
};

static void *rewriter(void *arg)
{
    struct race *x = arg;
    char job[64];
    for (int i = 0; !atomic_load(&x->stop); i++) {
        snprintf(job, sizeof job, "job-%d-%s", i, i % 2 ? "odd-and-longer-than-even" : "even");
        iot_registry_update(x->slot, job, i);
    }
    return NULL;
}

/* Through the writer's mapping and through a reader's pread copies: a
 * copy taken in the middle of a rewrite must never be returned (fails when
 * read_entry accepts its first copy). */
static void rewrites_read_consistently(int through_reader)
{
    struct race x = {.r = open_ok(1)};
    x.slot = iot_registry_claim(x.r, 999, (uint32_t)getpid(), "job-0-even", 0);
    iot_registry_begin(x.slot, 1);
    iot_registry *rd = x.r;
    if (through_reader)
        assert_non_null(rd = iot_registry_open_reader(path, (uint32_t)geteuid(),
                                                      (uint32_t)getegid(), 0, NULL, 0));
    pthread_t t;
    pthread_create(&t, NULL, rewriter, &x);
    for (int i = 0; i < 200000; i++) {
        struct iot_reg_entry e;
        if (!iot_registry_lookup(rd, 999, &e))
            continue;
        x.reads++;
        char want[64];
        snprintf(want, sizeof want, "job-%d-%s", e.rank,
                 e.rank % 2 ? "odd-and-longer-than-even" : "even");
        if (strcmp(want, e.job) != 0)
            x.torn++;
    }
    atomic_store(&x.stop, 1);
    pthread_join(t, NULL);
    assert_true(x.reads > 0);
    assert_int_equal(x.torn, 0);
    if (rd != x.r)
        iot_registry_close(rd);
    iot_registry_close(x.r);
}

static void test_rewrites_read_consistently(void **state)
{
    (void)state;
    rewrites_read_consistently(0);
}

static void test_rewrites_read_consistently_by_reader(void **state)
{
    (void)state;
    rewrites_read_consistently(1);
}

static void expect_open_error(const char *want)
{
    char err[256] = "";
    iot_registry *r = iot_registry_open(path, 0, err, sizeof err);
    if (r)
        fail_msg("opened a bad registry, wanted '%s'", want);
    if (!strstr(err, want))
        fail_msg("error '%s' does not mention '%s'", err, want);
}

static void write_file(const void *data, size_t len)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void test_bad_objects_refused(void **state)
{
    (void)state;
    char err[256] = "";
    assert_null(iot_registry_open("no-slash", 1, err, sizeof err));
    assert_non_null(strstr(err, "must start with '/'"));
    assert_null(iot_registry_open("/tmp/iotrace-no-such-dir/registry", 0, err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));

    write_file("short", 5);
    expect_open_error("too small");

    struct iot_reg_header h = {.version = IOT_REGISTRY_VERSION, .slots = 8,
                               .slot_size = sizeof(struct iot_reg_slot)};
    write_file(&h, sizeof h);
    expect_open_error("bad magic");
    atomic_store(&h.magic, IOT_REGISTRY_MAGIC);
    h.version = 99;
    write_file(&h, sizeof h);
    expect_open_error("version 99");
    h.version = IOT_REGISTRY_VERSION;
    h.slots = 12;
    write_file(&h, sizeof h);
    expect_open_error("bad geometry");
    h.slots = 8;
    write_file(&h, sizeof h);
    expect_open_error("truncated");
}

static void test_shared_memory_name(void **state)
{
    (void)state;
    char name[64], err[256] = "";
    snprintf(name, sizeof name, "/iotrace-registry-test-%d", (int)getpid());
    shm_unlink(name);
    iot_registry *w = iot_registry_open(name, 1, err, sizeof err);
    if (!w)
        fail_msg("%s", err);
    iot_registry *r = iot_registry_open(name, 0, err, sizeof err);
    assert_non_null(r);
    struct iot_reg_slot *s = iot_registry_claim(w, 31337, (uint32_t)getpid(), "shm", 0);
    iot_registry_begin(s, 42);
    struct iot_reg_entry e;
    assert_int_equal(iot_registry_lookup(r, 31337, &e), 1);
    assert_true(e.callid == 42);
    iot_registry_close(w);
    iot_registry_close(r);
    shm_unlink(name);
}

#define NOBODY 65534u

/* Runs fn(arg) in a child process as uid:gid; its exit status. */
static int as_user(uint32_t uid, int (*fn)(const char *), const char *arg)
{
    pid_t child = fork();
    if (child == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
            _exit(100);
        _exit(fn(arg));
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (!WIFEXITED(status))
        fail_msg("child as uid %u ended by signal %d", uid, WTERMSIG(status));
    return WEXITSTATUS(status);
}

static void need_root(void)
{
    if (geteuid() != 0)
        skip();
}

static void shm_name(char *out, size_t len, const char *tag, uint32_t uid)
{
    char base[64];
    snprintf(base, sizeof base, "/iotrace-registry-test-%s-%d", tag, (int)getpid());
    assert_int_equal(iot_registry_user_name(base, uid, out, len), 0);
}

static void test_created_private_to_its_owner(void **state)
{
    (void)state;
    mode_t old = umask(0);
    iot_registry *w = open_ok(1);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    iot_registry_close(w);

    /* A umask that takes the owner's bits does not make it unusable. */
    unlink(path);
    old = umask(0377);
    w = open_ok(1);
    umask(old);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    iot_registry_close(w);
    iot_registry_close(open_ok(0));
}

static void test_foreign_or_writable_registry_refused(void **state)
{
    (void)state;
    need_root();
    iot_registry_close(open_ok(1));
    char err[256] = "";

    /* Another user's: refused by writers and by readers for us. */
    assert_int_equal(chown(path, NOBODY, NOBODY), 0);
    expect_open_error("belongs to uid 65534, not 0");
    assert_null(iot_registry_open_reader(path, 0, 0, 0, err, sizeof err));
    assert_non_null(strstr(err, "belongs to uid 65534"));
    iot_registry *r = iot_registry_open_reader(path, NOBODY, NOBODY, 0, err, sizeof err);
    if (!r)
        fail_msg("the owner's registry refused to a reader for the owner: %s", err);
    iot_registry_close(r);
    assert_int_equal(chown(path, 0, 0), 0);

    /* Ours, but group or others may write it. */
    const mode_t bad[] = {0620, 0602, 0666};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(chmod(path, bad[i]), 0);
        expect_open_error("may be written by other users");
        assert_null(iot_registry_open_reader(path, 0, 0, 0, NULL, 0));
    }
    /* Being readable by others exposes attribution data, not the ranks. */
    assert_int_equal(chmod(path, 0644), 0);
    iot_registry_close(open_ok(0));
}

static void test_not_a_regular_file_refused(void **state)
{
    (void)state;
    /* A FIFO under the name must not block the opener (O_NONBLOCK). */
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10);
    expect_open_error("not a regular file");
    assert_null(iot_registry_open_reader(path, (uint32_t)geteuid(), 0, 0, NULL, 0));
    alarm(0);
    unlink(path);

    /* Nor is a symbolic link followed to somebody's registry. */
    char target[300];
    snprintf(target, sizeof target, "%s.target", path);
    unlink(target);
    iot_registry *w = iot_registry_open(target, 1, NULL, 0);
    assert_non_null(w);
    assert_int_equal(symlink(target, path), 0);
    expect_open_error("cannot open");
    iot_registry_close(w);
    unlink(target);
}

/* The reader copies with pread: a registry truncated under it (by its
 * owner) makes lookups miss. A mapping would raise SIGBUS here. */
static void test_reader_survives_truncation(void **state)
{
    (void)state;
    iot_registry *w = open_ok(1);
    iot_registry *r = iot_registry_open_reader(path, (uint32_t)geteuid(), (uint32_t)getegid(), 0,
                                               NULL, 0);
    assert_non_null(r);
    struct iot_reg_slot *s = iot_registry_claim(w, 4242, (uint32_t)getpid(), "job", 0);
    iot_registry_begin(s, 77);
    struct iot_reg_entry e;
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 1);
    assert_int_equal(iot_registry_stale(r, path), 0);

    /* From here on the writer's mapping must not be touched. */
    off_t part = (off_t)(sizeof(struct iot_reg_header) + 3 * sizeof(struct iot_reg_slot));
    assert_int_equal(truncate(path, part), 0);
    assert_int_equal(iot_registry_lookup(r, 4242, &e), 0);
    assert_int_equal(truncate(path, 0), 0);
    for (uint32_t tid = 1; tid < 2000; tid++)
        assert_int_equal(iot_registry_lookup(r, tid, &e), 0);
    assert_true(iot_registry_full_count(r) == 0);
    assert_int_equal(iot_registry_stale(r, path), 1);
    iot_registry_close(r);
    iot_registry_close(w);

    /* Nor can a truncated one be opened (and mapped) again. */
    expect_open_error("too small");
}

/* A page of a shared mapping of a tmpfs file that has no storage yet gets
 * it when first touched; when the tmpfs is full (any user can fill
 * /dev/shm), that touch raises SIGBUS.  These cases run in a child with a
 * tmpfs of its own, in a private mount namespace, and report the first
 * step that failed as its exit status (77: no such tmpfs to be had). */
static char small_dir[300], small_reg[340];

static int small_fail(int code, const char *what, const char *err)
{
    fprintf(stderr, "%s%s%s\n", what, err && err[0] ? ": " : "", err ? err : "");
    return code;
}

static size_t table_size(void)
{
    return sizeof(struct iot_reg_header) + IOT_REGISTRY_SLOTS * sizeof(struct iot_reg_slot);
}

static int fully_allocated(void)
{
    struct stat st;
    return stat(small_reg, &st) == 0 && (uint64_t)st.st_blocks * 512u >= table_size();
}

/* Fills the tmpfs, then frees `pages` pages of it again; 0 when it was
 * full. */
static int fill_leaving(size_t pages)
{
    char file[400];
    snprintf(file, sizeof file, "%s/fill", small_dir);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    static const char page[4096] = {1};
    off_t n = 0;
    ssize_t got;
    while ((got = pwrite(fd, page, sizeof page, n)) > 0)
        n += got;
    int full = got < 0 && errno == ENOSPC;
    off_t keep = n - (off_t)(pages * (size_t)sysconf(_SC_PAGESIZE));
    int rc = full && keep >= 0 && ftruncate(fd, keep) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

static void unfill(void)
{
    char file[400];
    snprintf(file, sizeof file, "%s/fill", small_dir);
    unlink(file);
}

/* What ranks of an older iotrace left: a complete header over holes. */
static int plant_sparse(void)
{
    struct iot_reg_header h = {.version = IOT_REGISTRY_VERSION, .slots = IOT_REGISTRY_SLOTS,
                               .slot_size = sizeof(struct iot_reg_slot)};
    atomic_store(&h.magic, IOT_REGISTRY_MAGIC);
    int fd = open(small_reg, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return -1;
    int rc = pwrite(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
             ftruncate(fd, (off_t)table_size()) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

/* Writes into, and reads, every page of the table, as the ranks of a node
 * come to over time: a slot claimed and published in for every tid, then
 * a sweep that reads every slot. */
static void touch_every_page(iot_registry *w)
{
    for (uint32_t tid = 1; tid <= IOT_REGISTRY_SLOTS; tid++) {
        struct iot_reg_slot *s = iot_registry_claim(w, tid, (uint32_t)getpid(), "full", 0);
        if (s) {
            iot_registry_begin(s, tid);
            iot_registry_release(s, tid);
        }
    }
    iot_registry_sweep(w);
}

/* A writer that is handed a table anyway uses it, as a rank would: with
 * holes on a full tmpfs, that is where SIGBUS strikes. */
static int refused(iot_registry *w, int code, const char *what, const char *err)
{
    if (w)
        touch_every_page(w);
    return small_fail(code, what, err);
}

/* Fills the tmpfs, then uses every page of `w` and closes it: 0, or
 * `code` when the tmpfs cannot be filled. */
static int use_on_full_tmpfs(iot_registry *w, int code)
{
    int rc = fill_leaving(0) < 0 ? small_fail(code, "cannot fill the tmpfs", strerror(errno)) : 0;
    if (rc == 0)
        touch_every_page(w);
    iot_registry_close(w);
    return rc;
}

struct small_case {
    int (*run)(void); /* its exit status */
};

/* The case to run is the test's state (see ON_SMALL_TMPFS). */
static void test_on_small_tmpfs(void **state)
{
    int (*fn)(void) = ((const struct small_case *)*state)->run;
    need_root();
    snprintf(small_dir, sizeof small_dir, "%s/small", dir);
    snprintf(small_reg, sizeof small_reg, "%s/registry", small_dir);
    assert_true(mkdir(small_dir, 0700) == 0 || errno == EEXIST);
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        /* cmocka's handlers would carry on with the next test in here. */
        const int fatal[] = {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGSYS};
        for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
            signal(fatal[i], SIG_DFL);
        /* Private, so that the tmpfs vanishes with the child whatever
         * happens to it. */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("iotrace-test", small_dir, "tmpfs", 0, "size=4m,mode=0700") < 0) {
            perror("private tmpfs");
            _exit(77);
        }
        _exit(fn());
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    rmdir(small_dir);
    if (WIFSIGNALED(status))
        fail_msg("the child died of signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (WEXITSTATUS(status) == 77)
        skip();
    if (WEXITSTATUS(status) != 0)
        fail_msg("step %d failed", WEXITSTATUS(status));
}

/* Made with every page reserved, it is used on a full tmpfs, by its maker
 * and by a later opener alike. */
static int made_reserved(void)
{
    char err[256] = "";
    iot_registry *w = iot_registry_open(small_reg, 1, err, sizeof err);
    if (!w)
        return small_fail(1, "cannot make a registry on an empty tmpfs", err);
    if (!fully_allocated())
        return small_fail(2, "the registry was made sparse", NULL);
    int rc = use_on_full_tmpfs(w, 3);
    if (rc)
        return rc;
    if (!(w = iot_registry_open(small_reg, 0, err, sizeof err)))
        return small_fail(4, "a reserved registry refused on a full tmpfs", err);
    touch_every_page(w);
    iot_registry_close(w);
    return 0;
}

/* A sparse one, found on a full tmpfs: readers may read it (holes read as
 * zeros), writers refuse it until its holes can be reserved. */
static int sparse_found(void)
{
    char err[512] = "";
    if (plant_sparse() < 0 || fill_leaving(0) < 0)
        return small_fail(1, "cannot plant a sparse registry on a full tmpfs", strerror(errno));
    iot_registry *r = iot_registry_open_reader(small_reg, (uint32_t)geteuid(),
                                               (uint32_t)getegid(), 0, err, sizeof err);
    if (!r)
        return small_fail(2, "a reader refused a sparse registry", err);
    struct iot_reg_entry e;
    for (uint32_t tid = 1; tid <= IOT_REGISTRY_SLOTS; tid++)
        if (iot_registry_lookup(r, tid, &e))
            return small_fail(3, "a hole read as a running call", NULL);
    iot_registry_close(r);

    char want[sizeof small_reg + 64];
    snprintf(want, sizeof want, "cannot reserve registry %s: %s", small_reg, strerror(ENOSPC));
    iot_registry *w = iot_registry_open(small_reg, 0, err, sizeof err);
    if (w || !strstr(err, want))
        return refused(w, 4, "a sparse registry on a full tmpfs opened for writing", err);
    unfill();
    if (!(w = iot_registry_open(small_reg, 0, err, sizeof err)))
        return small_fail(5, "a sparse registry refused with room to reserve it", err);
    if (!fully_allocated())
        return small_fail(6, "the opener did not reserve the holes", NULL);
    return use_on_full_tmpfs(w, 7);
}

/* Room for the header but not the table: neither a rank nor the file
 * system client makes it, and nothing half-made is left under the name. */
static int no_room(void)
{
    char err[256] = "";
    if (fill_leaving(8) < 0)
        return small_fail(1, "cannot fill the tmpfs", strerror(errno));
    iot_registry *w = iot_registry_open(small_reg, 1, err, sizeof err);
    if (w || !strstr(err, "cannot reserve registry"))
        return refused(w, 2, "a registry made without room for its table", err);
    if (access(small_reg, F_OK) == 0)
        return small_fail(3, "a registry that could not be reserved was left behind", NULL);
    iot_registry *r = iot_registry_open_reader(small_reg, NOBODY, NOBODY, 1, err, sizeof err);
    if (r || !strstr(err, "cannot reserve registry"))
        return small_fail(4, "the reader made a registry without room for its table", err);
    if (access(small_reg, F_OK) == 0)
        return small_fail(5, "the reader left a registry that could not be reserved", NULL);
    return 0;
}

/* Whatever a writer of the registry puts in a slot, a reader returns at
 * most a bounded entry for that tid. */
static void test_forged_slots_are_bounded(void **state)
{
    (void)state;
    iot_registry_close(open_ok(1));
    iot_registry *r = iot_registry_open_reader(path, (uint32_t)geteuid(), 0, 0, NULL, 0);
    assert_non_null(r);
    uint32_t tid = 31337;
    uint32_t home = (uint32_t)(((uint64_t)tid * 0x9E3779B97F4A7C15ull) >> 32) &
                    (IOT_REGISTRY_SLOTS - 1);
    off_t at = (off_t)sizeof(struct iot_reg_header) + (off_t)home * 128;
    unsigned char slot[128];
    memset(slot, 'x', sizeof slot); /* a job with no NUL */
    uint32_t head[4] = {tid, 2, (uint32_t)getpid(), 7};
    uint64_t callid = 0x1234;
    memcpy(slot, head, sizeof head);
    memcpy(slot + 16, &callid, sizeof callid);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, slot, sizeof slot, at), sizeof slot);
    struct iot_reg_entry e;
    assert_int_equal(iot_registry_lookup(r, tid, &e), 1);
    assert_int_equal(strlen(e.job), IOT_REGISTRY_JOB_MAX);
    assert_true(e.callid == 0x1234);

    const uint32_t bad_pids[] = {0, 0xffffffffu, 0x80000000u};
    for (size_t i = 0; i < sizeof bad_pids / sizeof *bad_pids; i++) {
        head[2] = bad_pids[i];
        assert_int_equal(pwrite(fd, head, sizeof head, at), sizeof head);
        assert_int_equal(iot_registry_lookup(r, tid, &e), 0);
    }
    head[1] = 3; /* a rewrite that never ends */
    head[2] = (uint32_t)getpid();
    assert_int_equal(pwrite(fd, head, sizeof head, at), sizeof head);
    assert_int_equal(iot_registry_lookup(r, tid, &e), 0);
    close(fd);
    iot_registry_close(r);
}

static void test_replaced_registry_is_stale(void **state)
{
    (void)state;
    iot_registry *w = open_ok(1);
    iot_registry *r = iot_registry_open_reader(path, (uint32_t)geteuid(), 0, 0, NULL, 0);
    assert_non_null(r);
    assert_int_equal(iot_registry_stale(r, path), 0);
    assert_int_equal(chmod(path, 0620), 0);
    assert_int_equal(iot_registry_stale(r, path), 1);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(iot_registry_stale(r, path), 0);
    unlink(path);
    assert_int_equal(iot_registry_stale(r, path), 1);
    iot_registry *w2 = open_ok(1);
    assert_int_equal(iot_registry_stale(r, path), 1);
    iot_registry_close(r);
    assert_non_null(r = iot_registry_open_reader(path, (uint32_t)geteuid(), 0, 0, NULL, 0));
    assert_int_equal(iot_registry_stale(r, path), 0);
    iot_registry_close(r);
    iot_registry_close(w2);
    iot_registry_close(w);
}

/* Exit status: 0 when this user can neither open `name` for writing,
 * truncate it, nor use it as a rank would. */
static int cannot_write(const char *name)
{
    char file[300];
    snprintf(file, sizeof file, "/dev/shm%s", name);
    if (open(file, O_RDWR) >= 0 || errno != EACCES)
        return 1;
    if (open(file, O_RDONLY) >= 0 || errno != EACCES)
        return 2;
    if (truncate(file, 0) == 0 || errno != EACCES)
        return 3;
    char err[256] = "";
    if (iot_registry_open(name, 1, err, sizeof err) || !strstr(err, "Permission denied"))
        return 4;
    return 0;
}

/* Exit status 0 when this user (the registry's owner) can publish. */
static int publishes(const char *name)
{
    iot_registry *w = iot_registry_open(name, 0, NULL, 0);
    struct iot_reg_slot *s = iot_registry_claim(w, 8888, (uint32_t)getpid(), "nobody's", 2);
    if (!s)
        return 1;
    iot_registry_begin(s, 0x8888);
    return 0; /* the slot stays: the process is gone, the reader must say so */
}

static int unlink_user_registries(void **state)
{
    (void)state;
    char name[128];
    shm_name(name, sizeof name, "user", NOBODY);
    shm_unlink(name);
    shm_name(name, sizeof name, "user", 0);
    shm_unlink(name);
    return 0;
}

/* The file system client (root) makes a user's registry for that user; the
 * user's ranks can use it, other users cannot touch it. */
static void test_registry_made_for_a_user(void **state)
{
    (void)state;
    need_root();
    char name[128], mine[128];
    shm_name(name, sizeof name, "user", NOBODY);
    shm_name(mine, sizeof mine, "user", 0);
    char err[256] = "";
    iot_registry *r = iot_registry_open_reader(name, NOBODY, NOBODY, 1, err, sizeof err);
    if (!r)
        fail_msg("%s", err);
    struct stat st;
    char file[300];
    snprintf(file, sizeof file, "/dev/shm%s", name);
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_uid, NOBODY);
    assert_int_equal(st.st_mode & 07777, 0600);

    assert_int_equal(as_user(NOBODY, publishes, name), 0);
    struct iot_reg_entry e;
    /* Published by a process that has exited: not a running call. */
    assert_int_equal(iot_registry_lookup(r, 8888, &e), 0);

    /* Root's registry, from ranks of root: nobody can touch it. */
    iot_registry *w = iot_registry_open(mine, 1, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(as_user(NOBODY, cannot_write, mine), 0);
    /* Nor can nobody pass its own registry off as root's. */
    iot_registry *wrong = iot_registry_open_reader(name, 0, 0, 0, err, sizeof err);
    assert_null(wrong);
    assert_non_null(strstr(err, "belongs to uid 65534"));
    iot_registry_close(w);
    iot_registry_close(r);
}

#define ON_SMALL_TMPFS(fn) \
    {"test_small_tmpfs_" #fn, test_on_small_tmpfs, NULL, NULL, &(struct small_case){fn}}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_resolution),
        cmocka_unit_test_setup(test_publish_and_clear, setup),
        cmocka_unit_test_setup(test_long_job_is_cut_not_overrun, setup),
        cmocka_unit_test_setup(test_many_threads_and_full_window, setup),
        cmocka_unit_test_setup(test_dead_process_is_ignored_and_reclaimed, setup),
        cmocka_unit_test_setup(test_rewrites_read_consistently, setup),
        cmocka_unit_test_setup(test_rewrites_read_consistently_by_reader, setup),
        cmocka_unit_test_setup(test_bad_objects_refused, setup),
        cmocka_unit_test(test_shared_memory_name),
        cmocka_unit_test_setup(test_created_private_to_its_owner, setup),
        cmocka_unit_test_setup(test_foreign_or_writable_registry_refused, setup),
        cmocka_unit_test_setup(test_not_a_regular_file_refused, setup),
        cmocka_unit_test_setup(test_reader_survives_truncation, setup),
        ON_SMALL_TMPFS(made_reserved),
        ON_SMALL_TMPFS(sparse_found),
        ON_SMALL_TMPFS(no_room),
        cmocka_unit_test_setup(test_forged_slots_are_bounded, setup),
        cmocka_unit_test_setup(test_replaced_registry_is_stale, setup),
        cmocka_unit_test_setup_teardown(test_registry_made_for_a_user, unlink_user_registries,
                                        unlink_user_registries),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(path);
    rmdir(dir);
    return rc;
}
