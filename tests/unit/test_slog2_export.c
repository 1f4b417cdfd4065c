/* The categories of iotrace-export --slog2 (collector/export/export_slog2.c)
 * as Jumpshot's legend shows them: every category the exporter can write
 * (a state per function of proto/functions.tsv, the three arrows, the
 * time-0 marker) is defined through xp_slog2_category, given a drawable,
 * written with the SLOG-2 writer and read back, Preview_* categories
 * included, and then:
 *
 * - every two categories differ in colour by at least MIN_DE00 in
 *   CIEDE2000, the perceptual difference of CIE Lab, so that no two look
 *   alike on a timeline (Preview_Event and Preview_State are exempt from
 *   each other: slog2sdk gives both white, and Jumpshot draws previews as
 *   stripes of the real categories' colours);
 * - a function's colour lies in its family's hues (docs/export.md,
 *   "Colours"): reads in greens, cyans and blues, writes in reds, oranges
 *   and browns, metadata in violets, purples and magentas, disk operations
 *   in golds, yellows and olives, the other MPI calls in greys; each arrow
 *   in the family of its path;
 * - the colours of the common functions are still those earlier files
 *   have, as readers know them;
 * - the CIEDE2000 used here gives Sharma, Wu and Dalal's published values
 *   (Color Res. Appl. 30, 2005, table 1), so that the threshold means what
 *   it says. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "export_slog2.h"
#include "iot_functions.h"
#include "slog2_read.h"
#include "slog2_write.h"

/* Well above the difference one notices side by side (about 2), so that
 * two categories stay apart in the legend and on a timeline at a glance. */
#define MIN_DE00 6.5

/* ---- colour science ---- */

struct lab {
    double L, a, b;
};

static double linear(uint8_t v)
{
    double c = v / 255.0;
    return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4);
}

static double lab_f(double t)
{
    return t > 216.0 / 24389 ? cbrt(t) : (24389.0 / 27 * t + 16) / 116;
}

/* sRGB (D65) to CIE Lab. */
static struct lab lab_of(uint8_t r8, uint8_t g8, uint8_t b8)
{
    double r = linear(r8), g = linear(g8), b = linear(b8);
    double x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047;
    double y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
    double z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883;
    double fx = lab_f(x), fy = lab_f(y), fz = lab_f(z);
    return (struct lab){116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)};
}

static double deg(double rad) { return rad * 180 / M_PI; }
static double rad(double d) { return d * M_PI / 180; }

static double hue_of(double a, double b)
{
    if (a == 0 && b == 0)
        return 0;
    double h = deg(atan2(b, a));
    return h < 0 ? h + 360 : h;
}

static double chroma_of(struct lab c) { return hypot(c.a, c.b); }

/* CIEDE2000 (Sharma, Wu and Dalal's formulation, kL = kC = kH = 1). */
static double de2000(struct lab p, struct lab q)
{
    double c7 = pow((chroma_of(p) + chroma_of(q)) / 2, 7);
    double g = 0.5 * (1 - sqrt(c7 / (c7 + pow(25, 7))));
    double a1 = (1 + g) * p.a, a2 = (1 + g) * q.a;
    double c1 = hypot(a1, p.b), c2 = hypot(a2, q.b);
    double h1 = hue_of(a1, p.b), h2 = hue_of(a2, q.b);
    double dh = 0;
    if (c1 * c2 != 0) {
        dh = h2 - h1;
        dh += dh > 180 ? -360 : dh < -180 ? 360 : 0;
    }
    double dL = q.L - p.L, dC = c2 - c1, dH = 2 * sqrt(c1 * c2) * sin(rad(dh / 2));
    double Lm = (p.L + q.L) / 2, Cm = (c1 + c2) / 2, hm = h1 + h2;
    if (c1 * c2 != 0)
        hm = fabs(h1 - h2) <= 180 ? hm / 2 : hm < 360 ? (hm + 360) / 2 : (hm - 360) / 2;
    double t = 1 - 0.17 * cos(rad(hm - 30)) + 0.24 * cos(rad(2 * hm)) +
               0.32 * cos(rad(3 * hm + 6)) - 0.20 * cos(rad(4 * hm - 63));
    double theta = 30 * exp(-pow((hm - 275) / 25, 2));
    double cm7 = pow(Cm, 7);
    double rc = 2 * sqrt(cm7 / (cm7 + pow(25, 7)));
    double sl = 1 + 0.015 * pow(Lm - 50, 2) / sqrt(20 + pow(Lm - 50, 2));
    double sc = 1 + 0.045 * Cm, sh = 1 + 0.015 * Cm * t;
    double rt = -sin(rad(2 * theta)) * rc;
    return sqrt(pow(dL / sl, 2) + pow(dC / sc, 2) + pow(dH / sh, 2) + rt * (dC / sc) * (dH / sh));
}

