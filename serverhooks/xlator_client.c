/* iotrace-client: GlusterFS translator in a FUSE client's graph.
 *
 * For every fop in IOTRACE_FOPS (the ones that can reach a brick's disk) it
 * looks the calling thread up in the node's CallID registry. The FUSE bridge
 * sets frame->root->pid to the thread id of the process thread that made the
 * system call, and every frame below shares that root, so the lookup works
 * wherever the translator sits. When the thread is inside an MPI-IO call the
 * request is wound with a copy of its xdata (the caller's dict is never
 * modified; a new one if it had none) carrying IOTRACE_XDATA_JOB and
 * IOTRACE_XDATA_CALLID; otherwise it is wound unchanged. Other fops pass
 * through (libglusterfs fills in its default_* fops).
 *
 * The registry is opened on first use and, while it does not exist yet,
 * retried at most once a second; a fop never waits for that (trylock).
 * Placement (volume.sh --client-hook-at): above each protocol/client by
 * default, so disperse's own read-modify-write reads are tagged too; see
 * docs/gluster.md. */
#include "xlator_common.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glusterfs/common-utils.h>
#include <glusterfs/defaults.h>
#include <glusterfs/dict.h>
#include <glusterfs/logging.h>
#include <glusterfs/stack.h>

#include "registry.h"

#define EXPORT __attribute__((visibility("default")))

#define IOTC_MAX_RETIRED 16

struct iotc_priv {
    struct iotrace_xl_conf conf;
    pthread_mutex_t lock;        /* open attempts and reconfigure */
    char *reg_name;              /* resolved registry name; NULL: off */
    atomic_bool off;             /* registry "off": tag nothing */
    _Atomic(iot_registry *) reg; /* NULL until opened */
    _Atomic int64_t next_try;    /* CLOCK_MONOTONIC second of the next open */
    char last_err[256];          /* last open error logged (under lock) */
    /* Registries replaced by reconfigure stay mapped until fini: a fop may
     * still be reading one. */
    iot_registry *retired[IOTC_MAX_RETIRED];
    unsigned nretired;
    atomic_uint_fast64_t tagged, untagged;
};

static int64_t now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec;
}

