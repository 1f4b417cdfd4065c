/* The text an MPI_File_open or MPI_File_set_info row names by its offset
 * (docs/client.md, "Access mode and hints"): "amode=RDWR|CREATE;key=value;..."
 * with '\', ';' and '=' inside a key or value escaped by '\'.  The client
 * library writes it, iotrace-replay reads it back; both include this table
 * of the access mode's names, so that the two cannot disagree. */
#ifndef IOT_MPI_INFO_TEXT_H
#define IOT_MPI_INFO_TEXT_H

#include <mpi.h>

static const struct {
    int flag;
    const char *name;
} iot_amode_names[] = {
    {MPI_MODE_RDONLY, "RDONLY"},          {MPI_MODE_RDWR, "RDWR"},
    {MPI_MODE_WRONLY, "WRONLY"},          {MPI_MODE_CREATE, "CREATE"},
    {MPI_MODE_EXCL, "EXCL"},              {MPI_MODE_DELETE_ON_CLOSE, "DELETE_ON_CLOSE"},
    {MPI_MODE_UNIQUE_OPEN, "UNIQUE_OPEN"}, {MPI_MODE_SEQUENTIAL, "SEQUENTIAL"},
    {MPI_MODE_APPEND, "APPEND"},
};

#define IOT_N_AMODE_NAMES (sizeof iot_amode_names / sizeof iot_amode_names[0])

#endif
