/* The columns of --jsonl and --csv.  Every row has every column and an
 * integer column is always an integer: where a value does not exist it holds
 * a sentinel the table documents (-1, 0), never null, so that pandas keeps
 * integer dtypes.  Names avoid pandas' DataFrame attributes (`rank`,
 * `count`), so df.mpi_rank works as well as df["mpi_rank"]. */
#include "export_rows.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_match.h"
#include "export_json.h"
#include "iot_functions.h"
#include "stats_report.h"
#include "wire.h"

enum col_type { COL_STR, COL_INT };

struct column {
    const char *name;
    enum col_type type;
    const char *values; /* the enumeration, "|"-separated, or NULL */
    const char *meaning;
};

/* Order: the order of the JSON keys and of the CSV columns. */
#define XP_COLUMNS(X)                                                                          \
    X(kind, COL_STR, "mpiio|posix|disk|drop", "what the row is: an MPI-IO call, a POSIX call, a disk operation on a storage server, or a drop record (events lost, counted in `dropped`)") \
    X(role, COL_STR, "call|completion|end|view|sync|op|drop", "`call` for an MPI-IO or POSIX call; `completion` for `MPI_Wait*`/`MPI_Test*` and `end` for a split collective's `*_end`, which repeat the bytes of the call they complete (sum `bytes` over `call` rows only); `view` for `MPI_File_set_view`, whose `offset`, `bytes` and `xfer` describe the view it set (first byte, block length, distance between blocks), not data; `sync` for an `MPI_Barrier`, `MPI_Send`, `MPI_Recv`, `MPI_Isend` or `MPI_Irecv` (recorded with `IOTRACE_SYNC=1`; an `MPI_Irecv` where it completed), whose `offset` is its communicator's id; a barrier's `bytes` is the communicator's size and `coll_seq` its number on it, a message's `bytes` its size, `xfer` the peer's rank in `MPI_COMM_WORLD` and `coll_seq` its tag; `op` for a disk operation; `drop` for a drop record") \
    X(job, COL_STR, NULL, "job id; null (CSV: empty) when the event has none") \
    X(node, COL_STR, NULL, "node that recorded the event") \
    X(mpi_rank, COL_INT, NULL, "MPI rank; -1 for disk operations and processes outside MPI") \
    X(pid, COL_INT, NULL, "process id on its node") \
    X(uid, COL_INT, NULL, "user the process ran as, as the agent learned it from the kernel; -1 when not known") \
    X(tid, COL_INT, NULL, "thread id (Linux tid); for a disk operation, the storage server's thread") \
    X(func, COL_STR, NULL, "function (`MPI_File_write_at`, `pwrite`, disk `writev`, ...); null for drop records") \
    X(callid, COL_STR, NULL, "CallID of the MPI-IO call the event belongs to, hexadecimal (`0x...`); null outside any call") \
    X(file, COL_STR, NULL, "absolute path of the file; null when not known") \
    X(mpi_info, COL_STR, NULL, "`MPI_File_open`: its access mode, the `MPI_MODE_` names joined by a vertical bar, and the hints it was given, as `amode=RDWR;cb_nodes=1;...` (`\\`, `;` and `=` inside a key or value escaped with `\\`); `MPI_File_set_info`: the hints; null otherwise, and in traces made before they were recorded") \
    X(offset, COL_INT, NULL, "byte offset where the access starts; -1 when the call has none or it is not known (stdio, O_APPEND)") \
    X(bytes, COL_INT, NULL, "bytes requested (MPI-IO: count times the datatype's size; disk: the operation's size); 0 for drop records") \
    X(xfer, COL_INT, NULL, "MPI-IO: bytes transferred (from the MPI_Status); -1 for other kinds") \
    X(ret, COL_INT, NULL, "return value: MPI error code, or the POSIX/disk result (bytes, descriptor, or -errno)") \
    X(t_start, COL_INT, NULL, "start, ns since the Unix epoch on the collector's clock (unless --no-align); -1 when not known") \
    X(t_end, COL_INT, NULL, "end, same clock; -1 when not known") \
    X(coll_seq, COL_INT, NULL, "collective calls: the sequence number shared by the ranks' parts of one collective on one file; 0 otherwise") \
    X(server, COL_STR, NULL, "disk operations: the storage server (brick) that did it; null otherwise") \
    X(reason, COL_STR, "buffer_full|send_failed|internal|unreadable|lost|agent_full|over_quota", "drop records: why the events were lost; null otherwise") \
    X(dropped, COL_INT, NULL, "drop records: how many events were lost; 0 otherwise")

enum {
#define X(name, type, values, meaning) COL_##name,
    XP_COLUMNS(X)
#undef X
    N_COLS
};

