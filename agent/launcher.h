/* Which launcher job a local process runs in, from what only root can make:
 * the process's cgroup in a batch system's own hierarchy.  A job id a user
 * names is a claim; this is the kernel's word (docs/agent.md, "Who owns a
 * job"). */
#ifndef IOT_AGENT_LAUNCHER_H
#define IOT_AGENT_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>

/* The job id of process `pid` (in the agent's PID namespace) as its cgroup
 * names it, into `job`, if the process is still that of user `uid`; 1 found,
 * 0 none (no such cgroup, the process gone or another user's now). */
int launcher_job(uint32_t pid, uint32_t uid, char *job, size_t len);

/* The same from the text of /proc/PID/cgroup (for tests): 1 found, 0 none. */
int launcher_job_of_cgroups(const char *text, uint32_t uid, char *job, size_t len);

#endif
