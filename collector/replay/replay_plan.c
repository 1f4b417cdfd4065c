#include "replay_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "grow.h"
#include "iot_functions.h"
#include "opts.h"
#include "wire.h"

const char *const rp_skip_names[RP_SKIP_REASONS] = {
    "replayed", "no_file", "incomplete_collective", "unmatched", "not_io", "failed", "outside",
    "unpaired_message"};

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

static struct rp_class classify(unsigned func)
{
    struct rp_class c = {0};
    if (iot_func_kind(func) != IOT_KIND_MPIIO)
        return c;
    const char *n = iot_func_name(func);
    if (strncmp(n, "MPI_Wait", 8) == 0 || strncmp(n, "MPI_Test", 8) == 0) {
        c.completion = 1;
        return c;
    }
    if (func == IOT_F_MPIIO_MPI_Barrier) {
        c.barrier = c.collective = 1;
        return c;
    }
    if (func == IOT_F_MPIIO_MPI_Send || func == IOT_F_MPIIO_MPI_Recv ||
        func == IOT_F_MPIIO_MPI_Isend || func == IOT_F_MPIIO_MPI_Irecv) {
        c.message = 1;
        return c;
    }
    n += strlen("MPI_File_");
    c.large = ends_with(n, "_c");
    const char *rw = n[0] == 'i' ? n + 1 : n;
    c.data = strncmp(rw, "read", 4) == 0 || strncmp(rw, "write", 5) == 0;
    c.write = strncmp(rw, "write", 5) == 0;
    c.nonblocking = c.data && n[0] == 'i';
    c.begin = strstr(n, "_begin") != NULL;
    c.end = ends_with(n, "_end");
    if (c.data)
        c.pos = strstr(n, "_at") ? RP_POS_AT
                : strstr(n, "_shared") || strstr(n, "_ordered") ? RP_POS_SHARED
                                                                 : RP_POS_IND;
    static const char *const coll[] = {"open", "close", "set_size", "preallocate", "set_info",
                                       "set_view", "set_atomicity", "sync", "seek_shared"};
    for (size_t i = 0; i < sizeof coll / sizeof coll[0]; i++)
        if (strcmp(n, coll[i]) == 0)
            c.collective = 1;
    if (strstr(n, "_all") || strstr(n, "_ordered"))
        c.collective = 1;
    return c;
}

/* By name, once: the replay asks for every record. */
struct rp_class rp_classify(unsigned func)
{
    static struct rp_class table[256];
    static uint8_t known[256];
    if (func >= 256)
        return classify(func);
    if (!known[func]) {
        table[func] = classify(func);
        known[func] = 1;
    }
    return table[func];
}

/* ---- reading ---------------------------------------------------------------- */

struct collected {
    struct xp_event *v;
    size_t n, cap;
    uint32_t job;
};

static int pending(const struct xp_event *ev)
{
    return ev->job == 0 && ev->kind != XP_DISK;
}

/* Disk events are the storage servers' view of the same calls: not
 * replayed.  POSIX calls inside an MPI-IO call (they carry its CallID) are
 * what the MPI library did for it, and the replayed call does them again. */
static int collect(void *ctx, const struct xp_data *d, const struct xp_event *ev, char *err,
                   size_t errlen)
{
    (void)d;
    struct collected *c = ctx;
    if (ev->kind == XP_DISK || (ev->kind == XP_POSIX && ev->callid != 0))
        return 0;
    if (ev->job != c->job && !pending(ev))
        return 0;
    if (iot_grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v, 4096) < 0) {
        snprintf(err, errlen, "out of memory holding %zu events", c->n);
        return -1;
    }
    c->v[c->n++] = *ev;
    return 0;
}

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int cmp_op(const void *pa, const void *pb)
{
    const struct xp_event *a = pa, *b = pb;
    int c;
    if ((c = cmp_i64(a->t_start, b->t_start)) || (c = cmp_i64(a->t_end, b->t_end)))
        return c;
    return cmp_i64((int64_t)a->order, (int64_t)b->order);
}

static int fail_oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return -1;
}

