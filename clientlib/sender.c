/* The sender: drains every thread's ring, converts times, builds column
 * batches, encodes and compresses them (proto/wire.c) and pushes them to the
 * node agent over ZeroMQ without ever waiting for it.  A batch the agent
 * cannot take right now is dropped and counted; the count travels in the
 * next batch as a drop record.  The library's sender thread does this, and
 * so does an MPI-IO call whose ring holds a batch (iot_sender_help), one at
 * a time (s.token). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agenttrust.h"
#include "client.h"
#include "clock.h"
#include "timeutil.h"
#include "wire.h"
#include "zpush.h"

struct name_entry {
    struct name_entry *next;
    uint64_t id;
    char path[];
};

struct mpiio_cols {
    uint32_t *func, *tid;
    uint64_t *callid, *file, *bytes, *xfer, *duration, *coll_seq, *coll_group;
    int64_t *offset, *t_start;
    int32_t *ret;
};

struct posix_cols {
    uint32_t *func, *tid;
    uint64_t *callid, *file, *bytes, *duration;
    int64_t *offset, *t_start, *ret;
};

struct disk_cols {
    uint32_t *func, *tid, *job;
    uint64_t *callid, *file, *bytes, *duration;
    int64_t *offset, *t_start, *ret;
};

/* Every column of the three tables: X(table, column). */
#define EACH_COLUMN(X)                                                                          \
    X(m, func) X(m, tid) X(m, callid) X(m, file) X(m, bytes) X(m, xfer) X(m, duration)          \
    X(m, coll_seq) X(m, coll_group) X(m, offset) X(m, t_start) X(m, ret)                        \
    X(p, func) X(p, tid) X(p, callid) X(p, file) X(p, bytes) X(p, duration) X(p, offset)        \
    X(p, t_start) X(p, ret)                                                                     \
    X(d, func) X(d, tid) X(d, job) X(d, callid) X(d, file) X(d, bytes) X(d, duration)           \
    X(d, offset) X(d, t_start) X(d, ret)

/* Per-batch job dictionary of disk events; jobs[0] is "" (none). */
#define MAX_BATCH_JOBS 256

struct drop_acc {
    uint64_t count;
    uint32_t tid;
    int reason;
};

#define MAX_DROP_RECORDS 256

static struct {
    pthread_mutex_t lock; /* rings list, names queue, thread start */
    _Atomic uint32_t kick; /* KICK_*: how the sender thread is woken (a futex) */
    pthread_cond_t swept;
    pthread_cond_t idle;
    int working; /* the sender thread is running, not parked in wait_a_little() */
    struct iot_ring *rings;
    struct name_entry *names, **names_tail;
    pthread_t thread;
    int started;
    int stop;
    int flush_requested;
    uint64_t sweeps;

    /* The right to encode and send: whoever holds it owns everything below
     * (the sender thread, or an MPI-IO call sending its thread's full batch
     * itself, iot_sender_help).  A ZeroMQ socket may move between threads
     * across a full barrier, which taking and giving it are. */
    _Atomic int token;
    _Atomic int ready; /* the socket is open: calls may send (iot_sender_help) */
    struct name_entry *held; /* names taken from the queue, not yet sent */

    struct iot_zpush conn; /* to the agent (zpush.h) */
    int conn_ok;           /* conn is initialised: its endpoint is usable */
    int64_t next_connect_ns; /* CLOCK_MONOTONIC of the next try when not connected */
    uint64_t seq;
    size_t cap, n_mpiio, n_posix, n_disk;
    struct disk_cols d;
    char (*jobs)[IOT_JOB_MAX + 1];
    char *job_ptrs[MAX_BATCH_JOBS];
    uint32_t job_uid[MAX_BATCH_JOBS]; /* Body.job_uid */
    size_t n_jobs;
    int job_uid_known;                /* some entry has a uid: send job_uid */
    struct mpiio_cols m;
    int grouped; /* some MPI-IO event of the batch has a coll_group: send the column */
    struct posix_cols p;
    struct drop_acc drops[MAX_DROP_RECORDS];
    size_t n_drops;
    uint64_t lost_send;     /* events in batches the agent did not take */
    uint64_t made;          /* Body.made_through of the last batch handed over */
    int64_t last_sweep_ns;
    uint64_t poll_written;  /* records the rings had taken at the last look */
    int64_t poll_ns;        /* when (CLOCK_MONOTONIC) */
    uint64_t sent_events, sent_batches, failed_batches;
    int final;                /* the last sweep, at exit: nothing comes after it */
    uint64_t boxed_batches, boxed_bytes;
    uint64_t call_batches;    /* of sent_batches, those MPI-IO calls sent (iot_sender_help) */
    /* The rank and job the last batch handed over named (see renamed()). */
    int32_t sent_rank;
    char sent_job[sizeof iot_g.job];
} s = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .names_tail = &s.names,
    .conn = {.fd = -1},
};

int iot_sender_fd(void) { return iot_zpush_fd(&s.conn); }

int iot_sender_vacate_fd(int fd) { return iot_zpush_vacate(&s.conn, fd); }

/* ---- registration (application threads) -------------------------------- */

void iot_sender_register_ring(struct iot_ring *ring)
{
    pthread_mutex_lock(&s.lock);
    ring->next = s.rings;
    s.rings = ring;
    pthread_mutex_unlock(&s.lock);
}

void iot_sender_queue_name(uint64_t id, const char *path, size_t len)
{
    struct name_entry *e = malloc(sizeof *e + len + 1);
    if (!e)
        return;
    e->next = NULL;
    e->id = id;
    memcpy(e->path, path, len);
    e->path[len] = '\0';
    pthread_mutex_lock(&s.lock);
    *s.names_tail = e;
    s.names_tail = &e->next;
    pthread_mutex_unlock(&s.lock);
}

/* ---- columns ------------------------------------------------------------ */

static int alloc_columns(size_t cap)
{
    if (s.cap) /* kept across fork */
        return 0;
#define ALLOC(t, c)                                                                             \
    if (!(s.t.c = calloc(cap, sizeof *s.t.c)))                                                  \
        return -1;
    EACH_COLUMN(ALLOC)
#undef ALLOC
    if (!(s.jobs = calloc(MAX_BATCH_JOBS, sizeof *s.jobs)))
        return -1;
    for (size_t i = 0; i < MAX_BATCH_JOBS; i++)
        s.job_ptrs[i] = s.jobs[i];
    s.job_uid[0] = IOT_UID_UNKNOWN;
    s.n_jobs = 1;
    s.job_uid_known = 0;
    s.cap = cap;
    return 0;
}

/* Index of a (job, user) in this batch's dictionary; 0 when it is full
 * (the caller sends the batch first, so that does not happen).  Two users
 * naming one job are two entries: readers keep them apart. */
