/* The drop box: a directory next to the agent's socket where a process
 * that could not hand its last batches over the socket (the agent was down
 * when it exited) leaves them as files, so that they, or at least the drop
 * records that count what was lost, still reach the store.  Anyone may
 * create files in it (mode 1733: no one but the agent lists or removes
 * them); the file's owner, as the kernel keeps it, is the batch's sender,
 * so a file can no more forge another user's events than the socket can. */
#ifndef IOT_AGENT_DROPBOX_H
#define IOT_AGENT_DROPBOX_H

#include <stdint.h>

#include "intake.h"

struct dropbox {
    int dirfd; /* -1: no drop box */
    char path[4096];
    int64_t next_scan_ns;
    uint64_t taken, refused;
};

/* The default directory for a producer endpoint: "PATH.dropbox" for
 * ipc://PATH, "" (none) otherwise.  The client library derives the same. */
void dropbox_default_path(const char *endpoint, char *out, size_t cap);

/* Creates `path` (mode 1733, owned by the agent) or takes it over if the
 * agent's user already owns it; refuses one that someone else owns or that
 * is not a directory.  An empty path: no drop box.  Returns -1 after logging
 * why. */
int dropbox_open(struct dropbox *db, const char *path);

/* Takes what the drop box holds, at most once a second unless `now` is 0:
 * each file becomes a batch of its owner; taken and refused files are
 * removed, a file there is no room for now stays for a later scan. */
void dropbox_scan(struct dropbox *db, int64_t now, struct intake *in, struct spool *sp,
                  struct agent_stats *st);

void dropbox_close(struct dropbox *db);

#endif
