/* The pending store's copy on disk: every batch the agent takes is appended
 * to a segment file in its state directory before it is forwarded, and a
 * segment is deleted once the collector has acknowledged all of its
 * batches.  A restarted agent (after SIGKILL, a crash or a reboot) reads the
 * segments back and sends what they hold again; the collector answers
 * DUPLICATE for what it already stored, so every batch is stored once.
 *
 * Records are framed (magic, length, checksum); a torn record at the end of
 * the newest segment (the agent died inside a write) is cut off, a damaged
 * one is skipped up to the next sound frame, and what follows is sent: its
 * events are counted (drop records, `unreadable`) when its envelope can
 * still be read.  Either is logged with the bytes concerned.
 *
 * A batch the disk refuses (full, I/O error) is held in memory only; so
 * that the agent's death then costs no event silently, a drop record of
 * it goes at once into a slot of the reserve, a file preallocated at start
 * (posix_fallocate), and the next start sends those drop records: the
 * collector stores the ones whose batch it never got and answers DUPLICATE
 * for the others.  A slot is freed when its batch is acknowledged.
 * Layout and sync policy: docs/agent.md, "Spool". */
#ifndef IOT_AGENT_JOURNAL_H
#define IOT_AGENT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "stats.h"

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
    /* The reserve: JOURNAL_RESERVE_SLOTS records of JOURNAL_RESERVE_SLOT
     * bytes (fewer if the disk had no room at start), which are in use. */
    int reserve_fd;
    uint32_t reserve_slots, reserve_used;
    uint8_t *slot_used;
    int failing; /* the last append failed: the disk refuses */
    struct ratelimit refused_log; /* a full disk refuses every batch */
    /* Damaged records found at start whose envelope can be read (a copy
     * of it): their drop records are stored once the segments are read. */
    struct journal_drop {
        uint64_t epoch, seq;
        uint8_t *data;
        size_t len;
        char key[512];
    } *drops;
    size_t n_drops, cap_drops;
    /* What happened, for the agent's counters and log. */
    uint64_t recovered, recovered_bytes, damaged_bytes, write_errors;
    uint64_t damaged_records, damaged_events; /* skipped at start, events counted */
    uint64_t reserved, at_risk; /* batches the disk refused: with a slot, without */
};

#define JOURNAL_RESERVE_SLOT 1024u
#define JOURNAL_RESERVE_SLOTS 64u

/* True when the disk refuses batches and the reserve has no free slot: a
 * batch taken now would be held in memory only, uncounted if the agent
 * died, so the agent stops reading (producers count their failed sends). */
int journal_at_risk(const struct journal *j);

/* Opens (creating with mode 0700) the spool directory `dir`, takes its lock
 * so that no second agent uses it, and puts every batch its segments hold
 * into `sp`, in the order they were taken.  Returns -1 after logging why. */
int journal_open(struct journal *j, const char *dir, int64_t sync_ns, uint64_t max_bytes,
                 struct spool *sp);

/* Appends a batch the spool just took; remembers its segment in the entry.
 * A failed write (disk full, I/O error) is logged and counted, the batch
 * stays in memory only, its drop record in a slot of the reserve: -1. */
int journal_append(struct journal *j, struct spool_entry *e);

/* The batch was acknowledged: its segment goes once all of its are. */
void journal_release(struct journal *j, const struct spool_entry *e);

/* Syncs what the policy says is due by `now_mono_ns`. */
void journal_tick(struct journal *j, int64_t now_mono_ns);

/* Syncs and closes; the segments stay for the next start. */
void journal_close(struct journal *j);

#endif