static uint32_t intern_job(const char *job, uint32_t uid)
{
    if (!job[0])
        return 0;
    for (size_t i = 1; i < s.n_jobs; i++)
        if (s.job_uid[i] == uid && strcmp(s.jobs[i], job) == 0)
            return (uint32_t)i;
    if (s.n_jobs == MAX_BATCH_JOBS)
        return 0;
    snprintf(s.jobs[s.n_jobs], sizeof s.jobs[0], "%s", job);
    s.job_uid[s.n_jobs] = uid;
    s.job_uid_known |= uid != IOT_UID_UNKNOWN;
    return (uint32_t)s.n_jobs++;
}

static void append_disk(const struct iot_rec *r, const char *job, uint32_t tid)
{
    size_t i = s.n_disk++;
    s.d.func[i] = r->func;
    s.d.tid[i] = tid;
    s.d.job[i] = intern_job(job, r->disk_uid);
    s.d.callid[i] = r->callid;
    s.d.file[i] = r->file;
    s.d.offset[i] = r->offset;
    s.d.bytes[i] = r->bytes;
    s.d.t_start[i] = iot_clock_to_ns(r->t0);
    s.d.duration[i] = iot_clock_span_ns(r->t0, r->t1);
    s.d.ret[i] = r->ret;
}

/* more: the second slot of an IOT_REC_MPIIO_LONG record, else NULL. */
static void append_record(const struct iot_rec *r, const struct iot_rec_long *more, uint32_t tid)
{
    int64_t t0 = iot_clock_to_ns(r->t0);
    if (r->kind != IOT_REC_POSIX) {
        uint64_t t1 = more ? more->t1 : r->t0 + r->ticks;
        size_t i = s.n_mpiio++;
        s.m.func[i] = r->func;
        s.m.tid[i] = tid;
        s.m.callid[i] = r->callid;
        s.m.file[i] = r->file;
        s.m.offset[i] = r->offset;
        s.m.bytes[i] = r->bytes;
        s.m.xfer[i] = r->xfer;
        s.m.t_start[i] = t0;
        s.m.duration[i] = iot_clock_span_ns(r->t0, t1);
        s.m.ret[i] = r->mpi_ret;
        s.m.coll_seq[i] = more ? more->coll_seq : r->coll_seq;
        /* Only a collective of a handle not opened on all of MPI_COMM_WORLD
         * has one, in the second slot (mpiio.c, record()). */
        s.m.coll_group[i] = more ? more->coll_group : 0;
        s.grouped |= s.m.coll_group[i] != 0;
    } else {
        size_t i = s.n_posix++;
        s.p.func[i] = r->func;
        s.p.tid[i] = tid;
        s.p.callid[i] = r->callid;
        s.p.file[i] = r->file;
        s.p.offset[i] = r->offset;
        s.p.bytes[i] = r->bytes;
        s.p.t_start[i] = t0;
        s.p.duration[i] = iot_clock_span_ns(r->t0, r->t1);
        s.p.ret[i] = r->ret;
    }
}

static void note_drop(int reason, uint32_t tid, uint64_t count)
{
    for (size_t i = 0; i < s.n_drops; i++)
        if (s.drops[i].reason == reason && s.drops[i].tid == tid) {
            s.drops[i].count += count;
            return;
        }
    if (s.n_drops == MAX_DROP_RECORDS) { /* fold the overflow into the first */
        s.drops[0].count += count;
        return;
    }
    s.drops[s.n_drops++] = (struct drop_acc){.count = count, .tid = tid, .reason = reason};
}

/* ---- batches -------------------------------------------------------------- */

static void fill_disk(iot_body *body, Iotrace__DiskEvents *de)
{
    if (!s.n_disk)
        return;
    de->n_func = de->n_tid = de->n_job = de->n_callid = de->n_file = de->n_offset =
        de->n_bytes = de->n_t_start = de->n_duration = de->n_ret = s.n_disk;
    de->func = s.d.func, de->tid = s.d.tid, de->job = s.d.job, de->callid = s.d.callid;
    de->file = s.d.file, de->offset = s.d.offset, de->bytes = s.d.bytes;
    de->t_start = s.d.t_start, de->duration = s.d.duration, de->ret = s.d.ret;
    body->disk = de;
    body->n_jobs = s.n_jobs;
    body->jobs = s.job_ptrs;
    body->n_job_uid = s.job_uid_known ? s.n_jobs : 0;
    body->job_uid = s.job_uid;
}

static void fill_body(iot_body *body, Iotrace__MpiioEvents *me, Iotrace__PosixEvents *pe,
                      Iotrace__DiskEvents *de,
                      Iotrace__Drop *drops, Iotrace__Drop **drop_ptrs, int64_t now)
{
    me->n_func = me->n_tid = me->n_callid = me->n_file = me->n_offset = me->n_bytes =
        me->n_xfer = me->n_t_start = me->n_duration = me->n_ret = me->n_coll_seq = s.n_mpiio;
    me->func = s.m.func, me->tid = s.m.tid, me->callid = s.m.callid, me->file = s.m.file;
    me->offset = s.m.offset, me->bytes = s.m.bytes, me->xfer = s.m.xfer;
    me->t_start = s.m.t_start, me->duration = s.m.duration, me->ret = s.m.ret;
    me->coll_seq = s.m.coll_seq;
    /* Without groups the column stays out, as before it existed: readers
     * take an absent column for all 0. */
    me->n_coll_group = s.grouped ? s.n_mpiio : 0;
    me->coll_group = s.m.coll_group;
    pe->n_func = pe->n_tid = pe->n_callid = pe->n_file = pe->n_offset = pe->n_bytes =
        pe->n_t_start = pe->n_duration = pe->n_ret = s.n_posix;
    pe->func = s.p.func, pe->tid = s.p.tid, pe->callid = s.p.callid, pe->file = s.p.file;
    pe->offset = s.p.offset, pe->bytes = s.p.bytes, pe->t_start = s.p.t_start;
    pe->duration = s.p.duration, pe->ret = s.p.ret;
    body->mpiio = s.n_mpiio ? me : NULL;
    fill_disk(body, de);
    body->posix = s.n_posix ? pe : NULL;
    for (size_t i = 0; i < s.n_drops; i++) {
        iotrace__drop__init(&drops[i]);
        drops[i].reason = s.drops[i].reason;
        drops[i].count = s.drops[i].count;
        drops[i].tid = s.drops[i].tid;
        drops[i].t_first = (uint64_t)(s.last_sweep_ns ? s.last_sweep_ns : now);
        drops[i].t_last = (uint64_t)now;
        drop_ptrs[i] = &drops[i];
    }
    body->n_drops = s.n_drops;
    body->drops = drop_ptrs;
}

static void attach_names(iot_body *body, struct name_entry *names,
                         Iotrace__FileName **ptrs, Iotrace__FileName *recs, size_t n)
{
    size_t i = 0;
    for (struct name_entry *e = names; e && i < n; e = e->next, i++) {
        iotrace__file_name__init(&recs[i]);
        recs[i].id = e->id;
        recs[i].path = e->path;
        ptrs[i] = &recs[i];
    }
    body->n_files = i;
    body->files = ptrs;
}

