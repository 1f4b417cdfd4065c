/* iotrace-server: GlusterFS translator placed right above storage/posix in a
 * brick's graph.
 *
 * Every fop in IOTRACE_FOPS is timed as a disk operation (iot_disk_begin
 * just before it is wound to posix, iot_disk_end in its callback) and
 * recorded through libiotrace-server with: its kind, the object (the file's
 * path inside the brick, as an iot_server_object id kept in the inode's
 * context), offset, length, result (op_ret, or -op_errno), and the job and
 * CallID that iotrace-client put into xdata (none: NULL/0, still recorded).
 * Those tags are believed only from a client run by root (tag_trust.h): the
 * rest are recorded as the job "JOB~unverified" of no real user, so that no
 * client of an ordinary user can put operations into another user's job.
 * The library takes the serving thread's id itself: posix runs the fop
 * synchronously in the thread that wound it (an io-threads worker), and
 * the callback comes back on that thread.
 *
 * Nothing here blocks or changes a result. When libiotrace-server cannot be
 * started the translator says so once and passes everything through.  With
 * the log level at DEBUG it logs every operation it records. */
#include "xlator_common.h"
#include "tag_trust.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glusterfs/common-utils.h>
#include <glusterfs/defaults.h>
#include <glusterfs/dict.h>
#include <glusterfs/inode.h>
#include <glusterfs/logging.h>
#include <glusterfs/mem-pool.h>
#include <glusterfs/stack.h>

#include <iotrace/server.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------ state */

struct iots_priv {
    struct iotrace_xl_conf conf;
    char *server;    /* identity: "<host>:<brick directory>" */
    iot_server *srv; /* NULL: recording is off, fops pass through */
    unsigned privileged_ports;       /* a peer port below it is root's */
    atomic_uint_fast64_t unverified; /* operations whose tags were not believed */
    _Atomic int64_t next_warning;    /* CLOCK_MONOTONIC second of the next log line */
};

#define IOTS_JOB_MAX 127
#define IOTS_UID_NONE UINT32_MAX
#define IOTS_WARN_EVERY 60 /* seconds between two lines about unverified tags */

/* Per operation in flight, from this->local_pool, in frame->local. */
struct iots_local {
    struct iot_disk_op op;
    struct iot_disk_info info;
    inode_t *stale; /* rename, unlink, rmdir: forget this inode's object once done */
    uint32_t uid;   /* whose the job is (iots_read_tag); IOTS_UID_NONE: not known */
    char job[IOTS_JOB_MAX + 1];
    int unverified; /* tagged by a client not run by root */
};

static const char *kind_name(enum iot_disk_kind k)
{
    /* In enum iot_disk_kind order, from IOT_DISK_READV on. */
    static const char *const names[] = {
        "readv",    "writev", "fsync",  "fdatasync", "ftruncate", "fallocate", "discard",
        "zerofill", "create", "open",   "unlink",    "flush",     "truncate",  "rename",
        "link",     "mknod",  "mkdir",  "rmdir",     "setattr",   "fsetattr",  "copy_file_range",
    };
    _Static_assert(sizeof names / sizeof names[0] ==
                       IOT_DISK_COPY_FILE_RANGE - IOT_DISK_READV + 1, "one name per kind");
    unsigned i = (unsigned)k - IOT_DISK_READV;
    return i < sizeof names / sizeof names[0] ? names[i] : "?";
}

static int debug_on(xlator_t *this)
{
    gf_loglevel_t l = this->loglevel ? this->loglevel : gf_log_get_loglevel();
    return l >= GF_LOG_DEBUG;
}

/* ------------------------------------------------------------ objects */

static int rooted(const char *p) { return p && p[0] == '/'; }

/* The object id of a file: kept in the inode's context once known by its
 * path inside the brick ("/dir/file"). When the brick only knows it by gfid
 * ("<gfid:...>"), the id of that name is used and not kept, so that the path
 * takes over once a lookup has made it known. */
static uint64_t iots_object(xlator_t *this, struct iots_priv *p, inode_t *inode, const char *path)
{
    uint64_t id = 0;
    if (inode && inode_ctx_get(inode, this, &id) == 0 && id)
        return id;
    char *owned = NULL;
    const char *name = NULL;
    if (rooted(path))
        name = path;
    else if (inode && inode_path(inode, NULL, &owned) >= 0 && rooted(owned))
        name = owned;
    else if (path)
        name = path; /* "<gfid:parent>/name" */
    else if (owned)
        name = owned; /* "<gfid:...>" */
    char gfid[64];
    if (!name && inode) {
        snprintf(gfid, sizeof gfid, "<gfid:%s>", uuid_utoa(inode->gfid));
        name = gfid;
    }
    if (name) {
        id = iot_server_object(p->srv, name);
        if (id && inode && rooted(name))
            inode_ctx_set(inode, this, &id);
        if (debug_on(this))
            gf_log(this->name, GF_LOG_DEBUG, "object 0x%" PRIx64 " = %s%s", id, name,
                   inode && rooted(name) ? "" : " (not kept)");
    }
    GF_FREE(owned);
    return id;
}

