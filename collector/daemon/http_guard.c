#include "http_guard.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"
#include "timeutil.h"

/* How often the late connections are looked for: a request is cut within
 * this much after its timeout. */
#define SWEEP_MS 250

struct guarded {
    struct guarded *prev, *next;
    int fd;
    int waiting;      /* no complete request yet */
    int64_t since_ns; /* CLOCK_MONOTONIC since it waits */
    char addr[64];
};

struct http_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int stop;
    int max_waiting, n_waiting;
    int64_t timeout_ns;
    struct guarded *head; /* oldest first among the waiting ones, by since_ns */
    uint64_t cut_late, cut_crowded;
};

/* The socket is shut down, not closed: libmicrohttpd's thread of the
 * connection sees its end and closes it as any other (the fd stays ours to
 * touch until http_guard_close). */
static void cut(struct http_guard *g, struct guarded *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->waiting = 0;
    g->n_waiting--;
}

/* The oldest waiting connection of the address with the most waiting ones:
 * a client that sends its request at once is never the one. */
static struct guarded *crowded(struct http_guard *g)
{
    struct guarded *best = NULL;
    int best_n = 0;
    for (struct guarded *c = g->head; c; c = c->next) {
        if (!c->waiting)
            continue;
        int n = 0;
        for (struct guarded *o = g->head; o; o = o->next)
            n += o->waiting && strcmp(o->addr, c->addr) == 0;
        if (n > best_n || (n == best_n && best && c->since_ns < best->since_ns)) {
            best = c;
            best_n = n;
        }
    }
    return best;
}

static void *sweep(void *arg)
{
    struct http_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        int64_t now = iot_mono_ns();
        for (struct guarded *c = g->head; c; c = c->next)
            if (c->waiting && now - c->since_ns > g->timeout_ns) {
                cut(g, c);
                g->cut_late++;
            }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += SWEEP_MS * 1000000l;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

struct http_guard *http_guard_start(int max_waiting, int64_t timeout_ns)
{
    struct http_guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    g->max_waiting = max_waiting;
    g->timeout_ns = timeout_ns;
    if (pthread_create(&g->thread, NULL, sweep, g) != 0) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
    }
    return g;
}

void http_guard_stop(struct http_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    if (g->cut_late || g->cut_crowded)
        iot_info("http: closed %llu connections without a request in time, %llu for room",
                 (unsigned long long)g->cut_late, (unsigned long long)g->cut_crowded);
    while (g->head) {
        struct guarded *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static void unlink_conn(struct http_guard *g, struct guarded *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* From now on c waits for a request: at the end of the list, which stays
 * in order of since_ns; one too many waiting makes room. */
static void start_waiting(struct http_guard *g, struct guarded *c)
{
    struct guarded **p = &g->head, *last = NULL;
    while (*p) {
        last = *p;
        p = &(*p)->next;
    }
    c->prev = last;
    *p = c;
    c->since_ns = iot_mono_ns();
    c->waiting = 1;
    if (++g->n_waiting > g->max_waiting) {
        struct guarded *victim = crowded(g);
        if (victim) {
            cut(g, victim);
            g->cut_crowded++;
        }
    }
}

struct guarded *http_guard_open(struct http_guard *g, int fd, const char *addr)
{
    struct guarded *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    pthread_mutex_lock(&g->lock);
    start_waiting(g, c);
    pthread_mutex_unlock(&g->lock);
    return c;
}

void http_guard_request(struct http_guard *g, struct guarded *c)
{
    pthread_mutex_lock(&g->lock);
    if (c->waiting) {
        c->waiting = 0;
        g->n_waiting--;
    }
    pthread_mutex_unlock(&g->lock);
}

void http_guard_waiting(struct http_guard *g, struct guarded *c)
{
    pthread_mutex_lock(&g->lock);
    if (!c->waiting) {
        unlink_conn(g, c);
        start_waiting(g, c);
    }
    pthread_mutex_unlock(&g->lock);
}

void http_guard_close(struct http_guard *g, struct guarded *c)
{
    pthread_mutex_lock(&g->lock);
    if (c->waiting)
        g->n_waiting--;
    unlink_conn(g, c);
    pthread_mutex_unlock(&g->lock);
    free(c);
}
