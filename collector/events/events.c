#include "events.h"

#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "grow.h"
#include "iot_functions.h"
#include "log.h"
#include "store.h"
#include "wire.h"

struct reader {
    struct xp_data *d;
    xp_sink sink;
    void *ctx;
    char *err;
    size_t errlen;
    xp_batch_done done;
    uint64_t batches;  /* counted by the clock pass */
    uint32_t only_job; /* a pass for one job: UINT32_MAX for all (see skippable) */
};

static uint64_t hash_bytes(const char *s, uint64_t seed)
{
    uint64_t h = 14695981039346656037ull ^ seed; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

static uint64_t hash_file(uint32_t producer, uint64_t id)
{
    uint64_t h = (id ^ ((uint64_t)producer << 32 | producer)) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static size_t string_slot(const struct xp_strings *t, const char *s)
{
    size_t mask = t->index_size - 1, i = (size_t)hash_bytes(s, 0) & mask;
    while (t->index[i] && strcmp(t->str[t->index[i] - 1], s) != 0)
        i = (i + 1) & mask;
    return i;
}

static int grow_string_index(struct xp_strings *t)
{
    size_t size = t->index_size ? t->index_size * 2 : 64;
    uint32_t *index = calloc(size, sizeof *index);
    if (!index)
        return -1;
    free(t->index);
    t->index = index;
    t->index_size = size;
    for (size_t k = 0; k < t->n; k++)
        if (t->str[k])
            t->index[string_slot(t, t->str[k])] = (uint32_t)k + 1;
    return 0;
}

static int push_string(struct xp_strings *t, const char *s)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **p = realloc(t->str, cap * sizeof *p);
        if (!p)
            return -1;
        t->str = p;
        t->cap = cap;
    }
    if (!(t->str[t->n] = strdup(s)))
        return -1;
    t->n++;
    return 0;
}

uint32_t xp_intern(struct xp_strings *t, const char *s)
{
    if (!s)
        s = "";
    if ((t->n + 1) * 2 > t->index_size && grow_string_index(t) < 0)
        return UINT32_MAX;
    size_t slot = string_slot(t, s);
    if (t->index[slot])
        return t->index[slot] - 1;
    if (push_string(t, s) < 0)
        return UINT32_MAX;
    t->index[slot] = (uint32_t)t->n;
    return (uint32_t)t->n - 1;
}

const char *xp_string(const struct xp_strings *t, uint32_t idx)
{
    return idx < t->n && t->str[idx] ? t->str[idx] : "";
}

/* Linear probing has no tombstones: the entries after the freed slot that
 * would no longer be found from their home slot move back into it. */
void xp_unintern(struct xp_strings *t, uint32_t idx)
{
    if (idx >= t->n || !t->str[idx])
        return;
    size_t mask = t->index_size - 1, i = string_slot(t, t->str[idx]);
    free(t->str[idx]);
    t->str[idx] = NULL;
    t->index[i] = 0;
    for (size_t j = (i + 1) & mask; t->index[j]; j = (j + 1) & mask) {
        size_t home = (size_t)hash_bytes(t->str[t->index[j] - 1], 0) & mask;
        /* j's entry may stay if its home lies cyclically in (i, j]. */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        t->index[i] = t->index[j];
        t->index[j] = 0;
        i = j;
    }
}

static void free_strings(struct xp_strings *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->str[i]);
    free(t->str);
    free(t->index);
    memset(t, 0, sizeof *t);
}

void xp_strings_free(struct xp_strings *t)
{
    free_strings(t);
}

int xp_data_init(struct xp_data *d)
{
    memset(d, 0, sizeof *d);
    if (xp_intern(&d->jobs, "") != 0 || xp_intern(&d->nodes, "") != 0 ||
        xp_intern(&d->servers, "") != 0 || xp_intern(&d->job_names, "") != 0)
        return -1;
    return 0;
}

void xp_data_free(struct xp_data *d)
{
    for (size_t i = 0; i < d->n_clocks; i++)
        iot_clockmap_free(&d->clocks[i].map);
    free(d->clocks);
    free_strings(&d->jobs);
    free_strings(&d->nodes);
    free_strings(&d->servers);
    free_strings(&d->keys);
    for (size_t i = 0; i < d->files_size; i++)
        free(d->files[i].path);
    free(d->files);
    free(d->producers);
    free(d->free_producers);
    free(d->retired_keys);
    free(d->job_owner);
    free(d->job_backed);
    free(d->job_name);
    free_strings(&d->job_names);
    memset(d, 0, sizeof *d);
}

/* One xp_clock per interned node. */
static int ensure_clocks(struct xp_data *d)
{
    size_t need = d->nodes.n;
    if (need <= d->n_clocks)
        return 0;
    struct xp_clock *v = realloc(d->clocks, need * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = d->n_clocks; i < need; i++) {
        memset(&v[i], 0, sizeof v[i]);
        iot_clockmap_init(&v[i].map);
    }
    d->clocks = v;
    d->n_clocks = need;
    return 0;
}

