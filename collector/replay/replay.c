/* iotrace-replay: runs the I/O of a traced job again, rank by rank, under
 * mpiexec, on another file system: the same MPI-IO calls (collective,
 * split, non-blocking, shared and ordered alike) at the same offsets with
 * the same sizes, the POSIX I/O the ranks did outside MPI-IO, and the time
 * between calls.  Rank 0 reads the store and works out the plan
 * (replay_plan.c); every rank gets its own calls.  See docs/replay.md. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "export_rows.h"
#include "fsutil.h"
#include "iot_functions.h"
#include "log.h"
#include "opts.h"
#include "mpi_info_text.h"
#include "replay_plan.h"

static char *opt_store;
static char *opt_job;
static char *opt_target;
static char *opt_compute;
static char *opt_time_scale;
static int opt_allow_incomplete;
static int opt_json;
static char *opt_posix_under;

static const struct iot_opt options[] = {
    {"store", 's', IOT_OPT_STRING, &opt_store, "DIR", "store directory written by iotrace-collector (required)"},
    {"job", 'j', IOT_OPT_STRING, &opt_job, "ID", "the job to replay (required; iotrace-export --list-jobs lists them)"},
    {"target", 't', IOT_OPT_STRING, &opt_target, "PATH", "directory the job's files are replayed under, created if missing (required; docs/replay.md, Files)"},
    {"compute", 0, IOT_OPT_STRING, &opt_compute, "keep|skip", "keep the time each rank spent between two calls (default), or go straight to the next call"},
    {"time-scale", 0, IOT_OPT_STRING, &opt_time_scale, "X", "multiply the kept time between calls by X (default 1; 0 is --compute skip)"},
    {"allow-incomplete", 0, IOT_OPT_FLAG, &opt_allow_incomplete, NULL, "replay a job with lost events (drop records) too: what is there, leaving out collectives a rank has no record of"},
    {"posix-under", 0, IOT_OPT_STRING, &opt_posix_under, "DIR", "replay the POSIX I/O outside MPI-IO on files under DIR only (default: the directory holding the job's MPI-IO files; never /dev, /proc, /sys)"},
    {"json", 0, IOT_OPT_FLAG, &opt_json, NULL, "print the report as one JSON object instead of text"},
};

static const struct iot_man_section replay_man[] = {
    {"EXAMPLES",
     "  mpiexec -n 4 iotrace-replay --store /var/lib/iotrace/store --job 4242 --target /mnt/new\n"
     "  mpiexec -n 4 -genv LD_PRELOAD libiotrace-client.so -genv IOTRACE_JOB_ID r4242 \\\n"
     "      iotrace-replay --store /var/lib/iotrace/store --job 4242 --target /mnt/new --json"},
    {"EXIT STATUS",
     "0 on success, also when some replayed calls failed (the report counts them); 1 on a "
     "data error (store unreadable, no such job, an incomplete job without "
     "--allow-incomplete, a number of processes other than the job's ranks, a file that "
     "cannot be opened under the target); 2 on a usage error."},
    {"SEE ALSO",
     "iotrace-export(1), libiotrace-client(7); docs/replay.md in the documentation "
     "directory."},
};

static const struct iot_opts_spec spec = {
    .program = "iotrace-replay",
    .synopsis = "--store DIR --job ID --target PATH [--compute keep|skip] [--time-scale X] "
                "[--allow-incomplete] [--posix-under DIR] [--json]\n"
                "   (under mpiexec -n N, N the job's number of ranks)",
    .description = "Replays the MPI-IO and POSIX I/O of a traced job, rank by rank, onto the "
                   "files under PATH, and reports original against replayed times.  See "
                   "docs/replay.md.",
    .opts = options,
    .n_opts = (int)(sizeof options / sizeof options[0]),
    .allow_config = 0,
    .man_section = 1,
    .summary = "replay the I/O of a job traced by iotrace on another file system",
    .man = replay_man,
    .n_man = (int)(sizeof replay_man / sizeof replay_man[0]),
};

static int rank, nprocs;

static void usage_error(const char *msg)
{
    fprintf(stderr, "%s: %s\nTry '%s --help'.\n", spec.program, msg, spec.program);
    exit(IOT_EXIT_USAGE);
}

/* ---- per rank: what it replays with ------------------------------------------ */

struct handle {
    MPI_File fh;
    MPI_Comm comm;
    int64_t disp;        /* of the view: its first byte of data */
    int64_t blk, stride; /* the view's blocks of data and their distance; 0: bytes */
    int64_t ptr;         /* the individual file pointer, in bytes of the view */
    int open;
    int comm_made;       /* a barrier's communicator, made at its first barrier */
};

struct pending {
    uint64_t callid;
    uint32_t handle;
    MPI_Request req;
};

#define RP_FUNCS 256

struct func_stat {
    uint64_t calls, orig_ns, bytes, replayed, replay_ns, replay_bytes;
};

struct rank_stat {
    uint64_t orig_ns, replay_ns, compute_ns, added_seeks, added_waits, syncs, errors;
    uint64_t strided_views; /* views replayed with the recorded pattern of blocks */
    uint64_t skipped[RP_SKIP_REASONS];
    struct func_stat f[RP_FUNCS];
};

struct shared {
    uint32_t n_handles, n_paths, n_infos;
    uint32_t *handle_path;
    uint8_t *members;
    uint64_t *extent;
    char **paths;
    char **infos; /* access modes and hints (replay_plan.h, rp_plan.infos) */
    char *blob;
};