static int add_loss(struct rp_plan *p, int32_t rank, uint16_t reason, uint64_t events)
{
    for (size_t i = 0; i < p->n_losses; i++)
        if (p->losses[i].rank == rank && p->losses[i].reason == reason) {
            p->losses[i].events += events;
            p->lost_events += events;
            return 0;
        }
    struct rp_loss *v = realloc(p->losses, (p->n_losses + 1) * sizeof *v);
    if (!v)
        return -1;
    p->losses = v;
    p->losses[p->n_losses++] = (struct rp_loss){rank, reason, events};
    p->lost_events += events;
    return 0;
}

/* Events of the job's ranks, in xp order; the rest counted or dropped. */
static int keep_rank_events(struct rp_plan *p, const struct xp_data *d, struct collected *c,
                            uint32_t job)
{
    size_t kept = 0;
    int32_t top = -1;
    for (size_t i = 0; i < c->n; i++) {
        struct xp_event *ev = &c->v[i];
        const struct xp_producer *pr = &d->producers[ev->producer];
        if (pending(ev))
            ev->job = pr->job;
        if (ev->job != job)
            continue;
        int ranked = pr->kind == IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT && pr->rank >= 0;
        if (ev->kind == XP_DROP) {
            if (add_loss(p, ranked ? pr->rank : -1, ev->func, ev->bytes) < 0)
                return -1;
            continue;
        }
        if (!ranked) {
            p->skipped_helpers++;
            continue;
        }
        if (pr->rank > top)
            top = pr->rank;
        c->v[kept++] = *ev;
    }
    c->n = kept;
    p->n_ranks = (uint32_t)(top + 1);
    return 0;
}

static int fill_ops(struct rp_plan *p, const struct xp_data *d, struct collected *c,
                    struct xp_strings *paths, struct xp_strings *infos)
{
    p->ops = calloc(p->n_ranks ? p->n_ranks : 1, sizeof *p->ops);
    p->n_ops = calloc(p->n_ranks ? p->n_ranks : 1, sizeof *p->n_ops);
    if (!p->ops || !p->n_ops)
        return -1;
    for (size_t i = 0; i < c->n; i++)
        p->n_ops[d->producers[c->v[i].producer].rank]++;
    for (uint32_t r = 0; r < p->n_ranks; r++) {
        if (p->n_ops[r])
            p->ranks_seen++;
        p->ops[r] = calloc(p->n_ops[r] ? p->n_ops[r] : 1, sizeof **p->ops);
        if (!p->ops[r])
            return -1;
        p->n_ops[r] = 0;
    }
    if (c->n)
        qsort(c->v, c->n, sizeof *c->v, cmp_op);
    for (size_t i = 0; i < c->n; i++) {
        const struct xp_event *ev = &c->v[i];
        int32_t rank = d->producers[ev->producer].rank;
        const char *path = ev->file ? xp_file_path(d, ev->producer, ev->file) : NULL;
        uint32_t pi = xp_intern(paths, path && path[0] == '/' ? path : "");
        if (pi == UINT32_MAX)
            return -1;
        /* An open's or set_info's offset names its mode and hints. */
        uint32_t info = 0;
        const char *text = xp_event_info(d, ev);
        if (text && (info = xp_intern(infos, text)) == UINT32_MAX)
            return -1;
        p->ops[rank][p->n_ops[rank]++] = (struct rp_op){
            .t_start = ev->t_start, .t_end = ev->t_end, .offset = xp_event_offset(ev),
            .bytes = ev->bytes, .xfer = ev->xfer, .ret = ev->ret, .callid = ev->callid,
            .handle = pi, .info = info,
            .coll_seq = (uint32_t)ev->coll_seq, .together = 1, .func = ev->func,
            .kind = ev->kind == XP_MPIIO ? RP_MPIIO : RP_POSIX};
    }
    return 0;
}