const struct iot_clockmap *xp_node_clock(const struct xp_data *d, uint32_t node)
{
    return node < d->n_clocks && d->clocks[node].map.n ? &d->clocks[node].map : NULL;
}

static size_t file_slot(const struct xp_file *files, size_t size, uint32_t producer,
                        uint64_t id)
{
    size_t mask = size - 1, i = (size_t)hash_file(producer, id) & mask;
    while (files[i].path && !(files[i].producer == producer && files[i].id == id))
        i = (i + 1) & mask;
    return i;
}

const char *xp_file_path(const struct xp_data *d, uint32_t producer, uint64_t id)
{
    if (!d->files_size)
        return NULL;
    return d->files[file_slot(d->files, d->files_size, producer, id)].path;
}

static int offset_names_text(const struct xp_event *ev)
{
    return ev->kind == XP_MPIIO &&
           (ev->func == IOT_F_MPIIO_MPI_File_open || ev->func == IOT_F_MPIIO_MPI_File_set_info);
}

const char *xp_event_info(const struct xp_data *d, const struct xp_event *ev)
{
    return offset_names_text(ev) && ev->offset > 0
               ? xp_file_path(d, ev->producer, (uint64_t)ev->offset)
               : NULL;
}

int64_t xp_event_offset(const struct xp_event *ev)
{
    return offset_names_text(ev) || ev->offset < 0 ? -1 : ev->offset;
}

static int grow_files(struct xp_data *d)
{
    size_t size = d->files_size ? d->files_size * 2 : 256;
    struct xp_file *files = calloc(size, sizeof *files);
    if (!files)
        return -1;
    for (size_t i = 0; i < d->files_size; i++) {
        const struct xp_file *f = &d->files[i];
        if (f->path)
            files[file_slot(files, size, f->producer, f->id)] = *f;
    }
    free(d->files);
    d->files = files;
    d->files_size = size;
    return 0;
}

/* The first name wins: a file id is a hash of the path within one process. */
static int add_file(struct xp_data *d, uint32_t producer, uint64_t id, const char *path)
{
    if ((d->files_used + 1) * 2 > d->files_size && grow_files(d) < 0)
        return -1;
    struct xp_file *f = &d->files[file_slot(d->files, d->files_size, producer, id)];
    if (f->path)
        return 0;
    if (!(f->path = strdup(path ? path : "")))
        return -1;
    f->producer = producer;
    f->id = id;
    d->files_used++;
    return 0;
}

/* The per-job tables follow the job strings; both grow together. */
static int grow_job_tables(struct xp_data *d)
{
    if (d->jobs.n <= d->cap_job_owner)
        return 0;
    size_t had = d->cap_job_owner, cap = had;
    if (iot_grow((void **)&d->job_owner, &cap, d->jobs.n, sizeof *d->job_owner, 64) < 0)
        return -1;
    uint32_t *names = realloc(d->job_name, cap * sizeof *names);
    if (!names)
        return -1;
    d->job_name = names;
    uint8_t *backed = realloc(d->job_backed, cap);
    if (!backed)
        return -1;
    d->job_backed = backed;
    d->cap_job_owner = cap;
    for (size_t i = had; i < cap; i++) {
        d->job_owner[i] = -2;
        d->job_name[i] = 0;
        d->job_backed[i] = 0;
    }
    return 0;
}

int64_t xp_job_owner(const struct xp_data *d, uint32_t job)
{
    return job < d->cap_job_owner && d->job_owner[job] >= 0 ? d->job_owner[job] : -1;
}

const char *xp_job_name(const struct xp_data *d, uint32_t job)
{
    return job < d->cap_job_owner && d->job_name[job] ? xp_string(&d->job_names, d->job_name[job])
                                                      : "";
}

const char *xp_user_name(int64_t uid, char *buf, size_t len)
{
    /* Few users run jobs on one collector; a small cache, replaced round
     * robin, bounds what a store of many users costs. Names learned are
     * kept for the process's life, as nscd would keep them a while. */
    enum { SLOTS = 64 };
    static struct {
        int64_t uid;
        char name[64];
    } cache[SLOTS];
    static size_t used, next;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    if (uid < 0 || uid > UINT32_MAX)
        return buf;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < used; i++)
        if (cache[i].uid == uid) {
            snprintf(buf, len, "%s", cache[i].name);
            pthread_mutex_unlock(&lock);
            return buf;
        }
    pthread_mutex_unlock(&lock);
    struct passwd pw, *found = NULL;
    char scratch[4096];
    if (getpwuid_r((uid_t)uid, &pw, scratch, sizeof scratch, &found) != 0 || !found)
        found = NULL;
    pthread_mutex_lock(&lock);
    size_t slot = used < SLOTS ? used++ : next++ % SLOTS;
    cache[slot].uid = uid;
    snprintf(cache[slot].name, sizeof cache[slot].name, "%s", found ? found->pw_name : "");
    snprintf(buf, len, "%s", cache[slot].name);
    pthread_mutex_unlock(&lock);
    return buf;
}

