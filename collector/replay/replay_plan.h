/* What iotrace-replay will do, worked out from a job's events in the store
 * before any rank replays anything (no MPI here): each rank's MPI-IO calls
 * and its POSIX I/O outside MPI-IO in the order it made them, the file
 * handles the ranks share, the files mapped under the target directory,
 * and what the trace does not say directly (where a seek went, the
 * displacement of a view) inferred from the accesses that follow.  See
 * docs/replay.md. */
#ifndef IOT_REPLAY_PLAN_H
#define IOT_REPLAY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "iot_functions.h"

enum rp_kind { RP_MPIIO = 1, RP_POSIX = 2 };

/* Why an operation of the trace is not replayed. */
enum rp_skip {
    RP_DO = 0,
    RP_SKIP_NO_FILE,    /* its file is not known (untraced, or its open is missing) */
    RP_SKIP_INCOMPLETE, /* a collective some member rank has no record of (drops) */
    RP_SKIP_UNMATCHED,  /* a completion or split end whose call is missing */
    RP_SKIP_NOT_IO,     /* error handlers, handle conversions: nothing to replay */
    RP_SKIP_FAILED,     /* the original call failed */
    RP_SKIP_OUTSIDE,    /* POSIX I/O on a file outside the job's data (the MPI runtime's) */
    RP_SKIP_UNPAIRED,   /* a message whose other end is not in the trace (events lost) */
    RP_SKIP_REASONS
};

extern const char *const rp_skip_names[RP_SKIP_REASONS];

/* One call to replay; sent from rank 0 to its rank as plain bytes. */
struct rp_op {
    int64_t t_start, t_end; /* original, ns on the recording node's clock */
    /* Data calls: the absolute offset recorded (-1: none).  MPI_File_seek
     * and seek_shared: the absolute offset to move to (-1: stay).
     * MPI_File_set_view: the displacement to use. */
    int64_t offset;
    uint64_t bytes, xfer, callid;
    int64_t ret;       /* MPI error code or POSIX result */
    uint32_t handle;   /* MPI-IO: index in rp_plan.handle_path (MPI_Barrier: its
                          communicator's, a handle without a path); POSIX: the path's index */
    uint32_t coll_seq;
    uint32_t info;     /* MPI_File_open, set_info: index in rp_plan.infos (0: none) */
    uint32_t together; /* completions: how many of the next records one Wait/Test call
                          completed (this one included); 0 for the records it covers */
    uint16_t func;
    uint8_t kind;      /* enum rp_kind */
    uint8_t skip;      /* enum rp_skip */
    uint8_t sync;      /* wait for the handle's members first (rp_plan_prepare) */
};

/* Bytes of data the operation moves: an MPI_File_set_view row's bytes
 * describe the view (docs/client.md, "File views"), an MPI_Barrier's the
 * size of its communicator, a message's (replayed empty) its size. */
static inline uint64_t rp_data_bytes(const struct rp_op *o)
{
    return o->kind == RP_MPIIO &&
                   (o->func == IOT_F_MPIIO_MPI_File_set_view || o->func == IOT_F_MPIIO_MPI_Barrier ||
                    o->func == IOT_F_MPIIO_MPI_Send || o->func == IOT_F_MPIIO_MPI_Recv ||
                    o->func == IOT_F_MPIIO_MPI_Isend || o->func == IOT_F_MPIIO_MPI_Irecv)
               ? 0
               : o->bytes;
}

/* Why ranks and their events are missing: drop records of the job. */
struct rp_loss {
    int32_t rank; /* -1: a process without a rank */
    uint16_t reason;
    uint64_t events;
};

struct rp_plan {
    uint32_t n_ranks;        /* highest rank seen + 1 */
    uint32_t ranks_seen;     /* ranks with at least one event */
    struct rp_op **ops;      /* per rank */
    size_t *n_ops;
    char **orig_paths;       /* per path index (0: none) */
    char **paths;            /* the same, mapped under the target */
    uint8_t *replayed;       /* per path: 1 if a call replayed uses it, so it is made */
    uint64_t *extent;        /* per path: the end of the furthest access, for set_size */
    size_t n_paths;
    uint32_t *handle_path;   /* per handle: its path (0: a barrier's communicator) */
    uint8_t *members;        /* n_handles x n_ranks: which ranks opened it (are in it) */
    size_t n_handles;
    size_t n_comms;          /* of the handles, the last n_comms are communicators */
    char **infos;            /* access modes and hints as recorded (0: ""), docs/client.md */
    size_t n_infos;
    struct rp_loss *losses;
    size_t n_losses;
    uint64_t lost_events;    /* sum over losses */
    uint64_t skipped_helpers; /* events of processes without a rank (not replayed) */
};

/* Reads the events of job `job` from the store: every rank's MPI-IO calls
 * and its POSIX calls outside MPI-IO, each rank's in start order.  -1 with
 * err set (no such job, unreadable store, out of memory). */
int rp_plan_read(const char *store, const char *job, struct rp_plan *p, char *err,
                 size_t errlen);

/* Leaves out the POSIX I/O on files outside `posix_under` (NULL: the
 * directory holding the job's MPI-IO files) and under /dev, /proc and /sys,
 * maps every file under `target` (docs/replay.md, Files) and works out
 * handles, seek targets, view displacements, completions; with
 * `incomplete`, collectives that a member rank has no record of are left
 * out on every rank so that no rank waits for one that never comes. */
int rp_plan_prepare(struct rp_plan *p, const char *target, const char *posix_under, char *err,
                    size_t errlen);

void rp_plan_free(struct rp_plan *p);

/* The tag a recorded message is replayed with on MPI_COMM_WORLD: its tag
 * and its communicator's id, so that messages of two communicators between
 * the same ranks do not match each other. */
static inline int rp_message_tag(const struct rp_op *o)
{
    uint64_t h = (uint64_t)o->offset * 0x9e3779b97f4a7c15ull ^ o->coll_seq;
    return (int)(h % 32767);
}

/* Function classes, by the function's id (proto/functions.tsv). */
enum rp_pos { RP_POS_NONE, RP_POS_AT, RP_POS_IND, RP_POS_SHARED };
struct rp_class {
    uint8_t pos;        /* enum rp_pos, data calls only */
    uint8_t data;       /* reads or writes */
    uint8_t write;
    uint8_t collective; /* on the handle: every member calls it */
    uint8_t nonblocking;
    uint8_t begin, end; /* split collective */
    uint8_t completion; /* MPI_Wait* and MPI_Test* */
    uint8_t barrier;    /* MPI_Barrier (IOTRACE_SYNC), collective on its communicator */
    uint8_t message;    /* MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv (IOTRACE_SYNC): xfer the
                           peer's world rank */
    uint8_t large;      /* the _c form */
};
struct rp_class rp_classify(unsigned func);

#endif
