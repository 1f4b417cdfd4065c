#include "analysis.h"

#include <stdlib.h>
#include <string.h>

static void ignore_closed(void *ctx, const struct iot_match_closed *c)
{
    (void)ctx;
    (void)c;
}

int iot_an_init(struct iot_an *an, const struct iot_an_config *cfg)
{
    memset(an, 0, sizeof *an);
    an->cfg = *cfg;
    struct iot_merge_config mc = {.lateness_ns = cfg->lateness_ns, .idle_ns = cfg->idle_ns};
    iot_merge_init(&an->merge, &mc);
    iot_an_stats_init(&an->stats);
    if (iot_match_init(&an->match, cfg->grace_ns, cfg->no_stats ? ignore_closed : iot_an_stats_closed,
                       &an->stats) < 0) {
        iot_an_free(an);
        return -1;
    }
    if (cfg->pairs)
        iot_match_set_pairs(&an->match, cfg->pairs, cfg->ctx);
    return 0;
}

void iot_an_free(struct iot_an *an)
{
    iot_merge_free(&an->merge);
    iot_match_free(&an->match);
    iot_an_stats_free(&an->stats);
    free(an->server);
    memset(an, 0, sizeof *an);
}

int iot_an_producer(struct iot_an *an, uint32_t producer, uint32_t server)
{
    if (producer >= an->n_server) {
        size_t n = an->n_server ? an->n_server : 64;
        while (n <= producer)
            n *= 2;
        uint32_t *v = realloc(an->server, n * sizeof *v);
        if (!v)
            return -1;
        memset(v + an->n_server, 0, (n - an->n_server) * sizeof *v);
        an->server = v;
        an->n_server = n;
    }
    an->server[producer] = server;
    return 0;
}

int iot_an_push(struct iot_an *an, const struct xp_event *ev)
{
    return iot_merge_push(&an->merge, ev);
}

/* Every released event, in order.  Calls whose window ended before this
 * event started are closed first, so whether a disk operation matches
 * depends on the times only, not on how the input was cut into batches. */
static int on_ordered(void *ctx, const struct xp_event *ev)
{
    struct iot_an *an = ctx;
    uint32_t tag = UINT32_MAX;
    if (an->cfg.ordered && an->cfg.ordered(an->cfg.ctx, ev, &tag) != 0)
        return -1;
    iot_match_expire(&an->match, ev->t_start);
    uint32_t server = ev->producer < an->n_server ? an->server[ev->producer] : 0;
    if (!an->cfg.no_stats && iot_an_stats_event(&an->stats, ev, server) < 0)
        return -1;
    if (iot_match_event_tagged(&an->match, ev, tag) < 0)
        return -1;
    return an->stats.failed ? -1 : 0;
}

int iot_an_advance(struct iot_an *an, int64_t now_ns)
{
    if (iot_merge_advance(&an->merge, now_ns, on_ordered, an) != 0)
        return -1;
    /* Nothing not yet released starts at or before the watermark (late
     * events aside), so windows that ended before it are over. */
    iot_match_expire(&an->match, an->merge.watermark);
    return an->stats.failed ? -1 : 0;
}

void iot_an_close_producer(struct iot_an *an, uint32_t producer)
{
    iot_merge_close_producer(&an->merge, producer);
}

int iot_an_forget_producer(struct iot_an *an, uint32_t producer)
{
    if (iot_merge_forget_producer(&an->merge, producer) < 0)
        return -1;
    if (producer < an->n_server)
        an->server[producer] = 0;
    return 0;
}

int iot_an_finish(struct iot_an *an)
{
    if (iot_merge_finish(&an->merge, on_ordered, an) != 0)
        return -1;
    iot_match_finish(&an->match);
    return an->stats.failed ? -1 : 0;
}

void iot_an_memory(const struct iot_an *an, struct iot_an_memory *m)
{
    *m = (struct iot_an_memory){
        .events_held = an->merge.heap_n, .events_peak = an->merge.peak_held,
        .entries_held = an->match.n_entries, .entries_peak = an->match.peak_entries,
        .groups_held = an->match.n_groups, .groups_peak = an->match.peak_groups,
        .merge_bytes = iot_merge_bytes(&an->merge), .match_bytes = iot_match_bytes(&an->match),
        .stats_bytes = an->stats.bytes, .pushed = an->merge.pushed, .late = an->merge.late,
        .max_late_ns = an->merge.max_late_ns, .watermark = an->merge.watermark};
}
