/* Logging of problems caused by peers (bad batches, malformed messages) that
 * a misbehaving or hostile peer cannot use to flood the log: each distinct
 * (peer, message) is logged once, at most IOT_RATELOG_BURST new lines per
 * IOT_RATELOG_WINDOW, and everything held back is summed into one line per
 * flush. */
#ifndef IOT_RATELOG_H
#define IOT_RATELOG_H

#include <stdint.h>

#define IOT_RATELOG_BURST 20
#define IOT_RATELOG_WINDOW_NS (60ll * 1000000000)
/* A pair is forgotten after this long, so a persisting problem shows up again. */
#define IOT_RATELOG_RETAIN_NS (3600ll * 1000000000)

struct iot_ratelog;

struct iot_ratelog *iot_ratelog_new(void);
void iot_ratelog_free(struct iot_ratelog *r);

/* Logs (at warn level) "peer: message" unless held back; now is monotonic ns. */
void iot_ratelog_note(struct iot_ratelog *r, const char *peer, const char *message, int64_t now);

/* Logs how many lines were held back since the last flush, if any. */
void iot_ratelog_flush(struct iot_ratelog *r, int64_t now);

#endif
