/* The JSON Lines form of an event (docs/export.md, "--jsonl"). */
#ifndef IOT_EXPORT_JSON_H
#define IOT_EXPORT_JSON_H

#include <jansson.h>

#include "events.h"

/* Names of Iotrace__DropReason values, by value (5 of them). */
extern const char *const xp_drop_reasons[5];

/* The event's object: kind, job, node, rank, ..., as --jsonl writes it
 * (a drop record's own fields for kind drop).  NULL when out of memory. */
json_t *xp_event_json(const struct xp_data *d, const struct xp_event *ev);

/* The CallID as "0x..." (null for a POSIX call or disk operation without one). */
json_t *xp_callid_json(const struct xp_event *ev);

#endif