/* The launcher's name for the job, kept from the first process that says. */
static int note_job_name(struct xp_data *d, uint32_t job, const char *name)
{
    if (!job || !name || !name[0])
        return 0;
    if (grow_job_tables(d) < 0)
        return -1;
    if (d->job_name[job])
        return 0;
    uint32_t n = xp_intern(&d->job_names, name);
    if (n == UINT32_MAX)
        return -1;
    d->job_name[job] = n;
    return 0;
}

/* Whether the agent found the sending process in the launcher's job of
 * that id (Sender.job, from the process's cgroup: agent/launcher.c). */
static int launcher_backed(const Iotrace__Sender *s, const char *job)
{
    return s && s->job && s->job[0] && job && strcmp(s->job, job) == 0;
}

static int job_name_taken(const struct xp_strings *t, const char *name)
{
    return t->index_size && t->index[string_slot(t, name)] != 0;
}

/* Job j, named first by a user the launcher does not back, goes to the
 * user the launcher runs it as: the processes that named it first move to
 * a job "JOB~uOWNER" of their own (or, should a user have named that too,
 * with "~2" ... after it), and the index, which callers may hold for the
 * name (iotrace-export --job), stays the job's.  A reader that interns
 * every producer before it reads events (xp_read_clocks) has moved them
 * before their first event; the live analysis moves those to come.  0, or
 * -1 if no name is free or memory is short. */
static int give_way(struct xp_data *d, uint32_t j, const char *job, int64_t uid)
{
    char name[512];
    for (int k = 1; k <= 9; k++) {
        int n = k == 1 ? snprintf(name, sizeof name, "%s~u%lld", job, (long long)d->job_owner[j])
                       : snprintf(name, sizeof name, "%s~u%lld~%d", job,
                                  (long long)d->job_owner[j], k);
        if (n < 0 || (size_t)n >= sizeof name)
            return -1;
        if (job_name_taken(&d->jobs, name))
            continue;
        uint32_t m = xp_intern(&d->jobs, name);
        if (m == UINT32_MAX || grow_job_tables(d) < 0)
            return -1;
        d->job_owner[m] = d->job_owner[j];
        d->job_name[m] = d->job_name[j];
        for (size_t p = 0; p < d->n_producers; p++)
            if (!d->producers[p].retired && d->producers[p].job == j)
                d->producers[p].job = m;
        iot_warn("job '%s' belongs to uid %lld, as its launcher runs it; the events of uid %lld, "
                 "which named it first, are kept apart as job '%s'",
                 job, (long long)uid, (long long)d->job_owner[j], name);
        d->job_owner[j] = uid;
        d->job_backed[j] = 1;
        return 0;
    }
    return -1;
}

/* Who owns a job id, by a rule no user can race (docs/agent.md, "Who owns
 * a job"): a job whose id the launcher backs (the agent found the process
 * in the launcher's cgroup of that job) belongs to the user the launcher
 * runs it as, even if another user named it first: that one's processes
 * move apart (give_way).  A job id no launcher backs belongs to the
 * local user whose processes named it first.  A process of another user
 * that names the same job (by mistake, or to pass its events off as
 * someone else's) is kept apart, in the job "JOB~uUID".  A producer whose
 * user is not known (no agent's ipc socket in between) joins any. */
static uint32_t job_of(struct xp_data *d, const char *job, int64_t uid, int backed)
{
    uint32_t j = xp_intern(&d->jobs, job);
    if (j == 0 || j == UINT32_MAX)
        return j;
    if (grow_job_tables(d) < 0)
        return UINT32_MAX;
    backed = backed && uid >= 0;
    int64_t *owner = &d->job_owner[j];
    if (*owner == -2 || *owner == -1) {
        if (uid >= 0 || *owner == -2)
            *owner = uid;
        d->job_backed[j] |= (uint8_t)backed;
        return j;
    }
    if (uid < 0 || *owner == uid) {
        d->job_backed[j] |= (uint8_t)backed;
        return j;
    }
    if (backed && !d->job_backed[j])
        return give_way(d, j, job, uid) < 0 ? UINT32_MAX : j;
    char name[512];
    if (snprintf(name, sizeof name, "%s~u%lld", job, (long long)uid) >= (int)sizeof name)
        return j; /* a job id of hundreds of bytes: nothing left to tell them apart by */
    size_t before = d->jobs.n;
    uint32_t k = xp_intern(&d->jobs, name);
    if (k == UINT32_MAX)
        return k;
    if (k >= before)
        iot_warn("job '%s' belongs to uid %lld; processes of uid %lld name it too: their events "
                 "are kept apart as job '%s'",
                 job, (long long)*owner, (long long)uid, name);
    return job_of(d, name, uid, 0);
}

/* Whether a producer key was retired before, as far as a table of
 * XP_RETIRED_KEYS hashes remembers: each hash has one place, where a later
 * one replaces it (0 is no key: hashes are made odd). */
#define XP_RETIRED_KEYS 16384

static uint64_t key_hash(const char *key)
{
    return hash_bytes(key, 0x5bd1e995u) | 1;
}