struct state {
    struct shared *sh;
    struct handle *h;
    struct pending *req;
    size_t n_req, cap_req;
    int *fd;
    FILE **fp;
    char *wbuf, *rbuf;
    MPI_Info empty_info;
    struct rank_stat st;
    int reported; /* errors shown on stderr */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The time a rank spent between two calls is slept to an absolute deadline
 * rather than spun: the replay's ROMIO aggregators, AIO threads and the
 * other ranks on the node need the cores the application's computing held,
 * and a deadline keeps the sleep's own lateness from adding up. */
static void wait_until(int64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void report_error(struct state *s, const char *what, int code)
{
    s->st.errors++;
    if (s->reported++ >= 5)
        return;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (code >= 0)
        MPI_Error_string(code, msg, &len);
    else
        snprintf(msg, sizeof msg, "%s", strerror(-code));
    fprintf(stderr, "%s: rank %d: %s failed: %s\n", spec.program, rank, what, msg);
}

/* ---- MPI-IO ---------------------------------------------------------------------- */

static MPI_Comm comm_of(struct state *s, uint32_t h)
{
    const uint8_t *m = s->sh->members + (size_t)h * (size_t)nprocs;
    int n = 0, *ranks = malloc((size_t)nprocs * sizeof *ranks);
    for (int r = 0; r < nprocs; r++)
        if (m[r])
            ranks[n++] = r;
    MPI_Comm comm = MPI_COMM_WORLD;
    if (n == 1) {
        comm = MPI_COMM_SELF;
    } else if (n < nprocs) {
        MPI_Group world, g;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, n, ranks, &g);
        MPI_Comm_create_group(MPI_COMM_WORLD, g, (int)(h % 32768), &comm);
        MPI_Group_free(&g);
        MPI_Group_free(&world);
    }
    free(ranks);
    return comm;
}

static void add_request(struct state *s, const struct rp_op *o, MPI_Request req)
{
    if (s->n_req == s->cap_req) {
        s->cap_req = s->cap_req ? 2 * s->cap_req : 16;
        s->req = realloc(s->req, s->cap_req * sizeof *s->req);
        if (!s->req)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    s->req[s->n_req++] = (struct pending){o->callid, o->handle, req};
}

static struct pending *find_request(struct state *s, uint64_t callid)
{
    for (size_t i = 0; i < s->n_req; i++)
        if (s->req[i].callid == callid)
            return &s->req[i];
    return NULL;
}

static void drop_request(struct state *s, struct pending *p)
{
    *p = s->req[--s->n_req];
}

/* A handle closed with requests of a completion the trace lost. */
static void finish_requests(struct state *s, uint32_t h)
{
    for (size_t i = 0; i < s->n_req;) {
        if (s->req[i].handle != h) {
            i++;
            continue;
        }
        MPI_Wait(&s->req[i].req, MPI_STATUS_IGNORE);
        s->st.added_waits++;
        drop_request(s, &s->req[i]);
    }
}

/* Where absolute byte a lies in the view: the bytes of data before it (a
 * byte in a hole: the end of the block before it). */
static int64_t view_pos(const struct handle *hd, int64_t a)
{
    int64_t rel = a > hd->disp ? a - hd->disp : 0;
    if (hd->stride <= hd->blk)
        return rel;
    int64_t r = rel % hd->stride;
    return rel / hd->stride * hd->blk + (r < hd->blk ? r : hd->blk);
}

/* Moves the individual pointer where the trace says the access started,
 * when the replay's view did not bring it there by itself (a view whose
 * pattern the trace does not hold moves through holes the replay's does
 * not have). */
static void place_pointer(struct state *s, struct handle *hd, int64_t offset)
{
    if (offset < 0 || offset < hd->disp || view_pos(hd, offset) == hd->ptr)
        return;
    hd->ptr = view_pos(hd, offset);
    MPI_File_seek(hd->fh, (MPI_Offset)hd->ptr, MPI_SEEK_SET);
    s->st.added_seeks++;
}

/* The recorded view: blocks of o->bytes every o->xfer bytes from o->offset
 * (docs/client.md, "File views"), as a filetype of that pattern; a
 * contiguous view, or one the trace does not describe, as bytes. */
static int set_view(struct state *s, const struct rp_op *o, struct handle *hd)
{
    hd->disp = o->offset < 0 ? 0 : o->offset;
    hd->ptr = 0;
    hd->blk = hd->stride = 0;
    MPI_Datatype block, filetype = MPI_BYTE;
    if (o->xfer > o->bytes && o->bytes > 0 && o->bytes <= INT32_MAX && o->xfer <= INT64_MAX &&
        MPI_Type_contiguous((int)o->bytes, MPI_BYTE, &block) == MPI_SUCCESS) {
        if (MPI_Type_create_resized(block, 0, (MPI_Aint)o->xfer, &filetype) == MPI_SUCCESS &&
            MPI_Type_commit(&filetype) == MPI_SUCCESS) {
            hd->blk = (int64_t)o->bytes;
            hd->stride = (int64_t)o->xfer;
            s->st.strided_views++;
        } else {
            filetype = MPI_BYTE;
        }
        MPI_Type_free(&block);
    }
    int ret = MPI_File_set_view(hd->fh, (MPI_Offset)hd->disp, MPI_BYTE, filetype, "native",
                                MPI_INFO_NULL);
    if (filetype != MPI_BYTE)
        MPI_Type_free(&filetype);
    return ret;
}

static int complete(struct state *s, const struct rp_op *o, size_t n)
{
    MPI_Request reqs[64];
    struct pending *pend[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        struct pending *p = find_request(s, o[i].callid);
        if (p) {
            pend[k] = p;
            reqs[k++] = p->req;
        }
    }
    MPI_Status sts[64]; /* not MPI_STATUSES_IGNORE: GCC takes its access attribute for an array */
    int ret = MPI_SUCCESS, flag = 0, idx, outc, ix[64];
    switch (o->func) {
    case IOT_F_MPIIO_MPI_Wait:
        for (size_t i = 0; i < k && ret == MPI_SUCCESS; i++)
            ret = MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        break;
    case IOT_F_MPIIO_MPI_Waitall:
        ret = MPI_Waitall((int)k, reqs, sts);
        break;
    case IOT_F_MPIIO_MPI_Waitany:
        for (size_t i = 0; i < k && ret == MPI_SUCCESS; i++)
            ret = MPI_Waitany((int)k, reqs, &idx, MPI_STATUS_IGNORE);
        break;
    case IOT_F_MPIIO_MPI_Waitsome:
    case IOT_F_MPIIO_MPI_Testsome: /* until all are done: records are per request */
        for (size_t done = 0; done < k && ret == MPI_SUCCESS; done += (size_t)outc) {
            ret = o->func == IOT_F_MPIIO_MPI_Waitsome
                      ? MPI_Waitsome((int)k, reqs, &outc, ix, sts)
                      : MPI_Testsome((int)k, reqs, &outc, ix, sts);
            if (ret != MPI_SUCCESS || outc == MPI_UNDEFINED)
                break;
        }
        break;
    /* A Test that completes nothing is not recorded: only the one that did. */
    case IOT_F_MPIIO_MPI_Test:
        for (size_t i = 0; i < k && ret == MPI_SUCCESS; i++)
            for (flag = 0; !flag && ret == MPI_SUCCESS;)
                ret = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
        break;
    case IOT_F_MPIIO_MPI_Testall:
        while (!flag && ret == MPI_SUCCESS)
            ret = MPI_Testall((int)k, reqs, &flag, sts);
        break;
    case IOT_F_MPIIO_MPI_Testany:
        for (size_t i = 0; i < k && ret == MPI_SUCCESS; i++)
            for (flag = 0; !flag && ret == MPI_SUCCESS;)
                ret = MPI_Testany((int)k, reqs, &idx, &flag, MPI_STATUS_IGNORE);
        break;
    default:
        break;
    }
    /* Drop from the table last: dropping moves entries. */
    for (size_t i = k; i-- > 0;) {
        size_t j = (size_t)(pend[i] - s->req);
        if (j < s->n_req)
            drop_request(s, pend[i]);
    }
    return ret;
}

#define F(name) IOT_F_MPIIO_MPI_File_##name

/* One key or value of a recorded text, unescaped; stops at `stop` chars. */
static const char *text_part(const char *p, const char *stop, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p && !strchr(stop, *p); p++) {
        if (*p == '\\' && p[1])
            p++;
        if (n + 1 < cap)
            out[n++] = *p;
    }
    out[n] = '\0';
    return p;
}

/* The access mode and hints recorded with an open or set_info (the text of
 * proto/mpi_info_text.h): the mode, -1 when not recorded, and the hints in
 * a new MPI_Info, MPI_INFO_NULL when there are none. */
static int parse_info(const char *text, MPI_Info *info)
{
    int amode = -1;
    *info = MPI_INFO_NULL;
    for (const char *p = text ? text : "", *first = p; *p;) {
        int at_start = p == first;
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1] = "";
        p = text_part(p, "=;", key, sizeof key);
        if (*p == '=')
            p = text_part(p + 1, ";", value, sizeof value);
        if (*p == ';')
            p++;
        /* The mode comes first; a hint the program named "amode" is a hint. */
        if (at_start && strcmp(key, "amode") == 0) {
            amode = 0;
            for (char *name = strtok(value, "|"); name; name = strtok(NULL, "|"))
                for (size_t i = 0; i < IOT_N_AMODE_NAMES; i++)
                    if (strcmp(name, iot_amode_names[i].name) == 0)
                        amode |= iot_amode_names[i].flag;
        } else if (key[0]) {
            if (*info == MPI_INFO_NULL)
                MPI_Info_create(info);
            MPI_Info_set(*info, key, value);
        }
    }
    return amode;
}