int rp_plan_read(const char *store, const char *job, struct rp_plan *p, char *err,
                 size_t errlen)
{
    memset(p, 0, sizeof *p);
    struct xp_data d;
    struct xp_strings paths = {0}, infos = {0};
    struct collected c = {0};
    if (xp_data_init(&d) < 0 || xp_intern(&paths, "") != 0 || xp_intern(&infos, "") != 0)
        return fail_oom(err, errlen);
    int rc = -1;
    c.job = xp_intern(&d.jobs, job);
    if (c.job == UINT32_MAX) {
        fail_oom(err, errlen);
        goto out;
    }
    if (xp_read_store(store, &d, collect, &c, err, errlen) < 0)
        goto out;
    if (keep_rank_events(p, &d, &c, c.job) < 0 || fill_ops(p, &d, &c, &paths, &infos) < 0) {
        fail_oom(err, errlen);
        goto out;
    }
    if (c.n == 0 && p->n_losses == 0) {
        snprintf(err, errlen, "job '%s' has no MPI-IO or POSIX events of MPI ranks in %s", job,
                 store);
        goto out;
    }
    p->n_paths = paths.n;
    p->orig_paths = paths.str; /* taken over */
    paths.str = NULL;
    paths.n = 0;
    p->n_infos = infos.n;
    p->infos = infos.str;
    infos.str = NULL;
    infos.n = 0;
    rc = 0;
out:
    free(c.v);
    xp_strings_free(&paths);
    xp_strings_free(&infos);
    xp_data_free(&d);
    return rc;
}

/* ---- files -------------------------------------------------------------------- */

/* Length of the directory part every used path shares ("/a/b" of
 * "/a/b/c" and "/a/b/d/e"), so that the files keep their places relative
 * to each other under the target. */
static size_t common_dir(const struct rp_plan *p, const uint8_t *used, uint8_t want)
{
    const char *first = NULL;
    size_t len = 0;
    for (size_t i = 1; i < p->n_paths; i++) {
        if (!(used[i] & want))
            continue;
        const char *s = p->orig_paths[i];
        const char *slash = strrchr(s, '/');
        size_t dir = (size_t)(slash - s);
        if (!first) {
            first = s;
            len = dir;
            continue;
        }
        size_t k = 0;
        while (k < len && k < dir && first[k] == s[k])
            k++;
        int boundary = (k == len || first[k] == '/') && (k == dir || s[k] == '/');
        if (!boundary)
            do
                k--;
            while (k > 0 && first[k] != '/');
        len = k;
    }
    return len;
}

static int map_paths(struct rp_plan *p, const char *target)
{
    uint8_t *used = p->replayed = calloc(p->n_paths + 1, 1);
    p->paths = calloc(p->n_paths + 1, sizeof *p->paths);
    p->extent = calloc(p->n_paths + 1, sizeof *p->extent);
    if (!used || !p->paths || !p->extent)
        return -1;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            const struct rp_op *o = &p->ops[r][i];
            if (o->skip)
                continue;
            used[o->handle] = 1;
            uint64_t end = (uint64_t)o->offset + rp_data_bytes(o);
            if (o->offset >= 0 && end > p->extent[o->handle])
                p->extent[o->handle] = end;
        }
    size_t dir = common_dir(p, used, 1);
    size_t tlen = strlen(target);
    while (tlen > 1 && target[tlen - 1] == '/')
        tlen--;
    for (size_t i = 0; i < p->n_paths; i++) {
        /* A file nothing replays need not share the others' directory. */
        const char *rest = !i ? "" : used[i] ? p->orig_paths[i] + dir : p->orig_paths[i];
        size_t n = tlen + strlen(rest) + 2;
        p->paths[i] = malloc(n);
        if (!p->paths[i])
            return -1;
        snprintf(p->paths[i], n, "%.*s%s%s", (int)tlen, target, rest[0] == '/' ? "" : "/", rest);
    }
    return 0;
}

static int under(const char *path, const char *dir, size_t len)
{
    return strncmp(path, dir, len) == 0 && (path[len] == '/' || (len && dir[len - 1] == '/'));
}

/* The MPI runtime's own POSIX I/O (shared memory under /dev/shm, random
 * numbers, the topology under /sys) is in the trace too, outside MPI-IO
 * like the application's; it is not the job's to replay. */
