/* The SLOG-2 writer (collector/slog2_write.c), checked through the
 * project's reader and invariant checker (slog2_read.c, slog2_check.c):
 *
 * - round trip: a few hundred states, arrows and events on several
 *   timelines come back exactly (times, timelines, categories, info
 *   values), with the categories (Preview_* included) and line-ID maps, and
 *   the checker finds nothing;
 * - multi-level trees: a tiny leaf size gives a deep tree, with 2 and 4
 *   children per node, valid and holding every drawable once;
 * - the reference inputs: the trace_sample texts that Java's traceTOslog2
 *   turned into the .slog2 files of ../shared/reference/slog2 (argv[1])
 *   are written with the same options and compared with Java's files, node
 *   by node and byte by byte (composites are not written, so of data.txt
 *   only the line-ID maps are compared);
 * - memory: after two million drawables the writer's heap has grown only by
 *   the tree levels added since two hundred thousand (the open path);
 * - errors: an unwritable path, drawables out of end-time order, undefined
 *   or mismatched categories, bad info values, an empty trace and a write
 *   error all give a clear message and no corrupt file. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#include <math.h>

#include "slog2_read.h"
#include "slog2_write.h"

static const char *ref_dir;
static char tmp_dir[64];

/* ---- helpers ---- */

static const char *tmp_path(const char *name)
{
    static char buf[2][256];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

static int make_tmp_dir(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/iotrace-slog2w-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state)
{
    (void)state;
    char cmd[128];
    if (getenv("IOTRACE_KEEP_TMP")) { /* to look at the files after a failure */
        print_message("kept %s\n", tmp_dir);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void print_violation(void *ctx, const char *msg)
{
    (void)ctx;
    print_message("violation: %s\n", msg);
}

static struct iot_slog2 *open_read(const char *path)
{
    char err[512];
    struct iot_slog2 *r = iot_slog2_open(path, err, sizeof err);
    if (!r)
        print_message("%s\n", err);
    assert_non_null(r);
    return r;
}

static long check_file(const char *path)
{
    struct iot_slog2 *r = open_read(path);
    long v = iot_slog2_check(r, print_violation, NULL);
    if (v < 0)
        print_message("%s\n", iot_slog2_error(r));
    iot_slog2_close(r);
    return v;
}

static iot_slog2_writer *open_write(const char *path, int32_t leaf, int16_t nc)
{
    char err[512];
    struct iot_slog2_options o = {leaf, nc};
    iot_slog2_writer *w = iot_slog2_writer_open(path, &o, err, sizeof err);
    if (!w)
        print_message("%s\n", err);
    assert_non_null(w);
    return w;
}

static void close_write(iot_slog2_writer *w)
{
    char err[512];
    int rc = iot_slog2_writer_close(w, err, sizeof err);
    if (rc)
        print_message("%s\n", err);
    assert_int_equal(rc, 0);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            print_message("%s\n", iot_slog2_writer_error(w));                                      \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- drawables as text, to compare what was written with what is read ---- */

struct text_list {
    char **s;
    size_t n, cap;
};

static void tl_add(struct text_list *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->s = realloc(l->s, l->cap * sizeof *l->s);
        assert_non_null(l->s);
    }
    l->s[l->n] = strdup(s);
    assert_non_null(l->s[l->n]);
    l->n++;
}

static void tl_free(struct text_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    *l = (struct text_list){0};
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Exact text of a drawable: hex floats, so equal text means equal bits. */
static void drawable_text(char *buf, size_t len, int32_t cat, int nv, const double *t,
                          const int32_t *line, const struct iot_slog2_value *v, int nval)
{
    int n = snprintf(buf, len, "cat=%d", cat);
    for (int i = 0; i < nv; i++)
        n += snprintf(buf + n, len - (size_t)n, " (%a,%d)", t[i], line[i]);
    for (int i = 0; i < nval; i++) {
        char ty = v[i].type;
        if (ty == 's')
            n += snprintf(buf + n, len - (size_t)n, " s:%.*s", v[i].u.s.len, v[i].u.s.p);
        else if (ty == 'e')
            n += snprintf(buf + n, len - (size_t)n, " e:%a", (double)(float)v[i].u.f);
        else if (ty == 'E')
            n += snprintf(buf + n, len - (size_t)n, " E:%a", v[i].u.f);
        else if (ty == 'x' || ty == 'd')
            n += snprintf(buf + n, len - (size_t)n, " %c:%d", ty, (int32_t)v[i].u.i);
        else if (ty == 'h')
            n += snprintf(buf + n, len - (size_t)n, " h:%d", (int16_t)v[i].u.i);
        else
            n += snprintf(buf + n, len - (size_t)n, " %c:%lld", ty, (long long)v[i].u.i);
    }
}

static void read_prim_text(struct iot_slog2 *r, const struct iot_slog2_prim *p, struct text_list *l)
{
    const struct iot_slog2_category *c = iot_slog2_category(r, p->category);
    struct iot_slog2_value v[16];
    double t[2];
    int32_t line[2];
    char why[128], buf[1024];
    size_t used;
    assert_non_null(c);
    int nval = iot_slog2_decode_info(c, p->info, p->info_len, v, 16, &used, why, sizeof why);
    assert_true(nval >= 0);
    for (int i = 0; i < p->n_vertices && i < 2; i++) {
        t[i] = p->vertices[i].time;
        line[i] = p->vertices[i].line;
    }
    drawable_text(buf, sizeof buf, p->category, p->n_vertices, t, line, v, nval);
    tl_add(l, buf);
}

/* Every real drawable of the file, as text; also counts nodes and depth. */
static void read_all(const char *path, struct text_list *l, size_t *nodes, int *depth)
{
    struct iot_slog2 *r = open_read(path);
    *nodes = iot_slog2_n_nodes(r);
    *depth = iot_slog2_header(r)->max_depth;
    for (size_t i = 0; i < *nodes; i++) {
        const struct iot_slog2_node *n;
        assert_int_equal(iot_slog2_read_node(r, i, &n), 0);
        for (uint32_t k = 0; k < n->n_nestless; k++)
            read_prim_text(r, &n->nestless[k].head, l);
        for (uint32_t k = 0; k < n->n_nestable; k++)
            read_prim_text(r, &n->nestable[k].head, l);
    }
    iot_slog2_close(r);
}

static void assert_same_drawables(struct text_list *want, struct text_list *got)
{
    qsort(want->s, want->n, sizeof *want->s, cmp_str);
    qsort(got->s, got->n, sizeof *got->s, cmp_str);
    assert_int_equal(got->n, want->n);
    for (size_t i = 0; i < want->n; i++)
        if (strcmp(want->s[i], got->s[i]) != 0) {
            print_message("drawable %zu differs:\n  wrote %s\n  read  %s\n", i, want->s[i],
                          got->s[i]);
            fail();
        }
}

/* ---- a synthetic trace ---- */

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double uniform(void)
{
    return (double)(next_rand() >> 11) / 9007199254740992.0;
}

enum {
    CAT_READ_PATH = 0,
    CAT_WRITE_PATH = 1,
    CAT_MPI_READ = 10,
    CAT_MPI_WRITE = 11,
    CAT_PREAD = 12,
    CAT_IDLE = 13,
    CAT_MARKER = 20,
    CAT_TICK = 21,
    CAT_UNUSED = 99
};

static const struct iot_slog2_catdef test_cats[] = {
    {CAT_READ_PATH, "Read Path", IOT_SLOG2_ARROW, 255, 165, 0, 255, 3, "CallID=0x%X", 0, NULL},
    {CAT_WRITE_PATH, "Write Path", IOT_SLOG2_ARROW, 0, 0, 255, 255, 3, "CallID=0x%X bytes=%l", 0,
     NULL},
    {CAT_MPI_READ, "MPI_File_read", IOT_SLOG2_STATE, 0, 255, 0, 255, 1,
     "CallID=0x%X offset=%l bytes=%l", 0, NULL},
    {CAT_MPI_WRITE, "MPI_File_write", IOT_SLOG2_STATE, 255, 0, 0, 255, 1, "CallID=0x%x rank=%d", 0,
     NULL},
    {CAT_PREAD, "pread", IOT_SLOG2_STATE, 160, 32, 240, 127, 1, "fd=%d path=%s", 0, NULL},
    {CAT_IDLE, "Idle", IOT_SLOG2_STATE, 128, 128, 128, 255, 1, NULL, 0, NULL},
    {CAT_MARKER, "Marker", IOT_SLOG2_EVENT, 255, 255, 0, 255, 1, "note=%s value=%E h=%h f=%e", 0,
     NULL},
    {CAT_TICK, "Tick", IOT_SLOG2_EVENT, 255, 0, 255, 255, 1, "iter=%d", 0, NULL},
    {CAT_UNUSED, "Unused", IOT_SLOG2_STATE, 1, 2, 3, 4, 1, "never=%d", 0, NULL},
};

#define N_TEST_CATS (sizeof test_cats / sizeof test_cats[0])

static const int32_t test_lines[] = {0, 1, 2, 3, 100, 101, 102, 103};
#define N_LINES 8

static void define_test_trace(iot_slog2_writer *w)
{
    static const char *const cols[] = {"node", "process", "thread"};
    int32_t rows[N_LINES + 1][4];
    for (size_t i = 0; i < N_TEST_CATS; i++)
        OK(iot_slog2_writer_category(w, &test_cats[i]));
    /* rows out of order on purpose, one line (7) used by no drawable */
    for (int i = 0; i < N_LINES; i++) {
        int32_t line = test_lines[N_LINES - 1 - i];
        rows[i][0] = line;
        rows[i][1] = line >= 100 ? 1 : 0;
        rows[i][2] = line >= 100 ? 4242 : 1000 + line;
        rows[i][3] = line >= 100 ? line - 100 : 0;
    }
    rows[N_LINES][0] = 7;
    rows[N_LINES][1] = 0;
    rows[N_LINES][2] = 1007;
    rows[N_LINES][3] = 0;
    struct iot_slog2_mapdef m = {
        "Node / process / thread", 3, cols, N_LINES + 1, &rows[0][0], 0, NULL};
    OK(iot_slog2_writer_lineidmap(w, &m));
    OK(iot_slog2_writer_timeline(w, 7));
}

struct gen {
    double now;
    uint64_t k;
    char str[64];
    struct iot_slog2_value v[4];
    int nv;
    int topo;
    int32_t cat;
    double t[2];
    int32_t line[2];
};

static void gen_values(struct gen *g)
{
    uint64_t id = next_rand();
    struct iot_slog2_value *v = g->v;
    switch (g->cat) {
    case CAT_READ_PATH:
        v[0] = (struct iot_slog2_value){.type = 'X', .u.i = (int64_t)id};
        g->nv = 1;
        break;
    case CAT_WRITE_PATH:
        v[0] = (struct iot_slog2_value){.type = 'X', .u.i = (int64_t)id};
        v[1] = (struct iot_slog2_value){.type = 'l', .u.i = (int64_t)(id % 100000)};
        g->nv = 2;
        break;
    case CAT_MPI_READ:
        v[0] = (struct iot_slog2_value){.type = 'X', .u.i = (int64_t)id};
        v[1] = (struct iot_slog2_value){.type = 'l', .u.i = (int64_t)(id >> 20)};
        v[2] = (struct iot_slog2_value){.type = 'l', .u.i = 4096};
        g->nv = 3;
        break;
    case CAT_MPI_WRITE:
        v[0] = (struct iot_slog2_value){.type = 'x', .u.i = (int64_t)(uint32_t)id};
        v[1] = (struct iot_slog2_value){.type = 'd', .u.i = -(int64_t)(id % 7)};
        g->nv = 2;
        break;
    case CAT_PREAD:
        snprintf(g->str, sizeof g->str, "/data/file %llu", (unsigned long long)(id % 1000));
        v[0] = (struct iot_slog2_value){.type = 'd', .u.i = (int64_t)(id % 1024)};
        v[1] = (struct iot_slog2_value){.type = 's', .u.s = {g->str, (uint16_t)strlen(g->str)}};
        g->nv = 2;
        break;
    case CAT_MARKER:
        snprintf(g->str, sizeof g->str, "mark %llu", (unsigned long long)g->k);
        v[0] = (struct iot_slog2_value){.type = 's', .u.s = {g->str, (uint16_t)strlen(g->str)}};
        v[1] = (struct iot_slog2_value){.type = 'E', .u.f = uniform() * 1e6};
        v[2] = (struct iot_slog2_value){.type = 'h', .u.i = -(int64_t)(id % 30000)};
        v[3] = (struct iot_slog2_value){.type = 'e', .u.f = (float)uniform()};
        g->nv = 4;
        break;
    case CAT_TICK:
        v[0] = (struct iot_slog2_value){.type = 'd', .u.i = (int64_t)g->k};
        g->nv = 1;
        break;
    default: g->nv = 0;
    }
}

/* The next drawable: end times never decrease; some states are long, a few
 * start before everything else, some arrows go backwards in time. */
static void gen_next(struct gen *g)
{
    static const int32_t state_cats[] = {CAT_MPI_READ, CAT_MPI_WRITE, CAT_PREAD, CAT_IDLE};
    uint64_t r = next_rand();
    g->now += (r % 4 == 0) ? 0.0 : uniform() * 1e-3;
    g->k++;
    g->line[0] = test_lines[r % N_LINES];
    g->line[1] = test_lines[(r >> 8) % N_LINES];
    int kind = (int)((r >> 16) % 10);
    if (kind < 6) {
        g->topo = IOT_SLOG2_STATE;
        g->cat = state_cats[(r >> 24) % 4];
        double dur = (r >> 32) % 50 == 0 ? uniform() * g->now : uniform() * 2e-3;
        g->t[0] = (r >> 40) % 500 == 0 ? 0.0 : g->now - dur;
        g->t[1] = g->now;
        g->line[1] = g->line[0];
    } else if (kind < 9) {
        g->topo = IOT_SLOG2_ARROW;
        g->cat = (r >> 24) % 2 ? CAT_READ_PATH : CAT_WRITE_PATH;
        double back = g->now - uniform() * 1e-3;
        g->t[0] = (r >> 28) % 4 ? back : g->now;
        g->t[1] = (r >> 28) % 4 ? g->now : back;
    } else {
        g->topo = IOT_SLOG2_EVENT;
        g->cat = (r >> 24) % 2 ? CAT_MARKER : CAT_TICK;
        g->t[0] = g->t[1] = g->now;
        g->line[1] = g->line[0];
    }
    gen_values(g);
}

static void gen_write(iot_slog2_writer *w, struct gen *g)
{
    if (g->topo == IOT_SLOG2_STATE)
        OK(iot_slog2_writer_state(w, g->cat, g->line[0], g->t[0], g->t[1], g->v, g->nv));
    else if (g->topo == IOT_SLOG2_ARROW)
        OK(iot_slog2_writer_arrow(w, g->cat, g->line[0], g->t[0], g->line[1], g->t[1], g->v,
                                  g->nv));
    else
        OK(iot_slog2_writer_event(w, g->cat, g->line[0], g->t[0], g->v, g->nv));
}

/* Writes n synthetic drawables; their text goes to want (if not NULL). */
static void write_trace(const char *path, int32_t leaf, int16_t nc, size_t n,
                        struct text_list *want, int64_t *per_cat)
{
    iot_slog2_writer *w = open_write(path, leaf, nc);
    struct gen g = {.now = 1.0};
    char buf[1024];
    define_test_trace(w);
    for (size_t i = 0; i < n; i++) {
        gen_next(&g);
        gen_write(w, &g);
        if (want) {
            drawable_text(buf, sizeof buf, g.cat, g.topo == IOT_SLOG2_EVENT ? 1 : 2, g.t, g.line,
                          g.v, g.nv);
            tl_add(want, buf);
        }
        if (per_cat)
            per_cat[g.cat]++;
    }
    close_write(w);
}

/* ---- (a) round trip ---- */

static void check_categories(const char *path, const int64_t *per_cat)
{
    struct iot_slog2 *r = open_read(path);
    size_t real = 0;
    for (size_t i = 0; i < N_TEST_CATS; i++) {
        const struct iot_slog2_catdef *d = &test_cats[i];
        const struct iot_slog2_category *c = iot_slog2_category(r, d->index);
        if (!per_cat[d->index]) {
            assert_null(c); /* Java drops unused categories */
            continue;
        }
        real++;
        assert_non_null(c);
        assert_string_equal(c->name, d->name);
        assert_int_equal(c->topo, d->topo);
        assert_true(c->red == d->red && c->green == d->green && c->blue == d->blue &&
                    c->alpha == d->alpha && c->width == d->width && c->modifiable);
        assert_int_equal(c->count, per_cat[d->index]);
        assert_int_equal(c->n_keys, d->label ? c->n_types + 1 : 0);
    }
    const struct iot_slog2_category *c = iot_slog2_category(r, CAT_MPI_READ);
    assert_string_equal(c->keys[0], "CallID=0x");
    assert_string_equal(c->keys[1], " offset=");
    assert_string_equal(c->keys[3], "");
    assert_memory_equal(c->types, "Xll", 3);
    static const char *const pv[3] = {"Preview_Event", "Preview_Arrow", "Preview_State"};
    for (int i = 0; i < 3; i++) {
        c = iot_slog2_category(r, -1 - i);
        assert_non_null(c);
        assert_string_equal(c->name, pv[i]);
        assert_true(c->width == 5 && c->count == 0 && c->n_keys == 0 &&
                    c->blue == (i == 1 ? 0 : 255));
    }
    assert_int_equal(iot_slog2_n_categories(r), real + 3);
    iot_slog2_close(r);
}

static void check_lineidmaps(const char *path)
{
    struct iot_slog2 *r = open_read(path);
    assert_int_equal(iot_slog2_n_lineidmaps(r), 2);
    const struct iot_slog2_lineidmap *m = iot_slog2_lineidmap_at(r, 0);
    assert_string_equal(m->title, "Node / process / thread");
    assert_int_equal(m->n_columns, 3);
    assert_string_equal(m->columns[2], "thread");
    assert_int_equal(m->n_rows, N_LINES + 1);
    for (int i = 1; i < m->n_rows; i++)
        assert_true(m->rows[4 * i] > m->rows[4 * (i - 1)]);
    assert_int_equal(m->rows[4 * 4 + 2], 1007); /* line 7 sorted in among 0..3 */
    m = iot_slog2_lineidmap_at(r, 1);
    assert_string_equal(m->title, "Identity Map");
    assert_int_equal(m->n_rows, N_LINES + 1);
    iot_slog2_close(r);
}

static void test_round_trip(void **state)
{
    (void)state;
    const char *path = tmp_path("roundtrip.slog2");
    struct text_list want = {0}, got = {0};
    int64_t per_cat[100] = {0};
    size_t nodes;
    int depth;
    write_trace(path, 0, 0, 400, &want, per_cat);
    read_all(path, &got, &nodes, &depth);
    assert_int_equal(nodes, 1); /* 400 drawables fit in one 64 KiB node */
    assert_same_drawables(&want, &got);
    check_categories(path, per_cat);
    check_lineidmaps(path);
    assert_int_equal(check_file(path), 0);
    char err[256];
    FILE *null = fopen("/dev/null", "w");
    assert_int_equal(iot_slog2_dump(null, path, err, sizeof err), 0);
    fclose(null);
    tl_free(&want);
    tl_free(&got);
}

/* ---- (b) deep trees ---- */

static void deep_tree(int16_t nc)
{
    const char *path = tmp_path(nc == 4 ? "deep4.slog2" : "deep2.slog2");
    struct text_list want = {0}, got = {0};
    int64_t per_cat[100] = {0};
    size_t nodes;
    int depth;
    write_trace(path, 512, nc, 10000, &want, per_cat);
    read_all(path, &got, &nodes, &depth);
    print_message("leaf 512, %d children: %zu nodes, depth %d\n", nc, nodes, depth);
    assert_true(depth >= 3);
    assert_true(nodes > 100);
    assert_same_drawables(&want, &got);
    check_categories(path, per_cat);
    assert_int_equal(check_file(path), 0);
    struct iot_slog2 *r = open_read(path);
    assert_int_equal(iot_slog2_header(r)->children_per_node, nc);
    assert_int_equal(iot_slog2_header(r)->leaf_bytesize, 512);
    iot_slog2_close(r);
    tl_free(&want);
    tl_free(&got);
}

static void test_deep_tree_2(void **state)
{
    (void)state;
    deep_tree(2);
}

static void test_deep_tree_4(void **state)
{
    (void)state;
    deep_tree(4);
}

/* ---- (c) the reference inputs ---- */

struct tcat {
    int32_t index;
    int topo;
    char types[64];
    int ntypes;
};

struct tparse {
    iot_slog2_writer *w;
    struct tcat cat[64];
    int ncat;
};

static int topo_of(const char *s)
{
    return !strcmp(s, "Event")   ? IOT_SLOG2_EVENT
           : !strcmp(s, "State") ? IOT_SLOG2_STATE
                                 : IOT_SLOG2_ARROW;
}

/* Category[ index=I name=N topo=T color=(R,G,B,A,true) width=W <label> { M } ] */
static void parse_category(struct tparse *t, const char *line)
{
    struct iot_slog2_catdef d = {0};
    char name[128], topo[16], flag[16], label[1024] = "";
    int r, g, b, a, n = 0, width;
    int32_t methods[8];
    assert_true(sscanf(line,
                       "%*s index=%d name=%127s topo=%15s color=(%d,%d,%d,%d,%15s width=%d %n",
                       &d.index, name, topo, &r, &g, &b, &a, flag, &width, &n) >= 9);
    const char *lt = strchr(line + n, '<'), *gt = lt ? strchr(lt, '>') : NULL;
    if (lt && gt)
        snprintf(label, sizeof label, "%.*s", (int)(gt - lt - 1), lt + 1);
    const char *br = strchr(gt ? gt : line + n, '{');
    while (br && d.n_methods < 8 && sscanf(br + 1, "%d%n", &methods[d.n_methods], &n) == 1) {
        d.n_methods++;
        br += n + 1;
    }
    d.name = name;
    d.topo = topo_of(topo);
    d.red = (uint8_t)r, d.green = (uint8_t)g, d.blue = (uint8_t)b, d.alpha = (uint8_t)a;
    d.width = width;
    d.label = lt && gt ? label : NULL;
    d.methods = methods;
    iot_slog2_writer *w = t->w;
    OK(iot_slog2_writer_category(w, &d));
    struct tcat *c = &t->cat[t->ncat++];
    *c = (struct tcat){.index = d.index, .topo = d.topo};
    for (const char *p = label; (p = strchr(p, '%')) && p[1]; p += 2)
        c->types[c->ntypes++] = p[1];
}

static const struct tcat *tcat_find(const struct tparse *t, int32_t index)
{
    for (int i = 0; i < t->ncat; i++)
        if (t->cat[i].index == index)
            return &t->cat[i];
    fail_msg("category %d not defined", index);
    return NULL;
}

/* <v1;;v2;;...>: split on every ';' like the C reader's strtok. */
static int parse_values(const struct tcat *c, char *text, struct iot_slog2_value *v)
{
    int n = 0;
    for (char *tok = strtok(text, ";"); tok && n < c->ntypes; tok = strtok(NULL, ";"), n++) {
        v[n].type = c->types[n];
        switch (c->types[n]) {
        case 'x': v[n].u.i = (int32_t)(uint32_t)strtoul(tok, NULL, 16); break;
        case 'X': v[n].u.i = (int64_t)strtoull(tok, NULL, 16); break;
        case 'e': v[n].u.f = (float)strtod(tok, NULL); break;
        case 'E': v[n].u.f = strtod(tok, NULL); break;
        case 's':
            v[n].u.s.p = tok;
            v[n].u.s.len = (uint16_t)strlen(tok);
            break;
        default: v[n].u.i = strtoll(tok, NULL, 10);
        }
    }
    return n;
}

/* Primitive[ TimeBBox(a,b) Category=C (t, line) [(t, line)] <values> ] */
static void parse_primitive(struct tparse *t, char *line)
{
    double b0, b1, tm[2];
    int32_t cat, ln[2];
    int n = 0, nv = 0, k;
    struct iot_slog2_value v[16];
    assert_int_equal(sscanf(line, "Primitive[ TimeBBox(%lf,%lf) Category=%d%n", &b0, &b1, &cat, &n),
                     3);
    char *p = line + n, *lt = strchr(p, '<');
    while (nv < 2 && (p = strchr(p, '(')) && (!lt || p < lt) &&
           sscanf(p, "(%lf, %d)%n", &tm[nv], &ln[nv], &k) == 2) {
        nv++;
        p += k;
    }
    const struct tcat *c = tcat_find(t, cat);
    int nval = 0;
    if (lt) {
        *strchr(lt, '>') = '\0';
        nval = parse_values(c, lt + 1, v);
    }
    iot_slog2_writer *w = t->w;
    if (nv == 1)
        OK(iot_slog2_writer_event(w, cat, ln[0], tm[0], v, nval));
    else if (c->topo == IOT_SLOG2_STATE)
        OK(iot_slog2_writer_state(w, cat, ln[0], tm[0], tm[1], v, nval));
    else
        OK(iot_slog2_writer_arrow(w, cat, ln[0], tm[0], ln[1], tm[1], v, nval));
}

/* YCoordMap[ Nrows=R Ncolumns=C Nmethods=M title=T colnames=< a b > ( l c1 c2 ) ... { m } ] */
static void parse_ycoordmap(struct tparse *t, const char *line)
{
    int nrows, ncols, nmeth, n = 0, k;
    char title[128], cols[8][64];
    const char *colp[8];
    int32_t rows[64 * 8], methods[4];
    assert_int_equal(sscanf(line,
                            "YCoordMap[ Nrows=%d Ncolumns=%d Nmethods=%d title=%127s colnames=<%n",
                            &nrows, &ncols, &nmeth, title, &n),
                     4);
    assert_true(nrows <= 64 && ncols <= 8 && nmeth <= 4);
    const char *p = line + n;
    for (int i = 0; i < ncols - 1; i++, p += k) {
        assert_int_equal(sscanf(p, "%63s%n", cols[i], &k), 1);
        colp[i] = cols[i];
    }
    for (int i = 0; i < nrows * ncols; i++) {
        p = strpbrk(p, "-0123456789");
        assert_int_equal(sscanf(p, "%d%n", &rows[i], &k), 1);
        p += k;
    }
    for (int i = 0; i < nmeth; i++) {
        p = strpbrk(p, "0123456789");
        assert_int_equal(sscanf(p, "%d%n", &methods[i], &k), 1);
        p += k;
    }
    struct iot_slog2_mapdef m = {title, ncols - 1, colp, nrows, rows, nmeth, methods};
    iot_slog2_writer *w = t->w;
    OK(iot_slog2_writer_lineidmap(w, &m));
}

/* Writes the trace of a trace_sample text file.  Composites are not
 * supported: with skip_composites they are left out with their primitives. */
static void write_text_trace(const char *input, const char *out, int32_t leaf, int16_t nc,
                             int skip_composites)
{
    char path[4096], line[1100];
    struct tparse t = {.w = open_write(out, leaf, nc)};
    int skip = 0;
    snprintf(path, sizeof path, "%s/%s", ref_dir, input);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Category", 8))
            parse_category(&t, line);
        else if (!strncmp(line, "YCoordMap", 9))
            parse_ycoordmap(&t, line);
        else if (!strncmp(line, "Composite", 9) && skip_composites)
            assert_int_equal(sscanf(strstr(line, "NumPrimes="), "NumPrimes=%d", &skip), 1);
        else if (!strncmp(line, "Primitive", 9) && skip > 0)
            skip--;
        else if (!strncmp(line, "Primitive", 9))
            parse_primitive(&t, line);
        else
            assert_true(strncmp(line, "Composite", 9));
    }
    fclose(f);
    close_write(t.w);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *p = malloc(*len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, *len, f), *len);
    fclose(f);
    return p;
}

/* data.txt has composites, which the writer does not write; its line-ID
 * maps (three YCoordMaps, one with a method, then the Identity Map) must
 * still come out as Java wrote them. */
static void test_reference_lineidmaps(void **state)
{
    (void)state;
    char ref[4096];
    snprintf(ref, sizeof ref, "%s/data.slog2", ref_dir ? ref_dir : ".");
    struct stat st;
    if (!ref_dir || stat(ref, &st) != 0)
        skip();
    const char *out = tmp_path("data-maps.slog2");
    write_text_trace("data.input.txt", out, 0, 0, 1);
    assert_int_equal(check_file(out), 0);
    size_t la, lb;
    unsigned char *a = slurp(out, &la), *b = slurp(ref, &lb);
    struct iot_slog2 *ra = open_read(out), *rb = open_read(ref);
    struct iot_slog2_blockptr pa = iot_slog2_header(ra)->block[IOT_SLOG2_LINEIDMAPS];
    struct iot_slog2_blockptr pb = iot_slog2_header(rb)->block[IOT_SLOG2_LINEIDMAPS];
    assert_int_equal(pa.size, pb.size);
    assert_memory_equal(a + pa.offset, b + pb.offset, (size_t)pa.size);
    print_message("data.slog2: LineIDMaps block (%d bytes) byte-identical\n", (int)pa.size);
    iot_slog2_close(ra);
    iot_slog2_close(rb);
    free(a);
    free(b);
}

/* Shadows in storage order; weights compared as sets (Java orders equal
 * ratios by identity hash). */
static void compare_shadowbufs(const struct iot_slog2_shadowbuf *a,
                               const struct iot_slog2_shadowbuf *b)
{
    assert_true(a->id.depth == b->id.depth && a->id.xpos == b->id.xpos);
    assert_int_equal(a->n_nestless, b->n_nestless);
    assert_int_equal(a->n_nestable, b->n_nestable);
    for (int list = 0; list < 2; list++) {
        const struct iot_slog2_shadow *x = list ? a->nestable : a->nestless;
        const struct iot_slog2_shadow *y = list ? b->nestable : b->nestless;
        for (uint32_t i = 0; i < (list ? a->n_nestable : a->n_nestless); i++) {
            assert_int_equal(x[i].n_real, y[i].n_real);
            assert_int_equal(x[i].n_weights, y[i].n_weights);
            assert_int_equal(x[i].prim.category, y[i].prim.category);
            assert_int_equal(x[i].prim.vertices[0].line, y[i].prim.vertices[0].line);
        }
    }
}

/* Node by node: ID, box, block, drawable counts, shadow buffers. */
static void compare_trees(const char *mine, const char *ref)
{
    struct iot_slog2 *a = open_read(mine), *b = open_read(ref);
    assert_int_equal(iot_slog2_n_nodes(a), iot_slog2_n_nodes(b));
    assert_int_equal(iot_slog2_header(a)->max_depth, iot_slog2_header(b)->max_depth);
    for (size_t i = 0; i < iot_slog2_n_nodes(a); i++) {
        const struct iot_slog2_dirent *x = iot_slog2_dirent_at(a, i),
                                      *y = iot_slog2_dirent_at(b, i);
        assert_true(x->id.depth == y->id.depth && x->id.xpos == y->id.xpos);
        assert_true(x->tbox.start == y->tbox.start && x->tbox.end == y->tbox.end);
        assert_int_equal(x->block.size, y->block.size);
        const struct iot_slog2_node *na, *nb;
        assert_int_equal(iot_slog2_read_node(a, i, &na), 0);
        assert_int_equal(iot_slog2_read_node(b, i, &nb), 0);
        assert_int_equal(na->n_nestless, nb->n_nestless);
        assert_int_equal(na->n_nestable, nb->n_nestable);
        assert_int_equal(na->n_shadowbufs, nb->n_shadowbufs);
        for (uint32_t k = 0; k < na->n_shadowbufs; k++)
            compare_shadowbufs(&na->shadowbufs[k], &nb->shadowbufs[k]);
    }
    iot_slog2_close(a);
    iot_slog2_close(b);
}

static void compare_categories(const char *mine, const char *ref)
{
    struct iot_slog2 *a = open_read(mine), *b = open_read(ref);
    assert_int_equal(iot_slog2_n_categories(a), iot_slog2_n_categories(b));
    for (size_t i = 0; i < iot_slog2_n_categories(a); i++) {
        const struct iot_slog2_category *x = iot_slog2_category_at(a, i);
        const struct iot_slog2_category *y = iot_slog2_category_at(b, i); /* same order */
        assert_int_equal(x->index, y->index);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->count, y->count);
        assert_int_equal(x->n_keys, y->n_keys);
        for (int k = 0; k < x->n_keys; k++)
            assert_string_equal(x->keys[k], y->keys[k]);
        assert_true(
            (x->incl_ratio == y->incl_ratio || (isnan(x->incl_ratio) && isnan(y->incl_ratio))) &&
            x->excl_ratio == y->excl_ratio);
    }
    assert_int_equal(iot_slog2_n_lineidmaps(a), iot_slog2_n_lineidmaps(b));
    iot_slog2_close(a);
    iot_slog2_close(b);
}

struct ref_case {
    const char *input, *ref;
    int32_t leaf;
    int16_t nc;
};

static void test_reference(void **state)
{
    const struct ref_case *rc = *state;
    char path[4096], out[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", ref_dir, rc->ref);
    if (!ref_dir || stat(path, &st) != 0)
        skip();
    snprintf(out, sizeof out, "%s", tmp_path(rc->ref));
    write_text_trace(rc->input, out, rc->leaf, rc->nc, 0);
    assert_int_equal(check_file(out), 0);
    compare_trees(out, path);
    compare_categories(out, path);
    size_t la, lb;
    unsigned char *a = slurp(out, &la), *b = slurp(path, &lb);
    size_t diff = 0, first = SIZE_MAX;
    for (size_t i = 0; i < la && i < lb; i++)
        if (a[i] != b[i] && diff++ == 0)
            first = i;
    print_message("%s: %zu bytes, Java's %zu; %zu bytes differ%s\n", rc->ref, la, lb, diff,
                  diff ? "" : " (byte-identical)");
    if (diff)
        print_message("  first difference at offset %zu\n", first);
    assert_int_equal(la, lb);
    assert_int_equal(diff, 0);
    free(a);
    free(b);
}

static const struct ref_case ref_cases[] = {
    {"arrow.input.txt", "arrow.slog2", 0, 0},
    {"arrow.input.txt", "arrow_ls200.slog2", 200, 0},
    {"arrow.input.txt", "arrow_ls128.slog2", 128, 0},
    {"onetimeline.input.txt", "onetimeline.slog2", 0, 0},
    {"three_tl.input.txt", "three_tl.slog2", 0, 0},
    {"three_tl.input.txt", "three_tl_ls128.slog2", 128, 0},
    {"three_tl.input.txt", "three_tl_ls256.slog2", 256, 0},
    {"three_tl.input.txt", "three_tl_ls400.slog2", 400, 0},
    {"big.input.txt", "big.slog2", 0, 0},
    {"big.input.txt", "big_ls1k.slog2", 1024, 0},
    {"big.input.txt", "big_ls1k_nc4.slog2", 1024, 4},
};

#define N_REF (sizeof ref_cases / sizeof ref_cases[0])

/* ---- (d) memory ---- */

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void test_memory_bound(void **state)
{
    (void)state;
    const char *path = tmp_path("big.slog2");
    iot_slog2_writer *w = open_write(path, 0, 0);
    struct iot_slog2_writer_stats early, st;
    struct gen g = {.now = 1.0};
    long rss0 = max_rss_kib(), rss1 = 0;
    define_test_trace(w);
    for (size_t i = 0; i < 2000000; i++) {
        gen_next(&g);
        if (g.topo == IOT_SLOG2_STATE && g.t[0] < g.now - 0.01)
            g.t[0] = g.now - 0.01; /* no ever longer states: they would stay in the root */
        gen_write(w, &g);
        if (i == 200000) {
            iot_slog2_writer_stats(w, &early);
            rss1 = max_rss_kib();
        }
    }
    iot_slog2_writer_stats(w, &st);
    long rss2 = max_rss_kib();
    print_message("after 200k: %zu bytes live (peak %zu), depth %d; after 2M: %zu live (peak "
                  "%zu), depth %d, %" PRIu64 " nodes, %" PRId64 " file bytes; max RSS %ld -> %ld "
                  "-> %ld KiB\n",
                  early.live_bytes, early.peak_bytes, early.depth, st.live_bytes, st.peak_bytes,
                  st.depth, st.nodes_written, st.file_bytes, rss0, rss1, rss2);
    assert_int_equal(st.drawables, 2000000);
    assert_true(st.depth > early.depth);
    /* ten times the drawables: memory grows only with the open path, by a
     * few nodes' worth of shadows for the levels added */
    size_t per_level = early.peak_bytes / (size_t)(early.depth + 1);
    assert_true(st.peak_bytes < 2 * 1024 * 1024);
    assert_true(st.live_bytes <= st.peak_bytes);
    assert_true(st.peak_bytes <
                early.peak_bytes + (size_t)(st.depth - early.depth + 1) * per_level);
#if !defined(__SANITIZE_ADDRESS__) /* ASan's quarantine keeps freed memory */
    assert_true(rss2 - rss1 < 8 * 1024); /* KiB */
#endif
    close_write(w);
    assert_int_equal(check_file(path), 0);
    unlink(path);
}

/* ---- (e) errors ---- */

static void test_unwritable(void **state)
{
    (void)state;
    char err[512];
    iot_slog2_writer *w = iot_slog2_writer_open("/nonexistent-dir/x.slog2", NULL, err, sizeof err);
    assert_null(w);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "/nonexistent-dir/x.slog2"));
    assert_non_null(strstr(err, "No such file or directory"));
    struct iot_slog2_options o = {64, 2};
    assert_null(iot_slog2_writer_open(tmp_path("tiny.slog2"), &o, err, sizeof err));
    assert_non_null(strstr(err, "leaf byte size 64"));
}