static const struct column columns[N_COLS] = {
#define X(name, type, values, meaning) {#name, type, values, meaning},
    XP_COLUMNS(X)
#undef X
};

/* A text of the program's own, plain ASCII, its length known. */
struct own {
    const char *s;
    size_t len;
};
#define OWN(lit) ((struct own){"" lit, sizeof(lit) - 1})

static const struct own kind_names[] = {OWN("mpiio"), OWN("posix"), OWN("disk"), OWN("drop")};
const char *const xp_drop_reasons[XP_DROP_REASONS] = {
    "buffer_full", "send_failed", "internal", "unreadable", "lost", "agent_full", "over_quota"};

struct value {
    const char *s; /* COL_STR; NULL: none */
    int64_t i;     /* COL_INT */
    size_t len;    /* of s, set by measure() unless known */
    unsigned char json_plain, csv_plain; /* s is written as it is (measure()) */
    unsigned char known; /* the program's own text: len set, plain */
};

/* Whether the strings of the interned tables (nodes, jobs, files, servers)
 * need escaping, by address: they stay put while rows are written, and a
 * file's path is in thousands of rows.  Direct-mapped; a miss looks again. */
#define PLAIN_CACHE 1024
struct plain_entry {
    const char *s;
    size_t len;
    unsigned char json_plain, csv_plain;
};

struct xp_rows {
    FILE *out;
    int csv;
    char callid[24], func[16], reason[16];
    struct xp_buf buf; /* rows not written out yet */
    struct plain_entry plain[PLAIN_CACHE];
};

/* Rows go out in writes of about this much. */
#define ROWS_FLUSH_AT (1u << 20)

const char *xp_func_name(unsigned func, size_t *len)
{
    static struct own cache[1024];
    if (func < sizeof cache / sizeof *cache && cache[func].s) {
        *len = cache[func].len;
        return cache[func].s;
    }
    const char *t = iot_func_name(func);
    struct own n = {t, t ? strlen(t) : 0};
    if (t && func < sizeof cache / sizeof *cache)
        cache[func] = n;
    *len = n.len;
    return n.s;
}

static struct own role_of(const struct xp_event *ev)
{
    switch (ev->kind) {
    case XP_DISK: return OWN("op");
    case XP_DROP: return OWN("drop");
    case XP_MPIIO: break;
    default: return OWN("call");
    }
    if (ev->func == IOT_F_MPIIO_MPI_File_set_view)
        return OWN("view");
    if (ev->func == IOT_F_MPIIO_MPI_Barrier || ev->func == IOT_F_MPIIO_MPI_Send ||
        ev->func == IOT_F_MPIIO_MPI_Recv || ev->func == IOT_F_MPIIO_MPI_Isend ||
        ev->func == IOT_F_MPIIO_MPI_Irecv)
        return OWN("sync");
    if (!iot_match_is_completion(ev->func))
        return OWN("call");
    const char *name = iot_func_name(ev->func);
    size_t n = name ? strlen(name) : 0;
    return n > 4 && strcmp(name + n - 4, "_end") == 0 ? OWN("end") : OWN("completion");
}

static void set_own(struct value *v, const char *s, size_t len)
{
    v->s = s;
    v->len = len;
    v->json_plain = v->csv_plain = v->known = 1;
}

static void row_values(struct xp_rows *w, const struct xp_data *d, const struct xp_event *ev,
                       struct value *v)
{
    const struct xp_producer *p = &d->producers[ev->producer];
    int drop = ev->kind == XP_DROP;
    memset(v, 0, N_COLS * sizeof *v);
    set_own(&v[COL_kind], kind_names[ev->kind].s, kind_names[ev->kind].len);
    struct own role = role_of(ev);
    set_own(&v[COL_role], role.s, role.len);
    v[COL_job].s = ev->job ? xp_string(&d->jobs, ev->job) : NULL;
    v[COL_node].s = xp_string(&d->nodes, p->node);
    v[COL_mpi_rank].i = p->kind == IOTRACE__PRODUCER_KIND__PRODUCER_CLIENT && p->rank >= 0 &&
                                ev->kind != XP_DISK
                            ? p->rank
                            : -1;
    v[COL_pid].i = p->pid;
    v[COL_uid].i = p->uid < 0 ? -1 : p->uid;
    v[COL_tid].i = ev->tid;
    v[COL_t_start].i = ev->t_start;
    v[COL_t_end].i = ev->t_end;
    v[COL_offset].i = -1;
    v[COL_xfer].i = -1;
    if (drop) {
        if (ev->func < XP_DROP_REASONS) {
            v[COL_reason].s = xp_drop_reasons[ev->func];
        } else {
            int len = snprintf(w->reason, sizeof w->reason, "%u", ev->func);
            set_own(&v[COL_reason], w->reason, (size_t)len);
        }
        v[COL_dropped].i = (int64_t)ev->bytes;
        return;
    }
    size_t len;
    const char *name = xp_func_name(ev->func, &len);
    if (name) {
        set_own(&v[COL_func], name, len);
    } else {
        int n = snprintf(w->func, sizeof w->func, "%u", ev->func);
        set_own(&v[COL_func], w->func, (size_t)n);
    }
    if (ev->callid || ev->kind == XP_MPIIO) /* "0x%llx", without printf's cost per row */
        set_own(&v[COL_callid], w->callid, xp_hex(w->callid, ev->callid));
    v[COL_file].s = ev->file ? xp_file_path(d, ev->producer, ev->file) : NULL;
    v[COL_offset].i = xp_event_offset(ev);
    v[COL_mpi_info].s = xp_event_info(d, ev);
    v[COL_bytes].i = (int64_t)ev->bytes;
    if (ev->kind == XP_MPIIO)
        v[COL_xfer].i = (int64_t)ev->xfer;
    v[COL_ret].i = ev->ret;
    v[COL_coll_seq].i = ev->kind == XP_MPIIO ? (int64_t)ev->coll_seq : 0;
    if (ev->kind == XP_DISK)
        v[COL_server].s = xp_string(&d->servers, p->server);
}