static int pick_posix(struct rp_plan *p, const char *posix_under)
{
    uint8_t *kind = calloc(p->n_paths + 1, 1);
    if (!kind)
        return -1;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++)
            if (!p->ops[r][i].skip)
                kind[p->ops[r][i].handle] |= p->ops[r][i].kind;
    const char *dir = posix_under ? posix_under : "";
    size_t len = posix_under ? strlen(posix_under) : common_dir(p, kind, RP_MPIIO);
    if (!posix_under && len == 0) /* no MPI-IO file, or only at the root */
        dir = "/";
    else if (!posix_under)
        dir = NULL;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            struct rp_op *o = &p->ops[r][i];
            if (o->kind != RP_POSIX || o->skip)
                continue;
            const char *path = p->orig_paths[o->handle];
            const char *base = dir;
            if (!base) /* the MPI-IO files' directory, as the first of them spells it */
                for (size_t k = 1; k < p->n_paths && !base; k++)
                    if (kind[k] & RP_MPIIO)
                        base = p->orig_paths[k];
            if (!path[0] || !under(path, base, len) || under(path, "/dev", 4) ||
                under(path, "/proc", 5) || under(path, "/sys", 4) || strncmp(path, "//", 2) == 0)
                o->skip = RP_SKIP_OUTSIDE;
        }
    free(kind);
    return 0;
}

/* ---- handles -------------------------------------------------------------------- */

/* Sort keys of the handle and collective tables: (path, nth open) and
 * (handle, sequence number), then rank. */
struct rp_key {
    uint32_t major, minor, rank;
};

static int cmp_key(const void *pa, const void *pb)
{
    const struct rp_key *a = pa, *b = pb;
    if (a->major != b->major)
        return a->major < b->major ? -1 : 1;
    if (a->minor != b->minor)
        return a->minor < b->minor ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

struct open_key {
    struct rp_key k; /* path, nth open of it, rank */
    size_t op;
};

/* The nth MPI_File_open of a path on each rank is one handle, shared by the
 * ranks that have it: which communicator opened it is not recorded, and
 * ranks open a handle's file together, the same number of times. */
static int assign_handles(struct rp_plan *p)
{
    size_t n = 0, cap = 0;
    struct open_key *keys = NULL;
    uint32_t *count = calloc(p->n_paths + 1, sizeof *count);
    uint32_t *cur = calloc(p->n_paths + 1, sizeof *cur);
    int rc = -1;
    if (!count || !cur)
        goto out;
    for (uint32_t r = 0; r < p->n_ranks; r++) {
        memset(count, 0, (p->n_paths + 1) * sizeof *count);
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            const struct rp_op *o = &p->ops[r][i];
            if (o->kind != RP_MPIIO || o->func != IOT_F_MPIIO_MPI_File_open || !o->handle ||
                o->skip)
                continue;
            if (iot_grow((void **)&keys, &cap, n + 1, sizeof *keys, 64) < 0)
                goto out;
            keys[n++] = (struct open_key){{o->handle, count[o->handle]++, r}, i};
        }
    }
    if (n) /* qsort wants an array, even of nothing */
        qsort(keys, n, sizeof *keys, cmp_key);
    p->handle_path = calloc(n + 1, sizeof *p->handle_path);
    p->members = calloc((n + 1) * (p->n_ranks ? p->n_ranks : 1), 1);
    if (!p->handle_path || !p->members)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct rp_key *k = &keys[i].k, *prev = i ? &keys[i - 1].k : NULL;
        if (!prev || prev->major != k->major || prev->minor != k->minor)
            p->handle_path[p->n_handles++] = k->major;
        uint32_t h = (uint32_t)p->n_handles - 1;
        p->members[(size_t)h * p->n_ranks + k->rank] = 1;
        p->ops[k->rank][keys[i].op].coll_seq = h; /* parked until the walk below */
    }
    /* Every other MPI-IO call names its file, and so the handle last opened
     * on it by its rank. */
    for (uint32_t r = 0; r < p->n_ranks; r++) {
        for (size_t k = 0; k <= p->n_paths; k++)
            cur[k] = UINT32_MAX;
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            struct rp_op *o = &p->ops[r][i];
            if (o->kind != RP_MPIIO)
                continue;
            if (o->func == IOT_F_MPIIO_MPI_File_open && o->handle && !o->skip) {
                uint32_t h = o->coll_seq;
                o->coll_seq = 1;
                cur[o->handle] = h;
                o->handle = h;
                continue;
            }
            struct rp_class c = rp_classify(o->func);
            if (o->func == IOT_F_MPIIO_MPI_File_delete || c.completion || c.barrier || c.message)
                continue; /* by path / by request / by communicator / by peer */
            uint32_t h = cur[o->handle];
            if (o->func == IOT_F_MPIIO_MPI_File_close)
                cur[o->handle] = UINT32_MAX;
            if (h == UINT32_MAX && !o->skip)
                o->skip = RP_SKIP_NO_FILE;
            o->handle = h;
        }
    }
    rc = 0;