/* ------------------------------------------------------------ operations */

/* xdata for posix without our keys: posix turns every xdata key of an
 * entry-creating fop (create, mknod, mkdir, link, symlink) into an xattr of
 * the new file, stops at the first one it cannot set ("iotrace.job" is in no
 * xattr namespace) and logs an error. NULL: nothing to strip. */
static dict_t *iots_strip(dict_t *xdata)
{
    static char *const keys[] = {IOTRACE_XDATA_JOB, IOTRACE_XDATA_CALLID, IOTRACE_XDATA_UID};
    enum { N_KEYS = sizeof keys / sizeof keys[0] };
    int ours = 0;
    for (int i = 0; xdata && i < N_KEYS; i++)
        ours |= dict_get(xdata, keys[i]) != NULL;
    if (!ours)
        return NULL;
    dict_t *x = dict_copy_with_ref(xdata, NULL);
    if (!x)
        return NULL;
    for (int i = 0; i < N_KEYS; i++)
        dict_del(x, keys[i]);
    return x;
}

/* Says, at most once a minute, that a client's tags were not believed, and
 * how many operations that has been so far. */
static void iots_warn_unverified(xlator_t *this, struct iots_priv *p, const call_stack_t *root,
                                 const char *job, const char *recorded, uint32_t uid, uint64_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t due = atomic_load_explicit(&p->next_warning, memory_order_relaxed);
    if (ts.tv_sec < due || !atomic_compare_exchange_strong(&p->next_warning, &due,
                                                           (int64_t)ts.tv_sec + IOTS_WARN_EVERY))
        return;
    char claimed[16] = "-";
    if (uid != IOTS_UID_NONE)
        snprintf(claimed, sizeof claimed, "%" PRIu32, uid);
    gf_log(this->name, GF_LOG_WARNING,
           "iotrace tags from %s not trusted (not from a port below %u, so not from a client "
           "run by root): job %s iotrace.uid %s of a request of uid %u recorded as job %s of "
           "uid %u, no real user; %" PRIu64 " operations so far",
           root->identifier[0] ? root->identifier : "a client without an address",
           p->privileged_ports, job ? job : "-", claimed, (unsigned)root->uid,
           recorded ? recorded : "-", IOTRACE_UID_UNVERIFIED, n);
}

/* Job, CallID and user of the tag the request carries, into l. From a
 * client run by root they are taken as they come: its iotrace-client took
 * the uid from the caller's credentials (the brick's own copy of them may
 * have been squashed since) and job and CallID from that user's registry.
 * From anyone else the job becomes "JOB~unverified", given to a uid no
 * account has (IOTRACE_UID_UNVERIFIED), so readers never count the operation
 * in the job it names nor in a job a real user named "JOB~unverified". */
static void iots_read_tag(xlator_t *this, struct iots_priv *p, const call_stack_t *root,
                          dict_t *xdata, struct iots_local *l)
{
    l->uid = IOTS_UID_NONE;
    if (!xdata)
        return;
    char *job = NULL;
    uint64_t callid = 0;
    uint32_t uid;
    int tagged = 0;
    if (dict_get_str(xdata, IOTRACE_XDATA_JOB, &job) == 0 && job && job[0])
        tagged = 1;
    else
        job = NULL;
    if (dict_get_uint64(xdata, IOTRACE_XDATA_CALLID, &callid) == 0) {
        l->info.callid = callid;
        tagged = 1;
    }
    if (dict_get_uint32(xdata, IOTRACE_XDATA_UID, &uid) == 0) {
        l->uid = uid;
        tagged = 1;
    }
    if (!tagged)
        return;
    if (iotrace_peer_privileged(root->identifier, p->privileged_ports)) {
        if (job) {
            snprintf(l->job, sizeof l->job, "%s", job);
            l->info.job = l->job;
        }
        if (l->uid == IOTS_UID_NONE)
            l->uid = (uint32_t)root->uid;
        return;
    }
    uint32_t claimed = l->uid;
    l->uid = IOTRACE_UID_UNVERIFIED;
    l->unverified = 1;
    if (job) {
        iotrace_unverified_job(job, l->job, sizeof l->job);
        l->info.job = l->job;
    }
    uint64_t n = atomic_fetch_add_explicit(&p->unverified, 1, memory_order_relaxed) + 1;
    iots_warn_unverified(this, p, root, job, job ? l->job : NULL, claimed, n);
}