static void expect_refused(iot_slog2_writer *w, int rc, const char *what)
{
    assert_int_equal(rc, -1);
    print_message("refused: %s\n", iot_slog2_writer_error(w));
    assert_non_null(strstr(iot_slog2_writer_error(w), what));
}

static void test_refused_drawables(void **state)
{
    (void)state;
    const char *path = tmp_path("refused.slog2");
    iot_slog2_writer *w = open_write(path, 0, 0);
    struct iot_slog2_value v[2] = {{.type = 'x', .u.i = 7}, {.type = 'd', .u.i = 1}};
    define_test_trace(w);
    OK(iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 1.0, 2.0, v, 2));
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 0.5, 1.5, v, 2),
                   "increasing end time");
    expect_refused(w, iot_slog2_writer_arrow(w, CAT_READ_PATH, 0, 1.9, 1, 1.0, v, 1),
                   "increasing end time");
    expect_refused(w, iot_slog2_writer_state(w, 55, 0, 2.0, 3.0, NULL, 0), "not defined");
    expect_refused(w, iot_slog2_writer_event(w, CAT_MPI_WRITE, 0, 3.0, v, 2),
                   "is not for an event");
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 2.0, 3.0, v, 1), "1 info values");
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 2.0, 3.0, v + 1, 2), "type 'd'");
    v[1].u.i = 1ll << 40;
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 2.0, 3.0, v, 2), "does not fit");
    v[1].u.i = 1;
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 3.0, 2.5, v, 2), "must not end");
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, NAN, 2.5, v, 2), "bad times");
    expect_refused(w, iot_slog2_writer_state(w, CAT_MPI_WRITE, 0, 2.0, INFINITY, v, 2),
                   "bad times");
    expect_refused(w, iot_slog2_writer_category(w, &test_cats[0]), "already defined");
    struct iot_slog2_catdef bad = {5, "Bad", IOT_SLOG2_STATE, 0, 0, 0, 0, 1, "x=%q", 0, NULL};
    expect_refused(w, iot_slog2_writer_category(w, &bad), "must be followed");
    bad.label = "x=%";
    expect_refused(w, iot_slog2_writer_category(w, &bad), "must be followed");
    bad = (struct iot_slog2_catdef){-2, "Neg", IOT_SLOG2_STATE, 0, 0, 0, 0, 1, NULL, 0, NULL};
    expect_refused(w, iot_slog2_writer_category(w, &bad), "reserved");
    int32_t rows[4] = {1, 5, 1, 6};
    const char *col = "c";
    struct iot_slog2_mapdef m = {"dup", 1, &col, 2, rows, 0, NULL};
    expect_refused(w, iot_slog2_writer_lineidmap(w, &m), "appears twice");
    /* the writer is still fine after all that */
    OK(iot_slog2_writer_state(w, CAT_MPI_WRITE, 1, 1.5, 2.0, v, 2));
    close_write(w);
    assert_int_equal(check_file(path), 0);
    struct text_list got = {0};
    size_t nodes;
    int depth;
    read_all(path, &got, &nodes, &depth);
    assert_int_equal(got.n, 2);
    tl_free(&got);
}

