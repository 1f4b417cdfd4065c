/* Streaming join of MPI-IO calls and disk operations on (job, CallID).
 *
 * Fed events in (roughly) start-time order, it keeps one entry per
 * (job, CallID) in flight: the call and the disk operations that carried
 * its CallID.  Collective calls (MPI-IO calls of one job on one file with
 * the same non-zero collective sequence number and the same communicator,
 * xp_event.coll_group, one per rank) are linked into a group, and the disk operations of any member (the aggregators')
 * count for the whole group.
 *
 * Windows, on the time the caller passes to iot_match_expire() (the
 * merge's watermark, or the start time of the next event):
 *   - a call's entry stays open until that time passes its end + grace; a
 *     completion record (MPI_Wait..., *_end) of the same CallID extends it;
 *     a member of a collective group stays until the whole group's window
 *     (the latest member's end + grace) has passed;
 *   - disk operations whose call has not been seen are held in the same
 *     entry until their latest end + grace, or the latest end + grace of a
 *     POSIX call carrying the CallID (the call is still running); a call
 *     arriving in that window takes them.
 * When an entry closes it is reported once (struct iot_match_closed) and
 * freed: what stays unmatched is counted by the receiver, not kept.  The
 * report may come up to a bucket of the timing wheel (about 1 ms of that
 * time) after the window ended; which events an entry takes never depends
 * on it.
 * Memory is proportional to the entries in flight (iot_match_bytes). */
#ifndef IOT_ANALYSIS_MATCH_H
#define IOT_ANALYSIS_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* What an entry amounted to when its window closed. */
struct iot_match_closed {
    uint64_t callid;     /* the entry's CallID (a group's: its first member's) */
    uint32_t job;
    uint16_t func;       /* the issuing call's function; a completion's if that is all
                            that was seen; 0 when no MPI-IO event had the CallID */
    uint8_t expect_disk; /* a read or write of bytes > 0 that succeeded */
    uint32_t ops;        /* disk operations of the call, or of its whole collective group */
    uint32_t own_ops;    /* disk operations that carried this CallID */
    uint64_t own_bytes, own_time_ns; /* their bytes and summed durations */
    uint32_t group_size; /* calls in its collective group; 0 for an independent call */
};

typedef void (*iot_match_sink)(void *ctx, const struct iot_match_closed *c);

/* One call -> disk operation pair: the MPI-IO call that issued the CallID
 * (or, if only its completion was seen, the completion) and a disk
 * operation carrying that CallID, each with the tag the caller gave it
 * (iot_match_event_tagged).  Reported once per disk operation, as soon as
 * both are known; a non-zero return is handed back by the event call. */
typedef int (*iot_match_pair_sink)(void *ctx, const struct xp_event *call, uint32_t call_tag,
                                   const struct xp_event *disk, uint32_t disk_tag);

/* The timing wheel's buckets: 2^20 ns (about 1 ms) each, 4096 of them
 * (4.3 s; entries further out go round again). */
#define IOT_MATCH_BUCKET_SHIFT 20
#define IOT_MATCH_BUCKET_NS (1ll << IOT_MATCH_BUCKET_SHIFT)
#define IOT_MATCH_BUCKETS 4096
#define IOT_MATCH_PAGE_CACHE_BITS 8

struct mt_entry;
struct mt_group;
struct mt_page;
struct mt_held;

/* A two-level index: key >> 6 (with the job, and the file for groups) is
 * found in a small hash table of pages; the page holds the 64 neighbouring
 * keys directly.  CallIDs are per-rank counters and collective sequence
 * numbers per-file counters, so the keys in flight are dense runs: a
 * lookup touches one recent page instead of a random slot of a table as
 * large as everything in flight. */
struct mt_index {
    struct mt_page *pages; /* slab, with a free list */
    size_t n_pages, cap_pages;
    uint32_t free_page;
    uint32_t *table; /* page key -> page index + 1, open addressing */
    size_t table_size;
    uint32_t cache[1u << IOT_MATCH_PAGE_CACHE_BITS]; /* pages used lately, index + 1 */
};

struct iot_match {
    int64_t grace_ns;
    iot_match_sink sink;
    void *ctx;
    struct mt_entry *entries; /* slab, with a free list */
    size_t n_entries, cap_entries;
    uint32_t free_entry;
    struct mt_index calls;   /* (job, CallID) -> entry index + 1 */
    struct mt_group *groups; /* slab, with a free list */
    size_t n_groups, cap_groups;
    uint32_t free_group;
    struct mt_index colls; /* (job, file and coll_group, coll_seq) -> group index + 1 */
    size_t rank_set_bytes;
    /* Entries by the end of their window, in buckets of about a
     * millisecond (a timing wheel); `now` is the latest time passed to
     * iot_match_expire, and an entry whose window ended before it is closed
     * when it is next looked up, so matching does not depend on when the
     * buckets are swept. */
    uint32_t *wheel;
    int64_t cursor; /* buckets before this one have been swept */
    int64_t now;
    int started;
    size_t peak_entries, peak_groups;
    /* Only with a pair sink: per entry its call and the disk operations
     * waiting for it (a list in the held slab). */
    iot_match_pair_sink pair;
    void *pair_ctx;
    struct xp_event *call;
    uint32_t *call_tag, *held_head;
    size_t cap_pair;
    struct mt_held *held; /* slab, with a free list */
    size_t cap_held, n_held, peak_held;
    uint32_t free_held;
};

int iot_match_init(struct iot_match *m, int64_t grace_ns, iot_match_sink sink, void *ctx);
void iot_match_free(struct iot_match *m);

/* Asks for every call -> disk operation pair (before the first event).
 * Disk operations that come before their call are then held, not only
 * counted, until the call comes or their window closes. */
void iot_match_set_pairs(struct iot_match *m, iot_match_pair_sink sink, void *ctx);

/* Takes an MPI-IO call, a disk operation or a POSIX call with a job and a
 * non-zero CallID; ignores everything else.  A POSIX call only keeps the
 * entry of its (not yet seen) MPI-IO call open: it is never counted as a
 * disk operation.  -1 when out of memory. */
int iot_match_event(struct iot_match *m, const struct xp_event *ev);
/* The same, with a tag handed back in the pairs this event is part of; -1
 * also when the pair sink failed. */
int iot_match_event_tagged(struct iot_match *m, const struct xp_event *ev, uint32_t tag);

/* Every entry whose window ended before now_ns is over: an event of its
 * key opens a new entry.  It is reported once now_ns passes the end of its
 * bucket (IOT_MATCH_BUCKET_NS), or at once when its key is looked up. */
void iot_match_expire(struct iot_match *m, int64_t now_ns);

/* End of input: closes everything. */
void iot_match_finish(struct iot_match *m);

/* Bytes allocated for entries, tables and heaps. */
size_t iot_match_bytes(const struct iot_match *m);

/* Function classes (by MPI-IO function id). */
int iot_match_is_completion(unsigned func); /* MPI_Wait*, MPI_Test*, split-collective *_end */
int iot_match_is_transfer(unsigned func);   /* reads and writes, completions excluded */

#endif