/* An agent stopped on purpose removes its socket and leaves its drop box
 * (under systemd, RuntimeDirectoryPreserve=yes keeps /run/iotrace).  Then
 * the directory holding the drop box vouches for it, if no one but its
 * owner can create entries there (/run/iotrace, 0755 iotrace; not /tmp):
 * its owner's. */
static int dropbox_parent_owner(const char *path, uid_t *owner)
{
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return -1;
    *(slash == parent ? slash + 1 : slash) = '\0';
    struct stat st;
    if (lstat(parent, &st) < 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 022))
        return -1;
    *owner = st.st_uid;
    return 0;
}

/* At exit a batch the agent does not take has no later batch to carry the
 * count of its events: it goes into the agent's drop box (agent/dropbox.h)
 * as a file, written under a temporary name and renamed, so that the agent
 * never reads half of one.  Readable by all, for the agent runs as its own
 * user, but no one else can list the directory, and the name holds this
 * process's random epoch.  At most IOT_DROPBOX_MAX_FILE of events per
 * process; a batch of drop records only always fits.
 *
 * Only into a directory the agent made: mode 1733, owned by whoever owns
 * the agent's socket (the user the process was about to trust with its
 * batches anyway), reached without following a link, and written through
 * its descriptor.  A directory another user planted at that path (the /tmp
 * default, while no agent runs) gets nothing. */
static int dropbox_dir(char *path, size_t cap)
{
    const char *conf = iot_g.cfg.dropbox, *agent = iot_g.cfg.agent;
    const char *sock = agent && !strncmp(agent, "ipc://", 6) && agent[6] && agent[6] != '@'
                           ? agent + 6
                           : NULL;
    if (conf && *conf)
        snprintf(path, cap, "%s", strcmp(conf, "none") ? conf : "");
    else if (sock)
        snprintf(path, cap, "%s" IOT_DROPBOX_SUFFIX, sock);
    else
        path[0] = '\0';
    if (!path[0])
        return -1;
    struct stat ss, ds;
    uid_t owner = 0; /* no socket to vouch for it: root's only */
    if (sock && lstat(sock, &ss) == 0) {
        if (!S_ISSOCK(ss.st_mode))
            return -1;
        owner = ss.st_uid;
    } else if (sock && (errno != ENOENT || dropbox_parent_owner(path, &owner) < 0)) {
        return -1;
    }
    /* Another user who made the socket (or its directory) first made the
     * drop box too: its owner must be one the batches may go to. */
    if (sock && !iot_agent_uid_trusted(owner))
        return -1;
    /* O_PATH: others may not read the directory, only create in it. */
    int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &ds) < 0 || (ds.st_mode & 07777) != 01733 ||
        (ds.st_uid != owner && ds.st_uid != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int dropbox_put(const uint8_t *buf, size_t len)
{
    char dir[4096], tmp[160], name[128];
    if (len > IOT_DROPBOX_MAX_FILE || (s.boxed_bytes + len > IOT_DROPBOX_MAX_FILE && len > 65536))
        return -1;
    int dfd = dropbox_dir(dir, sizeof dir);
    if (dfd < 0)
        return -1;
    /* The last part keeps apart batches queued for the agent and boxed
     * together at exit, after their sequence numbers were given. */
    snprintf(name, sizeof name, "%u-%016llx-%llu-%llu", (unsigned)iot_g.pid,
             (unsigned long long)iot_g.epoch, (unsigned long long)s.seq,
             (unsigned long long)s.boxed_batches);
    snprintf(tmp, sizeof tmp, ".%s", name);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        close(dfd);
        return -1;
    }
    fchmod(fd, 0644); /* whatever the umask */
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    int ok = close(fd) == 0 && done == len && renameat(dfd, tmp, dfd, name) == 0;
    if (!ok)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    if (!ok)
        return -1;
    s.boxed_batches++;
    s.boxed_bytes += len;
    return 0;
}

static int push(const uint8_t *buf, size_t len)
{
    if (s.conn_ok && iot_zpush_send(&s.conn, buf, len) == 0)
        return 0;
    return s.final ? dropbox_put(buf, len) : -1;
}

static int split_batch(struct name_entry **names, size_t n_names, int64_t now);

static void fill_producer(iot_producer *prod)
{
    *prod = (iot_producer)IOTRACE__PRODUCER__INIT;
    prod->node = iot_g.node;
    prod->pid = iot_g.pid;
    prod->start_time_ns = iot_g.start_ns;
    if (iot_g.kind == IOT_PRODUCER_SERVER) {
        prod->kind = IOTRACE__PRODUCER_KIND__PRODUCER_SERVER;
        prod->server = iot_g.server;
        prod->rank = -1;
    } else {
        prod->kind = IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT;
        prod->job = iot_g.job;
        prod->job_name = iot_g.job_name;
        prod->rank = iot_g.rank;
    }
}

/* Encodes and sends what has accumulated; names ride along with the first
 * batch after they were queued. */
/* A client learns its rank, and under Hydra its job, in MPI_Init: what it
 * sent before names neither, and readers give those events the rank and
 * job of a later batch of the process.  A rank killed before it sends
 * another (the launcher ending the job after MPI_Abort) would leave them
 * without, so once the rank or job changes after batches went out, the
 * next sweep sends a batch even with nothing else in it: its running total
 * alone (Body.made_through), which names the process as it is now. */
static int renamed(void)
{
    return iot_g.kind == IOT_PRODUCER_CLIENT && s.sent_batches > s.boxed_batches && s.made &&
           !s.final && (s.sent_rank != iot_g.rank || strcmp(s.sent_job, iot_g.job) != 0);
}

