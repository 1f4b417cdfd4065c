/* Drives libiotrace-server the way a storage server would: N operations
 * from two threads, each with a job out of J (more than one batch's job
 * dictionary holds), a known CallID, offset and length, one job id longer
 * than the library keeps, and operations with no job at all.
 *
 * With N = "overlap", one thread serves four requests of job "overlap" the
 * way an event-driven server does, several in flight at once: A, then B
 * while A is still running (B outlasts A: they cross), C inside B after A,
 * D after all; CallIDs 1 to 4.
 *
 * With N = "users", it records operations of job J the way a brick does
 * for requests of several users: 3 tagged by uid 0, 2 by uid 65534 and 1
 * whose tag named no user (iot_disk_end_user, iot_disk_end).
 *
 * usage: server_api_demo SERVER_ID N J
 *        server_api_demo SERVER_ID overlap
 *        server_api_demo SERVER_ID users J */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iotrace/server.h>

static iot_server *srv;
static long n_ops, n_jobs;
static uint64_t objects[2];

static void job_name(long i, char *buf, size_t len)
{
    if (i % 10 == 9) {
        buf[0] = '\0'; /* every tenth operation serves no MPI-IO call */
        return;
    }
    if (i == 0) {
        memset(buf, 'L', len - 1); /* longer than the library keeps */
        buf[len - 1] = '\0';
        return;
    }
    snprintf(buf, len, "job-%ld", i % n_jobs);
}

static void *worker(void *arg)
{
    long half = (long)(intptr_t)arg;
    char job[300];
    for (long i = half; i < n_ops; i += 2) {
        job_name(i, job, sizeof job);
        struct iot_disk_op op;
        iot_disk_begin(&op);
        iot_disk_end(srv, &op,
                     &(struct iot_disk_info){.kind = i % 2 ? IOT_DISK_READV : IOT_DISK_WRITEV,
                                             .object = objects[i % 2],
                                             .offset = i * 4096,
                                             .length = 4096,
                                             .result = 4096,
                                             .job = job[0] ? job : NULL,
                                             .callid = job[0] ? (uint64_t)i + 1 : 0});
    }
    return NULL;
}

static void pause_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_nsec = ms * 1000000}, NULL);
}

static void finish(struct iot_disk_op *op, uint64_t callid)
{
    iot_disk_end(srv, op, &(struct iot_disk_info){.kind = IOT_DISK_WRITEV, .object = objects[0],
                                                  .offset = (int64_t)callid * 4096,
                                                  .length = 4096, .result = 4096,
                                                  .job = "overlap", .callid = callid});
}

static void users(const char *job)
{
    static const uint32_t uids[] = {0, 65534, 0, 65534, 0, UINT32_MAX};
    for (size_t i = 0; i < sizeof uids / sizeof uids[0]; i++) {
        struct iot_disk_op op;
        iot_disk_begin(&op);
        struct iot_disk_info info = {.kind = IOT_DISK_WRITEV, .object = objects[0],
                                     .offset = (int64_t)i * 4096, .length = 4096,
                                     .result = 4096, .job = job, .callid = i + 1};
        if (uids[i] == UINT32_MAX)
            iot_disk_end(srv, &op, &info);
        else
            iot_disk_end_user(srv, &op, &info, uids[i]);
    }
}

static void overlapping(void)
{
    struct iot_disk_op a, b, c, d;
    iot_disk_begin(&a);
    pause_ms(2);
    iot_disk_begin(&b);
    pause_ms(2);
    finish(&a, 1);
    pause_ms(2);
    iot_disk_begin(&c);
    pause_ms(2);
    finish(&c, 3);
    pause_ms(2);
    finish(&b, 2);
    pause_ms(2);
    iot_disk_begin(&d);
    pause_ms(2);
    finish(&d, 4);
}

int main(int argc, char **argv)
{
    int overlap = argc == 3 && strcmp(argv[2], "overlap") == 0;
    const char *users_job = argc == 4 && strcmp(argv[2], "users") == 0 ? argv[3] : NULL;
    if (argc != 4 && !overlap) {
        fprintf(stderr,
                "usage: %s SERVER_ID N J\n       %s SERVER_ID overlap\n"
                "       %s SERVER_ID users J\n",
                argv[0], argv[0], argv[0]);
        return 2;
    }
    overlap |= users_job != NULL; /* no worker threads */
    n_ops = overlap ? 0 : atol(argv[2]);
    n_jobs = overlap ? 1 : atol(argv[3]);
    char err[256];
    srv = iot_server_open(&(struct iot_server_options){.server = argv[1]}, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "iot_server_open: %s\n", err);
        return 1;
    }
    if (iot_server_open(&(struct iot_server_options){.server = "another"}, err, sizeof err)) {
        fprintf(stderr, "a second identity was accepted\n");
        return 1;
    }
    printf("second identity refused: %s\n", err);
    objects[0] = iot_server_object(srv, "/even.dat");
    objects[1] = iot_server_object(srv, "/odd.dat");
    pthread_t t[2];
    if (users_job)
        users(users_job);
    else if (overlap)
        overlapping();
    for (long k = 0; k < 2 && !overlap; k++)
        pthread_create(&t[k], NULL, worker, (void *)(intptr_t)k);
    for (int k = 0; k < 2 && !overlap; k++)
        pthread_join(t[k], NULL);
    uint64_t recorded, dropped;
    iot_server_counts(srv, &recorded, &dropped);
    printf("recorded %llu dropped %llu\n", (unsigned long long)recorded,
           (unsigned long long)dropped);
    iot_server_close(srv);
    return 0;
}