static void test_empty_trace(void **state)
{
    (void)state;
    char err[512];
    const char *path = tmp_path("empty.slog2");
    struct stat st;
    iot_slog2_writer *w = open_write(path, 0, 0);
    define_test_trace(w);
    assert_int_equal(iot_slog2_writer_close(w, err, sizeof err), -1);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "no drawables"));
    assert_int_equal(stat(path, &st), -1); /* removed, not left half-written */
    w = open_write(path, 0, 0);
    iot_slog2_writer_abort(w);
    assert_int_equal(stat(path, &st), -1);
}

/* A write error (the file size limit, in a child process): a message with
 * the cause, and no file left behind. */
static void test_write_error(void **state)
{
    (void)state;
    const char *path = tmp_path("limited.slog2");
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {200000, 200000};
        char err[512] = "";
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &rl);
        iot_slog2_writer *w = open_write(path, 0, 0);
        struct gen g = {.now = 1.0};
        define_test_trace(w);
        int rc = 0;
        for (int i = 0; i < 20000 && rc == 0; i++) {
            gen_next(&g);
            rc = g.topo == IOT_SLOG2_EVENT
                     ? iot_slog2_writer_event(w, g.cat, g.line[0], g.t[0], g.v, g.nv)
                 : g.topo == IOT_SLOG2_STATE
                     ? iot_slog2_writer_state(w, g.cat, g.line[0], g.t[0], g.t[1], g.v, g.nv)
                     : iot_slog2_writer_arrow(w, g.cat, g.line[0], g.t[0], g.line[1], g.t[1], g.v,
                                              g.nv);
        }
        rc = iot_slog2_writer_close(w, err, sizeof err);
        ssize_t n = write(fd[1], err, strlen(err) + 1);
        _exit(rc == -1 && n > 0 ? 0 : 1);
    }
    close(fd[1]);
    char msg[512] = "";
    ssize_t n = read(fd[0], msg, sizeof msg - 1);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    print_message("%s\n", msg);
    assert_true(n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(strstr(msg, "limited.slog2"));
    assert_non_null(strstr(msg, "File too large"));
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
}

