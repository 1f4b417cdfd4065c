#include "agenttrust.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* lstat: a link in place of either directory vouches for no one.  Looked
 * at on every call (a connect, a drop box): the service may be installed or
 * its account changed while a process runs. */
static int service_uid(uid_t *uid)
{
    struct stat d, p;
    if (lstat(IOT_AGENT_RUNTIME_DIR, &d) < 0 || !S_ISDIR(d.st_mode) || (d.st_mode & 022) ||
        lstat("/run", &p) < 0 || !S_ISDIR(p.st_mode) || (p.st_mode & 022) || p.st_uid != 0)
        return -1;
    *uid = d.st_uid;
    return 0;
}

int iot_agent_uid_trusted(uid_t uid)
{
    uid_t svc;
    return uid == 0 || uid == geteuid() || (service_uid(&svc) == 0 && svc == uid);
}

int iot_agent_peer_uid(int fd, uid_t *uid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -1;
    if (len != sizeof cred) {
        errno = EPROTO;
        return -1;
    }
    *uid = cred.uid;
    return 0;
}
