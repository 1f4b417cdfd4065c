/* A progress line on standard error for exports that take a while: shown
 * once one has run two seconds, on a terminal (or always, or never, as
 * --progress and --no-progress say), redrawn at most five times a second,
 * erased at the end.  "iotrace-export: writing JSON Lines: 3.2 M of 6.6 M
 * events (48 %), 1.4 M/s, 2 s left". */
#ifndef IOT_EXPORT_PROGRESS_H
#define IOT_EXPORT_PROGRESS_H

#include <stdint.h>

enum xp_progress_mode { XP_PROGRESS_AUTO, XP_PROGRESS_ON, XP_PROGRESS_OFF };

/* Once per run, before the first phase; after_s: how long the run goes
 * before a line is shown (iotrace-export: 2). */
void xp_progress_init(const char *program, enum xp_progress_mode mode, double after_s);
/* A phase: what is done ("reading the store", "writing JSON Lines") and its
 * total in events (0: not known). */
void xp_progress_phase(const char *what, uint64_t total);
/* done events of the phase; cheap to call per event (looks at the clock
 * every 65 536 calls). */
void xp_progress_step(uint64_t done);
/* Erases the line, if one was shown. */
void xp_progress_end(void);

#endif
