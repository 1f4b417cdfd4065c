#include "handover.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "timeutil.h"

/* The address a connection to `endpoint` has as its peer; 0 if none. */
static socklen_t endpoint_addr(const char *endpoint, struct sockaddr_un *sa)
{
    if (strncmp(endpoint, "ipc://", 6))
        return 0;
    const char *path = endpoint + 6;
    size_t len = strlen(path);
    if (!len || len >= sizeof sa->sun_path)
        return 0;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, len);
    if (path[0] == '@') /* Linux's abstract namespace, as ZeroMQ spells it */
        sa->sun_path[0] = '\0';
    else
        len++; /* the kernel reports a path with its terminating NUL */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

static int noted(const struct iot_handover *h, unsigned long ino)
{
    for (int i = 0; h && i < h->n; i++)
        if (h->ino[i] == ino)
            return 1;
    return 0;
}

int iot_handover_find(const char *endpoint, const struct iot_handover *except,
                      struct iot_handover *out, int dup)
{
    out->n = 0;
    struct sockaddr_un want;
    socklen_t want_len = endpoint_addr(endpoint, &want);
    if (!want_len)
        return 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    for (struct dirent *e; out->n < IOT_HANDOVER_MAX && (e = readdir(d));) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        struct stat st;
        if (*end || end == e->d_name || fd == dirfd(d) || fstat((int)fd, &st) < 0 ||
            !S_ISSOCK(st.st_mode) || noted(except, st.st_ino) || noted(out, st.st_ino))
            continue;
        struct sockaddr_un peer;
        socklen_t len = sizeof peer;
        if (getpeername((int)fd, (struct sockaddr *)&peer, &len) < 0 || len != want_len ||
            memcmp(&peer, &want, len))
            continue;
        int copy = dup ? fcntl((int)fd, F_DUPFD_CLOEXEC, 0) : -1;
        if (dup && copy < 0)
            continue;
        out->fd[out->n] = copy;
        out->ino[out->n++] = st.st_ino;
    }
    closedir(d);
    return out->n;
}

long iot_handover_release(struct iot_handover *h, int64_t deadline_ns)
{
    long unread = 0;
    for (;;) {
        unread = 0;
        for (int i = 0; i < h->n; i++) {
            int q = 0;
            if (h->fd[i] >= 0 && ioctl(h->fd[i], SIOCOUTQ, &q) == 0 && q > 0)
                unread += q;
        }
        if (!unread || iot_mono_ns() >= deadline_ns)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < h->n; i++)
        if (h->fd[i] >= 0)
            close(h->fd[i]);
    h->n = 0;
    return unread;
}