int main(int argc, char **argv)
{
    ref_dir = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_deep_tree_2),
        cmocka_unit_test(test_deep_tree_4),       cmocka_unit_test(test_unwritable),
        cmocka_unit_test(test_refused_drawables), cmocka_unit_test(test_empty_trace),
        cmocka_unit_test(test_write_error),       cmocka_unit_test(test_memory_bound),
    };
    struct CMUnitTest ref_tests[N_REF];
    static char names[N_REF][80];
    for (size_t i = 0; i < N_REF; i++) {
        snprintf(names[i], sizeof names[i], "java %s", ref_cases[i].ref);
        ref_tests[i] =
            (struct CMUnitTest){names[i], test_reference, NULL, NULL, (void *)&ref_cases[i]};
    }
    const struct CMUnitTest map_tests[] = {cmocka_unit_test(test_reference_lineidmaps)};
    int failed = cmocka_run_group_tests_name("slog2_writer", tests, make_tmp_dir, remove_tmp_dir);
    failed += cmocka_run_group_tests_name("slog2_writer_maps_vs_java", map_tests, make_tmp_dir,
                                          remove_tmp_dir);
    failed += _cmocka_run_group_tests("slog2_writer_vs_java", ref_tests, N_REF, make_tmp_dir,
                                      remove_tmp_dir);
    return failed ? 1 : 0;
}
