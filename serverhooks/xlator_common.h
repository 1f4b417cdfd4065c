/* Shared by the iotrace-client and iotrace-server GlusterFS translators. */
#ifndef IOTRACE_XLATOR_COMMON_H
#define IOTRACE_XLATOR_COMMON_H

#include "gluster_config.h"

#include <glusterfs/xlator.h>

/* Key the client translator adds to a request's xdata (probe for now). */
#define IOTRACE_XDATA_PROBE "iotrace.probe"

/* Configuration common to both translators. Strings are owned (malloc). */
struct iotrace_xl_conf {
    char *agent;    /* agent endpoint; NULL when neither option nor env set */
    char *registry; /* CallID registry name; NULL likewise */
};

/* Volume options both translators accept (NULL-key terminated). */
extern volume_option_t iotrace_xl_options[];

/* Reads the options of `this` (falling back to IOTRACE_AGENT and
 * IOTRACE_REGISTRY when an option is empty) into a new conf stored in
 * this->private. Returns 0 or -1 (logged). */
int iotrace_xl_conf_init(xlator_t *this, const char *role);
/* Re-reads the options from `options` into this->private. */
int iotrace_xl_conf_reconfigure(xlator_t *this, dict_t *options);
/* Frees this->private. */
void iotrace_xl_conf_fini(xlator_t *this);

#endif
