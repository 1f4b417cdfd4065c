/* The iotrace wire library: batch envelope, LZ4 body, CRC-32 checksum.
 *
 * Every program that produces, forwards, stores or reads batches goes
 * through these functions, so a batch accepted anywhere is accepted
 * everywhere.  See docs/wire-format.md. */
#ifndef IOT_WIRE_H
#define IOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "iotrace.pb-c.h"

/* Where producers find their node's agent when IOTRACE_AGENT does not say,
 * and where the agent listens when --listen does not: the service's socket
 * (iotrace-agent.service, RuntimeDirectory=iotrace), for an agent started
 * by hand too.  In a directory only root can make (in /run), never in /tmp:
 * there any user could take the path first and receive every other user's
 * batches, file names and all. */
#define IOT_AGENT_DEFAULT_ENDPOINT "ipc:///run/iotrace/agent.sock"

/* The agent's drop box for an ipc://PATH endpoint is PATH IOT_DROPBOX_SUFFIX
 * (agent/dropbox.h): a process that cannot reach the agent as it exits
 * leaves its last batches there, one file each, at most this large. */
#define IOT_DROPBOX_SUFFIX ".dropbox"
#define IOT_DROPBOX_MAX_FILE (16u << 20)

#define IOT_WIRE_MAGIC 0x52544f49u /* "IOTR" read as little-endian u32 */
#define IOT_WIRE_VERSION 3u     /* what this build writes (column coding, flat columns) */
#define IOT_WIRE_VERSION_MIN 1u /* the oldest it reads: stores written since 2026 */
#define IOT_WIRE_MAX_BATCH (64u << 20) /* largest encoded batch accepted */
#define IOT_WIRE_MAX_RAW (256u << 20)  /* largest uncompressed body accepted */
/* Largest batch a producer sends, and all an agent takes from one: with the
 * 100 batches ZeroMQ may queue per connection, what one connection can hold
 * of the agent's memory (docs/agent.md, "Flow control").  Producers split a
 * batch that would be larger. */
#define IOT_WIRE_MAX_PRODUCER_BATCH (256u << 10)
/* LZ4_compress_fast's acceleration for bodies.  The coded columns are runs
 * of small values that even a quick match search finds: against the
 * default (1), 4 costs a client's sender 31 fewer instructions per event
 * (402 -> 371) for 0.1-0.35 more bytes stored per event (docs/performance.md). */
#define IOT_WIRE_LZ4_ACCELERATION 4

typedef Iotrace__Batch iot_batch;
typedef Iotrace__Body iot_body;
typedef Iotrace__Producer iot_producer;

/* Events, drop records and clock records in a body: what event_count counts. */
size_t iot_wire_event_count(const iot_body *body);

/* The events of its MPI-IO, POSIX and disk tables alone: what a producer's
 * running total (made_through) counts besides its drop records' counts. */
size_t iot_wire_table_events(const iot_body *body);

/* The body's protobuf encoding with its columns coded (the bytes
 * protobuf_c_message_pack() gives for the body after
 * iot_wire_code_columns()), the event tables written by loops specialised
 * for each column (wire_pack.c), into a new buffer; the body is left as it
 * was.  NULL with *len set when the body is empty, larger than max, or
 * memory is short. */
uint8_t *iot_wire_body_pack_new(const iot_body *body, size_t max, size_t *len);

/* The message iotrace__body__unpack() makes of a body's encoding (its
 * columns still coded), the event tables' columns read by loops specialised
 * for each type (wire_unpack.c), anything unexpected by protobuf-c itself;
 * allocated with `alp` (NULL: malloc) for iotrace__body__free_unpacked().
 * NULL when the bytes are not a body. */
iot_body *iot_wire_body_unpack(ProtobufCAllocator *alp, size_t len, const uint8_t *raw);

/* Checks that the columns of each event table have equal lengths and that
 * disk-event job indices fall inside the job dictionary. */
int iot_wire_check_body(const iot_body *body, char *err, size_t errlen);

/* Encodes `body` (its columns coded by iot_wire_code_columns, then
 * LZ4-compressed) into a batch.  The columns are coded in place while they
 * are packed and restored before it returns.  On success returns 0 and a
 * malloc'ed buffer in *out that the caller frees. */
int iot_wire_encode(const iot_producer *producer, uint64_t epoch, uint64_t seq,
                    const iot_body *body, uint8_t **out, size_t *out_len, char *err,
                    size_t errlen);

/* Decodes and checks an envelope (magic, version, sizes, checksum) without
 * touching the body.  Returns NULL with a reason in err on any problem. */
