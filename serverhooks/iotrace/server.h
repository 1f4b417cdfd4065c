/* libiotrace-server: record disk operations of a storage server, each with
 * the (job, CallID) of the MPI-IO call that caused it, and send them to the
 * node's iotrace agent.
 *
 * Recording never blocks the server: an operation goes into a per-thread
 * buffer with no lock and no system call; a background thread batches and
 * sends.  When the agent is missing or slow, operations are dropped and the
 * drops are counted and reported.  See docs/server-api.md.
 *
 *     iot_server *srv = iot_server_open(&(struct iot_server_options){
 *                                           .server = "node1:/bricks/b1"}, err, sizeof err);
 *     uint64_t obj = iot_server_object(srv, "/data/file.bin");
 *     struct iot_disk_op op;
 *     iot_disk_begin(&op);
 *     ssize_t n = pwrite(fd, buf, len, off);
 *     iot_disk_end(srv, &op, &(struct iot_disk_info){
 *         .kind = IOT_DISK_WRITEV, .object = obj, .offset = off, .length = len,
 *         .result = n < 0 ? -errno : n, .job = job, .callid = callid});
 *     iot_server_close(srv);
 */
#ifndef IOTRACE_SERVER_H
#define IOTRACE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IOT_SERVER_API_VERSION 2 /* 2: iot_disk_end_user() */

/* Operation kinds, as they appear in exports ("func").  The values are the
 * function ids of the wire format (proto/functions.tsv). */
enum iot_disk_kind {
    IOT_DISK_READV = 192,
    IOT_DISK_WRITEV = 193,
    IOT_DISK_FSYNC = 194,
    IOT_DISK_FDATASYNC = 195,
    IOT_DISK_FTRUNCATE = 196,
    IOT_DISK_FALLOCATE = 197,
    IOT_DISK_DISCARD = 198,
    IOT_DISK_ZEROFILL = 199,
    IOT_DISK_CREATE = 200,
    IOT_DISK_OPEN = 201,
    IOT_DISK_UNLINK = 202,
    IOT_DISK_FLUSH = 203,
    IOT_DISK_TRUNCATE = 204,
    IOT_DISK_RENAME = 205,
    IOT_DISK_LINK = 206,
    IOT_DISK_MKNOD = 207,
    IOT_DISK_MKDIR = 208,
    IOT_DISK_RMDIR = 209,
    IOT_DISK_SETATTR = 210,
    IOT_DISK_FSETATTR = 211,
    IOT_DISK_COPY_FILE_RANGE = 212,
};

struct iot_server_options {
    const char *server; /* identity of this server, e.g. "host:/bricks/b1" (required) */
    const char *agent;  /* agent endpoint; NULL: $IOTRACE_AGENT, else the default */
    const char *node;   /* node name; NULL: $IOTRACE_NODE, else the host name */
};

typedef struct iot_server iot_server;

/* Starts recording for this process.  One server identity per process:
 * opening again with the same identity returns the same handle (counted),
 * with another one fails.  NULL on error, with the reason in err. */
iot_server *iot_server_open(const struct iot_server_options *opt, char *err, size_t errlen);

/* Sends what is buffered (waiting at most about a second for the agent)
 * and stops recording when the last handle is closed. */
void iot_server_close(iot_server *srv);

/* A stable id for an object name (a path inside the server's storage);
 * the name itself is sent once.  Cheap enough to call per operation, but
 * servers that keep per-file state should keep the id there. */
uint64_t iot_server_object(iot_server *srv, const char *name);

/* Opaque start of an operation; lives on the caller's stack. */
struct iot_disk_op {
    uint64_t t0;
};

struct iot_disk_info {
    enum iot_disk_kind kind;
    uint64_t object;    /* iot_server_object(), 0 if none */
    int64_t offset;     /* byte offset, -1 if the operation has none */
    uint64_t length;    /* bytes asked for */
    int64_t result;     /* bytes done or 0 on success, -errno on failure */
    const char *job;    /* job of the MPI-IO call it serves, NULL or "" if none */
    uint64_t callid;    /* its CallID, 0 if none */
};

void iot_disk_begin(struct iot_disk_op *op);
void iot_disk_end(iot_server *srv, const struct iot_disk_op *op, const struct iot_disk_info *info);

/* The same, for an operation whose job's tag also named the user it was
 * made for (what the GlusterFS client translator sends): readers give a job
 * to the user who named it first and keep another user's operations naming
 * it apart, as JOB~uUID, so a user cannot pass disk operations off as
 * another user's job.  With iot_disk_end the job is taken by name alone. */
void iot_disk_end_user(iot_server *srv, const struct iot_disk_op *op,
                       const struct iot_disk_info *info, uint32_t uid);

/* Operations recorded, and dropped because a buffer was full. */
void iot_server_counts(const iot_server *srv, uint64_t *recorded, uint64_t *dropped);

#ifdef __cplusplus
}
#endif

#endif