static void ciede2000_matches_the_published_pairs(void **state)
{
    (void)state;
    static const struct {
        struct lab p, q;
        double de;
    } pairs[] = {
        {{50, 2.6772, -79.7751}, {50, 0, -82.7485}, 2.0425},
        {{50, 0, 0}, {50, -1, 2}, 2.3669},
        {{50, 2.49, -0.001}, {50, -2.49, 0.0009}, 7.1792},
        {{50, 2.5, 0}, {73, 25, -18}, 27.1492},
        {{50, 2.5, 0}, {61, -5, 29}, 22.8977},
        {{50, 2.5, 0}, {56, -27, -3}, 31.9030},
        {{50, 2.5, 0}, {58, 24, 15}, 19.4535},
        {{60.2574, -34.0099, 36.2677}, {60.4626, -34.1751, 39.4387}, 1.2644},
        {{22.7233, 20.0904, -46.6940}, {23.0331, 14.9730, -42.5619}, 2.0373},
        {{90.8027, -2.0831, 1.4410}, {91.1528, -1.6435, 0.0447}, 1.4441},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        double got = de2000(pairs[i].p, pairs[i].q), back = de2000(pairs[i].q, pairs[i].p);
        if (fabs(got - pairs[i].de) > 5e-5 || fabs(back - pairs[i].de) > 5e-5)
            fail_msg("pair %zu: CIEDE2000 %.4f (%.4f reversed), published %.4f", i + 1, got, back,
                     pairs[i].de);
    }
    /* sRGB's primaries in Lab, as every colour tool gives them. */
    struct lab red = lab_of(255, 0, 0), blue = lab_of(0, 0, 255);
    assert_true(fabs(red.L - 53.2408) < 1e-3 && fabs(red.a - 80.0925) < 1e-3 &&
                fabs(red.b - 67.2032) < 1e-3);
    assert_true(fabs(blue.L - 32.2970) < 1e-3 && fabs(blue.a - 79.1875) < 1e-3 &&
                fabs(blue.b + 107.8602) < 1e-3);
}

/* ---- every category through the writer and the reader ---- */

struct cat {
    int32_t index;
    char name[64];
    uint8_t rgb[3];
    struct lab lab;
};

static struct cat cats[XP_SLOG2_N_CATS + 3];
static size_t n_cats;
static char tmp_dir[64];

/* The categories the exporter can write: one per function of the table,
 * the arrows and the marker. */
static int can_write(int32_t cat)
{
    return cat >= XP_SLOG2_CAT_READ_PATH || iot_func_name((unsigned)cat) != NULL;
}

static int draw(iot_slog2_writer *w, const struct iot_slog2_catdef *c, double t)
{
    struct iot_slog2_value v[3] = {{.type = 'X', .u.i = 0x1234}, {.type = 'l', .u.i = 4096},
                                   {.type = 'l', .u.i = 65536}};
    int rc;
    if (c->topo == IOT_SLOG2_STATE)
        rc = iot_slog2_writer_state(w, c->index, 0, t, t + 0.5, v, 3);
    else if (c->topo == IOT_SLOG2_ARROW)
        rc = iot_slog2_writer_arrow(w, c->index, 0, t, 1, t + 0.5, v, 1);
    else {
        struct iot_slog2_value note = {.type = 's', .u.s = {"time 0", 6}};
        rc = iot_slog2_writer_event(w, c->index, 0, t + 0.5, &note, 1);
    }
    return rc;
}

