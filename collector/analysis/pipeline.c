#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int iot_pipe_init(struct iot_pipe *p, const struct iot_pipe_config *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    struct iot_an_config ac = {.lateness_ns = cfg->lateness_ns, .grace_ns = cfg->grace_ns,
                               .idle_ns = cfg->idle_ns, .no_stats = cfg->drawing,
                               .ordered = cfg->ordered, .pairs = cfg->pairs, .ctx = cfg->ctx};
    if (iot_an_init(&p->an, &ac) < 0)
        return -1;
    if (xp_intern(&p->names, "") != 0) {
        iot_pipe_free(p);
        return -1;
    }
    return 0;
}

void iot_pipe_free(struct iot_pipe *p)
{
    iot_an_free(&p->an);
    xp_strings_free(&p->names);
    free(p->known);
    free(p->pairs);
    memset(p, 0, sizeof *p);
}

/* Events come in runs of one producer, so most pairs repeat the last one;
 * the rest is deduplicated when the array fills, which keeps it at the
 * number of distinct (job, node) pairs. */
static int note_pair(struct iot_pipe *p, uint32_t job, uint32_t node)
{
    uint64_t pair = (uint64_t)job << 32 | node;
    if (p->n_pairs && p->pairs[p->n_pairs - 1] == pair)
        return 0;
    if (p->n_pairs == p->cap_pairs) {
        p->n_pairs = xp_unique_u64(p->pairs, p->n_pairs);
        if (p->n_pairs * 2 >= p->cap_pairs) {
            size_t cap = p->cap_pairs ? p->cap_pairs * 2 : 256;
            uint64_t *v = realloc(p->pairs, cap * sizeof *v);
            if (!v)
                return -1;
            p->pairs = v;
            p->cap_pairs = cap;
        }
    }
    p->pairs[p->n_pairs++] = pair;
    return 0;
}

size_t iot_pipe_job_nodes(struct iot_pipe *p, const uint64_t **pairs)
{
    p->n_pairs = xp_unique_u64(p->pairs, p->n_pairs);
    *pairs = p->pairs;
    return p->n_pairs;
}

static int describe(struct iot_pipe *p, const struct xp_data *d, uint32_t producer)
{
    if (producer < p->n_known && p->known[producer])
        return 0;
    if (producer >= p->n_known) {
        size_t n = p->n_known ? p->n_known * 2 : 64;
        while (n <= producer)
            n *= 2;
        uint8_t *k = realloc(p->known, n);
        if (!k)
            return -1;
        memset(k + p->n_known, 0, n - p->n_known);
        p->known = k;
        p->n_known = n;
    }
    const struct xp_producer *x = &d->producers[producer];
    const char *server = xp_string(&d->servers, x->server);
    uint32_t id = xp_intern(&p->names, server[0] ? server : xp_string(&d->nodes, x->node));
    if (id == UINT32_MAX || iot_an_producer(&p->an, producer, id) < 0)
        return -1;
    p->known[producer] = 1;
    return 0;
}

int iot_pipe_forget_producer(struct iot_pipe *p, uint32_t producer)
{
    if (iot_an_forget_producer(&p->an, producer) < 0)
        return -1;
    if (producer < p->n_known)
        p->known[producer] = 0;
    return 0;
}

/* Statistics count MPI-IO calls, disk operations and losses of a job;
 * POSIX calls matter only inside an MPI-IO call (analysis_match.h). */
static int counted(const struct xp_event *ev)
{
    if (ev->kind == XP_POSIX && ev->callid == 0)
        return 0;
    return ev->job != 0 || ev->kind == XP_DROP;
}

int iot_pipe_event(void *ctx, const struct xp_data *d, const struct xp_event *in, char *err,
                   size_t errlen)
{
    struct iot_pipe *p = ctx;
    struct xp_event ev = *in;
    ev.job = xp_event_job(d, &ev);
    if (p->cfg.job != UINT32_MAX && ev.job != p->cfg.job)
        return 0;
    if (ev.job && note_pair(p, ev.job, d->producers[ev.producer].clock) < 0)
        goto oom;
    if (!p->cfg.drawing && !counted(&ev))
        return 0;
    if (describe(p, d, ev.producer) < 0 || iot_an_push(&p->an, &ev) < 0)
        goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory in the analysis");
    return -1;
}

int iot_pipe_batch_done(void *ctx, const struct xp_data *d, uint32_t producer, uint64_t recv_ns,
                        char *err, size_t errlen)
{
    struct iot_pipe *p = ctx;
    if (d->producers[producer].last_batch == d->batches)
        iot_an_close_producer(&p->an, producer);
    if (iot_an_advance(&p->an, (int64_t)recv_ns) < 0) {
        if (!err[0])
            snprintf(err, errlen, "out of memory in the analysis");
        return -1;
    }
    if (p->cfg.advanced && p->cfg.advanced(p->cfg.ctx, p->an.merge.watermark) < 0)
        return -1;
    return 0;
}

int iot_pipe_finish(struct iot_pipe *p, char *err, size_t errlen)
{
    if (iot_an_finish(&p->an) < 0) {
        if (!err[0])
            snprintf(err, errlen, "out of memory in the analysis");
        return -1;
    }
    return 0;
}

int iot_pipe_run_store(struct iot_pipe *p, const char *store, struct xp_data *d, char *err,
                       size_t errlen)
{
    err[0] = '\0';
    if (xp_read_store_batches(store, d, p->cfg.job, iot_pipe_event, iot_pipe_batch_done, p, err,
                              errlen) < 0)
        return -1;
    return iot_pipe_finish(p, err, errlen);
}
