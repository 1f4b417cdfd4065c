#include "ratelog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define MAX_PAIRS 256

struct pair {
    char peer[64];
    char message[192];
    int64_t logged_at;
};

struct iot_ratelog {
    struct pair pairs[MAX_PAIRS];
    int n;
    int64_t window_start;
    int lines_in_window;
    uint64_t held_back;
};

struct iot_ratelog *iot_ratelog_new(void) { return calloc(1, sizeof(struct iot_ratelog)); }

void iot_ratelog_free(struct iot_ratelog *r) { free(r); }

static int find_pair(const struct iot_ratelog *r, const char *peer, const char *message)
{
    for (int i = 0; i < r->n; i++)
        if (strncmp(r->pairs[i].peer, peer, sizeof r->pairs[i].peer - 1) == 0 &&
            strncmp(r->pairs[i].message, message, sizeof r->pairs[i].message - 1) == 0)
            return i;
    return -1;
}

static int take_budget(struct iot_ratelog *r, int64_t now)
{
    if (now - r->window_start >= IOT_RATELOG_WINDOW_NS) {
        r->window_start = now;
        r->lines_in_window = 0;
    }
    if (r->lines_in_window >= IOT_RATELOG_BURST)
        return 0;
    r->lines_in_window++;
    return 1;
}

void iot_ratelog_note(struct iot_ratelog *r, const char *peer, const char *message, int64_t now)
{
    if (find_pair(r, peer, message) >= 0 || r->n == MAX_PAIRS || !take_budget(r, now)) {
        r->held_back++;
        return;
    }
    struct pair *p = &r->pairs[r->n++];
    snprintf(p->peer, sizeof p->peer, "%s", peer);
    snprintf(p->message, sizeof p->message, "%s", message);
    p->logged_at = now;
    iot_warn("%s: %s (repeats from this peer are counted, not logged)", peer, message);
}

static void forget_old(struct iot_ratelog *r, int64_t now)
{
    int keep = 0;
    for (int i = 0; i < r->n; i++)
        if (now - r->pairs[i].logged_at < IOT_RATELOG_RETAIN_NS)
            r->pairs[keep++] = r->pairs[i];
    r->n = keep;
}

void iot_ratelog_flush(struct iot_ratelog *r, int64_t now)
{
    if (r->held_back)
        iot_warn("%llu further problem reports from peers were not logged",
                 (unsigned long long)r->held_back);
    r->held_back = 0;
    forget_old(r, now);
}
