/* The collector's durable store: append-only segment files in a directory.
 * Byte layout in docs/store-format.md.
 *
 * One writer (the collector, holding DIR/LOCK) appends records and makes them
 * durable with iot_store_sync(); any number of readers scan the directory at
 * the same time without locking, seeing a consistent prefix. */
#ifndef IOT_STORE_H
#define IOT_STORE_H

#include <stddef.h>
#include <stdint.h>

#define IOT_STORE_FILE_MAGIC "IOTSTORE"
#define IOT_STORE_FORMAT_VERSION 1u
#define IOT_STORE_FILE_HEADER 16u
#define IOT_STORE_RECORD_MAGIC 0x53525449u /* "ITRS" read as little-endian u32 */
#define IOT_STORE_RECORD_VERSION 1u
#define IOT_STORE_RECORD_HEADER 24u
#define IOT_STORE_DEFAULT_SEGMENT_SIZE (256ull << 20)
#define IOT_STORE_MIN_SEGMENT_SIZE 4096ull

struct iot_store;

/* Called for every stored record in order; a non-zero return stops the scan
 * and becomes iot_store_scan()'s result. */
typedef int (*iot_store_scan_fn)(void *ctx, const uint8_t *batch, size_t len,
                                 uint64_t recv_ns);

/* Opens the store in `dir`.  Writable: creates the directory if needed, takes
 * DIR/LOCK (fails if another process holds it) and cuts a torn final record
 * left by a crash.  Read-only: checks that `dir` holds a store.  NULL with a
 * reason in err on failure. */
struct iot_store *iot_store_open(const char *dir, int writable, char *err, size_t errlen);

/* Size at which the writer starts a new segment (at least
 * IOT_STORE_MIN_SEGMENT_SIZE; a single larger record gets a segment of its own). */
void iot_store_set_segment_size(struct iot_store *s, uint64_t bytes);

/* Buffers one record.  Nothing is durable until iot_store_sync() returns 0.
 * After any failure the store refuses further writes: the caller must not
 * acknowledge what it appended. */
int iot_store_append(struct iot_store *s, const uint8_t *batch, size_t len, uint64_t recv_ns);

/* Writes buffered records and fdatasyncs them. */
int iot_store_sync(struct iot_store *s);

/* Reason for the last failed append/sync/close. */
const char *iot_store_error(const struct iot_store *s);

/* Number of the segment being written (1, 2, ...); 0 for a read-only store. */
uint32_t iot_store_segment(const struct iot_store *s);

/* Syncs (if writable), releases the lock and frees the store.  Returns -1 if
 * the final sync failed (the reason is logged). */
int iot_store_close(struct iot_store *s);

/* Whether the store failed for want of space (ENOSPC, EDQUOT). */
int iot_store_out_of_space(const struct iot_store *s);

/* After a failure for want of space: cuts away what was written after the
 * last sync and takes writes again.  -1 while that is not possible (no room
 * yet for a new segment, or a failure of another kind, which stays). */
int iot_store_recover(struct iot_store *s);

/* Reads every record of the store in `dir` in order, without locking.  An
 * incomplete record at the very end of the last segment is taken as the end
 * (a writer may be in the middle of it).  A damaged record is skipped by its
 * framing, up to the next sound record, and reported (iot_warn) with its
 * segment file and byte offset; segments missing from the sequence, and
 * what the store's MANIFEST says it held beyond what is there, are reported
 * too: *info counts all of it.  Returns 0 at the end, -1 when the store
 * cannot be read at all (or fn stopped the scan). */
int iot_store_scan(const char *dir, iot_store_scan_fn fn, void *ctx, char *err, size_t errlen);

/* What a scan read, for checking a whole store (iotrace-export --verify). */
struct iot_store_scan_info {
    uint32_t segments;
    uint64_t records, bytes; /* records read; bytes of the segment files read */
    int writer;              /* a collector held the store */
    char cut_segment[32];    /* non-empty: the last segment ends inside a record or its header */
    uint64_t cut_offset, cut_size; /* where, and the segment's size */
    int manifest;                  /* the store has a MANIFEST (written since 2026-12) */
    uint32_t missing_segments;     /* absent from the sequence 1..last */
    uint64_t missing_bytes;        /* of those and of cut segments, as far as MANIFEST tells */
    uint64_t damaged_records, damaged_bytes; /* byte ranges skipped, and their size */
    char damage[320];              /* the first damage or loss found */
};

/* Whether what a scan read is less than the store should hold: damage,
 * missing segments or bytes, or a cut end without a writer. */
int iot_store_scan_incomplete(const struct iot_store_scan_info *info);

/* iot_store_scan, filling *info as it goes (also when it fails). */
int iot_store_scan_info(const char *dir, iot_store_scan_fn fn, void *ctx,
                        struct iot_store_scan_info *info, char *err, size_t errlen);

/* Bytes in the store's segment files; -1 if the directory cannot be read. */
int64_t iot_store_bytes(const char *dir);

/* A place in the store: a segment number and a byte offset in it. */
struct iot_store_pos {
    uint32_t segment;
    uint64_t offset;
};

/* Writer: where the records end (durable after iot_store_sync()). */
void iot_store_end(const struct iot_store *s, struct iot_store_pos *pos);

/* Writer: where the records covered by a sync end (a rotation syncs the
 * segment it closes). */
void iot_store_durable(const struct iot_store *s, struct iot_store_pos *pos);

/* Reads the records from *pos (all zero: the store's first record) up to
 * `end`, a position the writer gave after a sync, and leaves *pos after the
 * last record read: a reader that follows a live writer.  -1 on damage. */
int iot_store_read_range(const char *dir, struct iot_store_pos *pos,
                         const struct iot_store_pos *end, iot_store_scan_fn fn, void *ctx,
                         char *err, size_t errlen);

/* The same for a reader that comes back for more (the live analysis): it
 * keeps the segment it reads open, and the read-ahead of its last read,
 * between calls.  NULL when memory is short. */
struct iot_store_follower;
struct iot_store_follower *iot_store_follow(const char *dir);
int iot_store_follow_read(struct iot_store_follower *f, struct iot_store_pos *pos,
                          const struct iot_store_pos *end, iot_store_scan_fn fn, void *ctx,
                          char *err, size_t errlen);
void iot_store_follow_close(struct iot_store_follower *f);

#endif
