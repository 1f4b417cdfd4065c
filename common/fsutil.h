/* File-system helpers shared by the agent and the collector. */
#ifndef IOT_FSUTIL_H
#define IOT_FSUTIL_H

#include <sys/types.h>

/* Creates `dir` with `mode` and any missing parent with 0755, as
 * `mkdir -p` does; an existing directory is fine.  -1 with errno set. */
int iot_mkdir_p(const char *dir, mode_t mode);

#endif