/* With the recorded access mode and hints: rank 0 made the file already,
 * so MPI_MODE_EXCL goes; without them (older traces), to read and write. */
static int do_open(struct state *s, const struct rp_op *o)
{
    struct handle *hd = &s->h[o->handle];
    hd->comm = comm_of(s, o->handle);
    const char *path = s->sh->paths[s->sh->handle_path[o->handle]];
    MPI_Info info;
    int amode = parse_info(o->info < s->sh->n_infos ? s->sh->infos[o->info] : "", &info);
    amode = amode < 0 ? MPI_MODE_CREATE | MPI_MODE_RDWR : amode & ~MPI_MODE_EXCL;
    int ret = MPI_File_open(hd->comm, path, amode, info, &hd->fh);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (ret != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(ret, msg, &len);
        fprintf(stderr, "%s: rank %d: cannot open %s: %s\n", spec.program, rank, path, msg);
        MPI_Abort(MPI_COMM_WORLD, IOT_EXIT_FAILURE);
    }
    hd->open = 1;
    hd->disp = hd->ptr = hd->blk = hd->stride = 0;
    return ret;
}

static int do_close(struct state *s, const struct rp_op *o)
{
    struct handle *hd = &s->h[o->handle];
    finish_requests(s, o->handle);
    int ret = MPI_File_close(&hd->fh);
    if (hd->comm != MPI_COMM_WORLD && hd->comm != MPI_COMM_SELF)
        MPI_Comm_free(&hd->comm);
    hd->open = 0;
    return ret;
}

/* Calls on the handle that move no data. */
static int do_meta(struct state *s, const struct rp_op *o, struct handle *hd, int *done)
{
    MPI_File fh = hd->fh;
    MPI_Offset off;
    MPI_Group g;
    MPI_Info info;
    MPI_Datatype et, ft;
    MPI_Aint ext;
    MPI_Count extc;
    char rep[MPI_MAX_DATAREP_STRING];
    int flag, ret;
    uint64_t extent = s->sh->extent[s->sh->handle_path[o->handle]];
    *done = 1;
    switch (o->func) {
    case F(set_size): /* the size asked for, or, in older traces, as far as the job wrote */
        return MPI_File_set_size(fh, (MPI_Offset)(o->offset >= 0 ? (uint64_t)o->offset : extent));
    case F(preallocate):
        return MPI_File_preallocate(fh,
                                    (MPI_Offset)(o->offset >= 0 ? (uint64_t)o->offset : extent));
    case F(get_size):
        return MPI_File_get_size(fh, &off);
    case F(get_group):
        if ((ret = MPI_File_get_group(fh, &g)) == MPI_SUCCESS)
            MPI_Group_free(&g);
        return ret;
    case F(get_amode):
        return MPI_File_get_amode(fh, &flag);
    case F(set_info): {
        MPI_Info info;
        parse_info(o->info < s->sh->n_infos ? s->sh->infos[o->info] : "", &info);
        int ret = MPI_File_set_info(fh, info != MPI_INFO_NULL ? info : s->empty_info);
        if (info != MPI_INFO_NULL)
            MPI_Info_free(&info);
        return ret;
    }
    case F(get_info):
        if ((ret = MPI_File_get_info(fh, &info)) == MPI_SUCCESS)
            MPI_Info_free(&info);
        return ret;
    case F(set_view):
        return set_view(s, o, hd);
    case F(get_view):
        return MPI_File_get_view(fh, &off, &et, &ft, rep);
    case F(seek):
        if (o->offset < 0)
            return MPI_File_seek(fh, 0, MPI_SEEK_CUR);
        hd->ptr = view_pos(hd, o->offset);
        return MPI_File_seek(fh, (MPI_Offset)hd->ptr, MPI_SEEK_SET);
    case F(get_position):
        return MPI_File_get_position(fh, &off);
    case F(get_byte_offset):
        return MPI_File_get_byte_offset(fh, 0, &off);
    case F(seek_shared):
        return MPI_File_seek_shared(fh, (MPI_Offset)view_pos(hd, o->offset), MPI_SEEK_SET);
    case F(get_position_shared):
        return MPI_File_get_position_shared(fh, &off);
    case F(get_type_extent):
        return MPI_File_get_type_extent(fh, MPI_BYTE, &ext);
    case F(get_type_extent_c):
        return MPI_File_get_type_extent_c(fh, MPI_BYTE, &extc);
    case F(set_atomicity):
        return MPI_File_set_atomicity(fh, 0);
    case F(get_atomicity):
        return MPI_File_get_atomicity(fh, &flag);
    case F(sync):
        return MPI_File_sync(fh);
    default:
        *done = 0;
        return MPI_SUCCESS;
    }
}

