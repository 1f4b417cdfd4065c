/* Options and helpers shared by the iotrace translators. */
#include "xlator_common.h"

#include <stdlib.h>
#include <string.h>

#include <glusterfs/logging.h>
#include <glusterfs/options.h>

/* Catches a gluster_config.h that disagrees with how libglusterfs was built:
 * with HAVE_ATOMIC_BUILTINS and SIZEOF_LONG right, atomics are bare. */
_Static_assert(sizeof(gf_atomic_uint64_t) == sizeof(uint64_t), "gf_atomic layout");
_Static_assert(sizeof(gf_atomic_uintptr_t) == sizeof(uintptr_t), "gf_atomic layout");
_Static_assert(sizeof(off_t) == 8, "64-bit off_t");

volume_option_t iotrace_xl_options[] = {
    {
        .key = {"agent"},
        .type = GF_OPTION_TYPE_STR,
        .default_value = "",
        .description = "Endpoint of the node's iotrace agent, to which "
                       "iotrace-server sends disk operations. Empty: use the "
                       "IOTRACE_AGENT environment variable, else "
                       "libiotrace-server's default.",
        .op_version = {1},
        .flags = OPT_FLAG_SETTABLE | OPT_FLAG_DOC,
    },
    {
        .key = {"registry"},
        .type = GF_OPTION_TYPE_STR,
        .default_value = "",
        .description = "Base name of the node-local CallID registries that "
                       "iotrace-client reads, one per user (NAME-UID): a POSIX "
                       "shared-memory name (/name), a file path, or \"off\" "
                       "(no tagging). Empty: use the IOTRACE_REGISTRY "
                       "environment variable, else /iotrace-registry.",
        .op_version = {1},
        .flags = OPT_FLAG_SETTABLE | OPT_FLAG_DOC,
    },
    {.key = {NULL}},
};

/* Option value if non-empty, else the environment variable if non-empty,
 * else NULL; always a fresh copy. *ok is cleared on allocation failure. */
static char *pick(const char *opt, const char *env, int *ok)
{
    const char *v = (opt && *opt) ? opt : getenv(env);
    if (!v || !*v)
        return NULL;
    char *copy = strdup(v);
    if (!copy)
        *ok = 0;
    return copy;
}

int iotrace_xl_conf_load(xlator_t *this, dict_t *options, struct iotrace_xl_conf *conf)
{
    char *agent = NULL, *registry = NULL;
    /* Values not in `options` come back as the declared defaults. */
    if (xlator_option_reconf_str(this, options, "agent", 5, &agent) != 0 ||
        xlator_option_reconf_str(this, options, "registry", 8, &registry) != 0) {
        gf_log(this->name, GF_LOG_ERROR, "invalid agent or registry option");
        return -1;
    }
    int ok = 1;
    struct iotrace_xl_conf fresh = {
        .agent = pick(agent, "IOTRACE_AGENT", &ok),
        .registry = pick(registry, "IOTRACE_REGISTRY", &ok),
    };
    if (!ok) {
        iotrace_xl_conf_free(&fresh);
        gf_log(this->name, GF_LOG_ERROR, "out of memory");
        return -1;
    }
    *conf = fresh;
    return 0;
}

void iotrace_xl_conf_free(struct iotrace_xl_conf *conf)
{
    free(conf->agent);
    free(conf->registry);
    conf->agent = conf->registry = NULL;
}

int iotrace_xl_check_graph(xlator_t *this, const char *role)
{
    if (!this->children || this->children->next) {
        gf_log(this->name, GF_LOG_ERROR, "%s needs exactly one subvolume", role);
        return -1;
    }
    if (!this->parents)
        gf_log(this->name, GF_LOG_WARNING, "dangling volume, check the volfile");
    return 0;
}

int iotrace_xl_same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}
