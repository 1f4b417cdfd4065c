/* A storage server without a file system, for tests of what joins MPI-IO
 * calls to disk operations: it watches the CallID registry (docs/registry.md)
 * the way the GlusterFS client translator reads it, and while a thread of a
 * process named COMM is inside an MPI-IO call it records a disk operation
 * tagged with that call's job and CallID, through libiotrace-server, from
 * one of two serving threads.  The operation lasts a few microseconds inside
 * the call, so the real matcher pairs it with the real call.  Its kind is a
 * read or a write when the rank's thread is in pread/pwrite at that moment
 * (/proc/TID/syscall), a flush otherwise.
 *
 * usage: registry_brick SERVER_ID COMM STOP_FILE
 * Prints "served N" every 100 operations, for a test to know when it has
 * enough, and "recorded N dropped D" at the end (STOP_FILE exists). */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <iotrace/server.h>

#include "registry.h"

#define MAX_TIDS 256

static iot_server *srv;
static iot_registry *reg;
static const char *comm, *stop_file;
static uint64_t object;
static _Atomic int stopping;

/* The watched threads, rescanned every 20 ms by the main thread. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t tids[MAX_TIDS];
static size_t n_tids;

static int has_comm(const char *pid)
{
    char path[300], name[64] = "";
    snprintf(path, sizeof path, "/proc/%s/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    return ok && strcmp(name, comm) == 0;
}

static void scan(void)
{
    uint32_t found[MAX_TIDS];
    size_t n = 0;
    DIR *proc = opendir("/proc");
    for (struct dirent *p; proc && (p = readdir(proc));) {
        if (p->d_name[0] < '0' || p->d_name[0] > '9' || !has_comm(p->d_name))
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/task", p->d_name);
        DIR *task = opendir(path);
        for (struct dirent *t; task && (t = readdir(task)) && n < MAX_TIDS;)
            if (t->d_name[0] >= '0' && t->d_name[0] <= '9')
                found[n++] = (uint32_t)atol(t->d_name);
        if (task)
            closedir(task);
    }
    if (proc)
        closedir(proc);
    pthread_mutex_lock(&lock);
    memcpy(tids, found, n * sizeof *found);
    n_tids = n;
    pthread_mutex_unlock(&lock);
}

/* x86-64 and aarch64 numbers of the positioned reads and writes. */
static enum iot_disk_kind kind_of(uint32_t tid)
{
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/%u/syscall", tid);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        fclose(f);
    }
    long nr = atol(line);
#if defined(__x86_64__)
    if (nr == SYS_pread64 || nr == SYS_readv || nr == SYS_preadv || nr == SYS_read)
        return IOT_DISK_READV;
    if (nr == SYS_pwrite64 || nr == SYS_writev || nr == SYS_pwritev || nr == SYS_write)
        return IOT_DISK_WRITEV;
#else
    if (nr == SYS_pread64 || nr == SYS_preadv || nr == SYS_read)
        return IOT_DISK_READV;
    if (nr == SYS_pwrite64 || nr == SYS_pwritev || nr == SYS_write)
        return IOT_DISK_WRITEV;
#endif
    return IOT_DISK_FLUSH;
}

static void serve(uint32_t tid, const struct iot_reg_entry *e)
{
    struct iot_disk_op op;
    iot_disk_begin(&op);
    enum iot_disk_kind kind = kind_of(tid);
    nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
    int io = kind != IOT_DISK_FLUSH;
    iot_disk_end(srv, &op, &(struct iot_disk_info){.kind = kind, .object = object,
                                                   .offset = io ? (int64_t)tid * 4096 : -1,
                                                   .length = io ? 4096 : 0,
                                                   .result = io ? 4096 : 0, .job = e->job,
                                                   .callid = e->callid});
}

/* Serving thread k takes the watched threads with tid % 2 == k, and serves
 * each call it sees once. */
static void *worker(void *arg)
{
    uint32_t k = (uint32_t)(uintptr_t)arg;
    uint64_t last[MAX_TIDS] = {0};
    uint32_t last_tid[MAX_TIDS] = {0};
    while (!atomic_load(&stopping)) {
        uint32_t mine[MAX_TIDS];
        size_t n = 0;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_tids; i++)
            if (tids[i] % 2 == k)
                mine[n++] = tids[i];
        pthread_mutex_unlock(&lock);
        for (size_t i = 0; i < n; i++) {
            struct iot_reg_entry e;
            size_t slot = mine[i] % MAX_TIDS;
            if (iot_registry_lookup(reg, mine[i], &e) != 1)
                continue;
            if (last_tid[slot] == mine[i] && last[slot] == e.callid)
                continue;
            last_tid[slot] = mine[i];
            last[slot] = e.callid;
            serve(mine[i], &e);
        }
        nanosleep(&(struct timespec){.tv_nsec = 5000}, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s SERVER_ID COMM STOP_FILE\n", argv[0]);
        return 2;
    }
    comm = argv[2];
    stop_file = argv[3];
    char err[256], name[512];
    const char *base = iot_registry_name(NULL);
    if (!base || iot_registry_user_name(base, (uint32_t)geteuid(), name, sizeof name) < 0) {
        fprintf(stderr, "no registry name\n");
        return 1;
    }
    reg = iot_registry_open_reader(name, (uint32_t)geteuid(), (uint32_t)getegid(), 1, err,
                                   sizeof err);
    if (!reg) {
        fprintf(stderr, "registry %s: %s\n", name, err);
        return 1;
    }
    srv = iot_server_open(&(struct iot_server_options){.server = argv[1]}, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "iot_server_open: %s\n", err);
        return 1;
    }
    object = iot_server_object(srv, "/brick/data.bin");
    printf("watching %s\n", name);
    fflush(stdout);
    pthread_t t[2];
    for (uintptr_t k = 0; k < 2; k++)
        pthread_create(&t[k], NULL, worker, (void *)k);
    uint64_t recorded, dropped, told = 0;
    while (access(stop_file, F_OK) != 0) {
        scan();
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
        iot_server_counts(srv, &recorded, &dropped);
        if (recorded / 100 > told / 100) {
            printf("served %llu\n", (unsigned long long)recorded);
            fflush(stdout);
            told = recorded;
        }
    }
    atomic_store(&stopping, 1);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    iot_server_counts(srv, &recorded, &dropped);
    printf("recorded %llu dropped %llu\n", (unsigned long long)recorded,
           (unsigned long long)dropped);
    iot_server_close(srv);
    iot_registry_close(reg);
    return 0;
}
