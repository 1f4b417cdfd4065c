#include "dropbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "spool.h"
#include "wire.h"

#define SCAN_INTERVAL_NS 1000000000LL
/* Entries looked at, and bytes read, per scan: a flood of files cannot hold
 * the loop (and the socket's producers) up; the rest waits a second. */
#define SCAN_MAX_FILES 256
#define SCAN_MAX_BYTES (64u << 20)
/* A writer's temporary file (".name") older than this was left by a
 * process that died while writing it. */
#define STALE_TEMP_S 600

void dropbox_default_path(const char *endpoint, char *out, size_t cap)
{
    out[0] = '\0';
    if (strncmp(endpoint, "ipc://", 6) != 0 || endpoint[6] == '@' || !endpoint[6])
        return;
    int n = snprintf(out, cap, "%s" IOT_DROPBOX_SUFFIX, endpoint + 6);
    if (n < 0 || (size_t)n >= cap)
        out[0] = '\0';
}

int dropbox_open(struct dropbox *db, const char *path)
{
    memset(db, 0, sizeof *db);
    db->dirfd = -1;
    if (!path || !path[0])
        return 0;
    if (strlen(path) >= sizeof db->path) {
        iot_err("drop box path too long: %s", path);
        return -1;
    }
    strcpy(db->path, path);
    if (mkdir(path, 01733) < 0 && errno != EEXIST) {
        iot_err("cannot create the drop box %s: %s", path, strerror(errno));
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        iot_err("cannot open the drop box %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        iot_err("the drop box %s belongs to uid %u, not to this agent (uid %u); not using it",
                path, (unsigned)st.st_uid, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    /* mkdir applies the umask; and a directory left by an older agent may
     * have another mode. */
    if ((st.st_mode & 07777) != 01733 && fchmod(fd, 01733) < 0) {
        iot_err("cannot set the mode of the drop box %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    db->dirfd = fd;
    iot_info("drop box for batches left by processes that could not reach the agent: %s", path);
    return 0;
}

static void remove_entry(struct dropbox *db, const char *name)
{
    if (unlinkat(db->dirfd, name, 0) < 0 && errno != ENOENT)
        iot_warn("cannot remove %s/%s from the drop box: %s", db->path, name, strerror(errno));
}

/* 1: taken or refused (the file is gone); 0: no room for it now, kept;
 * -1: no memory, kept.  *read_bytes: what it read. */
static int take_file(struct dropbox *db, const char *name, struct intake *in, struct spool *sp,
                     struct agent_stats *st, size_t *read_bytes)
{
    *read_bytes = 0;
    int fd = openat(db->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat fs;
    if (fd < 0 || fstat(fd, &fs) < 0) {
        iot_warn("drop box: cannot open %s: %s; removing it", name, strerror(errno));
        if (fd >= 0)
            close(fd);
        remove_entry(db, name);
        db->refused++;
        st->invalid++;
        return 1;
    }
    /* Only a plain file with one name: a hard link to someone else's file
     * would otherwise pass that file's contents off under its owner. */
    if (!S_ISREG(fs.st_mode) || fs.st_nlink != 1 || fs.st_size <= 0 ||
        (uint64_t)fs.st_size > IOT_DROPBOX_MAX_FILE) {
        iot_warn("drop box: %s is not a plain file of 1 to %u bytes with one link; removing it",
                 name, IOT_DROPBOX_MAX_FILE);
        close(fd);
        remove_entry(db, name);
        db->refused++;
        st->invalid++;
        return 1;
    }
    size_t len = (size_t)fs.st_size, got = 0;
    *read_bytes = len;
    uint8_t *buf = malloc(len);
    while (buf && got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf) {
        iot_warn("drop box: no memory for %s (%zu bytes); trying again later", name, len);
        return -1;
    }
    int rc = INTAKE_REFUSED;
    if (got == len) {
        Iotrace__Sender sender;
        iotrace__sender__init(&sender);
        sender.uid = (uint32_t)fs.st_uid;
        sender.gid = (uint32_t)fs.st_gid;
        rc = intake_accept(in, buf, len, &sender, 1, sp, st);
    } else {
        st->invalid++;
        iot_warn("drop box: %s ended after %zu of %zu bytes", name, got, len);
    }
    free(buf);
    if (rc == INTAKE_DEFERRED)
        return 0;
    remove_entry(db, name);
    if (rc == INTAKE_TAKEN) {
        db->taken++;
        iot_info("drop box: took %s (%zu bytes) from uid %u", name, len, (unsigned)fs.st_uid);
    } else {
        db->refused++;
    }
    return 1;
}

void dropbox_scan(struct dropbox *db, int64_t now, struct intake *in, struct spool *sp,
                  struct agent_stats *st)
{
    if (db->dirfd < 0 || (now && now < db->next_scan_ns))
        return;
    db->next_scan_ns = now + SCAN_INTERVAL_NS;
    int fd = dup(db->dirfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(dir);
    int entries = 0;
    size_t bytes = 0;
    for (struct dirent *e; entries < SCAN_MAX_FILES && bytes < SCAN_MAX_BYTES &&
                           !spool_full(sp) && (e = readdir(dir));) {
        entries++;
        if (e->d_name[0] == '.') {
            struct stat ts;
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                fstatat(db->dirfd, e->d_name, &ts, AT_SYMLINK_NOFOLLOW) == 0 &&
                ts.st_mtime + STALE_TEMP_S < time(NULL))
                remove_entry(db, e->d_name);
            continue;
        }
        /* A file kept for want of room (its user over the per-user limit)
         * does not hold the others up; no memory stops the scan. */
        size_t n;
        if (take_file(db, e->d_name, in, sp, st, &n) < 0)
            break;
        bytes += n;
    }
    closedir(dir);
}

void dropbox_close(struct dropbox *db)
{
    if (db->dirfd >= 0)
        close(db->dirfd);
    db->dirfd = -1;
}
