#include "clockudp.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "link.h"

#define MAGIC 0x31435449u /* "ITC1" */

static void put_i64(uint8_t *p, int64_t v) { iot_put_u64(p, (uint64_t)v); }
static int64_t get_i64(const uint8_t *p) { return (int64_t)iot_get_u64(p); }

static void mac(uint8_t out[IOT_CLOCKUDP_MAC], const uint8_t *buf, size_t len,
                const uint8_t key[IOT_CLOCKUDP_KEY])
{
    crypto_generichash(out, IOT_CLOCKUDP_MAC, buf, len, key, IOT_CLOCKUDP_KEY);
}

size_t iot_clockudp_pack(uint8_t *buf, const struct iot_clockudp_msg *msg,
                         const uint8_t key[IOT_CLOCKUDP_KEY])
{
    size_t len = msg->kind == 2 ? IOT_CLOCKUDP_ANSWER : IOT_CLOCKUDP_REQUEST;
    memset(buf, 0, len);
    iot_put_u32(buf, MAGIC);
    buf[4] = (uint8_t)msg->kind;
    iot_put_u64(buf + 8, msg->key_id);
    iot_put_u64(buf + 16, msg->nonce);
    put_i64(buf + 24, msg->t1);
    if (msg->kind == 2) {
        put_i64(buf + 32, msg->t2);
        put_i64(buf + 40, msg->t3);
    }
    mac(buf + len - IOT_CLOCKUDP_MAC, buf, len - IOT_CLOCKUDP_MAC, key);
    return len;
}

int iot_clockudp_peek(const uint8_t *buf, size_t len, struct iot_clockudp_msg *msg)
{
    if (len < 16 || iot_get_u32(buf) != MAGIC || (buf[4] != 1 && buf[4] != 2) ||
        len != (buf[4] == 2 ? IOT_CLOCKUDP_ANSWER : IOT_CLOCKUDP_REQUEST))
        return -1;
    memset(msg, 0, sizeof *msg);
    msg->kind = buf[4];
    msg->key_id = iot_get_u64(buf + 8);
    return 0;
}

int iot_clockudp_open(const uint8_t *buf, size_t len, const uint8_t key[IOT_CLOCKUDP_KEY],
                      struct iot_clockudp_msg *msg)
{
    if (iot_clockudp_peek(buf, len, msg) < 0)
        return -1;
    uint8_t want[IOT_CLOCKUDP_MAC];
    mac(want, buf, len - IOT_CLOCKUDP_MAC, key);
    if (sodium_memcmp(want, buf + len - IOT_CLOCKUDP_MAC, IOT_CLOCKUDP_MAC) != 0)
        return -1;
    msg->nonce = iot_get_u64(buf + 16);
    msg->t1 = get_i64(buf + 24);
    if (msg->kind == 2) {
        msg->t2 = get_i64(buf + 32);
        msg->t3 = get_i64(buf + 40);
    }
    return 0;
}

int iot_clockudp_socket(int family)
{
    int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int64_t ns_of(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec; }

int64_t iot_clockudp_skew_ns(void)
{
    /* The kernel's clock by the system call itself, which an interposer
     * of clock_gettime() does not see; the process's on either side of
     * it, so that the midpoint is the same instant. */
    struct timespec a, k, b;
    clock_gettime(CLOCK_REALTIME, &a);
    if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &k) != 0)
        return 0;
    clock_gettime(CLOCK_REALTIME, &b);
    return ns_of(&a) + (ns_of(&b) - ns_of(&a)) / 2 - ns_of(&k);
}

long iot_clockudp_recv(int fd, uint8_t *buf, size_t cap, int64_t *at_ns,
                       struct sockaddr *from, socklen_t *fromlen)
{
    struct iovec iov = {buf, cap};
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(struct timespec))];
    } ctl;
    struct msghdr mh = {.msg_name = from, .msg_namelen = from ? *fromlen : 0, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = ctl.space,
                        .msg_controllen = sizeof ctl.space};
    ssize_t n = recvmsg(fd, &mh, 0);
    if (n < 0)
        return -1;
    if (from)
        *fromlen = mh.msg_namelen;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(c), sizeof t);
            *at_ns = ns_of(&t) + iot_clockudp_skew_ns();
            return (long)n;
        }
    errno = ENOMSG;
    return -1;
}

int iot_clockudp_tcp_endpoint(const char *endpoint, char *host, size_t hostlen,
                              unsigned long *port)
{
    const char *hp = strncmp(endpoint, "tcp://", 6) == 0 ? endpoint + 6 : NULL;
    const char *colon = hp ? strrchr(hp, ':') : NULL;
    if (!colon || (size_t)(colon - hp) >= hostlen)
        return -1;
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = '\0';
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    *port = strtoul(colon + 1, NULL, 10);
    return 0;
}