static void send_batch(struct name_entry **names, int64_t now)
{
    size_t n_names = 0;
    for (struct name_entry *e = *names; e; e = e->next)
        n_names++;
    if (s.n_mpiio + s.n_posix + s.n_disk + s.n_drops + n_names == 0 && !renamed())
        return;

    iot_body body = IOTRACE__BODY__INIT;
    Iotrace__MpiioEvents me = IOTRACE__MPIIO_EVENTS__INIT;
    Iotrace__PosixEvents pe = IOTRACE__POSIX_EVENTS__INIT;
    Iotrace__DiskEvents de = IOTRACE__DISK_EVENTS__INIT;
    Iotrace__Drop drops[MAX_DROP_RECORDS];
    Iotrace__Drop *drop_ptrs[MAX_DROP_RECORDS];
    Iotrace__FileName **name_pp = calloc(n_names ? n_names : 1, sizeof *name_pp);
    Iotrace__FileName *name_recs = calloc(n_names ? n_names : 1, sizeof *name_recs);
    fill_body(&body, &me, &pe, &de, drops, drop_ptrs, now);
    uint64_t events = s.n_mpiio + s.n_posix + s.n_disk;
    /* What this batch accounts for: its events and the losses its drop
     * records count.  Readers find batches lost after the handover from the
     * gap this leaves in the running total. */
    uint64_t accounted = events;
    for (size_t i = 0; i < s.n_drops; i++)
        accounted += s.drops[i].count;
    body.made_through = s.made + accounted;
    if (name_pp && name_recs)
        attach_names(&body, *names, name_pp, name_recs, n_names);

    iot_producer prod;
    fill_producer(&prod);

    uint8_t *buf = NULL;
    size_t len = 0;
    char err[160];
    int ok = iot_wire_encode(&prod, iot_g.epoch, s.seq, &body, &buf, &len, err, sizeof err) == 0;
    int split = ok && len > IOT_WIRE_MAX_PRODUCER_BATCH;
    ok = ok && !split && push(buf, len) == 0;
    free(buf);
    free(name_pp);
    free(name_recs);
    if (split && split_batch(names, n_names, now))
        return;

    if (ok) {
        s.made = body.made_through;
        s.sent_rank = prod.rank;
        snprintf(s.sent_job, sizeof s.sent_job, "%s", prod.job ? prod.job : "");
        s.seq++;
        s.sent_batches++;
        s.sent_events += events;
        s.n_drops = 0;
        s.lost_send = 0;
        while (*names) { /* names sent: forget them */
            struct name_entry *e = *names;
            *names = e->next;
            free(e);
        }
    } else {
        /* Drop records that did not go out stay queued; the events are lost
         * and say so next time.  Names stay queued too. */
        s.failed_batches++;
        if (events) /* a batch of names only (split_batch) lost none */
            note_drop(IOTRACE__DROP_REASON__DROP_SEND_FAILED, 0, events);
    }
    s.n_mpiio = s.n_posix = s.n_disk = 0;
    s.n_jobs = 1;
    s.job_uid_known = 0;
    s.grouped = 0;
}

/* Sends what has accumulated as two batches (each split again if need be)
 * when one would be larger than an agent takes: half the names on their own
 * when they are the bulk (a few thousand new files), else the first half of
 * the events, with the names and drop records, then the rest.  0 when there
 * is nothing to split. */
static int split_batch(struct name_entry **names, size_t n_names, int64_t now)
{
    size_t m = s.n_mpiio, p = s.n_posix, d = s.n_disk, events = m + p + d;
    size_t name_bytes = 0;
    for (struct name_entry *e = *names; e; e = e->next)
        name_bytes += strlen(e->path) + 16;
    size_t jobs = s.n_jobs;
    int uid_known = s.job_uid_known, grouped = s.grouped;
    if (n_names > 1 && (events < 2 || name_bytes >= IOT_WIRE_MAX_PRODUCER_BATCH / 2)) {
        struct name_entry **cut = names;
        for (size_t i = 0; i < n_names / 2; i++)
            cut = &(*cut)->next;
        struct name_entry *rest = *cut;
        *cut = NULL;
        s.n_mpiio = s.n_posix = s.n_disk = 0;
        send_batch(names, now);
        struct name_entry **end = names; /* what did not go out stays queued, in order */
        while (*end)
            end = &(*end)->next;
        *end = rest;
        s.n_mpiio = m, s.n_posix = p, s.n_disk = d;
    } else if (events >= 2) {
        size_t half = events / 2;
        size_t from_m = m < half ? m : half;
        size_t from_p = p < half - from_m ? p : half - from_m;
        size_t from_d = half - from_m - from_p;
        s.n_mpiio = from_m, s.n_posix = from_p, s.n_disk = from_d;
        send_batch(names, now);
        size_t left_m = m - from_m, left_p = p - from_p, left_d = d - from_d;
#define SHIFT(t, c) memmove(s.t.c, s.t.c + from_##t, left_##t * sizeof *s.t.c);
        EACH_COLUMN(SHIFT)
#undef SHIFT
        s.n_mpiio = left_m, s.n_posix = left_p, s.n_disk = left_d;
    } else {
        return 0;
    }
    s.n_jobs = jobs;
    s.job_uid_known = uid_known;
    s.grouped = grouped;
    send_batch(names, now);
    return 1;
}

/* ---- sweeping ------------------------------------------------------------- */

/* Records dropped by rings since freed (threads that ended, full rings
 * handed over). */
static _Atomic uint64_t dropped_gone;

static void unlink_dead(struct iot_ring *dead)
{
    pthread_mutex_lock(&s.lock);
    for (struct iot_ring **pp = &s.rings; *pp; pp = &(*pp)->next)
        if (*pp == dead) {
            *pp = dead->next;
            break;
        }
    /* The ring put after it when it was handed over full (and only that
     * one) names it as older. */
    if (dead->next && dead->next->older == dead)
        dead->next->older = NULL;
    /* Its losses stay in the process's total (iot_dropped_total) after the
     * ring is gone: a server's threads come and go.  Under the lock that
     * total is read under, so that none is counted twice or not at all. */
    atomic_fetch_add(&dropped_gone, atomic_load_explicit(&dead->dropped, memory_order_relaxed));
    pthread_mutex_unlock(&s.lock);
    if (dead->handed_over)
        atomic_fetch_sub(&iot_g.overflow_used, dead->map_size);
    munmap(dead, dead->map_size);
}

int iot_sender_insert_ring(struct iot_ring *after, struct iot_ring *ring)
{
    if (pthread_mutex_trylock(&s.lock) != 0)
        return -1;
    /* A sweep walks the list without the lock: it sees `after`'s old
     * successor or the new ring, each a whole list from there on. */
    ring->next = after->next;
    __atomic_store_n(&after->next, ring, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s.lock);
    return 0;
}

static void drain_ring(struct iot_ring *r, struct name_entry **names, int64_t now)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    /* Read once: it shares its line with head, which the producer keeps
     * writing, and the column stores below could otherwise alias it. */
    const uint64_t mask = r->mask;
    while (tail != head) {
        const struct iot_rec *rec = &r->slots[tail++ & mask].rec;
        const struct iot_rec_long *more = NULL;
        if (rec->kind == IOT_REC_DISK) {
            char job[IOT_JOB_MAX + 1] = "";
            for (unsigned k = 0; k < rec->pad && k < IOT_JOB_SLOTS; k++)
                memcpy(job + 64 * k, r->slots[tail++ & mask].text, 64);
            if (s.n_jobs == MAX_BATCH_JOBS) {
                atomic_store_explicit(&r->tail, tail, memory_order_release);
                send_batch(names, now);
            }
            append_disk(rec, job, r->tid);
        } else {
            if (rec->kind == IOT_REC_MPIIO_LONG)
                more = &r->slots[tail++ & mask].more;
            append_record(rec, more, r->tid);
        }
        if (s.n_mpiio + s.n_posix + s.n_disk >= s.cap) {
            atomic_store_explicit(&r->tail, tail, memory_order_release);
            send_batch(names, now);
        }
    }
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    uint64_t dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
    if (dropped != r->dropped_reported) {
        note_drop(IOTRACE__DROP_REASON__DROP_BUFFER_FULL, r->tid, dropped - r->dropped_reported);
        r->dropped_reported = dropped;
    }
}

