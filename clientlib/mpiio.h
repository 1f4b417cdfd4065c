/* What the generated MPI-IO wrappers (gen_wrappers.py) and mpiio.c share. */
#ifndef IOT_MPIIO_H
#define IOT_MPIIO_H

#include <mpi.h>
#include <stdint.h>

#include "client.h"

enum {
    IOT_MF_AT = 1 << 0,     /* explicit offset */
    IOT_MF_IND = 1 << 1,    /* individual file pointer */
    IOT_MF_SHARED = 1 << 2, /* shared file pointer */
    IOT_MF_COLL = 1 << 3,   /* collective on the file handle */
    IOT_MF_READ = 1 << 4,
    IOT_MF_WRITE = 1 << 5,
};

struct iot_fh;

struct iot_mpi_call {
    uint64_t t0;
    uint64_t callid, prev_callid;
    uint64_t file;
    int64_t offset;
    uint64_t bytes;
    uint64_t coll_seq;
    uint64_t coll_group; /* its handle's communicator: 0 = all of MPI_COMM_WORLD */
    struct iot_fh *fhe;
    unsigned func, flags;
};

/* Non-zero (an enum iot_mpiio_state) when this call should be recorded:
 * tracing on, MPI-IO layer on, not nested inside another traced MPI-IO
 * call.  Acquire: READY vouches for what mpiio.c resolved before setting it. */
static inline int iot_mpi_tracing(void)
{
    int on = atomic_load_explicit(&iot_g.mpiio_on, memory_order_acquire);
    return (iot_t.internal | iot_t.mpi_depth) == 0 ? on : IOT_MPIIO_OFF;
}

IOT_HIDDEN void *iot_mpi_next(const char *name);

/* iot_mpi_enter*, iot_mpi_leave*: in mpiio.c, which includes the wrappers. */

/* The access mode (amode >= 0) and hints of an MPI-IO call as the id of a
 * text in the name dictionary, for its offset column; -1 if none. */
IOT_HIDDEN int64_t iot_mpi_info_id(MPI_Info info, int amode);

/* The group of the collectives of a handle opened on comm: 0 when comm has
 * every rank of MPI_COMM_WORLD, else an id every member works out alike
 * (docs/client.md, "Collective calls"). */
IOT_HIDDEN uint64_t iot_mpi_comm_group(MPI_Comm comm);

#endif