/* The data calls, each as itself with MPI_BYTE: the trace holds the bytes
 * asked for, not the datatype they were counted in. */
static int do_data(struct state *s, const struct rp_op *o, struct handle *hd)
{
    MPI_File fh = hd->fh;
    struct rp_class c = rp_classify(o->func);
    if (!c.large && o->bytes > INT32_MAX)
        return MPI_ERR_COUNT;
    int n = (int)o->bytes;
    MPI_Count nc = (MPI_Count)o->bytes;
    MPI_Offset at = (MPI_Offset)view_pos(hd, o->offset);
    void *r = s->rbuf;
    const void *w = s->wbuf;
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Status st;
    int ret;
    if (c.pos == RP_POS_IND && !c.end)
        place_pointer(s, hd, o->offset);
#define AT(fn, buf, cnt) case F(fn): ret = MPI_File_##fn(fh, at, buf, cnt, MPI_BYTE, &st); break
#define ATQ(fn, buf, cnt) case F(fn): ret = MPI_File_##fn(fh, at, buf, cnt, MPI_BYTE, &q); break
#define ATB(fn, buf, cnt) case F(fn): ret = MPI_File_##fn(fh, at, buf, cnt, MPI_BYTE); break
#define PT(fn, buf, cnt) case F(fn): ret = MPI_File_##fn(fh, buf, cnt, MPI_BYTE, &st); break
#define PTQ(fn, buf, cnt) case F(fn): ret = MPI_File_##fn(fh, buf, cnt, MPI_BYTE, &q); break
#define PTB(fn, buf, cnt) case F(fn): ret = MPI_File_##fn(fh, buf, cnt, MPI_BYTE); break
#define END(fn, buf) case F(fn): ret = MPI_File_##fn(fh, buf, &st); break
    switch (o->func) {
    AT(read_at, r, n); AT(read_at_all, r, n); AT(write_at, w, n); AT(write_at_all, w, n);
    AT(read_at_c, r, nc); AT(read_at_all_c, r, nc); AT(write_at_c, w, nc);
    AT(write_at_all_c, w, nc);
    ATQ(iread_at, r, n); ATQ(iwrite_at, w, n); ATQ(iread_at_all, r, n); ATQ(iwrite_at_all, w, n);
    ATQ(iread_at_c, r, nc); ATQ(iwrite_at_c, w, nc); ATQ(iread_at_all_c, r, nc);
    ATQ(iwrite_at_all_c, w, nc);
    ATB(read_at_all_begin, r, n); ATB(write_at_all_begin, w, n);
    ATB(read_at_all_begin_c, r, nc); ATB(write_at_all_begin_c, w, nc);
    PT(read, r, n); PT(read_all, r, n); PT(write, w, n); PT(write_all, w, n);
    PT(read_c, r, nc); PT(read_all_c, r, nc); PT(write_c, w, nc); PT(write_all_c, w, nc);
    PT(read_shared, r, n); PT(write_shared, w, n); PT(read_ordered, r, n);
    PT(write_ordered, w, n); PT(read_shared_c, r, nc); PT(write_shared_c, w, nc);
    PT(read_ordered_c, r, nc); PT(write_ordered_c, w, nc);
    PTQ(iread, r, n); PTQ(iwrite, w, n); PTQ(iread_all, r, n); PTQ(iwrite_all, w, n);
    PTQ(iread_shared, r, n); PTQ(iwrite_shared, w, n); PTQ(iread_c, r, nc);
    PTQ(iwrite_c, w, nc); PTQ(iread_all_c, r, nc); PTQ(iwrite_all_c, w, nc);
    PTQ(iread_shared_c, r, nc); PTQ(iwrite_shared_c, w, nc);
    PTB(read_all_begin, r, n); PTB(write_all_begin, w, n); PTB(read_ordered_begin, r, n);
    PTB(write_ordered_begin, w, n); PTB(read_all_begin_c, r, nc); PTB(write_all_begin_c, w, nc);
    PTB(read_ordered_begin_c, r, nc); PTB(write_ordered_begin_c, w, nc);
    END(read_at_all_end, r); END(write_at_all_end, (void *)w); END(read_all_end, r);
    END(write_all_end, (void *)w); END(read_ordered_end, r); END(write_ordered_end, (void *)w);
    default:
        return MPI_ERR_OTHER;
    }
#undef AT
#undef ATQ
#undef ATB
#undef PT
#undef PTQ
#undef PTB
#undef END
    if (ret == MPI_SUCCESS && c.pos == RP_POS_IND && !c.end)
        hd->ptr += (int64_t)o->bytes;
    if (ret == MPI_SUCCESS && c.nonblocking)
        add_request(s, o, q);
    return ret;
}

