/* Reading a store for iotrace-export: every stored batch is decoded, turned
 * into compact per-event records handed to a sink, and freed again, so only
 * the producers, strings and file names outlive their batch.
 *
 * Times are aligned to the collector's clock when the clock samples were
 * read first (xp_read_clocks): a pass over the store that keeps only the
 * agents' ClockSync records, a few per node and minute. */
#ifndef IOT_EXPORT_READ_H
#define IOT_EXPORT_READ_H

#include <stddef.h>
#include <stdint.h>

#include "clockmap.h"
#include "store.h"

enum xp_kind { XP_MPIIO, XP_POSIX, XP_DISK, XP_DROP };

/* Interned strings; index 0 is always "". */
struct xp_strings {
    char **str;
    size_t n, cap;
    uint32_t *index; /* open addressing over str, entries are index + 1 */
    size_t index_size;
};

struct xp_producer {
    uint32_t node;   /* in xp_data.nodes: the producer's node, its agent's (= clock) */
    uint32_t clock;  /* in xp_data.nodes: whose clock its events are on (the node of
                        the agent that forwarded its batches; else its own) */
    uint32_t job;    /* in xp_data.jobs, 0 = none */
    uint32_t server; /* in xp_data.servers, 0 = none */
    uint32_t pid;
    int32_t rank;
    int64_t uid;     /* local user that sent its batches (Batch.sender), -1 if not known */
    int kind;        /* Iotrace__ProducerKind */
    uint64_t last_batch; /* ordinal (1, 2, ...) of its last batch in the store, as counted
                            by xp_read_clocks; 0 if unknown */
    /* The running total of Body.made_through after the newest batch read
     * (UINT64_MAX: unknown) and the seq expected next, to find batches lost
     * between producer and store; `lost` is what is missing and not yet
     * reported. */
    uint64_t made_epoch, next_seq, made, lost;
    int64_t lost_t; /* producer's clock: the first event after the first gap */
    int made_known;
    int retired;    /* its slot is free (xp_retire_producers) */
    uint64_t last_recv_ns; /* when the collector received its newest batch read */
};

struct xp_event {
    int64_t t_start, t_end;
    uint64_t callid, file;
    uint64_t bytes;    /* drop records: the count */
    uint64_t xfer, coll_seq;
    uint64_t coll_group; /* MPI-IO: the collective's communicator, 0 = all ranks */
    int64_t offset, ret;
    uint64_t order;    /* arrival order, keeps sorting stable */
    uint32_t producer; /* in xp_data.producers */
    uint32_t job;      /* in xp_data.jobs, 0 = none */
    uint32_t tid;
    uint16_t func;     /* drop records: the Iotrace__DropReason */
    uint8_t kind;      /* enum xp_kind */
};

struct xp_data;

/* MPI_File_open and MPI_File_set_info carry in their offset the id of the
 * text of their access mode and hints (docs/client.md), not a position:
 * its text, or NULL; exports show -1 as their offset. */
const char *xp_event_info(const struct xp_data *d, const struct xp_event *ev);
int64_t xp_event_offset(const struct xp_event *ev);

struct xp_file {
    uint64_t id;
    uint32_t producer;
    char *path;
};

/* The last counters a node's agent reported (AgentStatus, batches). */
struct xp_agent_status {
    int known;
    uint64_t received, invalid, forwarded, resent, acked, duplicates, rejected, reconnects;
    uint64_t pending, pending_bytes;
    /* When the collector received the batch that carried it: the status
     * rides on the agent's clock batches, which wait behind the agent's
     * other batches while the collector cannot store them, so a status
     * can be far older than the node's last message. */
    uint64_t reported_ns;
};

/* Per node (same index as xp_data.nodes). */
struct xp_clock {
    struct iot_clockmap map; /* the node's ClockSync samples */
    size_t hint;             /* the map's interval of the last time aligned */
    uint64_t events;         /* events (and drop records) of the node read so far */
    struct xp_agent_status agent;
};

struct xp_data {
    struct xp_strings jobs, nodes, servers, keys; /* keys: producer keys, same index */
    struct xp_clock *clocks; /* one per node */
    size_t n_clocks;
    int align;               /* map event times to the collector's clock */
    struct xp_producer *producers; /* n_producers slots, retired ones included */
    size_t n_producers, cap_producers;
    uint32_t *free_producers;      /* retired slots, taken again by new producers */
    size_t n_free_producers, cap_free_producers;
    uint64_t *retired_keys;        /* hashes of retired producer keys (was_retired) */
    struct xp_file *files; /* open addressing on (producer, id) */
    size_t files_size, files_used;
    uint64_t batches, events;
    uint64_t unreadable_batches; /* stored, but their bodies cannot be decoded */
    uint64_t lost_events;        /* found missing between producers and the store */
    /* What the last reading of the store found missing or damaged in it
     * (iot_store_scan_info): each pass reads the whole store, so the last
     * one says it all. */
    struct iot_store_scan_info store_info;
    int64_t *job_owner;          /* per job: uid whose processes named it first, -1 if not
                                    known, -2 none yet */
    uint32_t *job_name;          /* per job: its name (Producer.job_name) in job_names, 0 none */
    size_t cap_job_owner;
    uint8_t *job_backed;         /* per job: its owner's claim is backed by the launcher (the
                                  * agent found the process in the job's cgroup) */
    struct xp_strings job_names;
};

