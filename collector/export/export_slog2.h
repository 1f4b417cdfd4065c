/* iotrace-export --slog2: a store turned into an SLOG-2 file for Jumpshot,
 * streaming (docs/export.md, "--slog2"):
 *
 *   store ──► align ──► merge (start order) ──► lanes ──► states ─┐
 *                              │                                  ├─► end-time order ──► writer
 *                              └──► match (job, CallID) ──► arrows┘
 *
 * One timeline per MPI rank (or other traced process) and per storage-server
 * thread, with extra lanes below it for states that overlap without nesting;
 * a state per event, an arrow from each MPI-IO call to each disk operation
 * that carried its CallID.  Memory is what is in flight (the merge's window,
 * the calls not yet closed, the states not yet ended) plus the writer's open
 * tree path, never the trace. */
#ifndef IOT_EXPORT_SLOG2_H
#define IOT_EXPORT_SLOG2_H

#include <stdint.h>

#include "events.h"
#include "slog2_write.h"

enum {
    XP_LAYER_MPIIO = 1,  /* states of MPI-IO calls */
    XP_LAYER_POSIX = 2,  /* states of POSIX calls */
    XP_LAYER_DISK = 4,   /* states of disk operations */
    XP_LAYER_ARROWS = 8, /* call -> disk operation arrows */
    XP_LAYER_ALL = 15
};

struct xp_slog2_options {
    const char *store;
    const char *path;     /* the SLOG-2 file to write */
    uint32_t job;         /* in d->jobs; UINT32_MAX: every job */
    const char *job_name; /* for messages */
    int64_t lateness_ns, grace_ns;
    double from_s, to_s;  /* time window, seconds after the first event; -inf / +inf: none */
    unsigned layers;      /* XP_LAYER_* */
    int32_t leaf_bytesize; /* 0: the writer's default */
    int16_t children;      /* 0: the writer's default */
};

struct xp_slog2_result {
    uint64_t states, arrows, events; /* drawables written */
    uint64_t pairs;                  /* call -> disk operation pairs found (arrows before the
                                        window and layer filters) */
    uint64_t late;                   /* drawables left out: they ended before drawables
                                        already written (events later than --lateness) */
    uint32_t lines;                  /* timelines used */
    int depth;
    uint64_t nodes_written; /* tree nodes in the file */
    int64_t file_bytes;
    int64_t origin_ns;               /* time 0 of the file, on the collector's clock */
    size_t writer_peak_bytes;
    size_t held_peak;                /* drawables waiting for their turn, at the most */
};

/* Category indices: a state category per function id (MPI-IO, POSIX and
 * disk ids are disjoint and below 256), then the arrows and the marker of
 * time 0. */
enum {
    XP_SLOG2_CAT_READ_PATH = 256,
    XP_SLOG2_CAT_WRITE_PATH,
    XP_SLOG2_CAT_OTHER_PATH,
    XP_SLOG2_CAT_ORIGIN,
    XP_SLOG2_N_CATS
};

/* The definition category cat (0 .. XP_SLOG2_N_CATS - 1) is written with:
 * name, topology, colour, width and label; the name is kept in name
 * (namelen bytes, 64 are enough).  Public so that a test can check every
 * category the exporter can write, not only those a trace happens to use. */
void xp_slog2_category(int32_t cat, struct iot_slog2_catdef *c, char *name, size_t namelen);

/* Parses a comma-separated list of layer names (mpiio, posix, disk,
 * arrows, all).  -1 with the offending name in err. */
int xp_slog2_layers(const char *list, unsigned *layers, char *err, size_t errlen);

/* Reads the store (after xp_read_clocks) and writes o->path.  Returns 0,
 * or -1 with the reason in err (a damaged store, nothing to draw, an I/O
 * error: the partial file is then removed). */
int xp_slog2(struct xp_data *d, const struct xp_slog2_options *o, struct xp_slog2_result *r,
             char *err, size_t errlen);

#endif
