/* iotrace-client: GlusterFS translator in a FUSE client's graph.
 *
 * For every fop in IOTRACE_FOPS (the ones that can reach a brick's disk) it
 * looks the calling thread up in its user's CallID registry. The FUSE bridge
 * sets frame->root->pid to the thread id of the process thread that made the
 * system call, and every frame below shares that root, so the lookup works
 * wherever the translator sits. When the thread is inside an MPI-IO call the
 * request is wound with a copy of its xdata (the caller's dict is never
 * modified; a new one if it had none) carrying IOTRACE_XDATA_JOB and
 * IOTRACE_XDATA_CALLID, and IOTRACE_XDATA_UID, the user whose registry gave
 * them; otherwise it is wound unchanged. Other fops pass
 * through (libglusterfs fills in its default_* fops).
 *
 * Each user has a registry of their own (docs/registry.md), written by
 * that user's ranks, found by frame->root->uid. The translator opens a
 * user's registry at the user's first request (creating it, so that even
 * the first calls of a short job find it there), keeps up to IOTC_USERS of
 * them open, and looks at each one's name again at most once a second
 * (replaced, removed, damaged: opened anew). It reads them with pread,
 * never through a mapping: a registry's owner can truncate it, and a
 * mapping would then take down this process, which serves all users. What
 * it reads is only ever used as the tag of that same user's requests. A
 * fop never waits for an open (trylock).
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

#define IOTC_USERS 64 /* registries kept open; the least recently used goes */

struct iotc_user {
    uint32_t uid;
    iot_registry *reg;    /* NULL: none usable (missing, refused) */
    int64_t next_check;   /* CLOCK_MONOTONIC second to look at the name again */
    _Atomic int64_t used; /* second of the last lookup (eviction) */
    char last_err[192];   /* last problem logged for this user (under lock) */
};

struct iotc_priv {
    struct iotrace_xl_conf conf;
    pthread_mutex_t lock;        /* opening registries, reconfigure */
    /* Fops look registries up under the read lock; an entry's registry is
     * only swapped or closed under the write lock, which is held for a few
     * stores, never across a system call. */
    pthread_rwlock_t users_lock;
    char *reg_name;              /* resolved base name; NULL: off */
    atomic_bool off;             /* registry "off": tag nothing */
    struct iotc_user users[IOTC_USERS];
    unsigned nusers;
    atomic_uint_fast64_t tagged, untagged;
};

static int64_t now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec;
}

static struct iotc_user *iotc_find(struct iotc_priv *p, uint32_t uid)
{
    for (unsigned i = 0; i < p->nusers; i++)
        if (p->users[i].uid == uid)
            return &p->users[i];
    return NULL;
}

/* A free entry, or the least recently used one; *evicted gets its
 * registry. Under both locks. */
static struct iotc_user *iotc_take(struct iotc_priv *p, uint32_t uid, iot_registry **evicted)
{
    struct iotc_user *u = &p->users[0];
    if (p->nusers < IOTC_USERS)
        u = &p->users[p->nusers++];
    else
        for (unsigned i = 1; i < IOTC_USERS; i++)
            if (atomic_load(&p->users[i].used) < atomic_load(&u->used))
                u = &p->users[i];
    *evicted = u->reg;
    u->reg = NULL;
    u->uid = uid;
    u->next_check = 0;
    u->last_err[0] = '\0';
    return u;
}

/* Opens `uid`'s registry, or again if it has been replaced or damaged,
 * when it is time to look. Never blocks. */
static void iotc_refresh(xlator_t *this, struct iotc_priv *p, uint32_t uid, uint32_t gid,
                         int64_t now)
{
    if (pthread_mutex_trylock(&p->lock) != 0)
        return; /* another thread is at it; this request goes without */
    struct iotc_user *u = iotc_find(p, uid);
    if (!p->reg_name || (u && now < u->next_check)) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    char name[512], err[sizeof u->last_err] = "";
    iot_registry *fresh = NULL, *old = NULL;
    int named = iot_registry_user_name(p->reg_name, uid, name, sizeof name) == 0;
    int reopen = !u || !u->reg || !named || iot_registry_stale(u->reg, name);
    if (reopen && !named)
        snprintf(err, sizeof err, "registry name %s-%u is too long", p->reg_name, uid);
    else if (reopen)
        fresh = iot_registry_open_reader(name, uid, gid, 1, err, sizeof err);

    pthread_rwlock_wrlock(&p->users_lock);
    if (!u)
        u = iotc_take(p, uid, &old);
    else if (reopen)
        old = u->reg;
    if (reopen)
        u->reg = fresh;
    u->next_check = now + 1;
    atomic_store(&u->used, now);
    pthread_rwlock_unlock(&p->users_lock);

    if (fresh) {
        u->last_err[0] = '\0';
        gf_log(this->name, GF_LOG_INFO, "reading CallID registry %s", name);
    } else if (reopen && strcmp(err, u->last_err) != 0) {
        /* Once per user and problem: it is looked at again every second. */
        snprintf(u->last_err, sizeof u->last_err, "%s", err);
        gf_log(this->name, GF_LOG_INFO, "%s; requests of uid %u stay untagged, retrying every "
               "second", err, uid);
    }
    pthread_mutex_unlock(&p->lock);
    iot_registry_close(old);
}

