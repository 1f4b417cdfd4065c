/* forge-tag: a GlusterFS translator an attacker loads into a storage client
 * of their own (tests/server/gfapi_forge.c) to put iotrace tags of their
 * choosing into every write: options `job`, `callid` and `uid` become
 * iotrace.job, iotrace.callid and iotrace.uid, as iotrace-client would send
 * them for a caller of that user inside that call. The brick's iotrace-server
 * must not believe them from such a client (docs/gluster.md, *Whose tags
 * count*); gluster.forged_tags checks that it does not. */
#include "gluster_config.h"

#include <inttypes.h>
#include <stdlib.h>

#include <glusterfs/defaults.h>
#include <glusterfs/dict.h>
#include <glusterfs/logging.h>
#include <glusterfs/stack.h>
#include <glusterfs/xlator.h>

#define EXPORT __attribute__((visibility("default")))

struct forge {
    char *job;
    uint64_t callid;
    uint32_t uid;
};

static int32_t forge_writev(call_frame_t *frame, xlator_t *this, fd_t *fd, struct iovec *vector,
                            int32_t count, off_t offset, uint32_t flags, struct iobref *iobref,
                            dict_t *xdata)
{
    struct forge *f = this->private;
    dict_t *x = xdata ? dict_copy_with_ref(xdata, NULL) : dict_new();
    if (x && (dict_set_dynstr_with_alloc(x, "iotrace.job", f->job) != 0 ||
              dict_set_uint64(x, "iotrace.callid", f->callid) != 0 ||
              dict_set_uint32(x, "iotrace.uid", f->uid) != 0)) {
        dict_unref(x);
        x = NULL;
    }
    STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->writev, fd, vector, count,
                    offset, flags, iobref, x ? x : xdata);
    if (x)
        dict_unref(x);
    return 0;
}

static int32_t forge_init(xlator_t *this)
{
    struct forge *f = calloc(1, sizeof *f);
    char *job = NULL, *callid = NULL, *uid = NULL;
    if (!f || dict_get_str(this->options, "job", &job) != 0 ||
        dict_get_str(this->options, "callid", &callid) != 0 ||
        dict_get_str(this->options, "uid", &uid) != 0 || !(f->job = strdup(job))) {
        gf_log(this->name, GF_LOG_ERROR, "forge-tag needs the options job, callid and uid");
        free(f);
        return -1;
    }
    f->callid = strtoull(callid, NULL, 0);
    f->uid = (uint32_t)strtoul(uid, NULL, 0);
    this->private = f;
    gf_log(this->name, GF_LOG_INFO, "forging job=%s callid=0x%" PRIx64 " uid=%u", f->job,
           f->callid, f->uid);
    return 0;
}

static void forge_fini(xlator_t *this)
{
    struct forge *f = this->private;
    this->private = NULL;
    if (f)
        free(f->job);
    free(f);
}

static struct xlator_fops forge_fops = {.writev = forge_writev};
static struct xlator_cbks forge_cbks;
static volume_option_t forge_options[] = {
    {.key = {"job"}, .type = GF_OPTION_TYPE_STR},
    {.key = {"callid"}, .type = GF_OPTION_TYPE_STR},
    {.key = {"uid"}, .type = GF_OPTION_TYPE_STR},
    {.key = {NULL}},
};

EXPORT xlator_api_t xlator_api = {
    .init = forge_init,
    .fini = forge_fini,
    .op_version = {1},
    .fops = &forge_fops,
    .cbks = &forge_cbks,
    .options = forge_options,
    .identifier = "forge-tag",
    .category = GF_EXPERIMENTAL,
};
