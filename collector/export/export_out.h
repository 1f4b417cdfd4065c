/* Where iotrace-export writes a streamed format (JSON Lines, CSV, Chrome
 * trace-event JSON): a file, or standard output for "-". */
#ifndef IOT_EXPORT_OUT_H
#define IOT_EXPORT_OUT_H

#include <stdio.h>

/* Standard output for "-", else the file created or truncated; NULL with
 * errno set when it cannot be. */
FILE *xp_output_open(const char *path);

/* How messages name it: "standard output" for "-", else the path. */
const char *xp_output_name(const char *path);

/* Closes a file, flushes standard output (which stays open); -1 when
 * anything written to it was not. */
int xp_output_close(FILE *out);

#endif