/* Sets up frame->local for an operation about to be wound and starts its
 * clock. 0: not recorded (recording off, or no memory), wind as a tail. */
static int iots_start(xlator_t *this, call_frame_t *frame, enum iot_disk_kind kind, loc_t *loc,
                      fd_t *fd, int64_t offset, uint64_t length, unsigned flags, dict_t *xdata)
{
    struct iots_priv *p = this->private;
    if (!p->srv)
        return 0;
    struct iots_local *l = mem_get0(this->local_pool);
    if (!l)
        return 0;
    l->info.kind = kind;
    if (loc)
        l->info.object = iots_object(this, p, loc->inode, loc->path);
    else if (fd)
        l->info.object = iots_object(this, p, fd->inode, NULL);
    l->info.offset = offset;
    l->info.length = length;
    iots_read_tag(this, p, frame->root, xdata, l);
    if ((flags & IOTRACE_FOP_UNNAME) && loc && loc->inode)
        l->stale = inode_ref(loc->inode);
    frame->local = l;
    iot_disk_begin(&l->op);
    return 1;
}

/* In the callback: records the operation and frees frame->local. */
static void iots_finish(xlator_t *this, call_frame_t *frame, int32_t op_ret, int32_t op_errno)
{
    struct iots_local *l = frame->local;
    frame->local = NULL;
    if (!l)
        return;
    struct iots_priv *p = this->private;
    l->info.result = op_ret >= 0 ? (int64_t)op_ret : -(int64_t)op_errno;
    if (l->uid == IOTS_UID_NONE)
        iot_disk_end(p->srv, &l->op, &l->info);
    else
        iot_disk_end_user(p->srv, &l->op, &l->info, l->uid);
    if (debug_on(this))
        gf_log(this->name, GF_LOG_DEBUG,
               "disk %s object=0x%" PRIx64 " offset=%" PRId64 " length=%" PRIu64
               " result=%" PRId64 " job=%s uid=%" PRId64 " callid=0x%" PRIx64 " tid=%d%s",
               kind_name(l->info.kind), l->info.object, l->info.offset, l->info.length,
               l->info.result, l->info.job ? l->info.job : "-",
               l->uid == IOTS_UID_NONE ? (int64_t)-1 : (int64_t)l->uid, l->info.callid,
               (int)gettid(), l->unverified ? " (tags not trusted)" : "");
    if (l->stale) {
        if (op_ret >= 0)
            inode_ctx_del(l->stale, this, NULL);
        inode_unref(l->stale);
    }
    mem_put(l);
}

/* One wrapper and one callback per fop in IOTRACE_FOPS. */
#define IOTS_FOP(FOP, KIND, P, A, CP, CA, LOC, FD, OFF, LEN, FL)                                \
    static int32_t iots_##FOP##_cbk(call_frame_t *frame, void *cookie, xlator_t *this,        \
                                    int32_t op_ret, int32_t op_errno, IOTRACE_UNPAREN CP)     \
    {                                                                                         \
        (void)cookie;                                                                         \
        iots_finish(this, frame, op_ret, op_errno);                                           \
        STACK_UNWIND_STRICT(FOP, frame, op_ret, op_errno, IOTRACE_UNPAREN CA);                \
        return 0;                                                                             \
    }                                                                                         \
    static int32_t iots_##FOP(call_frame_t *frame, xlator_t *this, IOTRACE_UNPAREN P,         \
                              dict_t *xdata)                                                  \
    {                                                                                         \
        dict_t *stripped_ = ((FL)&IOTRACE_FOP_ENTRY) ? iots_strip(xdata) : NULL;              \
        dict_t *down_ = stripped_ ? stripped_ : xdata;                                        \
        if (iots_start(this, frame, KIND, LOC, FD, OFF, LEN, FL, xdata))                      \
            STACK_WIND(frame, iots_##FOP##_cbk, FIRST_CHILD(this),                            \
                       FIRST_CHILD(this)->fops->FOP, IOTRACE_UNPAREN A, down_);               \
        else                                                                                  \
            STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->FOP,           \
                            IOTRACE_UNPAREN A, down_);                                        \
        if (stripped_)                                                                        \
            dict_unref(stripped_);                                                            \
        return 0;                                                                             \
    }
