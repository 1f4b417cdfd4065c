/* libiotrace-server: the storage-server side of iotrace.
 *
 * It is the client library's producer machinery (per-thread rings, the
 * sender thread, the calibrated clock; clientlib/core.c, sender.c, clock.c)
 * without any interposition: a server calls iot_disk_begin/iot_disk_end
 * around each disk operation itself.  Disk records take one ring slot, plus
 * one or two slots carrying the job id when the operation has one; the
 * sender turns them into DiskEvents with a per-batch job dictionary. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "iot_functions.h"
#include "iotrace/server.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert((int)IOT_DISK_READV == (int)IOT_F_DISK_readv &&
                   (int)IOT_DISK_WRITEV == (int)IOT_F_DISK_writev &&
                   (int)IOT_DISK_COPY_FILE_RANGE == (int)IOT_F_DISK_copy_file_range,
               "enum iot_disk_kind follows proto/functions.tsv");

struct iot_server {
    _Atomic uint64_t recorded;
};

static struct iot_server the_server;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static int open_count;
static char identity[sizeof iot_g.server];

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static iot_server *first_open(const struct iot_server_options *opt, char *err, size_t errlen)
{
    iot_producer_configure(&(struct iot_producer_setup){.kind = IOT_PRODUCER_SERVER,
                                                        .server = opt->server,
                                                        .agent = opt->agent,
                                                        .node = opt->node});
    iot_init();
    if (iot_g.cfg.disabled) {
        set_err(err, errlen, "recording is switched off (IOTRACE_DISABLE)");
        return NULL;
    }
    if (!atomic_load(&iot_g.active)) {
        set_err(err, errlen, "recording could not start (see IOTRACE_VERBOSE=1)");
        return NULL;
    }
    snprintf(identity, sizeof identity, "%s", opt->server);
    return &the_server;
}

EXPORT iot_server *iot_server_open(const struct iot_server_options *opt, char *err, size_t errlen)
{
    if (!opt || !opt->server || !opt->server[0]) {
        set_err(err, errlen, "a server identity is required");
        return NULL;
    }
    if (strlen(opt->server) >= sizeof identity) {
        set_err(err, errlen, "server identity longer than %zu bytes", sizeof identity - 1);
        return NULL;
    }
    iot_server *srv = NULL;
    pthread_mutex_lock(&open_lock);
    if (open_count == 0)
        srv = first_open(opt, err, errlen);
    else if (strcmp(identity, opt->server) == 0)
        srv = &the_server;
    else
        set_err(err, errlen, "this process already records as server '%s'", identity);
    if (srv)
        open_count++;
    pthread_mutex_unlock(&open_lock);
    return srv;
}

EXPORT void iot_server_close(iot_server *srv)
{
    if (srv != &the_server)
        return;
    pthread_mutex_lock(&open_lock);
    int last = open_count > 0 && --open_count == 0;
    pthread_mutex_unlock(&open_lock);
    /* Rings stay mapped: a thread still finishing an operation writes into
     * its ring harmlessly; only the sending stops. */
    if (last)
        iot_sender_flush(1000);
}

EXPORT uint64_t iot_server_object(iot_server *srv, const char *name)
{
    if (srv != &the_server || !name || !iot_recording())
        return 0;
    iot_t.internal++;
    uint64_t id = iot_object_register(name);
    iot_t.internal--;
    return id;
}

EXPORT void iot_disk_begin(struct iot_disk_op *op)
{
    if (op)
        op->t0 = iot_clock_raw();
}

/* The job id rides in the slots after the record, 64 bytes each. */
static unsigned job_slots(const char *job, size_t *len)
{
    *len = job ? strnlen(job, IOT_JOB_MAX) : 0;
    return (unsigned)((*len + sizeof(union iot_slot) - 1) / sizeof(union iot_slot));
}

/* Slot k of the reservation iot_rec_reserve() just made (k = 0 is the record). */
static union iot_slot *following_slot(unsigned k)
{
    struct iot_ring *r = iot_t.ring;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    return &r->slots[(h + k) & r->mask];
}

static void record_disk(iot_server *srv, const struct iot_disk_op *op,
                        const struct iot_disk_info *info, uint32_t uid)
{
    if (srv != &the_server || !op || !info || !iot_recording())
        return;
    uint64_t t1 = iot_clock_raw();
    size_t job_len;
    unsigned extra = job_slots(info->job, &job_len);
    struct iot_rec *r = iot_rec_reserve(1 + extra);
    if (!r)
        return;
    r->t0 = op->t0;
    r->t1 = t1;
    r->callid = info->callid;
    r->file = info->object;
    r->offset = info->offset;
    r->bytes = info->length;
    r->ret = info->result;
    r->func = (uint16_t)info->kind;
    r->disk_uid = uid;
    r->kind = IOT_REC_DISK;
    r->pad = (uint8_t)extra;
    for (unsigned i = 0; i < extra; i++) {
        char *text = following_slot(i + 1)->text;
        size_t from = i * sizeof(union iot_slot);
        size_t n = job_len - from < sizeof(union iot_slot) ? job_len - from : sizeof(union iot_slot);
        memset(text, 0, sizeof(union iot_slot));
        memcpy(text, info->job + from, n);
    }
    iot_rec_commit(1 + extra);
    atomic_fetch_add_explicit(&srv->recorded, 1, memory_order_relaxed);
}

EXPORT void iot_disk_end(iot_server *srv, const struct iot_disk_op *op,
                         const struct iot_disk_info *info)
{
    record_disk(srv, op, info, IOT_UID_UNKNOWN);
}

EXPORT void iot_disk_end_user(iot_server *srv, const struct iot_disk_op *op,
                              const struct iot_disk_info *info, uint32_t uid)
{
    record_disk(srv, op, info, uid);
}

EXPORT void iot_server_counts(const iot_server *srv, uint64_t *recorded, uint64_t *dropped)
{
    if (recorded)
        *recorded = srv == &the_server ? atomic_load(&the_server.recorded) : 0;
    if (dropped)
        *dropped = srv == &the_server ? iot_dropped_total() : 0;
}