out:
    free(keys);
    free(count);
    free(cur);
    return rc;
}

/* The communicators of the recorded barriers (IOTRACE_SYNC), after the
 * files' handles: one per communicator id, its members the ranks that
 * recorded a barrier on it.  One whose members are fewer than the size its
 * barriers name (a member's records were lost) has its barriers left out,
 * as settle_collectives does for a collective a member has no record of. */
static int assign_comms(struct rp_plan *p)
{
    size_t n = 0, cap = 0;
    struct {
        int64_t id;
        uint64_t size;
    } *ids = NULL;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            struct rp_op *o = &p->ops[r][i];
            if (o->kind != RP_MPIIO || o->skip || !rp_classify(o->func).barrier)
                continue;
            size_t k = 0;
            while (k < n && ids[k].id != o->offset)
                k++;
            if (k == n) {
                if (iot_grow((void **)&ids, &cap, n + 1, sizeof *ids, 8) < 0) {
                    free(ids);
                    return -1;
                }
                ids[n++] = (__typeof__(*ids)){o->offset, o->bytes};
            }
            o->handle = (uint32_t)(p->n_handles + k);
        }
    if (!n)
        return 0;
    size_t total = p->n_handles + n, width = p->n_ranks ? p->n_ranks : 1;
    uint32_t *hp = realloc(p->handle_path, (total + 1) * sizeof *hp);
    if (hp)
        p->handle_path = hp;
    uint8_t *m = hp ? realloc(p->members, (total + 1) * width) : NULL;
    if (!m) {
        free(ids);
        return -1;
    }
    p->members = m;
    memset(m + p->n_handles * width, 0, (n + 1) * width);
    for (size_t k = 0; k < n; k++)
        hp[p->n_handles + k] = 0;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            const struct rp_op *o = &p->ops[r][i];
            if (o->kind == RP_MPIIO && !o->skip && rp_classify(o->func).barrier)
                m[(size_t)o->handle * width + r] = 1;
        }
    for (size_t k = 0; k < n; k++) {
        size_t members = 0;
        for (uint32_t r = 0; r < p->n_ranks; r++)
            members += m[(p->n_handles + k) * width + r];
        if (members == ids[k].size)
            continue;
        for (uint32_t r = 0; r < p->n_ranks; r++)
            for (size_t i = 0; i < p->n_ops[r]; i++)
                if (p->ops[r][i].handle == p->n_handles + k &&
                    rp_classify(p->ops[r][i].func).barrier)
                    p->ops[r][i].skip = RP_SKIP_INCOMPLETE;
    }
    p->n_handles = total;
    p->n_comms = n;
    free(ids);
    return 0;
}

/* Messages (IOTRACE_SYNC): the n-th send from rank a to rank b with a tag
 * on a communicator is received by b's n-th receive from a with that tag
 * there (MPI does not let messages between two ranks overtake).  Where the
 * two counts differ (a side's events were lost) all of them are left out:
 * a receive whose send never comes would hang the replay. */
struct msg_key {
    int64_t comm;
    uint32_t from, to, tag;
    int recv;
    struct rp_op *op;
};

static int cmp_msg(const void *pa, const void *pb)
{
    const struct msg_key *a = pa, *b = pb;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->from != b->from)
        return a->from < b->from ? -1 : 1;
    if (a->to != b->to)
        return a->to < b->to ? -1 : 1;
    return a->tag < b->tag ? -1 : a->tag > b->tag;
}