/* The rings that r replaced when they were full, oldest first: their
 * records come before r's.  With the token. */
static void drain_older(struct iot_ring *r, struct name_entry **names, int64_t now)
{
    if (!r->older)
        return;
    drain_older(r->older, names, now);
    drain_ring(r->older, names, now);
}

struct ring_fill {
    uint64_t pending; /* records waiting in all rings */
    uint64_t fullest; /* records waiting in the fullest ring */
    uint64_t written; /* records the rings have taken, ever */
    uint64_t room;    /* free slots in the fullest ring */
    uint64_t least;   /* slots of the smallest ring */
};

static void ring_fill(struct ring_fill *f)
{
    *f = (struct ring_fill){.room = UINT64_MAX, .least = UINT64_MAX};
    pthread_mutex_lock(&s.lock);
    for (struct iot_ring *r = s.rings; r; r = r->next) {
        uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
        uint64_t used = head - atomic_load_explicit(&r->tail, memory_order_relaxed);
        f->pending += used;
        if (used > f->fullest)
            f->fullest = used;
        f->written += head;
        if (r->mask + 1 - used < f->room)
            f->room = r->mask + 1 - used;
        if (r->mask + 1 < f->least)
            f->least = r->mask + 1;
    }
    pthread_mutex_unlock(&s.lock);
}

/* How long the sender may sleep before it looks at the rings again.  Every
 * wake-up takes a core from a rank on a node whose cores all run one, so
 * it sleeps as long as the rings allow: until, at the rate they filled
 * since it last looked, half a batch would be waiting or the fullest ring
 * would be half full, halved again for a burst.  At least POLL_MIN_MS: a
 * ring of 65 536 records then gets half full only above 16 M records/s.
 * At most POLL_MAX_MS, and no longer than half the smallest ring takes to
 * fill at BURST_PER_MS (20 ms for the default 65 536 records, 8 ms for a
 * storage server's 16 384, 2 ms for rings of 4 096 and less).  Never past
 * the flush interval.  A thread that records faster than that, in a burst
 * after a quiet spell, wakes the sender when its ring gets a quarter full
 * (iot_ring_room, iot_sender_kick); the next sleep after such a wake-up is
 * the shortest, since the rate seen until then is no longer the rate. */
#define POLL_MIN_MS 2
#define POLL_MAX_MS 20
#define BURST_PER_MS 1000 /* records a thread makes in a ms at 1 M a second */

/* Records waiting at which the sender thread sweeps before its flush
 * interval: half a batch in all rings, or, when MPI-IO calls send their own
 * (IOTRACE_INLINE_SEND), half again what makes one do so in one ring, so
 * that it leaves them the work and does it only for threads that make no
 * such calls. */
static uint64_t sweep_at(void)
{
    return iot_g.cfg.help_at ? iot_g.cfg.help_at + iot_g.cfg.help_at / 2 : s.cap / 2;
}

static int64_t poll_interval_ms(const struct ring_fill *f, int64_t now_mono, int64_t now_real,
                                int kicked)
{
    int64_t flush_left = (s.last_sweep_ns + (int64_t)iot_g.cfg.flush_ms * 1000000 - now_real) /
                         1000000;
    int64_t most = f->least / 2 / BURST_PER_MS < POLL_MAX_MS
                       ? (int64_t)(f->least / 2 / BURST_PER_MS) : POLL_MAX_MS;
    int64_t ms = most;
    uint64_t elapsed = (uint64_t)(now_mono - s.poll_ns);
    if (s.poll_ns && f->written >= s.poll_written && elapsed > 0) {
        uint64_t added = f->written - s.poll_written;
        uint64_t at = sweep_at();
        uint64_t batch_left = f->pending < at ? at - f->pending : 0;
        /* With IOTRACE_INLINE_SEND the calls send their own batches; the
         * sender thread only keeps the rings from filling. */
        uint64_t limit = batch_left < f->room / 2 && !iot_g.cfg.help_at ? batch_left
                                                                       : f->room / 2;
        if (added)
            ms = (int64_t)((double)limit / ((double)added / (double)elapsed) / 2e6);
    } else
        ms = POLL_MIN_MS; /* threads came and went: no rate to go by */
    s.poll_written = f->written;
    s.poll_ns = now_mono;
    if (ms > most)
        ms = most;
    if (ms < POLL_MIN_MS || kicked)
        ms = POLL_MIN_MS;
    if (ms > flush_left)
        ms = flush_left > 1 ? flush_left : 1;
    return ms;
}

/* The token (see s.token).  The sender thread waits for it; a call never
 * does (iot_sender_help). */
static int try_token(void)
{
    return !atomic_exchange_explicit(&s.token, 1, memory_order_acquire);
}

/* A call holds it for one ring's drain at most, but may lose its core
 * meanwhile on a busy node: after a few yields, sleep rather than spin
 * against it for the core. */