/* Receives every event; a non-zero return stops reading (err must be set). */
typedef int (*xp_sink)(void *ctx, const struct xp_data *d, const struct xp_event *ev,
                       char *err, size_t errlen);

/* Called after the events of each batch (d->batches is its ordinal) with the
 * time the collector received it, on the collector's clock; a non-zero
 * return stops reading (err must be set). */
typedef int (*xp_batch_done)(void *ctx, const struct xp_data *d, uint32_t producer,
                             uint64_t recv_ns, char *err, size_t errlen);

/* The uid of the local user a job belongs to (-1 if not known) and its
 * name from the launcher ("" if none). */
int64_t xp_job_owner(const struct xp_data *d, uint32_t job);
const char *xp_job_name(const struct xp_data *d, uint32_t job);

/* The login name of uid on the host reading the store (the collector's or
 * the exporting user's), written to buf; "" when it has none or uid < 0.
 * The store keeps the uid the agents learned from the kernel: a name is the
 * reader's view, as ls -l gives one. Thread-safe; names are cached, since a
 * directory service may be slow and every dashboard update asks. */
const char *xp_user_name(int64_t uid, char *buf, size_t len);

int xp_data_init(struct xp_data *d);
void xp_data_free(struct xp_data *d);

/* First pass: collects the ClockSync records of every node (from batches of
 * producer kind AGENT; other batches are only opened, not decoded) and turns
 * alignment on for xp_read_store.  Every node of the store is interned, with
 * or without samples, and so is every producer, with what its last batch
 * says about it (its job and rank) and the ordinal of that batch. */
int xp_read_clocks(const char *dir, struct xp_data *d, char *err, size_t errlen);

/* Reads every batch of the store in `dir` and hands its events to `sink`,
 * ClockSync records excepted.  After xp_read_clocks, t_start and t_end of
 * every event of a node with samples are on the collector's clock
 * (iot_clockmap_map); a node without samples keeps its own clock. */
int xp_read_store(const char *dir, struct xp_data *d, xp_sink sink, void *ctx, char *err,
                  size_t errlen);

/* The job an event counts in: a disk operation's own (0: none), any other
 * event's its process's (the job the process named, whenever it did). */
static inline uint32_t xp_event_job(const struct xp_data *d, const struct xp_event *ev)
{
    return ev->job || ev->kind == XP_DISK ? ev->job : d->producers[ev->producer].job;
}

/* The same, calling done (if not NULL) after each batch.  With job (in
 * d->jobs) other than UINT32_MAX the pass is for that job alone: the sink
 * is given only the events xp_event_job puts in it, and the batches of
 * processes of other jobs are not decoded. */
int xp_read_store_batches(const char *dir, struct xp_data *d, uint32_t job, xp_sink sink,
                          xp_batch_done done, void *ctx, char *err, size_t errlen);

/* Live: one batch just stored.  An agent's clock samples join its node's
 * map at once, so events are aligned with the samples known when they
 * arrive (a store read after xp_read_clocks uses every sample); then the
 * batch is read as xp_read_store_batches reads it. */
int xp_feed_batch(struct xp_data *d, const uint8_t *buf, size_t len, uint64_t recv_ns,
                  xp_sink sink, xp_batch_done done, void *ctx, char *err, size_t errlen);

/* The live collector forgets processes it will not hear of again (their
 * job left its memory, the analysis holds nothing of them), so that its
 * memory follows the processes running, not all it ever saw: their keys,
 * file names and slots go, and the next new producers take the slots.  A
 * batch of one of them after all makes a new producer, which does not
 * count what it made before as lost when a table of 16 384 hashes of
 * retired keys still holds its key.  -1 when out of memory (some file names may be gone). */
int xp_retire_producers(struct xp_data *d, const uint32_t *ids, size_t n);
size_t xp_producers_in_use(const struct xp_data *d);

/* Whether a function reads, writes or neither, by its name (MPI-IO, POSIX
 * and disk operations alike). */
enum { XP_DIR_READ, XP_DIR_WRITE, XP_DIR_OTHER };
int xp_func_direction(unsigned func);

/* The clock samples of a node, or NULL if it has none. */
const struct iot_clockmap *xp_node_clock(const struct xp_data *d, uint32_t node);

/* Index of s, adding it if new; UINT32_MAX when out of memory. */
uint32_t xp_intern(struct xp_strings *t, const char *s);
/* The string at idx is no longer found (xp_intern adds it again under a new
 * index) and reads as ""; its index is not given to another string. */
void xp_unintern(struct xp_strings *t, uint32_t idx);
const char *xp_string(const struct xp_strings *t, uint32_t idx);
void xp_strings_free(struct xp_strings *t);

/* Sorts v and drops repeated values; returns how many are left. */
size_t xp_unique_u64(uint64_t *v, size_t n);

/* Path of a file id as named by FileName records of that producer, or NULL. */
const char *xp_file_path(const struct xp_data *d, uint32_t producer, uint64_t id);

#endif