static int do_mpiio(struct state *s, const struct rp_op *o, size_t n_together)
{
    struct rp_class c = rp_classify(o->func);
    if (c.completion)
        return complete(s, o, n_together);
    if (o->func == F(open))
        return do_open(s, o);
    if (c.message) {
        /* Empty, on MPI_COMM_WORLD between the ranks that exchanged it: it
         * orders, as the original did.  MPICH sends an empty message
         * eagerly, without waiting for the receive, so a send the original
         * made beside calls the trace does not hold (an MPI_Irecv) cannot
         * hang here. */
        int peer = (int)o->xfer, tag = rp_message_tag(o), ret;
        MPI_Request r;
        switch (o->func) {
        case IOT_F_MPIIO_MPI_Send:
            return MPI_Send(NULL, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        case IOT_F_MPIIO_MPI_Isend: /* its completion orders nothing */
            ret = MPI_Isend(NULL, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
            return ret == MPI_SUCCESS ? MPI_Request_free(&r) : ret;
        case IOT_F_MPIIO_MPI_Irecv: /* recorded where it completed */
            ret = MPI_Irecv(NULL, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
            return ret == MPI_SUCCESS ? MPI_Wait(&r, MPI_STATUS_IGNORE) : ret;
        default:
            return MPI_Recv(NULL, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    if (c.barrier) {
        /* By its MPI_ name, so that a traced replay records it as the
         * original did; the replay's own barriers go through PMPI_. */
        struct handle *hd = &s->h[o->handle];
        if (!hd->comm_made) {
            hd->comm = comm_of(s, o->handle);
            hd->comm_made = 1;
        }
        return MPI_Barrier(hd->comm);
    }
    if (o->func == F(delete))
        return MPI_File_delete(s->sh->paths[o->handle], MPI_INFO_NULL);
    struct handle *hd = &s->h[o->handle];
    if (!hd->open)
        return MPI_ERR_FILE;
    if (o->func == F(close))
        return do_close(s, o);
    int done;
    int ret = do_meta(s, o, hd, &done);
    return done ? ret : do_data(s, o, hd);
}

#undef F

/* ---- POSIX ----------------------------------------------------------------------- */

#define P(name) IOT_F_POSIX_##name

/* Flags and modes are not recorded: a file is opened to read and write,
 * and created if it is not there. */
static int do_posix(struct state *s, const struct rp_op *o)
{
    const char *path = s->sh->paths[o->handle];
    int *fd = &s->fd[o->handle];
    FILE **fp = &s->fp[o->handle];
    size_t n = (size_t)o->bytes;
    off_t off = o->offset < 0 ? 0 : (off_t)o->offset;
    struct iovec rv = {s->rbuf, n}, wv = {s->wbuf, n};
    ssize_t r = 0;
    switch (o->func) {
    case P(open): case P(open64): case P(open_2): case P(open64_2):
    case P(openat): case P(openat64): case P(creat): case P(creat64):
        if (*fd >= 0)
            close(*fd);
        *fd = o->func == P(creat) || o->func == P(creat64) ? creat(path, 0644)
              : o->func == P(openat) || o->func == P(openat64)
                  ? openat(AT_FDCWD, path, O_RDWR | O_CREAT, 0644)
                  : open(path, O_RDWR | O_CREAT, 0644);
        return *fd < 0 ? -errno : 0;
    case P(fopen): case P(fopen64):
        if (*fp)
            fclose(*fp);
        if (!(*fp = fopen(path, "r+")) && !(*fp = fopen(path, "w+")))
            return -errno;
        return 0;
    case P(fread):
        return *fp && fread(s->rbuf, 1, n, *fp) == 0 && ferror(*fp) ? -EIO : 0;
    case P(fwrite):
        return *fp && fwrite(s->wbuf, 1, n, *fp) != n ? -EIO : 0;
    case P(fclose):
        r = *fp ? fclose(*fp) : 0;
        *fp = NULL;
        return r < 0 ? -errno : 0;
    default:
        break;
    }
    if (*fd < 0)
        return -EBADF;
    switch (o->func) {
    case P(close): r = close(*fd); *fd = -1; break;
    case P(read): r = read(*fd, s->rbuf, n); break;
    case P(write): r = write(*fd, s->wbuf, n); break;
    case P(pread): case P(pread64): r = pread(*fd, s->rbuf, n, off); break;
    case P(pwrite): case P(pwrite64): r = pwrite(*fd, s->wbuf, n, off); break;
    case P(readv): r = readv(*fd, &rv, 1); break;
    case P(writev): r = writev(*fd, &wv, 1); break;
    case P(preadv): case P(preadv64): r = preadv(*fd, &rv, 1, off); break;
    case P(pwritev): case P(pwritev64): r = pwritev(*fd, &wv, 1, off); break;
    case P(preadv2): case P(preadv64v2): r = preadv2(*fd, &rv, 1, off, 0); break;
    case P(pwritev2): case P(pwritev64v2): r = pwritev2(*fd, &wv, 1, off, 0); break;
    /* lseek's result is where it went. */
    case P(lseek): case P(lseek64): r = lseek(*fd, o->ret < 0 ? 0 : (off_t)o->ret, SEEK_SET); break;
    case P(fsync): r = fsync(*fd); break;
    case P(fdatasync): r = fdatasync(*fd); break;
    case P(ftruncate): case P(ftruncate64):
        r = ftruncate(*fd, (off_t)s->sh->extent[o->handle]);
        break;
    default: return 0;
    }
    return r < 0 ? -errno : 0;
}

#undef P

/* ---- the replay ------------------------------------------------------------------ */

struct timing {
    int skip_compute;
    double scale;
};

static void count(struct state *s, const struct rp_op *o, int64_t ns, int replayed)
{
    struct func_stat *f = &s->st.f[o->func < RP_FUNCS ? o->func : 0];
    uint64_t bytes = rp_data_bytes(o);
    f->calls++;
    f->bytes += bytes;
    f->orig_ns += (uint64_t)(o->t_end > o->t_start ? o->t_end - o->t_start : 0);
    if (replayed) {
        f->replayed++;
        f->replay_bytes += bytes;
        f->replay_ns += (uint64_t)ns;
    }
}

static void replay_rank(struct state *s, const struct rp_op *ops, size_t n, struct timing t)
{
    int64_t start = now_ns(), last_end = start;
    int64_t prev_orig_end = n ? ops[0].t_start : 0;
    double gap = 0;
    for (size_t i = 0; i < n; i++) {
        const struct rp_op *o = &ops[i];
        if (o->t_start > prev_orig_end)
            gap += (double)(o->t_start - prev_orig_end);
        if (o->t_end > prev_orig_end)
            prev_orig_end = o->t_end;
        if (o->skip) {
            s->st.skipped[o->skip]++;
            count(s, o, 0, 0);
            continue;
        }
        if (o->kind == RP_MPIIO && rp_classify(o->func).completion && o->together == 0)
            continue; /* replayed with the first record of its call */
        if (!t.skip_compute && gap * t.scale >= 1) {
            int64_t deadline = last_end + (int64_t)(gap * t.scale);
            int64_t before = now_ns();
            if (deadline > before) {
                wait_until(deadline);
                s->st.compute_ns += (uint64_t)(now_ns() - before);
            }
        }
        gap = 0;
        size_t together = o->kind == RP_MPIIO && o->together > 1 ? o->together : 1;
        if (o->sync && s->h[o->handle].open) {
            PMPI_Barrier(s->h[o->handle].comm); /* replay_plan.c, settle_shared_order */
            s->st.syncs++;
        }
        int64_t t0 = now_ns();
        int ret = o->kind == RP_MPIIO ? do_mpiio(s, o, together) : do_posix(s, o);
        last_end = now_ns();
        if (o->kind == RP_MPIIO ? ret != MPI_SUCCESS : ret < 0)
            report_error(s, iot_func_name(o->func), o->kind == RP_MPIIO ? ret : ret);
        for (size_t k = 0; k < together; k++)
            count(s, &o[k], last_end - t0, 1);
    }
    for (uint32_t h = 0; h < s->sh->n_handles; h++)
        if (s->h[h].open) { /* a close the trace lost */
            finish_requests(s, h);
            MPI_File_close(&s->h[h].fh);
        }
    s->st.replay_ns = (uint64_t)(last_end - start);
    s->st.orig_ns = n ? (uint64_t)(prev_orig_end - ops[0].t_start) : 0;
}

/* ---- rank 0: the plan, and handing it out ----------------------------------------- */

/* Everything but the ops, as one blob every rank gets. */
/* The blob's parts after the header: the handles' paths, their members
 * (padded to 8 bytes, for the extents that follow), the paths' extents,
 * the paths, the access modes and hints. */
static size_t members_size(size_t n_handles, size_t n_ranks)
{
    return (n_handles * n_ranks + 7) & ~(size_t)7;
}

static char *pack_shared(const struct rp_plan *p, size_t *len)
{
    size_t n = 4 * sizeof(uint32_t) + ((p->n_handles * sizeof(uint32_t) + 7) & ~(size_t)7) +
               members_size(p->n_handles, p->n_ranks) + p->n_paths * sizeof(uint64_t);
    for (size_t i = 0; i < p->n_paths; i++)
        n += strlen(p->paths[i]) + 1;
    for (size_t i = 0; i < p->n_infos; i++)
        n += strlen(p->infos[i]) + 1;
    char *b = calloc(1, n), *w = b;
    if (!b)
        return NULL;
    uint32_t hdr[4] = {(uint32_t)p->n_handles, (uint32_t)p->n_paths, (uint32_t)p->n_infos, 0};
    memcpy(w, hdr, sizeof hdr), w += sizeof hdr;
    size_t hp = p->n_handles * sizeof(uint32_t);
    memcpy(w, p->handle_path, hp), w += (hp + 7) & ~(size_t)7;
    memcpy(w, p->members, p->n_handles * p->n_ranks), w += members_size(p->n_handles, p->n_ranks);
    memcpy(w, p->extent, p->n_paths * sizeof(uint64_t)), w += p->n_paths * sizeof(uint64_t);
    for (size_t i = 0; i < p->n_paths; i++) {
        size_t l = strlen(p->paths[i]) + 1;
        memcpy(w, p->paths[i], l), w += l;
    }
    for (size_t i = 0; i < p->n_infos; i++) {
        size_t l = strlen(p->infos[i]) + 1;
        memcpy(w, p->infos[i], l), w += l;
    }
    *len = n;
    return b;
}

static int unpack_shared(struct shared *sh, char *b)
{
    uint32_t hdr[4];
    memcpy(hdr, b, sizeof hdr);
    sh->n_handles = hdr[0];
    sh->n_paths = hdr[1];
    sh->n_infos = hdr[2];
    char *r = b + sizeof hdr;
    sh->handle_path = (uint32_t *)(void *)r;
    r += (sh->n_handles * sizeof(uint32_t) + 7) & ~(size_t)7;
    sh->members = (uint8_t *)r, r += members_size(sh->n_handles, (size_t)nprocs);
    sh->extent = (uint64_t *)(void *)r, r += sh->n_paths * sizeof(uint64_t);
    sh->paths = calloc(sh->n_paths + 1, sizeof *sh->paths);
    sh->infos = calloc(sh->n_infos + 1, sizeof *sh->infos);
    if (!sh->paths || !sh->infos)
        return -1;
    for (uint32_t i = 0; i < sh->n_paths; i++) {
        sh->paths[i] = r;
        r += strlen(r) + 1;
    }
    for (uint32_t i = 0; i < sh->n_infos; i++) {
        sh->infos[i] = r;
        r += strlen(r) + 1;
    }
    sh->blob = b;
    return 0;
}

static void describe_losses(const struct rp_plan *p, char *msg, size_t len)
{
    size_t w = (size_t)snprintf(msg, len,
                                "job '%s' is incomplete: %llu events were lost (", opt_job,
                                (unsigned long long)p->lost_events);
    for (size_t i = 0; i < p->n_losses && w < len; i++) {
        const struct rp_loss *l = &p->losses[i];
        const char *why = l->reason < XP_DROP_REASONS ? xp_drop_reasons[l->reason] : "unknown";
        char who[32];
        if (l->rank >= 0)
            snprintf(who, sizeof who, "rank %d", l->rank);
        else
            snprintf(who, sizeof who, "a process without a rank");
        w += (size_t)snprintf(msg + w, len - w, "%s%s: %llu %s", i ? "; " : "", who,
                              (unsigned long long)l->events, why);
    }
    if (w < len)
        snprintf(msg + w, len - w, "); the calls they held would be missing from the replay. "
                 "--allow-incomplete replays what there is");
}

/* Rank 0: 0 and the plan, or 1 with msg to print. */
static int make_plan(struct rp_plan *p, char *msg, size_t len)
{
    if (rp_plan_read(opt_store, opt_job, p, msg, len) < 0)
        return 1;
    if (p->lost_events && !opt_allow_incomplete) {
        describe_losses(p, msg, len);
        return 1;
    }
    if (p->skipped_helpers)
        fprintf(stderr, "%s: warning: %llu events of processes without an MPI rank in job '%s' "
                "are not replayed\n", spec.program, (unsigned long long)p->skipped_helpers,
                opt_job);
    if (p->n_ranks != (uint32_t)nprocs) {
        snprintf(msg, len, "job '%s' has %u ranks (0 to %u); run iotrace-replay under "
                 "mpiexec -n %u (this run has %d processes)", opt_job, p->n_ranks,
                 p->n_ranks ? p->n_ranks - 1 : 0, p->n_ranks, nprocs);
        return 1;
    }
    if (rp_plan_prepare(p, opt_target, opt_posix_under, msg, len) < 0)
        return 1;
    /* Only the directories of files the replay uses: those of the calls it
     * leaves out (the MPI runtime's /dev/shm, /proc, /sys) are mapped under
     * the target too, and would be made there empty. */
    for (size_t i = 0; i < p->n_paths; i++) {
        if (i > 0 && !p->replayed[i])
            continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", p->paths[i]);
        char *slash = strrchr(dir, '/');
        if (i == 0)
            slash = dir + strlen(dir);
        if (slash && slash > dir) {
            *slash = 0;
            if (iot_mkdir_p(dir, 0755) < 0) {
                snprintf(msg, len, "cannot create %s: %s", dir, strerror(errno));
                return 1;
            }
        }
    }
    /* MPI-IO files exist before the ranks open them: GlusterFS's FUSE client
     * turns direct I/O off for a file several processes open while it is
     * being created (docs/gluster.md), and the page cache would then answer
     * the replay's reads.  By system call, so that a traced replay does not
     * record this preparation as the job's I/O. */
    for (size_t h = 0; h < p->n_handles - p->n_comms; h++) {
        long fd = syscall(SYS_openat, AT_FDCWD, p->paths[p->handle_path[h]], O_WRONLY | O_CREAT,
                          0644);
        if (fd < 0) {
            snprintf(msg, len, "cannot create %s: %s", p->paths[p->handle_path[h]],
                     strerror(errno));
            return 1;
        }
        syscall(SYS_close, fd);
    }
    return 0;
}

/* Every rank's ops from rank 0, each rank its own. */
static struct rp_op *scatter_ops(const struct rp_plan *p, size_t *n)
{
    int *counts = NULL, *displs = NULL, mine = 0;
    char *all = NULL;
    if (rank == 0) {
        counts = calloc((size_t)nprocs, sizeof *counts);
        displs = calloc((size_t)nprocs, sizeof *displs);
        size_t total = 0;
        for (int r = 0; r < nprocs; r++)
            total += p->n_ops[r] * sizeof(struct rp_op);
        if (total > INT32_MAX) {
            fprintf(stderr, "%s: the job has too many events to hand out (%zu bytes)\n",
                    spec.program, total);
            MPI_Abort(MPI_COMM_WORLD, IOT_EXIT_FAILURE);
        }
        all = malloc(total ? total : 1);
        size_t at = 0;
        for (int r = 0; r < nprocs; r++) {
            counts[r] = (int)(p->n_ops[r] * sizeof(struct rp_op));
            displs[r] = (int)at;
            memcpy(all + at, p->ops[r], (size_t)counts[r]);
            at += (size_t)counts[r];
        }
    }
    MPI_Scatter(counts, 1, MPI_INT, &mine, 1, MPI_INT, 0, MPI_COMM_WORLD);
    struct rp_op *ops = malloc(mine ? (size_t)mine : 1);
    MPI_Scatterv(all, counts, displs, MPI_BYTE, ops, mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(all);
    free(counts);
    free(displs);
    *n = (size_t)mine / sizeof(struct rp_op);
    return ops;
}

/* ---- the report ------------------------------------------------------------------ */

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static void total_of(const struct rank_stat *all, struct rank_stat *t)
{
    memset(t, 0, sizeof *t);
    for (int r = 0; r < nprocs; r++) {
        const struct rank_stat *s = &all[r];
        if (s->orig_ns > t->orig_ns)
            t->orig_ns = s->orig_ns;
        if (s->replay_ns > t->replay_ns)
            t->replay_ns = s->replay_ns;
        t->compute_ns += s->compute_ns;
        t->added_seeks += s->added_seeks;
        t->added_waits += s->added_waits;
        t->syncs += s->syncs;
        t->strided_views += s->strided_views;
        t->errors += s->errors;
        for (int k = 0; k < RP_SKIP_REASONS; k++)
            t->skipped[k] += s->skipped[k];
        for (int f = 0; f < RP_FUNCS; f++) {
            t->f[f].calls += s->f[f].calls;
            t->f[f].orig_ns += s->f[f].orig_ns;
            t->f[f].bytes += s->f[f].bytes;
            t->f[f].replayed += s->f[f].replayed;
            t->f[f].replay_ns += s->f[f].replay_ns;
            t->f[f].replay_bytes += s->f[f].replay_bytes;
        }
    }
}

static void text_rank(const char *who, const struct rank_stat *s)
{
    printf("%s: original %.3f ms, replayed %.3f ms (time between calls kept %.3f ms); "
           "strided views %llu, added seeks %llu, added waits %llu, added barriers %llu, "
           "failed %llu", who, ms(s->orig_ns), ms(s->replay_ns), ms(s->compute_ns),
           (unsigned long long)s->strided_views, (unsigned long long)s->added_seeks,
           (unsigned long long)s->added_waits, (unsigned long long)s->syncs,
           (unsigned long long)s->errors);
    for (int k = 1; k < RP_SKIP_REASONS; k++)
        if (s->skipped[k])
            printf(", not replayed (%s) %llu", rp_skip_names[k],
                   (unsigned long long)s->skipped[k]);
    printf("\n  %-32s %8s %10s %12s %12s %8s\n", "function", "calls", "replayed", "orig_ms",
           "replay_ms", "ratio");
    for (int f = 0; f < RP_FUNCS; f++) {
        const struct func_stat *x = &s->f[f];
        if (!x->calls)
            continue;
        char ratio[32] = "-";
        if (x->orig_ns && x->replayed)
            snprintf(ratio, sizeof ratio, "%.2f", (double)x->replay_ns / (double)x->orig_ns);
        printf("  %-32s %8llu %10llu %12.3f %12.3f %8s   %llu bytes\n", iot_func_name((unsigned)f),
               (unsigned long long)x->calls, (unsigned long long)x->replayed, ms(x->orig_ns),
               ms(x->replay_ns), ratio, (unsigned long long)x->bytes);
    }
}

static void set_u64(json_t *o, const char *key, uint64_t v)
{
    json_object_set_new(o, key, json_integer((json_int_t)v));
}

static json_t *json_stat(const struct rank_stat *s, int rank_no)
{
    json_t *o = json_object(), *fs = json_array(), *sk = json_object();
    if (rank_no >= 0)
        json_object_set_new(o, "rank", json_integer(rank_no));
    set_u64(o, "original_ns", s->orig_ns);
    set_u64(o, "replayed_ns", s->replay_ns);
    set_u64(o, "compute_ns", s->compute_ns);
    set_u64(o, "strided_views", s->strided_views);
    set_u64(o, "added_seeks", s->added_seeks);
    set_u64(o, "added_waits", s->added_waits);
    set_u64(o, "added_barriers", s->syncs);
    set_u64(o, "failed", s->errors);
    for (int k = 1; k < RP_SKIP_REASONS; k++)
        json_object_set_new(sk, rp_skip_names[k], json_integer((json_int_t)s->skipped[k]));
    json_object_set_new(o, "not_replayed", sk);
    for (int f = 0; f < RP_FUNCS; f++) {
        const struct func_stat *x = &s->f[f];
        if (!x->calls)
            continue;
        json_t *j = json_object();
        json_object_set_new(j, "func", json_string(iot_func_name((unsigned)f)));
        set_u64(j, "calls", x->calls);
        set_u64(j, "bytes", x->bytes);
        set_u64(j, "original_ns", x->orig_ns);
        set_u64(j, "replayed_calls", x->replayed);
        set_u64(j, "replayed_bytes", x->replay_bytes);
        set_u64(j, "replayed_ns", x->replay_ns);
        json_array_append_new(fs, j);
    }
    json_object_set_new(o, "functions", fs);
    return o;
}

static void report(const struct rank_stat *all, const struct timing *t)
{
    struct rank_stat *total = malloc(sizeof *total);
    total_of(all, total);
    if (opt_json) {
        json_t *o = json_object(), *ranks = json_array();
        json_object_set_new(o, "job", json_string(opt_job));
        json_object_set_new(o, "target", json_string(opt_target));
        json_object_set_new(o, "ranks", json_integer(nprocs));
        json_object_set_new(o, "compute", json_string(t->skip_compute ? "skip" : "keep"));
        json_object_set_new(o, "time_scale", json_real(t->scale));
        for (int r = 0; r < nprocs; r++)
            json_array_append_new(ranks, json_stat(&all[r], r));
        json_object_set_new(o, "per_rank", ranks);
        json_object_set_new(o, "total", json_stat(total, -1));
        json_dumpf(o, stdout, JSON_COMPACT);
        fputc('\n', stdout);
        json_decref(o);
    } else {
        printf("iotrace-replay: job %s, %d ranks, onto %s; time between calls %s (scale %g)\n",
               opt_job, nprocs, opt_target, t->skip_compute ? "skipped" : "kept", t->scale);
        for (int r = 0; r < nprocs; r++) {
            char who[32];
            snprintf(who, sizeof who, "rank %d", r);
            text_rank(who, &all[r]);
        }
        text_rank("all ranks (times: the longest rank; per function: sums)", total);
    }
    fflush(stdout);
    free(total);
}

static struct timing check_options(int argc, int first)
{
    if (first < argc)
        usage_error("unexpected argument");
    if (!opt_store || !opt_store[0] || !opt_job || !opt_job[0] || !opt_target || !opt_target[0])
        usage_error("--store DIR, --job ID and --target PATH are required");
    struct timing t = {0, 1.0};
    if (opt_compute && strcmp(opt_compute, "keep") != 0 && strcmp(opt_compute, "skip") != 0)
        usage_error("--compute takes keep or skip");
    t.skip_compute = opt_compute && strcmp(opt_compute, "skip") == 0;
    if (opt_time_scale) {
        char *end;
        errno = 0;
        t.scale = strtod(opt_time_scale, &end);
        if (end == opt_time_scale || *end || errno || !isfinite(t.scale) || t.scale < 0)
            usage_error("--time-scale takes a number, 0 or more");
        if (t.skip_compute)
            usage_error("--time-scale scales the time --compute skip leaves out");
    }
    if (t.scale == 0)
        t.skip_compute = 1;
    return t;
}

/* Traced itself, the replay names the job it replays: the client library
 * reads IOTRACE_JOB_NAME when it loads, so it is set and the program
 * started again, before MPI_Init. */
static void name_the_replay(char **argv)
{
    const char *preload = getenv("LD_PRELOAD");
    if (!preload || !strstr(preload, "libiotrace-client") || getenv("IOTRACE_JOB_NAME"))
        return;
    char name[512];
    snprintf(name, sizeof name, "replay-of:%s", opt_job);
    setenv("IOTRACE_JOB_NAME", name, 1);
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    iot_log_init(spec.program, IOT_LOG_WARN);
    int first = iot_opts_parse(&spec, argc, argv);
    struct timing t = check_options(argc, first);
    name_the_replay(argv);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    struct rp_plan plan = {0};
    char msg[4096] = "";
    int rc = rank == 0 ? make_plan(&plan, msg, sizeof msg) : 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "%s: %s\n", spec.program, msg);
        rp_plan_free(&plan);
        MPI_Finalize();
        return rc;
    }
    size_t len = 0;
    char *blob = rank == 0 ? pack_shared(&plan, &len) : NULL;
    unsigned long long blen = len;
    MPI_Bcast(&blen, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank != 0)
        blob = malloc(blen ? blen : 1);
    MPI_Bcast(blob, (int)blen, MPI_BYTE, 0, MPI_COMM_WORLD);
    struct shared sh;
    unpack_shared(&sh, blob);
    size_t n = 0;
    struct rp_op *ops = scatter_ops(&plan, &n);
    rp_plan_free(&plan);

    struct state s = {.sh = &sh};
    s.h = calloc(sh.n_handles + 1, sizeof *s.h);
    s.fd = malloc((sh.n_paths + 1) * sizeof *s.fd);
    s.fp = calloc(sh.n_paths + 1, sizeof *s.fp);
    uint64_t biggest = 1;
    for (size_t i = 0; i < n; i++)
        if (ops[i].bytes > biggest)
            biggest = ops[i].bytes;
    s.wbuf = malloc(biggest);
    s.rbuf = malloc(biggest);
    if (!s.h || !s.fd || !s.fp || !s.wbuf || !s.rbuf) {
        fprintf(stderr, "%s: rank %d: out of memory\n", spec.program, rank);
        MPI_Abort(MPI_COMM_WORLD, IOT_EXIT_FAILURE);
    }
    for (uint32_t i = 0; i <= sh.n_paths; i++)
        s.fd[i] = -1;
    memset(s.wbuf, 'r', biggest);
    MPI_Info_create(&s.empty_info);

    PMPI_Barrier(MPI_COMM_WORLD); /* not the program's: not recorded when traced */
    replay_rank(&s, ops, n, t);
    for (uint32_t i = 0; i < sh.n_paths; i++) {
        if (s.fd[i] >= 0)
            close(s.fd[i]);
        if (s.fp[i])
            fclose(s.fp[i]);
    }

    struct rank_stat *all = rank == 0 ? calloc((size_t)nprocs, sizeof *all) : NULL;
    MPI_Gather(&s.st, (int)sizeof s.st, MPI_BYTE, all, (int)sizeof s.st, MPI_BYTE, 0,
               MPI_COMM_WORLD);
    if (rank == 0)
        report(all, &t);
    free(all);
    MPI_Info_free(&s.empty_info);
    free(s.h);
    free(s.fd);
    free(s.fp);
    free(s.req);
    free(s.wbuf);
    free(s.rbuf);
    free(ops);
    free(sh.paths);
    free(sh.infos);
    free(blob);
    MPI_Finalize();
    return IOT_EXIT_OK;
}