static void take_token(void)
{
    for (int tries = 0; !try_token(); tries++) {
        if (tries < 8) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

static void give_token(void)
{
    atomic_store_explicit(&s.token, 0, memory_order_release);
}

/* Moves the queued names to s.held, behind those not sent yet; with
 * s.lock held. */
static void hold_names(void)
{
    struct name_entry **end = &s.held;
    while (*end)
        end = &(*end)->next;
    *end = s.names;
    s.names = NULL;
    s.names_tail = &s.names;
}

static void sweep(void)
{
    take_token();
    iot_clock_calibrate();
    int64_t now = iot_now_ns();

    pthread_mutex_lock(&s.lock);
    hold_names();
    struct iot_ring *rings = s.rings;
    pthread_mutex_unlock(&s.lock);

    /* Rings are only ever prepended and unlinked here, so walking the
     * snapshot without the lock is safe. */
    for (struct iot_ring *r = rings, *next; r; r = next) {
        next = r->next;
        int dead = atomic_load_explicit(&r->dead, memory_order_acquire);
        drain_ring(r, &s.held, now);
        if (dead)
            unlink_dead(r);
    }
    send_batch(&s.held, now); /* names it could not send stay held, in order */
    s.last_sweep_ns = now;
    give_token();
}

/* An MPI-IO call whose thread has a batch waiting in its ring sends it
 * itself (IOTRACE_INLINE_SEND): on a node whose cores all run ranks, the
 * sender thread would take the core from a rank to do the same work, and
 * the records are still in this core's cache.  It never waits: when the
 * sender thread (or another call) is at work, or the queue of names is
 * being written, it leaves the ring to the sender thread.  Not from POSIX
 * wrappers, which may run in a signal handler, where encoding (malloc)
 * must not.  With now, the batch goes out whatever its size: a failed call
 * (iot_sender_send_now).  1 when it drained the ring. */
int iot_sender_help(struct iot_ring *r, int now)
{
    if (!atomic_load_explicit(&s.ready, memory_order_acquire) || !try_token())
        return 0;
    int helped = 0;
    if (s.conn_ok && !s.final && pthread_mutex_trylock(&s.lock) == 0) {
        hold_names();
        pthread_mutex_unlock(&s.lock);
        int saved = errno;
        /* No signal handler of the program's may run on this thread while
         * it writes on the agent's socket: one that dup2()s onto that
         * descriptor would wait for this write to end (iot_zpush_vacate). */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        iot_t.internal++; /* the library's own system calls are not the application's */
        int64_t t = iot_now_ns();
        uint64_t before = s.sent_batches;
        drain_older(r, &s.held, t);
        drain_ring(r, &s.held, t);
        if (now || s.n_mpiio + s.n_posix + s.n_disk >= iot_g.cfg.help_at)
            send_batch(&s.held, t);
        s.call_batches += s.sent_batches - before;
        iot_t.internal--;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        errno = saved;
        helped = 1;
    }
    give_token();
    return helped;
}

/* ---- the thread ------------------------------------------------------------ */

/* Connects when not connected, at most every RECONNECT_MS: an agent that
 * is absent costs a failed connect(2), which a Unix socket answers at
 * once.  Only the sender thread connects. */
#define RECONNECT_MS 100

static void connect_agent(void)
{
    if (!s.conn_ok || atomic_load_explicit(&s.conn.fd, memory_order_relaxed) >= 0)
        return;
    int64_t now = iot_mono_ns();
    if (now < s.next_connect_ns)
        return;
    s.next_connect_ns = now + (int64_t)RECONNECT_MS * 1000000;
    uint64_t before = s.conn.connects, refused = s.conn.refusals;
    if (iot_zpush_connect(&s.conn) != 0 && errno == EACCES) {
        /* Said once: the endpoint stays another user's, and every batch
         * counts as send_failed meanwhile. */
        if (!refused)
            iot_debug_log("not sending to %s: the process listening there is uid %ld's, "
                          "neither root nor this user nor the service's account; the events "
                          "count as dropped (send_failed)",
                          iot_g.cfg.agent, s.conn.refused_uid);
    } else if (s.conn.refusals == refused && atomic_load(&s.conn.fd) < 0)
        iot_debug_log("cannot reach the agent at %s: %s", iot_g.cfg.agent, strerror(errno));
    else if (before)
        iot_debug_log("connected to the agent again (%llu times)",
                      (unsigned long long)s.conn.connects);
}

static void open_socket(void)
{
    char err[200];
    if (iot_zpush_init(&s.conn, iot_g.cfg.agent, iot_g.cfg.send_queue, err, sizeof err) != 0) {
        iot_debug_log("cannot use agent endpoint: %s", err);
        return;
    }
    s.conn_ok = 1;
    connect_agent();
}

static void box_queued(const uint8_t *buf, size_t len, void *arg)
{
    (void)arg;
    if (dropbox_put(buf, len) != 0)
        iot_debug_log("a batch the agent had not taken did not fit in its drop box");
}

/* Whatever the agent did not take vanishes with the process, and the last
 * batches show no gap to count them by: when the linger ran out with
 * batches queued, when the agent had not read the socket by then, and
 * when ZeroMQ dropped what it had written last (handover.h) or the agent
 * died holding it, which nothing here can see.  So a process that handed
 * anything over leaves, after its last batch, a batch with no events
 * whose running total (Body.made_through) is everything it handed over,
 * in the agent's drop box: readers count what never arrived as lost
 * (DROP_LOST), and a late batch takes its events back from that count.
 * `why`: what went wrong for certain, or NULL. */
static void leave_running_total(const char *why)
{
    iot_producer prod;
    fill_producer(&prod);
    iot_body body = IOTRACE__BODY__INIT;
    body.made_through = s.made;
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[160];
    if (iot_wire_encode(&prod, iot_g.epoch, s.seq, &body, &buf, &len, err, sizeof err) != 0) {
        iot_debug_log("cannot encode the running total: %s", err);
        return;
    }
    if (dropbox_put(buf, len) == 0) {
        s.seq++;
        if (why)
            iot_debug_log("%s: the running total of %llu events went into its drop box, so that "
                          "readers count what it did not take as lost",
                          why, (unsigned long long)s.made);
    } else if (why) {
        iot_debug_log("%s, and its drop box took no running total: what it did not take is lost "
                      "uncounted", why);
    }
    free(buf);
}

/* Closes the connection to the agent once the agent has read everything
 * written on it, or the linger has run out, and leaves the running total.
 * The agent's libzmq throws away what is still unread in a connection that
 * was closed (libzmq issue #1813), hence the wait for SIOCOUTQ to fall to 0
 * rather than for the writes alone.  Batches still queued here then (the
 * agent is stopped or swamped) go into its drop box instead; an agent that
 * is not there is not waited for at all. */
/* Waits, at most the linger, until the agent has answered the handshake,
 * taken every queued batch and read every byte; then what is still queued
 * goes into the drop box.  The bytes the agent had not read, and in
 * *queued the batches boxed. */
static long await_agent_read(size_t *queued)
{
    int64_t deadline = iot_mono_ns() + (int64_t)iot_g.cfg.linger_ms * 1000000;
    long unread = 0;
    while (s.conn_ok && atomic_load(&s.conn.fd) >= 0) {
        size_t waiting = iot_zpush_flush(&s.conn);
        unread = iot_zpush_unread(&s.conn);
        int peer_ready = iot_zpush_peer_ready(&s.conn);
        if ((!waiting && !unread && peer_ready) || iot_mono_ns() >= deadline)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    *queued = s.conn.n;
    if (s.conn_ok)
        iot_zpush_drain(&s.conn, box_queued, NULL);
    return unread;
}

static void hand_over_last(void)
{
    int used = s.sent_batches > s.boxed_batches;
    size_t queued = 0;
    long unread = used ? await_agent_read(&queued) : 0;
    if (s.conn_ok) {
        if (!used)
            iot_zpush_drain(&s.conn, box_queued, NULL);
        iot_zpush_close(&s.conn);
    }
    char why[200];
    if (unread)
        snprintf(why, sizeof why, "the agent had not read %ld bytes of the last batches when the "
                 "linger (%llu ms) ran out", unread, (unsigned long long)iot_g.cfg.linger_ms);
    else if (s.conn.lost_partial)
        snprintf(why, sizeof why, "%llu batches were cut off by a broken connection to the agent",
                 (unsigned long long)s.conn.lost_partial);
    if (queued)
        iot_debug_log("%zu batches the agent had not taken went into its drop box", queued);
    if (used)
        leave_running_total(unread || s.conn.lost_partial ? why : NULL);
}

/* The sender thread sleeps on s.kick, a futex, rather than on a condition
 * variable: a recording thread that wakes it must never wait, and a
 * condition variable is signalled under its mutex. */
enum { KICK_AWAKE, KICK_SLEEPING, KICK_KICKED };

void iot_sender_kick(void)
{
    if (atomic_exchange(&s.kick, KICK_KICKED) == KICK_SLEEPING) {
        int saved = errno;
        syscall(SYS_futex, &s.kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        errno = saved;
    }
}

/* The only place the sender thread is idle: a fork may proceed while it is
 * parked here, and while a fork is under way it cannot leave (the forking
 * thread holds s.lock).  A kick that comes while it is awake makes its
 * next sleep return at once: nothing it was woken for is missed. */
static int wait_a_little(int64_t ms)
{
    pthread_mutex_lock(&s.lock);
    s.working = 0;
    pthread_cond_broadcast(&s.idle);
    int asked = s.stop || s.flush_requested, kicked = 0;
    pthread_mutex_unlock(&s.lock);
    if (!asked) {
        kicked = atomic_exchange(&s.kick, KICK_SLEEPING) == KICK_KICKED;
        if (!kicked) {
            struct timespec rel = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
            syscall(SYS_futex, &s.kick, FUTEX_WAIT_PRIVATE, KICK_SLEEPING, &rel, NULL, 0);
        }
    }
    kicked |= atomic_exchange(&s.kick, KICK_AWAKE) == KICK_KICKED;
    pthread_mutex_lock(&s.lock);
    s.working = 1;
    pthread_mutex_unlock(&s.lock);
    return kicked;
}

/* The agent's half of the handshake completes asynchronously, and until
 * it has come nothing is written (zpush.h): give it a moment, on this
 * thread, so that the first batches, such as a failed open's just before
 * MPI_Abort ends the job, are not left queued.  Idle meanwhile for fork
 * (iot_sender_fork_prepare): this holds no lock and allocates nothing. */
static void await_handshake(int max_ms)
{
    pthread_mutex_lock(&s.lock);
    s.working = 0;
    pthread_cond_broadcast(&s.idle);
    pthread_mutex_unlock(&s.lock);
    int64_t end = iot_mono_ns() + (int64_t)max_ms * 1000000;
    for (;;) {
        int fd = iot_zpush_fd(&s.conn), ready = 0;
        if (fd >= 0 && try_token()) {
            ready = iot_zpush_peer_ready(&s.conn);
            give_token();
        }
        if (fd < 0 || ready || iot_mono_ns() >= end)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 2);
    }
    pthread_mutex_lock(&s.lock);
    s.working = 1;
    pthread_mutex_unlock(&s.lock);
}

static void *sender_main(void *arg)
{
    (void)arg;
    iot_t.internal = 1; /* never record the sender's own I/O */
    struct sched_param none = {0};
    if (iot_g.cfg.sender_policy != SCHED_OTHER)
        pthread_setschedparam(pthread_self(), iot_g.cfg.sender_policy, &none);
    if (s.conn_ok) {
        await_handshake(100);
        atomic_store_explicit(&s.ready, 1, memory_order_release);
    }
    /* Sweep when half a batch is waiting, a ring is filling up (a thread
     * woke the sender) or the flush interval passes; look as often as the
     * rings' filling needs (poll_interval_ms). */
    int64_t poll_ms = POLL_MIN_MS;
    for (;;) {
        int kicked = wait_a_little(poll_ms);
        pthread_mutex_lock(&s.lock);
        int stop = s.stop, flush = s.flush_requested;
        s.flush_requested = 0;
        pthread_mutex_unlock(&s.lock);
        int64_t now = iot_now_ns();
        if (stop) { /* the last sweep: no call sends after it */
            atomic_store_explicit(&s.ready, 0, memory_order_relaxed);
            take_token();
            s.final = 1;
            give_token();
        }
        /* Reconnect, and write out what the kernel could not take before,
         * also when no sweep is due. */
        if (s.conn_ok && (atomic_load_explicit(&s.conn.fd, memory_order_relaxed) < 0 ||
                          s.conn.n)) {
            take_token();
            connect_agent();
            iot_zpush_flush(&s.conn);
            give_token();
        }
        struct ring_fill f;
        ring_fill(&f);
        /* With IOTRACE_INLINE_SEND, by ring: each thread's calls send
         * their own. */
        uint64_t waiting = iot_g.cfg.help_at ? f.fullest : f.pending;
        if (stop || flush || kicked || waiting >= sweep_at() ||
            now - s.last_sweep_ns >= (int64_t)iot_g.cfg.flush_ms * 1000000) {
            sweep();
            ring_fill(&f);
            now = iot_now_ns();
        }
        poll_ms = poll_interval_ms(&f, iot_mono_ns(), now, kicked);
        if (s.conn.n && poll_ms > POLL_MIN_MS) /* batches wait for the socket */
            poll_ms = POLL_MIN_MS;
        pthread_mutex_lock(&s.lock);
        s.sweeps++;
        pthread_cond_broadcast(&s.swept);
        pthread_mutex_unlock(&s.lock);
        if (stop)
            break;
    }
    /* The last batch failed, and the drop box took none of it: its events
     * are counted now, in a batch of drop records alone, small enough for
     * the drop box whatever it already holds. */
    take_token(); /* kept: s.final keeps calls out from here on */
    if (s.n_drops) {
        struct name_entry *none = NULL;
        send_batch(&none, iot_now_ns());
    }
    uint64_t unsent = 0;
    for (size_t i = 0; i < s.n_drops; i++)
        unsent += s.drops[i].count;
    iot_debug_log("made %llu events: %llu sent in %llu batches, %llu counted in drop records "
                  "sent, %llu lost with no batch left to count them; %llu batches not taken "
                  "by the agent, %llu left in its drop box; %llu batches sent by MPI-IO calls",
                  (unsigned long long)(s.made + unsent), (unsigned long long)s.sent_events,
                  (unsigned long long)s.sent_batches,
                  (unsigned long long)(s.made - s.sent_events), (unsigned long long)unsent,
                  (unsigned long long)s.failed_batches, (unsigned long long)s.boxed_batches,
                  (unsigned long long)s.call_batches);
    hand_over_last();
    give_token();
    pthread_mutex_lock(&s.lock);
    s.working = 0;
    pthread_cond_broadcast(&s.idle);
    pthread_mutex_unlock(&s.lock);
    return NULL;
}

void iot_sender_start(void)
{
    pthread_mutex_lock(&s.lock);
    if (s.started) {
        pthread_mutex_unlock(&s.lock);
        return;
    }
    s.started = 1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s.swept, &ca);
    pthread_condattr_destroy(&ca);
    s.working = 1; /* from its very start: a new thread's set-up allocates too */
    /* The program's signals are not for the library's thread: it starts
     * with all of them blocked (a handler run there could, say, dup2() onto
     * the agent's socket while this thread writes on it). */
    sigset_t all, old;
    sigfillset(&all);
    /* The connection is made here, on the thread that recorded first, not
     * on the sender thread: a program that closes every descriptor (a
     * daemon starting up) would otherwise race the sender thread's
     * socket() for its low number before it moves out of the way. */
    open_socket();
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int failed = alloc_columns(iot_g.cfg.batch_events) != 0 ||
                 pthread_create(&s.thread, NULL, sender_main, NULL) != 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed) {
        s.started = s.working = 0;
        pthread_mutex_unlock(&s.lock);
        iot_disable_after_error("cannot start the sender thread");
        return;
    }
    pthread_setname_np(s.thread, "iotrace-send"); /* top -H, benchmarks */
    pthread_mutex_unlock(&s.lock);
}

void iot_sender_flush(int timeout_ms)
{
    pthread_mutex_lock(&s.lock);
    if (!s.started || s.stop) {
        pthread_mutex_unlock(&s.lock);
        return;
    }
    /* Two completed sweeps after the request: the first may have begun
     * before the records we care about were written. */
    uint64_t target = s.sweeps + 2;
    s.flush_requested = 1;
    iot_sender_kick();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    while (s.sweeps < target) {
        if (pthread_cond_timedwait(&s.swept, &s.lock, &ts) == ETIMEDOUT)
            break;
        if (s.sweeps < target && !s.flush_requested) {
            s.flush_requested = 1;
            iot_sender_kick();
        }
    }
    pthread_mutex_unlock(&s.lock);
}

/* The program replaces itself (execve and the like): the new image has a
 * library of its own, and this one's rings and queue vanish with the old
 * image, uncounted.  So what it recorded goes out first and the agent reads
 * it, within the linger, as at exit, and the running total goes into the
 * drop box; the connection closes with the exec (O_CLOEXEC).  If the exec
 * fails, the process goes on tracing as before, and leaves a larger
 * running total at exit.  Not in a vfork() child (it shares the parent's
 * memory, and its parent's sender is not its own). */
void iot_sender_before_exec(void)
{
    pthread_mutex_lock(&s.lock);
    int running = s.started && !s.stop;
    pthread_mutex_unlock(&s.lock);
    if (!running || (uint32_t)getpid() != (uint32_t)iot_g.pid)
        return;
    /* The sweep on this thread, not the sender's: on a loaded node the
     * sender thread may not get a core before the linger runs out, and what
     * is left in the rings at exec is lost uncounted.  (An exec from a
     * signal handler that interrupted malloc could then deadlock in the
     * encoder's allocations: rarer by far than a slow sender.) */
    int saved = errno;
    iot_t.internal++;
    sweep();
    take_token();
    if (s.sent_batches > s.boxed_batches) {
        size_t queued = 0;
        long unread = await_agent_read(&queued);
        char why[160];
        snprintf(why, sizeof why, "at exec, the agent had not read %ld bytes of the last batches "
                 "when the linger (%llu ms) ran out", unread,
                 (unsigned long long)iot_g.cfg.linger_ms);
        leave_running_total(unread ? why : NULL);
    }
    give_token();
    iot_t.internal--;
    errno = saved;
}

void iot_sender_stop(void)
{
    pthread_mutex_lock(&s.lock);
    if (!s.started || s.stop) {
        pthread_mutex_unlock(&s.lock);
        return;
    }
    s.stop = 1;
    iot_sender_kick();
    pthread_mutex_unlock(&s.lock);
    pthread_join(s.thread, NULL);
}

/* The fork waits until the sender thread is parked, and keeps it parked.
 * A thread that is inside malloc at the fork leaves the allocator's lock held
 * for good in the child.  glibc's malloc guards against that itself, but
 * ASan's allocator (GCC 12's libasan has no fork interceptor) does not, so a
 * forked child deadlocked on its first allocation when the fork met the
 * sender starting ZeroMQ or sending a batch.  The wait is bounded by one
 * sweep, or by the connection wait right after the sender starts. */
void iot_sender_fork_prepare(void)
{
    pthread_mutex_lock(&s.lock);
    while (s.working)
        pthread_cond_wait(&s.idle, &s.lock);
    /* A call sending its batch does not need s.lock to finish (it only
     * tries it), so this cannot wait on the fork. */
    take_token();
}

void iot_sender_fork_parent(void)
{
    give_token();
    pthread_mutex_unlock(&s.lock);
}

void iot_sender_after_fork_child(void)
{
    /* Only the forking thread exists here; the parent's sender thread,
     * ZeroMQ context and rings are not ours.  The ZeroMQ context must not be
     * touched in the child, so it is abandoned. */
    struct iot_ring *r = s.rings;
    while (r) {
        struct iot_ring *next = r->next;
        munmap(r, r->map_size);
        r = next;
    }
    s.rings = NULL;
    atomic_store(&iot_g.overflow_used, 0);
    atomic_store(&dropped_gone, 0);
    struct name_entry *e = s.names;
    while (e) {
        struct name_entry *next = e->next;
        free(e);
        e = next;
    }
    s.names = NULL;
    s.names_tail = &s.names;
    for (e = s.held; e;) {
        struct name_entry *next = e->next;
        free(e);
        e = next;
    }
    s.held = NULL;
    atomic_store(&s.token, 0);
    atomic_store(&s.ready, 0);
    s.started = s.stop = s.flush_requested = s.working = 0;
    atomic_store(&s.kick, KICK_AWAKE);
    /* The parent's connection: its queue is the parent's to send, and a
     * write here would cut into its stream.  The child makes its own. */
    if (s.conn_ok) {
        int fd = atomic_load(&s.conn.fd);
        if (fd >= 0)
            syscall(SYS_close, fd);
        atomic_store(&s.conn.fd, -1);
        for (size_t i = 0; i < s.conn.n; i++)
            free(s.conn.queue[(s.conn.head + i) % s.conn.max_queue].buf);
        free(s.conn.queue);
        memset(&s.conn, 0, sizeof s.conn);
        atomic_store(&s.conn.fd, -1);
        s.conn_ok = 0;
    }
    s.next_connect_ns = 0;
    s.seq = 0;
    s.made = s.sent_events = s.sent_batches = s.failed_batches = 0;
    s.final = 0;
    s.boxed_batches = s.boxed_bytes = s.call_batches = 0;
    s.n_mpiio = s.n_posix = s.n_disk = s.n_drops = 0;
    s.n_jobs = 1;
    s.job_uid_known = 0;
    s.sweeps = 0;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.idle, NULL);
}

uint64_t iot_dropped_total(void)
{
    pthread_mutex_lock(&s.lock);
    uint64_t n = atomic_load(&dropped_gone);
    for (struct iot_ring *r = s.rings; r; r = r->next)
        n += atomic_load_explicit(&r->dropped, memory_order_relaxed);
    pthread_mutex_unlock(&s.lock);
    return n;
}
