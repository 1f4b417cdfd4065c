/* Drives libiotrace-server the way a storage server would: N operations
 * from two threads, each with a job out of J (more than one batch's job
 * dictionary holds), a known CallID, offset and length, one job id longer
 * than the library keeps, and operations with no job at all.
 *
 * usage: server_api_demo SERVER_ID N J */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s SERVER_ID N J\n", argv[0]);
        return 2;
    }
    n_ops = atol(argv[2]);
    n_jobs = atol(argv[3]);
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
    for (long k = 0; k < 2; k++)
        pthread_create(&t[k], NULL, worker, (void *)(intptr_t)k);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    uint64_t recorded, dropped;
    iot_server_counts(srv, &recorded, &dropped);
    printf("recorded %llu dropped %llu\n", (unsigned long long)recorded,
           (unsigned long long)dropped);
    iot_server_close(srv);
    return 0;
}