iot_batch *iot_wire_open(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* The same for a batch read back from a collector's store: it passed
 * iot_wire_open before it was stored, and the store's record checksum
 * covers its bytes, so the body's checksum (a pass over every byte, a tenth
 * of a job's pass over the store) is not computed again.  Everything else
 * is checked.  --verify uses iot_wire_open all the same. */
iot_batch *iot_wire_open_stored(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* Decompresses and decodes the body of an opened batch and checks it against
 * the envelope (raw size, event count) and iot_wire_check_body. */
iot_body *iot_wire_body(const iot_batch *batch, char *err, size_t errlen);

/* Full validation of an encoded batch, as the collector does before storing. */
int iot_wire_validate(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* Decoded batches and bodies live in a block of the decoding thread (reused
 * once everything decoded in it is freed): free them in that thread. */
void iot_wire_free_batch(iot_batch *batch);
void iot_wire_free_body(iot_body *body);

/* t_start columns are delta coded; these convert in place. */
void iot_wire_delta_encode(int64_t *values, size_t n);
void iot_wire_delta_decode(int64_t *values, size_t n);

/* The event columns as a batch of IOT_WIRE_VERSION carries them
 * (docs/wire-format.md, "Column coding"), in place; the columns of each
 * table must have equal lengths (iot_wire_check_body).  iot_wire_encode
 * codes, iot_wire_body decodes, by the batch's version: a reader never
 * sees coded values. */
void iot_wire_code_columns(const iot_body *body);
void iot_wire_uncode_columns(const iot_body *body, uint32_t version);

/* Makes the flat columns of a body of `version` (3 on: a column of two
 * values in a table of more rows, docs/wire-format.md) whole, with `alp`
 * (NULL: malloc), before its columns are checked or uncoded.  -1 when
 * memory is short or the body would expand past IOT_WIRE_MAX_RAW values. */
int iot_wire_expand_columns(iot_body *body, ProtobufCAllocator *alp, uint32_t version);

/* CRC-32 (zlib's polynomial, the sums of its crc32()) as used by batches,
 * the collector's store and the agent's journal: the one implementation of
 * it in iotrace.  _update continues a sum (0 starts one). */
uint32_t iot_wire_crc32(const uint8_t *data, size_t len);
uint32_t iot_wire_crc32_update(uint32_t crc, const void *data, size_t len);

/* The envelope's own checksum: CRC-32 over magic, version, every producer
 * field, epoch, seq, event_count, raw_size, compression and the body's
 * checksum, in a fixed layout (docs/wire-format.md), so that a damaged
 * identity is caught like a damaged body.  `via` and `sender` are the
 * agent's and not covered.  _set stores it in the batch, as 1 << 32 | CRC so
 * that it is never 0, which proto3 could not tell from an absent field. */
uint32_t iot_wire_id_checksum(const iot_batch *b);
void iot_wire_set_id_checksum(iot_batch *b);

/* The bytes that, appended to an encoded batch, set its `via` (the
 * forwarding agent's node) whatever the batch said before: the last
 * occurrence of a field is the one decoded.  Returns their length (at most
 * IOT_WIRE_VIA_MAX + 3), or 0 if `via` is longer than IOT_WIRE_VIA_MAX. */
#define IOT_WIRE_VIA_MAX 255
size_t iot_wire_via_field(const char *via, uint8_t out[IOT_WIRE_VIA_MAX + 3]);

/* The node whose clock the batch's event times are on: the forwarding
 * agent's (`via`), or for a batch that came another way the producer's. */
const char *iot_wire_clock_node(const iot_batch *b);

/* Producer identity as one printable key: "node/pid/start_time_ns", and
 * "/uUID" after it when the agent named the local user that sent the batch:
 * a process of one user cannot pass for one of another, nor take the
 * sequence numbers of its batches.  -1 if it does not fit. */
int iot_wire_producer_key(const iot_producer *p, const Iotrace__Sender *sender, char *buf,
                          size_t len);
int iot_wire_batch_key(const iot_batch *b, char *buf, size_t len);

/* The bytes that, appended to an encoded batch, set its `sender`; at most
 * IOT_WIRE_SENDER_MAX of them.  A launcher job id (`job`) longer than
 * IOT_WIRE_LAUNCHER_JOB_MAX is left out. */
#define IOT_WIRE_LAUNCHER_JOB_MAX 64
#define IOT_WIRE_SENDER_MAX (20 + 2 + IOT_WIRE_LAUNCHER_JOB_MAX)
size_t iot_wire_sender_field(const Iotrace__Sender *sender, uint8_t out[IOT_WIRE_SENDER_MAX]);

/* The agent's stamp: CRC-32 over `via` and `sender` (NULL: none), so that
 * the fields that say where and by whom a batch was made are checked like
 * its identity.  _field gives the bytes that, appended after `via` and
 * `sender`, set `stamp_checksum`; _ok is 1 for a batch whose stamp matches,
 * or that carries neither field nor stamp (not forwarded by an agent). */
#define IOT_WIRE_STAMP_MAX 9
uint32_t iot_wire_stamp_checksum(const char *via, const Iotrace__Sender *sender);
size_t iot_wire_stamp_field(const char *via, const Iotrace__Sender *sender,
                            uint8_t out[IOT_WIRE_STAMP_MAX]);
int iot_wire_stamp_ok(const iot_batch *b);

/* What an agent appends to a batch: via, sender, stamp. */
#define IOT_WIRE_TAIL_MAX (IOT_WIRE_VIA_MAX + 3 + IOT_WIRE_SENDER_MAX + IOT_WIRE_STAMP_MAX)

#endif
