#include "clockserve.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "timeutil.h"

/* One key per node: as many as the collector takes agents, twice over so
 * that open addressing stays short. */
#define KEYS 8192
#define NODE_MAX 64

struct key {
    uint64_t id; /* 0: free */
    uint8_t key[IOT_CLOCKUDP_KEY];
    char node[NODE_MAX];
};

struct clockserve {
    int fd;
    unsigned port;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t lock; /* the table and the counts */
    struct key keys[KEYS];
    size_t n_keys;
    struct clockserve_counts count;
};

static size_t slot_of(uint64_t id) { return (size_t)(id * 0x9e3779b97f4a7c15ull >> 40) & (KEYS - 1); }

static struct key *find(struct clockserve *cs, uint64_t id)
{
    for (size_t i = slot_of(id), n = 0; n < KEYS; i = (i + 1) & (KEYS - 1), n++) {
        if (cs->keys[i].id == id)
            return &cs->keys[i];
        if (!cs->keys[i].id)
            return NULL;
    }
    return NULL;
}

/* Removal with backward shift: lookups stop at the first free slot. */
static void remove_at(struct clockserve *cs, size_t i)
{
    cs->keys[i].id = 0;
    cs->n_keys--;
    for (size_t k = (i + 1) & (KEYS - 1); cs->keys[k].id; k = (k + 1) & (KEYS - 1)) {
        struct key e = cs->keys[k];
        cs->keys[k].id = 0;
        size_t j = slot_of(e.id);
        while (cs->keys[j].id)
            j = (j + 1) & (KEYS - 1);
        cs->keys[j] = e;
    }
}

int clockserve_set_key(struct clockserve *cs, const char *node, uint64_t key_id,
                       const uint8_t key[IOT_CLOCKUDP_KEY])
{
    if (!key_id)
        return -1;
    pthread_mutex_lock(&cs->lock);
    /* A node's earlier key goes: a session's key is its own. */
    for (size_t i = 0; i < KEYS; i++)
        if (cs->keys[i].id && strncmp(cs->keys[i].node, node, NODE_MAX) == 0) {
            remove_at(cs, i);
            break;
        }
    struct key *k = find(cs, key_id);
    if (!k) {
        if (cs->n_keys >= KEYS / 2) {
            pthread_mutex_unlock(&cs->lock);
            return -1;
        }
        size_t i = slot_of(key_id);
        while (cs->keys[i].id)
            i = (i + 1) & (KEYS - 1);
        k = &cs->keys[i];
        cs->n_keys++;
    }
    k->id = key_id;
    memcpy(k->key, key, IOT_CLOCKUDP_KEY);
    snprintf(k->node, sizeof k->node, "%s", node);
    pthread_mutex_unlock(&cs->lock);
    return 0;
}

static void answer(struct clockserve *cs, const uint8_t *buf, long n, int64_t t2,
                   const struct sockaddr *from, socklen_t fromlen)
{
    struct iot_clockudp_msg msg;
    uint8_t key[IOT_CLOCKUDP_KEY];
    int known = 0;
    if (iot_clockudp_peek(buf, (size_t)n, &msg) == 0 && msg.kind == 1) {
        pthread_mutex_lock(&cs->lock);
        struct key *k = find(cs, msg.key_id);
        if (k) {
            memcpy(key, k->key, sizeof key);
            known = 1;
        }
        pthread_mutex_unlock(&cs->lock);
    }
    if (!known || iot_clockudp_open(buf, (size_t)n, key, &msg) < 0) {
        pthread_mutex_lock(&cs->lock);
        cs->count.refused++;
        pthread_mutex_unlock(&cs->lock);
        return; /* no answer: nothing for a prober or a forger to learn */
    }
    uint8_t out[IOT_CLOCKUDP_ANSWER];
    msg.kind = 2;
    msg.t2 = t2;
    msg.t3 = iot_now_ns(); /* last, just before the send */
    size_t len = iot_clockudp_pack(out, &msg, key);
    if (sendto(cs->fd, out, len, MSG_DONTWAIT, from, fromlen) < 0)
        iot_debug("clock: cannot answer over UDP: %s", strerror(errno));
    pthread_mutex_lock(&cs->lock);
    cs->count.answered++;
    pthread_mutex_unlock(&cs->lock);
}

static void *run(void *arg)
{
    struct clockserve *cs = arg;
    while (!atomic_load(&cs->stop)) {
        struct pollfd p = {cs->fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        for (;;) {
            uint8_t buf[128];
            struct sockaddr_storage from;
            socklen_t fromlen = sizeof from;
            int64_t t2;
            long n = iot_clockudp_recv(cs->fd, buf, sizeof buf, &t2, (struct sockaddr *)&from,
                                       &fromlen);
            if (n < 0) {
                if (errno == ENOMSG)
                    continue; /* no kernel time: not answered, the agent tries again */
                break;
            }
            answer(cs, buf, n, t2, (struct sockaddr *)&from, fromlen);
        }
    }
    return NULL;
}

struct clockserve *clockserve_start(const char *host, unsigned port, char *why, size_t whylen)
{
    why[0] = '\0';
    char service[16];
    snprintf(service, sizeof service, "%u", port);
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_DGRAM},
                    *res = NULL;
    const char *node = host && host[0] && strcmp(host, "*") != 0 ? host : NULL;
    int rc = getaddrinfo(node, service, &hints, &res);
    if (rc != 0) {
        snprintf(why, whylen, "cannot resolve %s: %s", node ? node : "*", gai_strerror(rc));
        return NULL;
    }
    struct clockserve *cs = calloc(1, sizeof *cs);
    if (!cs) {
        freeaddrinfo(res);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    cs->fd = -1;
    for (struct addrinfo *a = res; a && cs->fd < 0; a = a->ai_next) {
        int fd = iot_clockudp_socket(a->ai_family);
        if (fd < 0)
            continue;
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0)
            cs->fd = fd;
        else {
            snprintf(why, whylen, "cannot bind UDP port %u: %s", port, strerror(errno));
            close(fd);
        }
    }
    freeaddrinfo(res);
    if (cs->fd < 0) {
        if (!why[0])
            snprintf(why, whylen, "no UDP socket for %s", node ? node : "*");
        free(cs);
        return NULL;
    }
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    cs->port = port;
    if (getsockname(cs->fd, (struct sockaddr *)&sa, &salen) == 0) {
        if (sa.ss_family == AF_INET)
            cs->port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        else if (sa.ss_family == AF_INET6)
            cs->port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    }
    pthread_mutex_init(&cs->lock, NULL);
    if ((rc = pthread_create(&cs->thread, NULL, run, cs)) != 0) {
        snprintf(why, whylen, "cannot start the clock thread: %s", strerror(rc));
        close(cs->fd);
        free(cs);
        return NULL;
    }
    pthread_setname_np(cs->thread, "iotrace-clock");
    return cs;
}

unsigned clockserve_port(const struct clockserve *cs) { return cs->port; }

void clockserve_counts(struct clockserve *cs, struct clockserve_counts *out)
{
    pthread_mutex_lock(&cs->lock);
    *out = cs->count;
    pthread_mutex_unlock(&cs->lock);
}

void clockserve_stop(struct clockserve *cs)
{
    if (!cs)
        return;
    atomic_store(&cs->stop, 1);
    pthread_join(cs->thread, NULL);
    close(cs->fd);
    pthread_mutex_destroy(&cs->lock);
    free(cs);
}