static int settle_messages(struct rp_plan *p)
{
    size_t n = 0, cap = 0;
    struct msg_key *keys = NULL;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            struct rp_op *o = &p->ops[r][i];
            if (o->kind != RP_MPIIO || o->skip || !rp_classify(o->func).message)
                continue;
            if (o->xfer >= p->n_ranks) { /* a peer the replay does not have */
                o->skip = RP_SKIP_UNPAIRED;
                continue;
            }
            int recv = o->func == IOT_F_MPIIO_MPI_Recv || o->func == IOT_F_MPIIO_MPI_Irecv;
            if (iot_grow((void **)&keys, &cap, n + 1, sizeof *keys, 64) < 0) {
                free(keys);
                return -1;
            }
            keys[n++] = (struct msg_key){o->offset, recv ? (uint32_t)o->xfer : r,
                                         recv ? r : (uint32_t)o->xfer, o->coll_seq, recv, o};
        }
    if (n)
        qsort(keys, n, sizeof *keys, cmp_msg);
    for (size_t i = 0, j; i < n; i = j) {
        size_t sends = 0, recvs = 0;
        for (j = i; j < n && cmp_msg(&keys[i], &keys[j]) == 0; j++)
            keys[j].recv ? recvs++ : sends++;
        if (sends != recvs)
            for (size_t k = i; k < j; k++)
                keys[k].op->skip = RP_SKIP_UNPAIRED;
    }
    free(keys);
    return 0;
}

/* ---- what the trace leaves out ---------------------------------------------- */

struct seg {
    int64_t next_ind, next_shared, min_data;
    int shared;
};

/* One backward walk per rank: a seek goes where the next access through
 * that pointer starts; a view's displacement is the lowest offset its
 * accesses touch, so that explicit offsets stay positive and the first
 * access through the individual pointer needs no seek of its own.  Shared
 * file pointers count from the displacement, which every rank must then
 * agree on: with shared accesses in a view's span it is 0. */
static void infer_positions(struct rp_plan *p, uint32_t r, struct seg *s)
{
    for (size_t h = 0; h < p->n_handles; h++)
        s[h] = (struct seg){-1, -1, INT64_MAX, 0};
    for (size_t i = p->n_ops[r]; i-- > 0;) {
        struct rp_op *o = &p->ops[r][i];
        if (o->kind != RP_MPIIO || o->skip || o->handle == UINT32_MAX)
            continue;
        struct rp_class c = rp_classify(o->func);
        if (c.completion || o->handle >= p->n_handles)
            continue;
        struct seg *g = &s[o->handle];
        if (c.data && !c.end && o->offset >= 0) {
            if (c.pos == RP_POS_IND)
                g->next_ind = o->offset;
            if (c.pos == RP_POS_SHARED) {
                g->next_shared = o->offset;
                g->shared = 1;
            } else if (o->offset < g->min_data) {
                g->min_data = o->offset;
            }
        }
        switch (o->func) {
        case IOT_F_MPIIO_MPI_File_seek:
            o->offset = g->next_ind;
            g->next_ind = -1;
            break;
        case IOT_F_MPIIO_MPI_File_seek_shared:
            o->offset = g->next_shared;
            g->next_shared = -1;
            break;
        case IOT_F_MPIIO_MPI_File_set_view:
        case IOT_F_MPIIO_MPI_File_open:
        case IOT_F_MPIIO_MPI_File_close:
            /* Older traces do not record where the view starts. */
            if (o->func == IOT_F_MPIIO_MPI_File_set_view && o->offset < 0)
                o->offset = g->shared || g->min_data == INT64_MAX ? 0 : g->min_data;
            *g = (struct seg){-1, -1, INT64_MAX, 0};
            break;
        default:
            break;
        }
    }
}

struct coll_key {
    struct rp_key k; /* handle, sequence number, rank */
    int64_t offset;
    struct rp_op *op;
};

static size_t members_of(const struct rp_plan *p, uint32_t h)
{
    size_t n = 0;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        n += p->members[(size_t)h * p->n_ranks + r];
    return n;
}