/* Looks the request's thread up in its user's registry: 1 and *e when it
 * is inside an MPI-IO call. *had_reg: the user had a usable registry. */
static int iotc_lookup(xlator_t *this, struct iotc_priv *p, call_stack_t *root,
                       struct iot_reg_entry *e, int *had_reg)
{
    uint32_t uid = (uint32_t)root->uid;
    int64_t now = now_sec();
    for (int refreshed = 0;; refreshed = 1) {
        pthread_rwlock_rdlock(&p->users_lock);
        struct iotc_user *u = iotc_find(p, uid);
        if (u && (refreshed || now < u->next_check)) {
            atomic_store_explicit(&u->used, now, memory_order_relaxed);
            *had_reg = u->reg != NULL;
            int found = u->reg && iot_registry_lookup(u->reg, (uint32_t)root->pid, e);
            pthread_rwlock_unlock(&p->users_lock);
            return found;
        }
        pthread_rwlock_unlock(&p->users_lock);
        if (refreshed) {
            *had_reg = 0;
            return 0;
        }
        iotc_refresh(this, p, uid, (uint32_t)root->gid, now);
    }
}

/* xdata to wind with when the calling thread is inside an MPI-IO call: a
 * copy of the caller's (or a new dict) with job and CallID. NULL: wind the
 * caller's unchanged. The result is a reference the caller drops. */
static dict_t *iotc_tag(xlator_t *this, call_frame_t *frame, dict_t *xdata)
{
    struct iotc_priv *p = this->private;
    /* Internal requests (self-heal, rebalance, ...) have pids <= 0. */
    if (frame->root->pid <= 0 || atomic_load_explicit(&p->off, memory_order_relaxed))
        return NULL;
    struct iot_reg_entry e;
    int had_reg = 0;
    if (!iotc_lookup(this, p, frame->root, &e, &had_reg)) {
        if (had_reg)
            atomic_fetch_add_explicit(&p->untagged, 1, memory_order_relaxed);
        return NULL;
    }
    dict_t *out = xdata ? dict_copy_with_ref(xdata, NULL) : dict_new();
    if (!out)
        return NULL;
    /* The uid says whose registry named the job: the brick's readers keep
     * a job with the user who named it first (docs/gluster.md). */
    if ((e.job[0] && dict_set_dynstr_with_alloc(out, IOTRACE_XDATA_JOB, e.job) != 0) ||
        dict_set_uint64(out, IOTRACE_XDATA_CALLID, e.callid) != 0 ||
        dict_set_uint32(out, IOTRACE_XDATA_UID, (uint32_t)frame->root->uid) != 0) {
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
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* A swap must not wait behind an endless stream of lookups. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&p->users_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&p->lock, NULL);
    atomic_store(&p->off, p->reg_name == NULL);
    this->private = p;
    gf_log(this->name, GF_LOG_INFO, "iotrace-client loaded: registry=%s%s",
           p->reg_name ? p->reg_name : "off",
           p->reg_name ? "-UID (one per user)" : " (requests are not tagged)");
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
    for (unsigned i = 0; i < p->nusers; i++)
        iot_registry_close(p->users[i].reg);
    pthread_rwlock_destroy(&p->users_lock);
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
    iot_registry *old[IOTC_USERS];
    unsigned nold = 0;
    pthread_mutex_lock(&p->lock);
    if (!iotrace_xl_same(name, p->reg_name)) {
        pthread_rwlock_wrlock(&p->users_lock);
        for (unsigned i = 0; i < p->nusers; i++)
            if (p->users[i].reg)
                old[nold++] = p->users[i].reg;
        p->nusers = 0;
        pthread_rwlock_unlock(&p->users_lock);
        free(p->reg_name);
        p->reg_name = name;
        name = NULL;
        atomic_store(&p->off, p->reg_name == NULL);
        gf_log(this->name, GF_LOG_INFO, "registry now %s%s", p->reg_name ? p->reg_name : "off",
               p->reg_name ? "-UID" : "");
    }
    iotrace_xl_conf_free(&p->conf);
    p->conf = fresh;
    pthread_mutex_unlock(&p->lock);
    /* No fop can be reading them: they were taken out under the write lock. */
    for (unsigned i = 0; i < nold; i++)
        iot_registry_close(old[i]);
    free(name);
    return 0;
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