static int write_and_read(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/iotrace-slog2x-XXXXXX");
    if (!mkdtemp(tmp_dir))
        return -1;
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/categories.slog2", tmp_dir);
    iot_slog2_writer *w = iot_slog2_writer_open(path, NULL, err, sizeof err);
    if (!w) {
        print_error("%s\n", err);
        return -1;
    }
    double t = 0;
    for (int32_t i = 0; i < XP_SLOG2_N_CATS; i++) {
        if (!can_write(i))
            continue;
        char name[64];
        struct iot_slog2_catdef c;
        xp_slog2_category(i, &c, name, sizeof name);
        if (iot_slog2_writer_category(w, &c) < 0 || draw(w, &c, t++) < 0) {
            print_error("%s: %s\n", c.name, iot_slog2_writer_error(w));
            iot_slog2_writer_abort(w);
            return -1;
        }
    }
    if (iot_slog2_writer_close(w, err, sizeof err) < 0) {
        print_error("%s\n", err);
        return -1;
    }
    struct iot_slog2 *r = iot_slog2_open(path, err, sizeof err);
    if (!r) {
        print_error("%s\n", err);
        return -1;
    }
    size_t n = iot_slog2_n_categories(r);
    for (size_t i = 0; i < n && n_cats < sizeof cats / sizeof cats[0]; i++) {
        const struct iot_slog2_category *c = iot_slog2_category_at(r, i);
        struct cat *k = &cats[n_cats++];
        k->index = c->index;
        snprintf(k->name, sizeof k->name, "%s", c->name);
        k->rgb[0] = c->red, k->rgb[1] = c->green, k->rgb[2] = c->blue;
        k->lab = lab_of(c->red, c->green, c->blue);
    }
    iot_slog2_close(r);
    unlink(path);
    rmdir(tmp_dir);
    return 0;
}

static const struct cat *cat_at(int32_t index)
{
    for (size_t i = 0; i < n_cats; i++)
        if (cats[i].index == index)
            return &cats[i];
    return NULL;
}

static void every_category_is_in_the_file(void **state)
{
    (void)state;
    size_t want = 3; /* Preview_Event, Preview_Arrow, Preview_State */
    for (int32_t i = 0; i < XP_SLOG2_N_CATS; i++)
        if (can_write(i)) {
            want++;
            if (!cat_at(i))
                fail_msg("category %d is not in the file", i);
        }
    assert_int_equal(n_cats, want);
}

static void every_category_has_a_colour_of_its_own(void **state)
{
    (void)state;
    size_t near = 0, same = 0;
    double least = INFINITY;
    for (size_t i = 0; i < n_cats; i++)
        for (size_t j = i + 1; j < n_cats; j++) {
            const struct cat *p = &cats[i], *q = &cats[j];
            if (p->index < 0 && q->index < 0)
                continue; /* slog2sdk's own previews */
            double de = de2000(p->lab, q->lab);
            if (de < least)
                least = de;
            if (de >= MIN_DE00)
                continue;
            same += memcmp(p->rgb, q->rgb, 3) == 0;
            if (near++ < 40)
                print_message("too alike (CIEDE2000 %.2f): %s (%u,%u,%u) and %s (%u,%u,%u)\n", de,
                              p->name, p->rgb[0], p->rgb[1], p->rgb[2], q->name, q->rgb[0],
                              q->rgb[1], q->rgb[2]);
        }
    print_message("%zu categories, the closest two %.2f apart (CIEDE2000)\n", n_cats, least);
    if (near)
        fail_msg("%zu pairs of categories less than %.1f apart, %zu of them the same colour", near,
                 MIN_DE00, same);
}

/* ---- families ---- */

enum family { F_READ, F_WRITE, F_META, F_DISK, F_MPI, N_FAMILIES };

/* The families of docs/export.md, "Colours": hues in OKLCh degrees, OKLab
 * chroma.  OKLab, as its hues are even (CIE Lab's crowd blue and violet
 * into a few degrees). */
static const struct {
    const char *name;
    double hue_from, hue_to, chroma_min, chroma_max;
} families[N_FAMILIES] = {
    [F_READ] = {"read: greens, cyans, blues", 140, 270, 0.06, 1},
    [F_WRITE] = {"write: reds, oranges, browns", 15, 75, 0.06, 1},
    [F_META] = {"metadata: violets, purples, magentas", 280, 355, 0.06, 1},
    [F_DISK] = {"disk: golds, yellows, olives", 85, 115, 0.06, 1},
    [F_MPI] = {"other MPI calls: greys", 0, 360, 0, 0.025},
};