/* Collective operations, one (handle, sequence number) each: every member
 * must take part, with the same seek_shared offset (the lowest any rank's
 * next shared access starts at).  One a member has no record of is left
 * out on all, or the replay would hang. */
static int settle_collectives(struct rp_plan *p)
{
    size_t n = 0, cap = 0;
    struct coll_key *keys = NULL;
    for (uint32_t r = 0; r < p->n_ranks; r++)
        for (size_t i = 0; i < p->n_ops[r]; i++) {
            struct rp_op *o = &p->ops[r][i];
            if (o->kind != RP_MPIIO || o->skip || !o->coll_seq || o->handle >= p->n_handles)
                continue;
            struct rp_class c = rp_classify(o->func);
            if (!c.collective || c.end || c.completion)
                continue;
            if (iot_grow((void **)&keys, &cap, n + 1, sizeof *keys, 256) < 0) {
                free(keys);
                return -1;
            }
            keys[n++] = (struct coll_key){{o->handle, o->coll_seq, r}, o->offset, o};
        }
    if (n) /* qsort wants an array, even of nothing */
        qsort(keys, n, sizeof *keys, cmp_key);
    for (size_t i = 0, j; i < n; i = j) {
        int64_t low = -1;
        const struct rp_key *first = &keys[i].k;
        for (j = i; j < n && keys[j].k.major == first->major && keys[j].k.minor == first->minor; j++)
            if (keys[j].offset >= 0 && (low < 0 || keys[j].offset < low))
                low = keys[j].offset;
        int whole = j - i == members_of(p, keys[i].k.major);
        for (size_t k = i; k < j; k++) {
            if (!whole)
                keys[k].op->skip = RP_SKIP_INCOMPLETE;
            else if (keys[k].op->func == IOT_F_MPIIO_MPI_File_seek_shared)
                keys[k].op->offset = low < 0 ? 0 : low;
        }
    }
    free(keys);
    return 0;
}

/* What completes what: a completion or split end whose call was left out
 * goes too; records of one Wait/Test call (same function, same start) are
 * replayed as one call. */
static void settle_completions(struct rp_plan *p, uint32_t r)
{
    struct rp_op *v = p->ops[r];
    size_t n = p->n_ops[r];
    for (size_t i = 0; i < n; i++) {
        struct rp_class c = rp_classify(v[i].func);
        if (v[i].kind != RP_MPIIO || !(c.completion || c.end) || v[i].skip)
            continue;
        const struct rp_op *call = NULL;
        for (size_t k = i; k-- > 0 && !call;) {
            struct rp_class b = rp_classify(v[k].func);
            if (v[k].kind == RP_MPIIO && v[k].callid == v[i].callid && (b.nonblocking || b.begin))
                call = &v[k];
        }
        if (!call)
            v[i].skip = RP_SKIP_UNMATCHED;
        else if (call->skip)
            v[i].skip = call->skip;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != RP_MPIIO || !rp_classify(v[i].func).completion || v[i].skip)
            continue;
        size_t j = i + 1;
        while (j < n && v[j].kind == RP_MPIIO && v[j].func == v[i].func &&
               v[j].t_start == v[i].t_start && !v[j].skip)
            v[j++].together = 0;
        v[i].together = (uint32_t)(j - i);
        i = j - 1;
    }
}

/* Calls that failed in the original run are not replayed (a failed open
 * would not even give a handle), nor the ones that do no I/O. */
static void settle_misc(struct rp_plan *p, uint32_t r)
{
    for (size_t i = 0; i < p->n_ops[r]; i++) {
        struct rp_op *o = &p->ops[r][i];
        if (o->skip)
            continue;
        if (o->kind == RP_MPIIO ? o->ret != 0 : o->ret < 0)
            o->skip = RP_SKIP_FAILED;
        const char *n = iot_func_name(o->func);
        if (o->kind == RP_MPIIO && (strstr(n, "errhandler") || strstr(n, "2f") || strstr(n, "2c")))
            o->skip = RP_SKIP_NOT_IO;
    }
}

