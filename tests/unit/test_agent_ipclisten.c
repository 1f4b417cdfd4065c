/* The agent's own ipc listener: the handshake a PUSH peer speaks, one
 * message at a time with the sender's credentials, multipart messages
 * flagged, frames over the limit and garbage closed, connections beyond a
 * user's limit refused, memory following the bytes sent rather than the
 * size claimed, and stalled messages closed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipclisten.h"

static const uint8_t hello[64 + 28] = {
    0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L',
    [64] = 0x04, 26, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y',
    'p', 'e', 0, 0, 0, 4, 'P', 'U', 'S', 'H'};

static char dir[64], path[128];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int setup(void **state)
{
    struct ipcl *l = calloc(1, sizeof *l);
    snprintf(dir, sizeof dir, "/tmp/iotrace-ipcl.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/agent.sock", dir);
    assert_int_equal(ipcl_open(l, path, 0600), 0);
    l->max_conns = 16;
    l->max_conns_user = 4;
    l->max_msg = 256 << 10;
    l->max_bytes = 1 << 20;
    l->max_bytes_user = 512 << 10;
    l->stall_ns = 10000000000LL;
    *state = l;
    return 0;
}

static int teardown(void **state)
{
    ipcl_close(*state);
    free(*state);
    unlink(path);
    rmdir(dir);
    return 0;
}

static int dial(int handshake)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    if (handshake)
        assert_int_equal(write(fd, hello, sizeof hello), (ssize_t)sizeof hello);
    return fd;
}

static void put(int fd, const void *buf, size_t len)
{
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* A frame header: short below 256 bytes, else long. */
static size_t header(uint8_t *h, size_t len, int more)
{
    if (len < 256) {
        h[0] = (uint8_t)more;
        h[1] = (uint8_t)len;
        return 2;
    }
    h[0] = (uint8_t)(0x02 | more);
    for (int i = 0; i < 8; i++)
        h[1 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    return 9;
}

/* The next message within a second, or 0 bytes (*got 0). */
static size_t next(struct ipcl *l, const uint8_t **data, int *multipart, int *got)
{
    size_t len = 0;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    *got = 0;
    for (int i = 0; i < 1000 && !*got; i++) {
        *got = ipcl_next(l, now_ns(), data, &len, &uid, &gid, &pid, multipart);
        if (!*got)
            usleep(1000);
    }
    if (*got) {
        assert_int_equal(uid, getuid());
        assert_int_equal(pid, getpid());
    }
    return len;
}

/* Lets the listener accept and read for a few milliseconds. */
static void pump(struct ipcl *l)
{
    const uint8_t *d;
    size_t len;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    int mp;
    for (int i = 0; i < 20; i++) {
        ipcl_next(l, now_ns(), &d, &len, &uid, &gid, &pid, &mp);
        usleep(1000);
    }
}

/* True once the listener has closed fd (reads EOF or an error). */
static int closed_by_peer(struct ipcl *l, int fd)
{
    const uint8_t *d;
    int mp, got;
    for (int i = 0; i < 1000; i++) {
        next(l, &d, &mp, &got);
        uint8_t buf[256];
        ssize_t r;
        while ((r = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
            ;
        if (r == 0 || (r < 0 && errno != EAGAIN))
            return 1;
    }
    return 0;
}

static void test_messages(void **state)
{
    struct ipcl *l = *state;
    int fd = dial(1);
    pump(l);
    uint8_t greeting[92];
    assert_int_equal(recv(fd, greeting, sizeof greeting, MSG_WAITALL), 92);
    assert_memory_equal(greeting + 64 + 24, "PULL", 4);
    uint8_t h[9], small[100], big[100000];
    memset(small, 's', sizeof small);
    memset(big, 'b', sizeof big);
    put(fd, h, header(h, sizeof small, 0));
    put(fd, small, sizeof small);
    put(fd, h, header(h, sizeof big, 0));
    put(fd, big, sizeof big);
    put(fd, h, header(h, 10, 1)); /* two parts: thrown away, flagged */
    put(fd, small, 10);
    put(fd, h, header(h, 10, 0));
    put(fd, small, 10);
    const uint8_t *d;
    int mp, got;
    assert_int_equal(next(l, &d, &mp, &got), sizeof small);
    assert_true(got && !mp && d[0] == 's');
    assert_int_equal(next(l, &d, &mp, &got), sizeof big);
    assert_true(got && !mp && d[99999] == 'b');
    next(l, &d, &mp, &got);
    assert_true(got && mp);
    assert_int_equal(ipcl_conns(l), 1);
    close(fd);
}

static void test_oversized_and_garbage(void **state)
{
    struct ipcl *l = *state;
    int fd = dial(1);
    uint8_t h[9];
    put(fd, h, header(h, (256 << 10) + 1, 0));
    assert_true(closed_by_peer(l, fd));
    assert_int_equal(l->c.oversized, 1);
    close(fd);
    fd = dial(0);
    put(fd, "GET / HTTP/1.1\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 64);
    assert_true(closed_by_peer(l, fd));
    assert_int_equal(l->c.broken, 1);
    close(fd);
    assert_int_equal(l->bytes, 0);
}

static void test_connection_limit(void **state)
{
    struct ipcl *l = *state;
    int fds[6];
    for (int i = 0; i < 6; i++)
        fds[i] = dial(1);
    pump(l);
    assert_int_equal(ipcl_conns(l), 4);
    assert_int_equal(l->c.refused, 2);
    for (int i = 0; i < 6; i++)
        close(fds[i]);
}

/* Claims of 200 000 bytes with 1 000 sent hold 64 KiB each, not what they
 * claim; beyond the user's share (192 KiB here) a connection is not read;
 * stalled ones are closed and what they held is given back. */
static void test_memory_and_stall(void **state)
{
    struct ipcl *l = *state;
    l->stall_ns = 200000000;
    l->max_bytes_user = 192 << 10;
    int fds[4];
    uint8_t h[9], part[1000];
    memset(part, 'p', sizeof part);
    for (int i = 0; i < 4; i++) {
        fds[i] = dial(1);
        put(fds[i], h, header(h, 200000, 0));
        put(fds[i], part, sizeof part);
    }
    pump(l);
    assert_int_equal(ipcl_conns(l), 4);
    assert_int_equal(l->bytes, 3 * (64u << 10));
    assert_int_equal(l->n_paused, 1);
    int64_t t0 = now_ns();
    while (ipcl_conns(l) && now_ns() - t0 < 5000000000LL) {
        ipcl_tick(l, now_ns(), 1);
        usleep(10000);
    }
    assert_int_equal(ipcl_conns(l), 0);
    assert_int_equal(l->c.stalled, 4);
    assert_int_equal(l->bytes, 0);
    assert_int_equal(l->n_paused, 0);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_and_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_and_stall, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