static int was_retired(const struct xp_data *d, const char *key)
{
    if (!d->retired_keys)
        return 0;
    uint64_t h = key_hash(key);
    return d->retired_keys[(h >> 1) % XP_RETIRED_KEYS] == h;
}

/* The slot a new producer takes: a retired one's, else one more. */
static int producer_slot(struct xp_data *d, const char *key, size_t key_slot, uint32_t *idx)
{
    if (d->n_free_producers) {
        char *s = strdup(key);
        if (!s)
            return -1;
        *idx = d->free_producers[--d->n_free_producers];
        d->keys.str[*idx] = s;
    } else {
        if (d->n_producers == d->cap_producers) {
            size_t cap = d->cap_producers ? d->cap_producers * 2 : 64;
            struct xp_producer *v = realloc(d->producers, cap * sizeof *v);
            if (!v)
                return -1;
            d->producers = v;
            d->cap_producers = cap;
        }
        if (push_string(&d->keys, key) < 0)
            return -1;
        *idx = (uint32_t)d->n_producers++;
    }
    d->keys.index[key_slot] = *idx + 1;
    return 0;
}

static int new_producer(struct xp_data *d, struct xp_producer *x, const iot_batch *b,
                        const char *clock, const char *key)
{
    const iot_producer *p = b->producer;
    int64_t uid = b->sender ? (int64_t)b->sender->uid : -1;
    *x = (struct xp_producer){0};
    if (was_retired(d, key)) {
        /* Back after it was forgotten: what it made before was counted
         * then, so its running total is no gap. */
        x->made_known = 1;
        x->made_epoch = b->epoch;
        x->made = UINT64_MAX;
    }
    /* A producer's node is its agent's, whatever it says of itself: any
     * local user could name another node. */
    x->clock = xp_intern(&d->nodes, clock);
    x->node = x->clock;
    x->uid = uid;
    x->job = job_of(d, p->job, uid, launcher_backed(b->sender, p->job));
    if (x->job != UINT32_MAX && note_job_name(d, x->job, p->job_name) < 0)
        return -1;
    x->server = xp_intern(&d->servers, p->server);
    x->pid = p->pid;
    x->rank = p->rank;
    x->kind = (int)p->kind;
    if (x->node == UINT32_MAX || x->clock == UINT32_MAX || x->job == UINT32_MAX ||
        x->server == UINT32_MAX || ensure_clocks(d) < 0)
        return -1;
    return 0;
}

int xp_retire_producers(struct xp_data *d, const uint32_t *ids, size_t n)
{
    if (!n)
        return 0;
    size_t need = d->n_free_producers + n;
    if (iot_grow((void **)&d->free_producers, &d->cap_free_producers, need,
                 sizeof *d->free_producers, 64) < 0)
        return -1;
    if (!d->retired_keys && !(d->retired_keys = calloc(XP_RETIRED_KEYS, sizeof *d->retired_keys)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= d->n_producers || d->producers[id].retired)
            continue;
        uint64_t h = key_hash(d->keys.str[id]);
        d->retired_keys[(h >> 1) % XP_RETIRED_KEYS] = h;
        xp_unintern(&d->keys, id);
        d->producers[id] = (struct xp_producer){.retired = 1};
        d->free_producers[d->n_free_producers++] = id;
    }
    /* Their file names go in one rebuild of the table. */
    struct xp_file *files = d->files;
    size_t size = d->files_size;
    d->files = NULL;
    d->files_size = d->files_used = 0;
    int rc = 0;
    for (size_t i = 0; i < size; i++) {
        struct xp_file *f = &files[i];
        if (!f->path)
            continue;
        if (d->producers[f->producer].retired || rc < 0) {
            free(f->path);
            continue;
        }
        if ((d->files_used + 1) * 2 > d->files_size && grow_files(d) < 0) {
            free(f->path);
            rc = -1; /* names lost, not memory: xp_file_path answers NULL */
            continue;
        }
        d->files[file_slot(d->files, d->files_size, f->producer, f->id)] = *f;
        d->files_used++;
    }
    free(files);
    return rc;
}

size_t xp_producers_in_use(const struct xp_data *d)
{
    return d->n_producers - d->n_free_producers;
}

/* A rank learns its rank (and, under Hydra, its job id) in MPI_Init, after
 * it may already have sent batches: what a later batch knows applies to the
 * whole process. */
static int refresh_producer(struct xp_data *d, struct xp_producer *x, const iot_batch *b,
                            const char *clock)
{
    const iot_producer *p = b->producer;
    /* Its first batches may have come before the agent could see its
     * cgroup (or after the process was gone): a later batch that the
     * launcher backs gives it the job from then on. */
    int backed = launcher_backed(b->sender, p->job);
    if (strcmp(xp_string(&d->nodes, x->clock), clock) != 0 &&
        ((x->node = x->clock = xp_intern(&d->nodes, clock)) == UINT32_MAX || ensure_clocks(d) < 0))
        return -1;
    if (p->rank >= 0)
        x->rank = p->rank;
    if (((x->job == 0 && p->job && p->job[0]) || (backed && x->job && !d->job_backed[x->job])) &&
        (x->job = job_of(d, p->job, x->uid, backed)) == UINT32_MAX)
        return -1;
    if (note_job_name(d, x->job, p->job_name) < 0)
        return -1;
    return 0;
}

