/* The pending store's copy on disk: every batch the agent takes is appended
 * to a segment file in its state directory before it is forwarded, and a
 * segment is deleted once the collector has acknowledged all of its
 * batches.  A restarted agent (after SIGKILL, a crash or a reboot) reads the
 * segments back and sends what they hold again; the collector answers
 * DUPLICATE for what it already stored, so every batch is stored once.
 *
 * Records are checksummed; a torn record at the end of the newest segment
 * (the agent died inside a write) is cut off, a damaged one elsewhere ends
 * the reading of its segment.  Either is logged with the bytes concerned.
 * Layout and sync policy: docs/agent.md, "Spool". */
#ifndef IOT_AGENT_JOURNAL_H
#define IOT_AGENT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

struct spool;
struct spool_entry;

/* When written batches reach the disk itself, not only the page cache
 * (which already survives the agent's death). */
#define JOURNAL_SYNC_ALWAYS 0   /* fdatasync after every batch */
#define JOURNAL_SYNC_NEVER (-1) /* leave it to the kernel */

struct journal_segment {
    uint64_t id;
    uint64_t live;  /* batches in it not yet acknowledged */
    uint64_t bytes; /* its size */
};

struct journal {
    char *dir;
    int dirfd, lockfd, fd; /* fd: the segment being appended to, -1 before the first */
    struct journal_segment *segs;
    size_t n_segs, cap_segs;
    uint64_t next_id;
    uint64_t segment_max; /* rotate once the current segment is this large */
    uint64_t disk_bytes;  /* sum of the segments' sizes */
    int64_t sync_ns;      /* JOURNAL_SYNC_*, or the longest time a write waits for its sync */
    int64_t unsynced_since; /* 0: nothing written since the last sync */
    /* What happened, for the agent's counters and log. */
    uint64_t recovered, recovered_bytes, damaged_bytes, write_errors;
};

/* Opens (creating with mode 0700) the spool directory `dir`, takes its lock
 * so that no second agent uses it, and puts every batch its segments hold
 * into `sp`, in the order they were taken.  Returns -1 after logging why. */
int journal_open(struct journal *j, const char *dir, int64_t sync_ns, uint64_t max_bytes,
                 struct spool *sp);

/* Appends a batch the spool just took; remembers its segment in the entry.
 * A failed write (disk full, I/O error) is logged and counted, and the
 * batch stays in memory only: -1. */
int journal_append(struct journal *j, struct spool_entry *e);

/* The batch was acknowledged: its segment goes once all of its are. */
void journal_release(struct journal *j, const struct spool_entry *e);

/* Syncs what the policy says is due by `now_mono_ns`. */
void journal_tick(struct journal *j, int64_t now_mono_ns);

/* Syncs and closes; the segments stay for the next start. */
void journal_close(struct journal *j);

#endif
