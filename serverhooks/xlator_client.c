/* iotrace-client: GlusterFS translator at the top of a FUSE client's graph.
 *
 * Skeleton stage: every fop passes through unchanged (the defaults that
 * libglusterfs fills in for fops we leave out), except readv and writev, which
 * add IOTRACE_XDATA_PROBE = the caller's thread id (frame->root->pid, which the
 * FUSE bridge takes from the kernel's request header) to the request's xdata.
 * The CallID registry lookup replaces the probe later. */
#include "xlator_common.h"

#include <inttypes.h>

#include <glusterfs/defaults.h>
#include <glusterfs/dict.h>
#include <glusterfs/logging.h>
#include <glusterfs/stack.h>

#define EXPORT __attribute__((visibility("default")))

/* xdata to send down: a copy of the caller's (never modified in place, the
 * caller may share it) or a new dict, with the probe added. Returns a
 * reference the caller drops after winding, or NULL on failure. */
static dict_t *tagged_xdata(xlator_t *this, call_frame_t *frame, dict_t *xdata)
{
    dict_t *out = xdata ? dict_copy_with_ref(xdata, NULL) : dict_new();
    if (!out)
        return NULL;
    if (dict_set_uint64(out, IOTRACE_XDATA_PROBE, (uint64_t)frame->root->pid) != 0) {
        gf_log(this->name, GF_LOG_WARNING, "cannot add %s to xdata", IOTRACE_XDATA_PROBE);
        dict_unref(out);
        return NULL;
    }
    return out;
}

static int32_t iotc_readv(call_frame_t *frame, xlator_t *this, fd_t *fd, size_t size, off_t offset,
                          uint32_t flags, dict_t *xdata)
{
    dict_t *x = tagged_xdata(this, frame, xdata);
    STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->readv, fd, size, offset,
                    flags, x ? x : xdata);
    if (x)
        dict_unref(x);
    return 0;
}

static int32_t iotc_writev(call_frame_t *frame, xlator_t *this, fd_t *fd, struct iovec *vector,
                           int32_t count, off_t offset, uint32_t flags, struct iobref *iobref,
                           dict_t *xdata)
{
    dict_t *x = tagged_xdata(this, frame, xdata);
    STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->writev, fd, vector, count,
                    offset, flags, iobref, x ? x : xdata);
    if (x)
        dict_unref(x);
    return 0;
}

static int32_t iotc_init(xlator_t *this)
{
    return iotrace_xl_conf_init(this, "iotrace-client");
}

static void iotc_fini(xlator_t *this)
{
    iotrace_xl_conf_fini(this);
}

static int32_t iotc_reconfigure(xlator_t *this, dict_t *options)
{
    return iotrace_xl_conf_reconfigure(this, options);
}

static struct xlator_fops iotc_fops = {
    .readv = iotc_readv,
    .writev = iotc_writev,
};

static struct xlator_cbks iotc_cbks;

EXPORT xlator_api_t xlator_api = {
    .init = iotc_init,
    .fini = iotc_fini,
    .reconfigure = iotc_reconfigure,
    .op_version = {1},
    .fops = &iotc_fops,
    .cbks = &iotc_cbks,
    .options = iotrace_xl_options,
    .identifier = "iotrace-client",
    .category = GF_EXPERIMENTAL,
};
