/* The CallID registry: claim, publish, look up, clear; tids that collide;
 * a full window; processes that die inside a call; concurrent rewrites
 * read consistently; bad registry objects refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

    /* And sweep frees slots of dead processes that no reader touched. */
    pid_t other = fork();
    if (other == 0) {
        iot_registry *c2 = iot_registry_open(path, 0, NULL, 0);
        iot_registry_claim(c2, 6666, (uint32_t)getpid(), "dead", 1);
        _exit(0);
    }
    waitpid(other, NULL, 0);
    assert_int_equal(iot_registry_sweep(w), 1);
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

static void test_rewrites_read_consistently(void **state)
{
    (void)state;
    struct race x = {.r = open_ok(1)};
    x.slot = iot_registry_claim(x.r, 999, (uint32_t)getpid(), "job-0-even", 0);
    iot_registry_begin(x.slot, 1);
    pthread_t t;
    pthread_create(&t, NULL, rewriter, &x);
    for (int i = 0; i < 200000; i++) {
        struct iot_reg_entry e;
        if (!iot_registry_lookup(x.r, 999, &e))
            continue;
        x.reads++;
        char want[64];
        snprintf(want, sizeof want, "job-%d-%s", e.rank, e.rank % 2 ? "odd-and-longer-than-even" : "even");
        if (strcmp(want, e.job) != 0)
            x.torn++;
    }
    atomic_store(&x.stop, 1);
    pthread_join(t, NULL);
    assert_true(x.reads > 0);
    assert_int_equal(x.torn, 0);
    iot_registry_close(x.r);
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
        cmocka_unit_test_setup(test_bad_objects_refused, setup),
        cmocka_unit_test(test_shared_memory_name),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(path);
    rmdir(dir);
    return rc;
}
