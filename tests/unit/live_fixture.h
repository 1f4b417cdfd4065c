/* A live analysis of a committed store, for the HTTP API's unit test and
 * fuzzer: the segment file copied into a new directory and read by the
 * real live thread until every job is finished with its final statistics
 * in memory; from then on the state, and every answer, stays the same. */
#ifndef IOT_TEST_LIVE_FIXTURE_H
#define IOT_TEST_LIVE_FIXTURE_H

#include <stddef.h>

#include "live.h"

/* Aborts on failure (a test cannot go on without it). */
struct live *live_fixture_start(const char *segment_file, size_t jobs);

/* Stops the thread and removes the directory. */
void live_fixture_stop(struct live *l);

#endif