/* Producers are interned by key; their index equals the key's index. */
static uint32_t producer_index(struct xp_data *d, const iot_batch *b)
{
    const char *clock = iot_wire_clock_node(b);
    char key[512];
    if (iot_wire_batch_key(b, key, sizeof key) < 0)
        return UINT32_MAX;
    struct xp_strings *keys = &d->keys;
    if ((keys->n + 1) * 2 > keys->index_size && grow_string_index(keys) < 0)
        return UINT32_MAX;
    size_t slot = string_slot(keys, key);
    if (keys->index[slot]) {
        uint32_t idx = keys->index[slot] - 1;
        return refresh_producer(d, &d->producers[idx], b, clock) < 0 ? UINT32_MAX : idx;
    }
    uint32_t idx;
    if (producer_slot(d, key, slot, &idx) < 0 ||
        new_producer(d, &d->producers[idx], b, clock, key) < 0)
        return UINT32_MAX;
    return idx;
}

/* Both ends are mapped separately: with a drift the duration changes too,
 * by parts per million.  The clock is that of the node whose agent
 * forwarded the batch, whatever node the producer names. */
static void align(struct xp_data *d, struct xp_event *ev)
{
    struct xp_clock *c = &d->clocks[d->producers[ev->producer].clock];
    c->events++;
    if (!d->align || c->map.n == 0)
        return;
    ev->t_start = iot_clockmap_map_at(&c->map, &c->hint, ev->t_start);
    ev->t_end = iot_clockmap_map_at(&c->map, &c->hint, ev->t_end);
}

static int emit(struct reader *r, struct xp_event *ev)
{
    /* In a pass for one job, another job's events are counted and dropped
     * here rather than aligned and dropped by the sink. */
    if (r->only_job != UINT32_MAX && xp_event_job(r->d, ev) != r->only_job) {
        r->d->clocks[r->d->producers[ev->producer].clock].events++;
        r->d->events++;
        return 0;
    }
    align(r->d, ev);
    ev->order = r->d->events++;
    return r->sink(r->ctx, r->d, ev, r->err, r->errlen);
}

static int read_mpiio(struct reader *r, uint32_t prod, const Iotrace__MpiioEvents *t)
{
    for (size_t i = 0; i < t->n_func; i++) {
        struct xp_event ev = {
            .kind = XP_MPIIO, .producer = prod, .job = r->d->producers[prod].job,
            .func = (uint16_t)t->func[i], .tid = t->tid[i], .callid = t->callid[i],
            .file = t->file[i], .offset = t->offset[i], .bytes = t->bytes[i],
            .xfer = t->xfer[i], .t_start = t->t_start[i],
            .t_end = t->t_start[i] + (int64_t)t->duration[i], .ret = t->ret[i],
            .coll_seq = t->coll_seq[i],
            /* absent in batches before the column, and in those without groups */
            .coll_group = t->n_coll_group ? t->coll_group[i] : 0};
        if (emit(r, &ev) != 0)
            return -1;
    }
    return 0;
}

static int read_posix(struct reader *r, uint32_t prod, const Iotrace__PosixEvents *t)
{
    for (size_t i = 0; i < t->n_func; i++) {
        struct xp_event ev = {
            .kind = XP_POSIX, .producer = prod, .job = r->d->producers[prod].job,
            .func = (uint16_t)t->func[i], .tid = t->tid[i], .callid = t->callid[i],
            .file = t->file[i], .offset = t->offset[i], .bytes = t->bytes[i],
            .t_start = t->t_start[i], .t_end = t->t_start[i] + (int64_t)t->duration[i],
            .ret = t->ret[i]};
        if (emit(r, &ev) != 0)
            return -1;
    }
    return 0;
}

/* Disk events name their job through the batch's own dictionary, and
 * (job_uid) the user whose CallID tag named it, who is held to the same
 * rule as a process naming a job.  Only a storage server run by root (a
 * brick) speaks for other users: one that another user runs speaks for
 * that user whatever its tags say. */
static int intern_jobs(struct reader *r, uint32_t prod, const iot_body *body, uint32_t *map)
{
    int64_t server_uid = r->d->producers[prod].uid;
    for (size_t j = 0; j < body->n_jobs; j++) {
        uint32_t tag = body->n_job_uid ? body->job_uid[j] : UINT32_MAX;
        int64_t uid = server_uid > 0 ? server_uid : tag == UINT32_MAX ? -1 : (int64_t)tag;
        if ((map[j] = job_of(r->d, body->jobs[j], uid, 0)) == UINT32_MAX)
            return iot_fail(r->err, r->errlen, "out of memory");
    }
    return 0;
}

