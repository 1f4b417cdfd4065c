/* iotrace-server: GlusterFS translator placed right above storage/posix in a
 * brick's graph.
 *
 * Skeleton stage: every fop passes through unchanged (the defaults that
 * libglusterfs fills in for fops we leave out). readv and writev log at INFO
 * whether the request's xdata carries IOTRACE_XDATA_PROBE, its value, the
 * request's pid as the brick sees it and the thread serving it. Timing the
 * operation and emitting disk events replaces the log line later. */
#include "xlator_common.h"

#include <inttypes.h>
#include <unistd.h>

#include <glusterfs/defaults.h>
#include <glusterfs/dict.h>
#include <glusterfs/logging.h>
#include <glusterfs/stack.h>

#define EXPORT __attribute__((visibility("default")))

static void log_probe(xlator_t *this, call_frame_t *frame, const char *fop, fd_t *fd,
                      off_t offset, size_t len, dict_t *xdata)
{
    uint64_t probe = 0;
    int has = xdata && dict_get_uint64(xdata, IOTRACE_XDATA_PROBE, &probe) == 0;
    char probe_s[32] = "none";
    if (has)
        snprintf(probe_s, sizeof probe_s, "%" PRIu64, probe);
    gf_log(this->name, GF_LOG_INFO,
           "%s gfid=%s offset=%" PRId64 " len=%zu " IOTRACE_XDATA_PROBE "=%s "
           "frame-pid=%d served-by-tid=%d",
           fop, fd && fd->inode ? uuid_utoa(fd->inode->gfid) : "-", (int64_t)offset, len,
           probe_s, (int)frame->root->pid, (int)gettid());
}

static int32_t iots_readv(call_frame_t *frame, xlator_t *this, fd_t *fd, size_t size, off_t offset,
                          uint32_t flags, dict_t *xdata)
{
    log_probe(this, frame, "readv", fd, offset, size, xdata);
    STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->readv, fd, size, offset,
                    flags, xdata);
    return 0;
}

static int32_t iots_writev(call_frame_t *frame, xlator_t *this, fd_t *fd, struct iovec *vector,
                           int32_t count, off_t offset, uint32_t flags, struct iobref *iobref,
                           dict_t *xdata)
{
    log_probe(this, frame, "writev", fd, offset, iov_length(vector, count), xdata);
    STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->writev, fd, vector, count,
                    offset, flags, iobref, xdata);
    return 0;
}

static int32_t iots_init(xlator_t *this)
{
    return iotrace_xl_conf_init(this, "iotrace-server");
}

static void iots_fini(xlator_t *this)
{
    iotrace_xl_conf_fini(this);
}

static int32_t iots_reconfigure(xlator_t *this, dict_t *options)
{
    return iotrace_xl_conf_reconfigure(this, options);
}

static struct xlator_fops iots_fops = {
    .readv = iots_readv,
    .writev = iots_writev,
};

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