static json_t *row_json(const struct value *v)
{
    json_t *o = json_object();
    for (int c = 0; o && c < N_COLS; c++) {
        json_t *x = columns[c].type == COL_INT ? json_integer(v[c].i)
                    : v[c].s                    ? iot_json_text(v[c].s)
                                                : json_null();
        json_object_set_new(o, columns[c].name, x);
    }
    return o;
}

json_t *xp_rows_json(const struct xp_data *d, const struct xp_event *ev)
{
    struct xp_rows scratch = {0};
    struct value v[N_COLS];
    row_values(&scratch, d, ev, v);
    return row_json(v);
}

static const struct plain_entry *plain_of(struct plain_entry *cache, const char *s)
{
    struct plain_entry *e = &cache[((uintptr_t)s >> 3) % PLAIN_CACHE];
    if (e->s != s) {
        e->s = s;
        e->len = strlen(s);
        e->json_plain = (unsigned char)xp_json_plain(s, e->len);
        e->csv_plain = !strpbrk(s, ",\"\r\n");
    }
    return e;
}

/* One string column's length, and whether it goes out as it is: the
 * strings of the stored tables (nodes, jobs, files, servers) through the
 * cache; the program's own texts (kind, role, function, CallID) were
 * measured where they were set. */
static inline __attribute__((always_inline)) size_t measure_col(struct plain_entry *cache,
                                                                struct value *v)
{
    if (!v->s || v->known)
        return v->len;
    const struct plain_entry *e = plain_of(cache, v->s);
    v->len = e->len;
    v->json_plain = e->json_plain;
    v->csv_plain = e->csv_plain;
    return e->len;
}

/* The string columns alone, the table unrolled: no test per integer. */
#define MEASURE_COL_INT(c)
#define MEASURE_COL_STR(c) strings += measure_col(w->plain, &v[COL_##c]);
#define MEASURE(name, type, values, meaning) MEASURE_##type(name)

/* The sum of a row's string lengths. */
static size_t measure(struct xp_rows *w, struct value *v)
{
    size_t strings = 0;
    XP_COLUMNS(MEASURE)
    return strings;
}

/* The most a row takes besides its strings (escaped at worst, 6 bytes a
 * byte, plus quotes): keys and integers at their longest. */
#define X(name, type, values, meaning) + sizeof(",\"" #name "\":") + 24
static const size_t row_fixed = 8 XP_COLUMNS(X);
#undef X

static inline __attribute__((always_inline)) char *put_json_value(char *p, const struct value *v)
{
    if (!v->s) {
        memcpy(p, "null", 4);
        return p + 4;
    }
    if (!v->json_plain)
        return xp_put_json_string(p, v->s, v->len);
    *p++ = '"';
    memcpy(p, v->s, v->len);
    p += v->len;
    *p++ = '"';
    return p;
}

/* One column: its key (with the comma before it), then its value; a key's
 * size is known when compiled, so its copy is a move or two. */