/* The registry, opening it if it is time to try. Never blocks. */
static iot_registry *iotc_registry(xlator_t *this, struct iotc_priv *p)
{
    iot_registry *r = atomic_load_explicit(&p->reg, memory_order_acquire);
    if (r || atomic_load_explicit(&p->off, memory_order_relaxed))
        return r;
    int64_t now = now_sec();
    if (now < atomic_load_explicit(&p->next_try, memory_order_relaxed))
        return NULL;
    if (pthread_mutex_trylock(&p->lock) != 0)
        return NULL; /* another thread is trying right now */
    r = atomic_load_explicit(&p->reg, memory_order_acquire);
    if (!r && p->reg_name && now >= atomic_load_explicit(&p->next_try, memory_order_relaxed)) {
        atomic_store_explicit(&p->next_try, now + 1, memory_order_relaxed);
        char err[sizeof p->last_err];
        /* Created here if no rank has yet: a registry made only at a
         * rank's first MPI-IO call would be found a second later, and a
         * short job's calls would all go untagged. */
        r = iot_registry_open(p->reg_name, 1, err, sizeof err);
        if (r) {
            atomic_store_explicit(&p->reg, r, memory_order_release);
            p->last_err[0] = '\0';
            gf_log(this->name, GF_LOG_INFO, "reading CallID registry %s", p->reg_name);
        } else if (strcmp(err, p->last_err) != 0) {
            /* A registry we may not create (permissions) may appear later. */
            snprintf(p->last_err, sizeof p->last_err, "%s", err);
            gf_log(this->name, GF_LOG_INFO, "%s; requests stay untagged, retrying every second",
                   err);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return r;
}

/* xdata to wind with when the calling thread is inside an MPI-IO call: a
 * copy of the caller's (or a new dict) with job and CallID. NULL: wind the
 * caller's unchanged. The result is a reference the caller drops. */
static dict_t *iotc_tag(xlator_t *this, call_frame_t *frame, dict_t *xdata)
{
    struct iotc_priv *p = this->private;
    /* Internal requests (self-heal, rebalance, ...) have pids <= 0. */
    if (frame->root->pid <= 0)
        return NULL;
    iot_registry *r = iotc_registry(this, p);
    struct iot_reg_entry e;
    if (!r || !iot_registry_lookup(r, (uint32_t)frame->root->pid, &e)) {
        if (r)
            atomic_fetch_add_explicit(&p->untagged, 1, memory_order_relaxed);
        return NULL;
    }
    dict_t *out = xdata ? dict_copy_with_ref(xdata, NULL) : dict_new();
    if (!out)
        return NULL;
    if ((e.job[0] && dict_set_dynstr_with_alloc(out, IOTRACE_XDATA_JOB, e.job) != 0) ||
        dict_set_uint64(out, IOTRACE_XDATA_CALLID, e.callid) != 0) {
        gf_log(this->name, GF_LOG_WARNING, "cannot add the CallID to xdata (out of memory?)");
        dict_unref(out);
        return NULL;
    }
    atomic_fetch_add_explicit(&p->tagged, 1, memory_order_relaxed);
    if ((this->loglevel ? this->loglevel : gf_log_get_loglevel()) >= GF_LOG_TRACE)
        gf_log(this->name, GF_LOG_TRACE, "tid %d: job %s CallID 0x%" PRIx64,
               (int)frame->root->pid, e.job, e.callid);
    return out;
}

/* One wrapper per fop in IOTRACE_FOPS: tag, wind (as a tail call: nothing
 * to do on the way back), drop our reference. */
#define IOTC_FOP(FOP, KIND, P, A, CP, CA, LOC, FD, OFF, LEN, FL)                                \
    static int32_t iotc_##FOP(call_frame_t *frame, xlator_t *this, IOTRACE_UNPAREN P,         \
                              dict_t *xdata)                                                  \
    {                                                                                         \
        dict_t *tagged_ = iotc_tag(this, frame, xdata);                                       \
        STACK_WIND_TAIL(frame, FIRST_CHILD(this), FIRST_CHILD(this)->fops->FOP,               \
                        IOTRACE_UNPAREN A, tagged_ ? tagged_ : xdata);                        \
        if (tagged_)                                                                          \
            dict_unref(tagged_);                                                              \
        return 0;                                                                             \
    }
IOTRACE_FOPS(IOTC_FOP)
#undef IOTC_FOP

/* Resolves the registry option (IOTRACE_REGISTRY, default, "off"). */
static int iotc_resolve(const char *option, char **name_out)
{
    const char *name = iot_registry_name(option);
    *name_out = NULL;
    if (name && !(*name_out = strdup(name)))
        return -1;
    return 0;
}

static int32_t iotc_init(xlator_t *this)
{
    if (iotrace_xl_check_graph(this, "iotrace-client") != 0)
        return -1;
    struct iotc_priv *p = calloc(1, sizeof *p);
    if (!p) {
        gf_log(this->name, GF_LOG_ERROR, "out of memory");
        return -1;
    }
    if (iotrace_xl_conf_load(this, this->options, &p->conf) != 0)
        goto fail;
    if (iotc_resolve(p->conf.registry, &p->reg_name) != 0) {
        gf_log(this->name, GF_LOG_ERROR, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&p->lock, NULL);
    atomic_store(&p->off, p->reg_name == NULL);
    this->private = p;
    gf_log(this->name, GF_LOG_INFO, "iotrace-client loaded: registry=%s%s",
           p->reg_name ? p->reg_name : "off",
           p->reg_name ? "" : " (requests are not tagged)");
    return 0;
fail:
    iotrace_xl_conf_free(&p->conf);
    free(p);
    return -1;
}

static void iotc_fini(xlator_t *this)
{
    struct iotc_priv *p = this->private;
    this->private = NULL;
    if (!p)
        return;
    gf_log(this->name, GF_LOG_INFO, "requests tagged: %" PRIu64 ", looked up but untagged: %" PRIu64,
           (uint64_t)atomic_load(&p->tagged), (uint64_t)atomic_load(&p->untagged));
    iot_registry_close(atomic_load(&p->reg));
    for (unsigned i = 0; i < p->nretired; i++)
        iot_registry_close(p->retired[i]);
    pthread_mutex_destroy(&p->lock);
    iotrace_xl_conf_free(&p->conf);
    free(p->reg_name);
    free(p);
}

static int32_t iotc_reconfigure(xlator_t *this, dict_t *options)
{
    struct iotc_priv *p = this->private;
    struct iotrace_xl_conf fresh = {0};
    if (!p || iotrace_xl_conf_load(this, options, &fresh) != 0)
        return -1;
    char *name = NULL;
    if (iotc_resolve(fresh.registry, &name) != 0) {
        iotrace_xl_conf_free(&fresh);
        return -1;
    }
    pthread_mutex_lock(&p->lock);
    int ret = 0;
    if (!iotrace_xl_same(name, p->reg_name)) {
        iot_registry *old = atomic_load(&p->reg);
        if (old && p->nretired == IOTC_MAX_RETIRED) {
            gf_log(this->name, GF_LOG_ERROR, "registry changed too often; restart the client");
            ret = -1;
        } else {
            if (old)
                p->retired[p->nretired++] = old;
            atomic_store_explicit(&p->reg, NULL, memory_order_release);
            free(p->reg_name);
            p->reg_name = name;
            name = NULL;
            atomic_store(&p->off, p->reg_name == NULL);
            atomic_store(&p->next_try, 0);
            p->last_err[0] = '\0';
            gf_log(this->name, GF_LOG_INFO, "registry now %s", p->reg_name ? p->reg_name : "off");
        }
    }
    if (ret == 0) {
        iotrace_xl_conf_free(&p->conf);
        p->conf = fresh;
    } else {
        iotrace_xl_conf_free(&fresh);
    }
    pthread_mutex_unlock(&p->lock);
    free(name);
    return ret;
}

#define IOTC_FOP_ENTRY(FOP, ...) .FOP = iotc_##FOP,
static struct xlator_fops iotc_fops = {IOTRACE_FOPS(IOTC_FOP_ENTRY)};
#undef IOTC_FOP_ENTRY

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
