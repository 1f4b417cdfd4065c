#include "launcher.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Digits (a job id's) up to the next '/' or the end; their length, 0 if none
 * or if anything else comes first. */
static size_t job_digits(const char *p)
{
    size_t n = strspn(p, "0123456789");
    return n && (p[n] == '/' || p[n] == '\0' || p[n] == '\n') ? n : 0;
}

/* One cgroup path: Slurm's, the hierarchies slurmd and slurmstepd make as
 * root and users cannot (their delegated subtrees live under /user.slice):
 *   cgroup v1  /slurm/uid_UID/job_ID/...  (or /slurm_NODE/...: several slurmd)
 *   cgroup v2  /system.slice/slurmstepd.scope/job_ID/...  (or NODE_slurmstepd.scope)
 * v1 also names the job's user, which must be the sender. */
static size_t slurm_job(const char *path, uint32_t uid, const char **id)
{
    if (!strncmp(path, "/slurm", 6) && (path[6] == '/' || path[6] == '_')) {
        const char *p = strchr(path + 1, '/');
        char *end;
        if (!p || strncmp(p, "/uid_", 5) != 0)
            return 0;
        unsigned long u = strtoul(p + 5, &end, 10);
        if (end == p + 5 || *end != '/' || u != uid || strncmp(end, "/job_", 5) != 0)
            return 0;
        *id = end + 5;
        return job_digits(*id);
    }
    if (!strncmp(path, "/system.slice/", 14)) {
        const char *scope = path + 14, *slash = strchr(scope, '/');
        size_t n = slash ? (size_t)(slash - scope) : 0;
        if (n < 16 || strncmp(scope + n - 16, "slurmstepd.scope", 16) != 0 ||
            (n > 16 && scope[n - 17] != '_') || strncmp(slash, "/job_", 5) != 0)
            return 0;
        *id = slash + 5;
        return job_digits(*id);
    }
    return 0;
}

int launcher_job_of_cgroups(const char *text, uint32_t uid, char *job, size_t len)
{
    /* Lines "ID:CONTROLLERS:PATH"; the first that names a job wins (every
     * hierarchy of one process names the same job). */
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *c1 = strchr(line, ':'), *nl = strchr(line, '\n');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || (nl && c2 > nl))
            continue;
        const char *id;
        size_t n = slurm_job(c2 + 1, uid, &id);
        if (n && n < len) {
            memcpy(job, id, n);
            job[n] = '\0';
            return 1;
        }
    }
    return 0;
}

int launcher_job(uint32_t pid, uint32_t uid, char *job, size_t len)
{
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%u", pid);
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    /* The directory's owner is the process's user: a pid reused by another
     * user's process since the batch was sent proves nothing for this one. */
    struct stat st;
    int fd = fstat(dir, &st) == 0 && st.st_uid == uid ? openat(dir, "cgroup", O_RDONLY | O_CLOEXEC)
                                                      : -1;
    close(dir);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return launcher_job_of_cgroups(text, uid, job, len);
}