static int read_disk(struct reader *r, uint32_t prod, const iot_body *body)
{
    const Iotrace__DiskEvents *t = body->disk;
    uint32_t *jobs = calloc(body->n_jobs + 1, sizeof *jobs);
    if (!jobs || intern_jobs(r, prod, body, jobs) < 0) {
        free(jobs);
        return iot_fail(r->err, r->errlen, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < t->n_func && rc == 0; i++) {
        struct xp_event ev = {
            .kind = XP_DISK, .producer = prod, .job = t->job[i] ? jobs[t->job[i]] : 0,
            .func = (uint16_t)t->func[i], .tid = t->tid[i], .callid = t->callid[i],
            .file = t->file[i], .offset = t->offset[i], .bytes = t->bytes[i],
            .t_start = t->t_start[i], .t_end = t->t_start[i] + (int64_t)t->duration[i],
            .ret = t->ret[i]};
        rc = emit(r, &ev);
    }
    free(jobs);
    return rc ? -1 : 0;
}

static int read_drops(struct reader *r, uint32_t prod, const iot_body *body)
{
    for (size_t i = 0; i < body->n_drops; i++) {
        const Iotrace__Drop *x = body->drops[i];
        struct xp_event ev = {
            .kind = XP_DROP, .producer = prod, .job = r->d->producers[prod].job,
            .func = (uint16_t)x->reason, .tid = x->tid, .bytes = x->count,
            .t_start = (int64_t)x->t_first, .t_end = (int64_t)x->t_last, .offset = -1};
        if (emit(r, &ev) != 0)
            return -1;
    }
    return 0;
}

static int read_body(struct reader *r, uint32_t prod, const iot_body *body)
{
    for (size_t i = 0; i < body->n_files; i++)
        if (add_file(r->d, prod, body->files[i]->id, body->files[i]->path) < 0)
            return iot_fail(r->err, r->errlen, "out of memory");
    if (body->mpiio && read_mpiio(r, prod, body->mpiio) < 0)
        return -1;
    if (body->posix && read_posix(r, prod, body->posix) < 0)
        return -1;
    if (body->disk && read_disk(r, prod, body) < 0)
        return -1;
    return read_drops(r, prod, body);
}

/* Each producer's batches carry the running total of what it accounted
 * for, and their seqs have no holes (a batch the agent did not take keeps
 * its seq for the next one).  What the batches before a stored one leave
 * unexplained of its total was handed over and lost on the way (an agent
 * killed with batches in its socket, say); a batch stored out of order
 * fills part of such a gap again.  The loss is reported as a drop of reason
 * DROP_LOST once the producer's last batch in the store has been read, or
 * at once when that is not known (the collector's live reading, where a
 * late batch can then no longer take it back; the final figures are
 * recomputed from the store). */
static void made_epoch(struct xp_producer *p, const iot_batch *b)
{
    if (p->made_known && p->made_epoch == b->epoch)
        return;
    p->made_known = 1;
    p->made_epoch = b->epoch;
    p->next_seq = 0;
    p->made = 0;
}

static void read_made(struct xp_producer *p, const iot_batch *b, const iot_body *body)
{
    if (!body->made_through)
        return;
    uint64_t here = iot_wire_table_events(body);
    for (size_t i = 0; i < body->n_drops; i++)
        here += body->drops[i]->count;
    uint64_t before = body->made_through >= here ? body->made_through - here : 0;
    made_epoch(p, b);
    if (b->seq >= p->next_seq) {
        if (p->made != UINT64_MAX && before > p->made) {
            if (!p->lost)
                p->lost_t = body->mpiio && body->mpiio->n_t_start ? body->mpiio->t_start[0]
                            : body->posix && body->posix->n_t_start ? body->posix->t_start[0]
                            : body->disk && body->disk->n_t_start   ? body->disk->t_start[0]
                                                                    : 0;
            p->lost += before - p->made;
        }
        p->next_seq = b->seq + 1;
        p->made = body->made_through;
    } else {
        p->lost -= here < p->lost ? here : p->lost;
    }
}

static int report_lost(struct reader *r, uint32_t prod, uint64_t recv_ns)
{
    struct xp_producer *p = &r->d->producers[prod];
    if (!p->lost || (p->last_batch && p->last_batch != r->d->batches))
        return 0;
    uint64_t lost = p->lost;
    p->lost = 0;
    iot_warn("%llu events of %s were handed over and never stored: counted as dropped (lost)",
             (unsigned long long)lost, r->d->keys.str[prod]);
    r->d->lost_events += lost;
    int64_t t = p->lost_t ? p->lost_t : (int64_t)recv_ns;
    struct xp_event ev = {.kind = XP_DROP, .producer = prod, .job = p->job,
                          .func = IOTRACE__DROP_REASON__DROP_LOST, .bytes = lost,
                          .t_start = t, .t_end = t, .offset = -1};
    return emit(r, &ev);
}

/* A stored batch whose envelope is sound (the collector checked it and its
 * checksum before storing) but whose body cannot be decoded: its events
 * are lost, and counted as a drop of its producer, at the time it was
 * stored. */
static int read_unreadable(struct reader *r, uint32_t prod, const iot_batch *b, uint64_t recv_ns,
                           const char *why)
{
    iot_warn("stored batch %llu of %s (received at %llu ns) cannot be decoded: %s; its %u "
             "events are counted as dropped (unreadable)",
             (unsigned long long)r->d->batches, r->d->keys.str[prod], (unsigned long long)recv_ns,
             why, b->event_count);
    r->d->unreadable_batches++;
    struct xp_event ev = {.kind = XP_DROP, .producer = prod, .job = r->d->producers[prod].job,
                          .func = IOTRACE__DROP_REASON__DROP_UNREADABLE, .bytes = b->event_count,
                          .t_start = (int64_t)recv_ns, .t_end = (int64_t)recv_ns, .offset = -1};
    return emit(r, &ev);
}

/* In a pass for one job, a process's batches are left undecoded once its
 * job is known to be another: every event and drop record in them, and
 * every loss found from them, is of that job, and the pass keeps nothing
 * of another job's events.  Decoding is what a pass costs (a job's final
 * figures are computed from the store when it ends), so the processes of
 * other jobs cost their batches' envelopes.  What the rest of the pass
 * depends on still happens: the batch is counted and handed to `done` (the
 * merge's watermark moves with arrivals, not events).  Read in full all
 * the same: a process whose job is not yet known (0; it may name the job
 * later), and one on a node without clock samples, whose events the reader
 * counts for its warning about them.  Storage servers' batches are read in
 * full (their dictionaries name any job, their file names serve later
 * batches); emit() leaves out their events of other jobs.  Disk operations
 * in a process's batch (the library writes none: a process forging them)
 * are not seen by a pass for another job. */
static int client_elsewhere(const struct reader *r, const struct xp_producer *p)
{
    return r->only_job != UINT32_MAX && p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT &&
           p->job != 0 && p->job != r->only_job && r->d->clocks[p->clock].map.n > 0;
}

/* A stored batch, opened (b, or NULL with the reason in why); frees it. */
static int read_batch(struct reader *r, iot_batch *b, char *why, size_t whylen, uint64_t recv_ns)
{
    uint64_t n = ++r->d->batches;
    iot_body *body = NULL;
    int rc = -1;
    uint32_t prod = b ? producer_index(r->d, b) : UINT32_MAX;
    if (prod != UINT32_MAX)
        r->d->producers[prod].last_recv_ns = recv_ns;
    if (b && prod != UINT32_MAX && client_elsewhere(r, &r->d->producers[prod])) {
        /* Counted as if read: the ordinals of later events. */
        r->d->events += b->event_count;
        rc = r->done && r->done(r->ctx, r->d, prod, recv_ns, r->err, r->errlen) ? -1 : 0;
        iot_wire_free_batch(b);
        return rc;
    }
    if (b)
        body = iot_wire_body(b, why, whylen);
    if (!b)
        iot_fail(r->err, r->errlen, "stored batch %llu (received at %llu ns) cannot be decoded: %s",
             (unsigned long long)n, (unsigned long long)recv_ns, why);
    else if (prod == UINT32_MAX)
        iot_fail(r->err, r->errlen, "out of memory");
    else {
        struct xp_producer *p = &r->d->producers[prod];
        if (body) {
            read_made(p, b, body);
            rc = read_body(r, prod, body);
        } else {
            /* What it accounted for is unknown, and counted by
             * read_unreadable in its own way: the next batch only sets the
             * running total again. */
            made_epoch(p, b);
            if (b->seq >= p->next_seq) {
                p->next_seq = b->seq + 1;
                p->made = UINT64_MAX;
            }
            rc = read_unreadable(r, prod, b, recv_ns, why);
        }
        if (rc == 0)
            rc = report_lost(r, prod, recv_ns);
        if (rc == 0 && r->done)
            rc = r->done(r->ctx, r->d, prod, recv_ns, r->err, r->errlen) ? -1 : 0;
    }
    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    return rc;
}

static int on_batch(void *ctx, const uint8_t *buf, size_t len, uint64_t recv_ns)
{
    char why[256];
    iot_batch *b = iot_wire_open_stored(buf, len, why, sizeof why);
    return read_batch(ctx, b, why, sizeof why, recv_ns);
}

static int add_samples(struct xp_data *d, uint32_t node, const iot_body *body, uint64_t recv_ns)
{
    const Iotrace__AgentStatus *a = body->agent;
    if (a)
        d->clocks[node].agent = (struct xp_agent_status){
            1, a->received, a->invalid, a->forwarded, a->resent, a->acked, a->duplicates,
            a->rejected, a->reconnects, a->pending, a->pending_bytes, recv_ns};
    for (size_t i = 0; i < body->n_clock; i++) {
        const Iotrace__ClockSync *c = body->clock[i];
        if (iot_clockmap_add(&d->clocks[node].map, c->local_ns, c->offset_ns, c->rtt_ns) < 0)
            return -1;
    }
    return 0;
}

/* The producer of every batch is interned here already, so that a process's
 * job and rank (which it may learn only in MPI_Init) and its last batch are
 * known before its first event is read. */
static int note_producer(struct reader *r, const iot_batch *b)
{
    uint32_t prod = producer_index(r->d, b);
    if (prod == UINT32_MAX)
        return -1;
    r->d->producers[prod].last_batch = r->batches;
    return 0;
}

/* Clock samples count from an agent's own batches of its own node only: a
 * local user's batch that says it is an agent's (which agents refuse) or
 * one forwarded by another node's agent would move every event of a node. */
static int gives_clock(const iot_batch *b)
{
    return b->producer->kind == IOTRACE__PRODUCER_KIND__PRODUCER_AGENT && !b->sender &&
           strcmp(iot_wire_clock_node(b), b->producer->node) == 0;
}

/* Only agents send clock records; every other batch is opened just to learn
 * its node, which keeps this pass far cheaper than decoding the events. */
static int on_clock_batch(void *ctx, const uint8_t *buf, size_t len, uint64_t recv_ns)
{
    struct reader *r = ctx;
    char why[256];
    iot_batch *b = iot_wire_open_stored(buf, len, why, sizeof why);
    iot_body *body = NULL;
    int rc = 0;
    r->batches++;
    if (!b)
        rc = iot_fail(r->err, r->errlen, "a stored batch (received at %llu ns) cannot be decoded: %s",
                  (unsigned long long)recv_ns, why);
    else {
        /* An unreadable clock batch only lacks its samples here; the
         * event pass counts it. */
        if (gives_clock(b))
            body = iot_wire_body(b, why, sizeof why);
        /* The node its events will be labelled with: the forwarding
         * agent's, not the one a producer names (--clock lists no node
         * that only a producer's claim made up). */
        uint32_t node = xp_intern(&r->d->nodes, iot_wire_clock_node(b));
        if (node == UINT32_MAX || ensure_clocks(r->d) < 0 || note_producer(r, b) < 0 ||
            (body && add_samples(r->d, node, body, recv_ns) < 0))
            rc = iot_fail(r->err, r->errlen, "out of memory");
    }
    iot_wire_free_body(body);
    iot_wire_free_batch(b);
    return rc;
}

int xp_feed_batch(struct xp_data *d, const uint8_t *buf, size_t len, uint64_t recv_ns,
                  xp_sink sink, xp_batch_done done, void *ctx, char *err, size_t errlen)
{
    struct reader r = {d, sink, ctx, err, errlen, done, 0, UINT32_MAX};
    char why[256];
    iot_batch *b = iot_wire_open_stored(buf, len, why, sizeof why);
    int rc = 0;
    if (b && gives_clock(b)) {
        iot_body *body = iot_wire_body(b, why, sizeof why);
        uint32_t node = xp_intern(&d->nodes, b->producer->node);
        if (!body)
            ; /* counted by read_batch below */
        else if (node == UINT32_MAX || ensure_clocks(d) < 0 || add_samples(d, node, body, recv_ns) < 0)
            rc = iot_fail(err, errlen, "out of memory");
        else
            iot_clockmap_finish(&d->clocks[node].map);
        iot_wire_free_body(body);
    }
    d->align = 1;
    if (rc < 0) {
        iot_wire_free_batch(b);
        return rc;
    }
    return read_batch(&r, b, why, sizeof why, recv_ns);
}

int xp_read_clocks(const char *dir, struct xp_data *d, char *err, size_t errlen)
{
    struct reader r = {d, NULL, NULL, err, errlen, NULL, 0, UINT32_MAX};
    if (iot_store_scan_info(dir, on_clock_batch, &r, &d->store_info, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < d->n_clocks; i++)
        iot_clockmap_finish(&d->clocks[i].map);
    d->align = 1;
    return 0;
}

int xp_read_store_batches(const char *dir, struct xp_data *d, uint32_t job, xp_sink sink,
                          xp_batch_done done, void *ctx, char *err, size_t errlen)
{
    struct reader r = {d, sink, ctx, err, errlen, done, 0, job};
    return iot_store_scan_info(dir, on_batch, &r, &d->store_info, err, errlen) == 0 ? 0 : -1;
}

int xp_read_store(const char *dir, struct xp_data *d, xp_sink sink, void *ctx, char *err,
                  size_t errlen)
{
    return xp_read_store_batches(dir, d, UINT32_MAX, sink, NULL, ctx, err, errlen);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int xp_func_direction(unsigned func)
{
    static int8_t cache[256];
    if (func >= sizeof cache)
        return XP_DIR_OTHER;
    if (!cache[func]) {
        const char *name = iot_func_name(func);
        cache[func] = (int8_t)(1 + (!name                    ? XP_DIR_OTHER
                                    : strstr(name, "read")  ? XP_DIR_READ
                                    : strstr(name, "write") ? XP_DIR_WRITE
                                                            : XP_DIR_OTHER));
    }
    return cache[func] - 1;
}

size_t xp_unique_u64(uint64_t *v, size_t n)
{
    if (n == 0)
        return 0; /* v may be NULL, which qsort must not see */
    qsort(v, n, sizeof *v, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    return k;
}

