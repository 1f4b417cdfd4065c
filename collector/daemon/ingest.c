#include "ingest.h"

#include <stdio.h>
#include <string.h>

#include "timeutil.h"

void ingest_view_init(struct ingest_view *v)
{
    memset(v, 0, sizeof *v);
    pthread_mutex_init(&v->lock, NULL);
    pthread_cond_init(&v->stored, NULL);
    v->started_ns = iot_now_ns();
}

struct ingest_agent *ingest_view_agent(struct ingest_view *v, const char *node)
{
    size_t oldest = 0;
    for (size_t i = 0; i < v->n_agents; i++) {
        if (strcmp(v->agents[i].node, node) == 0)
            return &v->agents[i];
        if (v->agents[i].last_seen_ns < v->agents[oldest].last_seen_ns)
            oldest = i;
    }
    struct ingest_agent *a =
        v->n_agents < IOT_INGEST_MAX_AGENTS ? &v->agents[v->n_agents++] : &v->agents[oldest];
    memset(a, 0, sizeof *a);
    snprintf(a->node, sizeof a->node, "%s", node);
    a->first_seen_ns = a->last_seen_ns = iot_now_ns();
    return a;
}