/* OKLab's chroma and hue (degrees) of an sRGB colour. */
static void oklch(const uint8_t rgb[3], double *chroma, double *hue)
{
    double r = linear(rgb[0]), g = linear(rgb[1]), b = linear(rgb[2]);
    double l = cbrt(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
    double m = cbrt(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
    double s = cbrt(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
    double a = 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s;
    double bb = 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s;
    *chroma = hypot(a, bb);
    *hue = hue_of(a, bb);
}

/* What the function's name says it is, independently of the table's
 * family column, so that a row declared in the wrong family shows. */
static enum family family_by_name(unsigned func)
{
    const char *n = iot_func_name(func);
    if (iot_func_kind(func) == IOT_KIND_DISK)
        return F_DISK;
    if (iot_func_kind(func) == IOT_KIND_MPIIO && strncmp(n, "MPI_File_", 9) != 0)
        return F_MPI; /* MPI_Wait*, MPI_Test*, MPI_Barrier, MPI_Send ... */
    return strstr(n, "read") ? F_READ : strstr(n, "write") ? F_WRITE : F_META;
}

static int in_family(const struct cat *c, enum family f)
{
    double ch, h;
    oklch(c->rgb, &ch, &h);
    return ch >= families[f].chroma_min && ch <= families[f].chroma_max &&
           h >= families[f].hue_from && h <= families[f].hue_to;
}

static void related_functions_share_a_family(void **state)
{
    (void)state;
    size_t wrong = 0;
    for (size_t i = 0; i < n_cats; i++) {
        const struct cat *c = &cats[i];
        enum family f;
        if (c->index >= 0 && c->index < XP_SLOG2_CAT_READ_PATH)
            f = family_by_name((unsigned)c->index);
        else if (c->index == XP_SLOG2_CAT_READ_PATH)
            f = F_READ;
        else if (c->index == XP_SLOG2_CAT_WRITE_PATH)
            f = F_WRITE;
        else if (c->index == XP_SLOG2_CAT_OTHER_PATH)
            f = F_META;
        else
            continue; /* the marker and the previews belong to no family */
        if (in_family(c, f))
            continue;
        double ch, h;
        oklch(c->rgb, &ch, &h);
        if (wrong++ < 40)
            print_message("%s (%u,%u,%u): OKLCh hue %.0f, chroma %.3f, not in family %s\n",
                          c->name, c->rgb[0], c->rgb[1], c->rgb[2], h, ch, families[f].name);
    }
    if (wrong)
        fail_msg("%zu categories outside their family's colours", wrong);
}

/* ---- stability ---- */

/* Readers come to know the colours of the common categories; a change of
 * gen_colours.py or of the table that moves them must be made on purpose,
 * with this list. */
static void common_colours_stay(void **state)
{
    (void)state;
    static const struct {
        int32_t cat;
        uint32_t rgb;
    } known[] = {
        {IOT_F_MPIIO_MPI_File_open, 0xFF96C3},
        {IOT_F_MPIIO_MPI_File_close, 0xD22D87},
        {IOT_F_MPIIO_MPI_File_read_at, 0x3CE100},
        {IOT_F_MPIIO_MPI_File_write_at, 0xFFB44B},
        {IOT_F_MPIIO_MPI_File_write_all, 0xE1874B},
        {IOT_F_POSIX_pwrite, 0xC31E2D},
        {IOT_F_DISK_readv, 0x787800},
        {IOT_F_DISK_writev, 0xC3961E},
        {XP_SLOG2_CAT_READ_PATH, 0x008CFF},
        {XP_SLOG2_CAT_WRITE_PATH, 0xFF4000},
        {XP_SLOG2_CAT_OTHER_PATH, 0xAA50FF},
        {XP_SLOG2_CAT_ORIGIN, 0xFF00A0},
    };
    size_t moved = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const struct cat *c = cat_at(known[i].cat);
        assert_non_null(c);
        uint32_t rgb = (uint32_t)c->rgb[0] << 16 | (uint32_t)c->rgb[1] << 8 | c->rgb[2];
        if (rgb == known[i].rgb)
            continue;
        moved++;
        print_message("%s: colour 0x%06X, was 0x%06X\n", c->name, rgb, known[i].rgb);
    }
    if (moved)
        fail_msg("%zu common categories changed colour", moved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ciede2000_matches_the_published_pairs),
        cmocka_unit_test(every_category_is_in_the_file),
        cmocka_unit_test(every_category_has_a_colour_of_its_own),
        cmocka_unit_test(related_functions_share_a_family),
        cmocka_unit_test(common_colours_stay),
    };
    return cmocka_run_group_tests(tests, write_and_read, NULL);
}
