/* What the test programs do when an MPI call fails: say which call, on
 * which rank and why, and end the job.  Included after the program's own
 * `static int rank`. */
#ifndef IOT_TEST_MPI_CHECK_H
#define IOT_TEST_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

#endif