IOTRACE_FOPS(IOTS_FOP)
#undef IOTS_FOP

/* ------------------------------------------------------------ life cycle */

/* "<host>:<brick directory>", the directory from the storage/posix below
 * (else the brick's volfile-id, else our volume name). */
static char *iots_identity(xlator_t *this)
{
    const char *where = NULL;
    for (xlator_t *xl = FIRST_CHILD(this); xl; xl = xl->children ? xl->children->xlator : NULL) {
        char *dir = NULL;
        if (xl->type && strcmp(xl->type, "storage/posix") == 0) {
            if (xl->options && dict_get_str(xl->options, "directory", &dir) == 0 && dir && dir[0])
                where = dir;
            break;
        }
    }
    if (!where && this->ctx && this->ctx->cmd_args.volfile_id)
        where = this->ctx->cmd_args.volfile_id;
    if (!where)
        where = this->name;
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    char *id = NULL;
    if (asprintf(&id, "%s:%s", host, where) < 0)
        return NULL;
    return id;
}

static int32_t iots_init(xlator_t *this)
{
    if (iotrace_xl_check_graph(this, "iotrace-server") != 0)
        return -1;
    struct iots_priv *p = calloc(1, sizeof *p);
    if (!p) {
        gf_log(this->name, GF_LOG_ERROR, "out of memory");
        return -1;
    }
    if (iotrace_xl_conf_load(this, this->options, &p->conf) != 0)
        goto fail;
    if (!(p->server = iots_identity(this)) ||
        !(this->local_pool = mem_pool_new(struct iots_local, 64))) {
        gf_log(this->name, GF_LOG_ERROR, "out of memory");
        goto fail;
    }
    char err[256] = "";
    p->srv = iot_server_open(
        &(struct iot_server_options){.server = p->server, .agent = p->conf.agent}, err, sizeof err);
    if (!p->srv)
        gf_log(this->name, GF_LOG_ERROR,
               "cannot start libiotrace-server for %s: %s; disk operations are not recorded "
               "(the brick serves as usual)",
               p->server, err[0] ? err : "unknown error");
    p->privileged_ports = iotrace_privileged_ports();
    this->private = p;
    gf_log(this->name, GF_LOG_INFO,
           "iotrace-server loaded: server=%s agent=%s tags trusted from ports below %u%s",
           p->server, p->conf.agent ? p->conf.agent : "(default)", p->privileged_ports,
           p->srv ? "" : " (not recording)");
    return 0;
fail:
    if (this->local_pool) {
        mem_pool_destroy(this->local_pool);
        this->local_pool = NULL;
    }
    iotrace_xl_conf_free(&p->conf);
    free(p->server);
    free(p);
    return -1;
}

static void iots_fini(xlator_t *this)
{
    struct iots_priv *p = this->private;
    this->private = NULL;
    if (!p)
        return;
    gf_log(this->name, GF_LOG_INFO, "operations with tags not trusted: %" PRIu64,
           (uint64_t)atomic_load(&p->unverified));
    if (p->srv)
        iot_server_close(p->srv);
    if (this->local_pool) {
        mem_pool_destroy(this->local_pool);
        this->local_pool = NULL;
    }
    iotrace_xl_conf_free(&p->conf);
    free(p->server);
    free(p);
}

static int32_t iots_reconfigure(xlator_t *this, dict_t *options)
{
    struct iots_priv *p = this->private;
    struct iotrace_xl_conf fresh = {0};
    if (!p || iotrace_xl_conf_load(this, options, &fresh) != 0)
        return -1;
    /* The library is started once, in init; fops never read conf. */
    if (!iotrace_xl_same(fresh.agent, p->conf.agent))
        gf_log(this->name, GF_LOG_WARNING, "agent %s takes effect when the brick restarts",
               fresh.agent ? fresh.agent : "(default)");
    iotrace_xl_conf_free(&p->conf);
    p->conf = fresh;
    return 0;
}

#define IOTS_FOP_ENTRY(FOP, ...) .FOP = iots_##FOP,
static struct xlator_fops iots_fops = {IOTRACE_FOPS(IOTS_FOP_ENTRY)};
#undef IOTS_FOP_ENTRY

static struct xlator_cbks iots_cbks;

EXPORT xlator_api_t xlator_api = {
    .init = iots_init,
    .fini = iots_fini,
    .reconfigure = iots_reconfigure,
    .op_version = {1},
    .fops = &iots_fops,
    .cbks = &iots_cbks,
    .options = iotrace_xl_options,
    .identifier = "iotrace-server",
    .category = GF_EXPERIMENTAL,
};