/* The shared file pointer is the one dependency between ranks that the
 * trace shows without the program's own synchronisation: a collective
 * shared-pointer call (seek_shared, *_ordered) that a rank makes after
 * independent *_shared calls must find them all done, or a late rank's
 * write_shared lands where the collective moved the pointer.  The original
 * run had something (a barrier, say) that the trace does not record;
 * the replay puts a barrier of the file's ranks before such a collective,
 * on every member at the same (n-th) collective shared call of the file. */
static int is_shared(const struct rp_op *o, int collective)
{
    if (o->kind != RP_MPIIO || o->skip != RP_DO)
        return 0;
    struct rp_class c = rp_classify(o->func);
    const char *n = iot_func_name(o->func);
    int seek = n && strcmp(n, "MPI_File_seek_shared") == 0;
    if (collective)
        return seek || (c.data && c.pos == RP_POS_SHARED && c.collective && !c.end);
    return c.data && c.pos == RP_POS_SHARED && !c.collective;
}

static int settle_shared_order(struct rp_plan *p)
{
    for (uint32_t h = 0; h < p->n_handles; h++) {
        size_t cap = 0;
        for (uint32_t r = 0; r < p->n_ranks; r++) {
            size_t k = 0;
            for (size_t i = 0; i < p->n_ops[r]; i++)
                k += p->ops[r][i].handle == h && is_shared(&p->ops[r][i], 1);
            cap = k > cap ? k : cap;
        }
        if (!cap)
            continue;
        uint8_t *needs = calloc(cap, 1);
        if (!needs)
            return -1;
        for (uint32_t r = 0; r < p->n_ranks; r++) {
            size_t k = 0;
            int pending = 0;
            for (size_t i = 0; i < p->n_ops[r]; i++) {
                const struct rp_op *o = &p->ops[r][i];
                if (o->handle != h)
                    continue;
                if (is_shared(o, 0)) {
                    pending = 1;
                } else if (is_shared(o, 1)) {
                    needs[k++] |= (uint8_t)pending;
                    pending = 0;
                }
            }
        }
        for (uint32_t r = 0; r < p->n_ranks; r++) {
            size_t k = 0;
            for (size_t i = 0; i < p->n_ops[r]; i++) {
                struct rp_op *o = &p->ops[r][i];
                if (o->handle == h && is_shared(o, 1))
                    o->sync = needs[k++];
            }
        }
        free(needs);
    }
    return 0;
}

int rp_plan_prepare(struct rp_plan *p, const char *target, const char *posix_under, char *err,
                    size_t errlen)
{
    for (uint32_t r = 0; r < p->n_ranks; r++)
        settle_misc(p, r);
    if (pick_posix(p, posix_under) < 0 || map_paths(p, target) < 0 || assign_handles(p) < 0 ||
        assign_comms(p) < 0)
        return fail_oom(err, errlen);
    struct seg *s = calloc(p->n_handles + 1, sizeof *s);
    if (!s)
        return fail_oom(err, errlen);
    for (uint32_t r = 0; r < p->n_ranks; r++)
        infer_positions(p, r, s);
    free(s);
    if (settle_collectives(p) < 0 || settle_shared_order(p) < 0 || settle_messages(p) < 0)
        return fail_oom(err, errlen);
    for (uint32_t r = 0; r < p->n_ranks; r++)
        settle_completions(p, r);
    return 0;
}

void rp_plan_free(struct rp_plan *p)
{
    for (uint32_t r = 0; p->ops && r < p->n_ranks; r++)
        free(p->ops[r]);
    free(p->ops);
    free(p->n_ops);
    for (size_t i = 0; i < p->n_paths; i++) {
        free(p->orig_paths ? p->orig_paths[i] : NULL);
        free(p->paths ? p->paths[i] : NULL);
    }
    free(p->orig_paths);
    free(p->paths);
    for (size_t i = 0; i < p->n_infos; i++)
        free(p->infos[i]);
    free(p->infos);
    free(p->extent);
    free(p->replayed);
    free(p->handle_path);
    free(p->members);
    free(p->losses);
    memset(p, 0, sizeof *p);
}