#define PUT_COL_INT(c) p = xp_put_int(p, v[COL_##c].i);
#define PUT_COL_STR(c) p = put_json_value(p, &v[COL_##c]);
#define PUT_JSON(name, type, values, meaning)                                       \
    memcpy(p, ",\"" #name "\":", sizeof(",\"" #name "\":") - 1);                   \
    p += sizeof(",\"" #name "\":") - 1;                                            \
    PUT_##type(name)

/* The row as json_dumpf(row_json(v), JSON_COMPACT) writes it, keys in
 * the table's order (export.text checks the two against each other). */
static void put_json_row(struct xp_rows *w, struct xp_buf *b, struct value *v, char end)
{
    char *p = xp_buf_reserve(b, row_fixed + 6 * measure(w, v) + 2 * N_COLS);
    if (!p)
        return;
    char *start = p;
    XP_COLUMNS(PUT_JSON)
    *start = '{'; /* over the first key's comma */
    *p++ = '}';
    if (end)
        *p++ = end;
    xp_buf_commit(b, p);
}

void xp_rows_json_text(struct xp_rows *w, struct xp_buf *b, const struct xp_data *d,
                       const struct xp_event *ev)
{
    struct value v[N_COLS];
    row_values(w, d, ev, v);
    put_json_row(w, b, v, 0);
}

static char *put_csv_value(char *p, const struct value *v)
{
    if (!v->s)
        return p;
    if (!v->csv_plain)
        return xp_put_csv_field(p, v->s, v->len);
    memcpy(p, v->s, v->len);
    return p + v->len;
}

#define PUT_CSV_INT(c) p = xp_put_int(p, v[COL_##c].i);
#define PUT_CSV_STR(c) p = put_csv_value(p, &v[COL_##c]);
#define PUT_CSV(name, type, values, meaning)                                        \
    if (COL_##name)                                                                 \
        *p++ = ','; /* not before the first column: a constant test */              \
    PUT_CSV_##type(name)
#define PUT_CSV_COL_INT PUT_CSV_INT
#define PUT_CSV_COL_STR PUT_CSV_STR

static void put_csv_row(struct xp_rows *w, struct xp_buf *b, struct value *v)
{
    char *p = xp_buf_reserve(b, row_fixed + 2 * measure(w, v) + 2 * N_COLS);
    if (!p)
        return;
    XP_COLUMNS(PUT_CSV)
    *p++ = '\n';
    xp_buf_commit(b, p);
}

struct xp_rows *xp_rows_open(FILE *out, const char *format)
{
    struct xp_rows *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->out = out;
    w->csv = strcmp(format, "csv") == 0;
    if (!out) /* scratch for xp_rows_json_text alone */
        return w;
    if (w->csv) {
        int bad = 0;
        for (int c = 0; c < N_COLS; c++)
            bad |= fprintf(out, "%s%s", c ? "," : "", columns[c].name) < 0;
        if (bad || fputc('\n', out) == EOF) {
            free(w);
            return NULL;
        }
    }
    return w;
}

int xp_rows_write(struct xp_rows *w, const struct xp_data *d, const struct xp_event *ev)
{
    struct value v[N_COLS];
    row_values(w, d, ev, v);
    if (w->csv)
        put_csv_row(w, &w->buf, v);
    else
        put_json_row(w, &w->buf, v, '\n');
    return w->buf.len >= ROWS_FLUSH_AT || w->buf.failed ? xp_buf_flush(&w->buf, w->out) : 0;
}

int xp_rows_close(struct xp_rows *w)
{
    int rc = !w->out || (xp_buf_flush(&w->buf, w->out) == 0 && fflush(w->out) == 0 &&
                         !ferror(w->out))
                 ? 0
                 : -1;
    xp_buf_free(&w->buf);
    free(w);
    return rc;
}

int xp_rows_schema(FILE *out)
{
    json_t *props = json_object(), *required = json_array();
    for (int c = 0; c < N_COLS; c++) {
        const struct column *col = &columns[c];
        json_t *p = json_object();
        if (col->type == COL_INT)
            json_object_set_new(p, "type", json_string("integer"));
        else if (col->values || c == COL_node)
            json_object_set_new(p, "type", json_string("string"));
        else
            json_object_set_new(p, "type", json_pack("[ss]", "string", "null"));
        if (col->values) {
            json_t *e = json_array();
            char buf[128];
            snprintf(buf, sizeof buf, "%s", col->values);
            for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
                json_array_append_new(e, json_string(t));
            if (c == COL_reason)
                json_array_append_new(e, json_null());
            json_object_set_new(p, "enum", e);
            if (c == COL_reason)
                json_object_set_new(p, "type", json_pack("[ss]", "string", "null"));
        }
        json_object_set_new(p, "description", json_string(col->meaning));
        json_object_set_new(props, col->name, p);
        json_array_append_new(required, json_string(col->name));
    }
    json_t *schema = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:b}",
                               "$schema", "https://json-schema.org/draft/2020-12/schema",
                               "title", XP_ROWS_SCHEMA,
                               "description", "one line of iotrace-export --jsonl: one event",
                               "type", "object", "properties", props, "required", required,
                               "additionalProperties", 0);
    if (!schema)
        return -1;
    int rc = json_dumpf(schema, out, JSON_INDENT(2));
    json_decref(schema);
    return rc < 0 || fputc('\n', out) == EOF ? -1 : 0;
}
