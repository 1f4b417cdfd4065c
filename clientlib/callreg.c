/* The writer side of the CallID registry (common/registry.c) in the client
 * library: each thread that makes MPI-IO calls claims a slot once, and the
 * MPI-IO wrappers publish and clear CallIDs in it with single stores, so
 * that a file system client on this node can tag the thread's requests.
 * See docs/registry.md. */
#include <pthread.h>
#include <unistd.h>

#include "client.h"
#include "registry.h"

#define MAX_CLAIMS 4096

static struct {
    pthread_mutex_t lock;
    pthread_key_t key;
    int key_made;
    int tried;          /* opened or given up: at most once per process */
    iot_registry *reg;
    struct iot_reg_slot *claims[MAX_CLAIMS]; /* released at exit */
    uint32_t claim_tids[MAX_CLAIMS];
    size_t n_claims;
} cr = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Threads that cannot publish write here, so the hot path needs no test. */
static struct iot_reg_slot nowhere;

static void forget_claim(struct iot_reg_slot *slot)
{
    for (size_t i = 0; i < cr.n_claims; i++)
        if (cr.claims[i] == slot) {
            cr.claims[i] = cr.claims[--cr.n_claims];
            cr.claim_tids[i] = cr.claim_tids[cr.n_claims];
            return;
        }
}

static void thread_exit(void *arg)
{
    struct iot_reg_slot *slot = arg;
    pthread_mutex_lock(&cr.lock);
    forget_claim(slot);
    pthread_mutex_unlock(&cr.lock);
    iot_registry_release(slot, slot->tid);
}

/* The user's own registry, or none: a registry this process cannot trust
 * not to be truncated by someone else (docs/registry.md) is not used, and
 * the process traces on without publishing. Tried once per process. */
static void open_registry(void)
{
    cr.tried = 1;
    const char *base = iot_registry_name(NULL);
    if (!base)
        return;
    char name[512], err[256];
    if (iot_registry_user_name(base, (uint32_t)geteuid(), name, sizeof name) < 0) {
        iot_debug_log("CallIDs are not published: registry name %s is too long", base);
        return;
    }
    cr.reg = iot_registry_open(name, 1, err, sizeof err);
    if (!cr.reg) {
        iot_debug_log("CallIDs are not published: %s", err);
        return;
    }
    cr.key_made = pthread_key_create(&cr.key, thread_exit) == 0;
}

static struct iot_reg_slot *claim(void)
{
    if (!cr.tried)
        open_registry();
    if (!cr.reg || !cr.key_made || cr.n_claims == MAX_CLAIMS)
        return &nowhere;
    uint32_t tid = iot_tid();
    struct iot_reg_slot *slot = iot_registry_claim(cr.reg, tid, iot_g.pid, iot_g.job, iot_g.rank);
    if (!slot) {
        iot_debug_log("CallID registry full: thread %u does not publish", tid);
        return &nowhere;
    }
    cr.claims[cr.n_claims] = slot;
    cr.claim_tids[cr.n_claims++] = tid;
    pthread_setspecific(cr.key, slot);
    return slot;
}

struct iot_reg_slot *iot_callreg_attach(void)
{
    iot_t.internal++;
    pthread_mutex_lock(&cr.lock);
    struct iot_reg_slot *slot = claim();
    pthread_mutex_unlock(&cr.lock);
    iot_t.reg = slot;
    iot_t.internal--;
    return slot;
}

void iot_callreg_release_all(void)
{
    pthread_mutex_lock(&cr.lock);
    for (size_t i = 0; i < cr.n_claims; i++)
        iot_registry_release(cr.claims[i], cr.claim_tids[i]);
    cr.n_claims = 0;
    pthread_mutex_unlock(&cr.lock);
}

/* The parent's slots are the parent's: the child claims its own. */
void iot_callreg_after_fork_child(void)
{
    pthread_mutex_init(&cr.lock, NULL);
    cr.n_claims = 0;
    iot_t.reg = NULL;
}
