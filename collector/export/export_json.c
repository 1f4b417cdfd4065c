/* One event as the JSON object of `iotrace-export --jsonl` (docs/export.md,
 * "Event fields"): shared by --jsonl and by the exports that carry the same
 * fields (the args of --chrome's slices). */
#include "export_json.h"

#include <stdio.h>

#include "iot_functions.h"
#include "stats_report.h"
#include "wire.h"

static const char *const kind_names[] = {"mpiio", "posix", "disk", "drop"};
const char *const xp_drop_reasons[5] = {"buffer_full", "send_failed", "internal", "unreadable",
                                        "lost"};

static json_t *job_value(const struct xp_data *d, uint32_t job)
{
    return job ? iot_json_text(xp_string(&d->jobs, job)) : json_null();
}

static json_t *rank_value(const struct xp_producer *p)
{
    return p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT && p->rank >= 0
               ? json_integer(p->rank)
               : json_null();
}

json_t *xp_callid_json(const struct xp_event *ev)
{
    if (ev->callid == 0 && ev->kind != XP_MPIIO)
        return json_null();
    char hex[24];
    snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)ev->callid);
    return json_string(hex);
}

static json_t *func_value(unsigned id)
{
    const char *name = iot_func_name(id);
    return name ? json_string(name) : json_null();
}

static json_t *uid_value(const struct xp_producer *p)
{
    return p->uid < 0 ? json_null() : json_integer(p->uid);
}

static json_t *drop_json(const struct xp_data *d, const struct xp_event *ev)
{
    const struct xp_producer *p = &d->producers[ev->producer];
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("drop"));
    json_object_set_new(o, "node", iot_json_text(xp_string(&d->nodes, p->node)));
    json_object_set_new(o, "pid", json_integer(p->pid));
    json_object_set_new(o, "uid", uid_value(p));
    json_object_set_new(o, "job", job_value(d, ev->job));
    json_object_set_new(o, "rank", rank_value(p));
    size_t n_reasons = sizeof xp_drop_reasons / sizeof *xp_drop_reasons;
    json_object_set_new(o, "reason", ev->func < n_reasons
                                         ? json_string(xp_drop_reasons[ev->func])
                                         : json_integer(ev->func));
    json_object_set_new(o, "count", json_integer((json_int_t)ev->bytes));
    json_object_set_new(o, "t_start", json_integer(ev->t_start));
    json_object_set_new(o, "t_end", json_integer(ev->t_end));
    json_object_set_new(o, "tid", json_integer(ev->tid));
    return o;
}

json_t *xp_event_json(const struct xp_data *d, const struct xp_event *ev)
{
    if (ev->kind == XP_DROP)
        return drop_json(d, ev);
    const struct xp_producer *p = &d->producers[ev->producer];
    const char *path = ev->file ? xp_file_path(d, ev->producer, ev->file) : NULL;
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(kind_names[ev->kind]));
    json_object_set_new(o, "job", job_value(d, ev->job));
    json_object_set_new(o, "node", iot_json_text(xp_string(&d->nodes, p->node)));
    json_object_set_new(o, "rank", ev->kind == XP_DISK ? json_null() : rank_value(p));
    json_object_set_new(o, "pid", json_integer(p->pid));
    json_object_set_new(o, "uid", uid_value(p));
    json_object_set_new(o, "tid", json_integer(ev->tid));
    json_object_set_new(o, "func", func_value(ev->func));
    json_object_set_new(o, "callid", xp_callid_json(ev));
    json_object_set_new(o, "file", path ? iot_json_text(path) : json_null());
    json_object_set_new(o, "offset", ev->offset < 0 ? json_null() : json_integer(ev->offset));
    json_object_set_new(o, "bytes", json_integer((json_int_t)ev->bytes));
    if (ev->kind == XP_MPIIO)
        json_object_set_new(o, "xfer", json_integer((json_int_t)ev->xfer));
    json_object_set_new(o, "ret", json_integer(ev->ret));
    json_object_set_new(o, "t_start", json_integer(ev->t_start));
    json_object_set_new(o, "t_end", json_integer(ev->t_end));
    if (ev->kind == XP_MPIIO && ev->coll_seq)
        json_object_set_new(o, "coll_seq", json_integer((json_int_t)ev->coll_seq));
    if (ev->kind == XP_DISK)
        json_object_set_new(o, "server", iot_json_text(xp_string(&d->servers, p->server)));
    return o;
}
