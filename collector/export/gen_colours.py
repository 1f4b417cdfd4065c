#!/usr/bin/env python3
"""Chooses the colour of every category iotrace-export --slog2 writes and
writes them as a C table (docs/export.md, "Colours").

Each function of proto/functions.tsv belongs to the family its row declares,
and a family is a range of hues.  A family's key colour goes to its arrows;
its functions, in id order, each take the colour of the family's range that
is farthest (CIEDE2000) from its key and from the colours its functions
already took, a vivid one while vivid ones are still far enough.  A family
leaves out the colours within APART of an earlier family's range and of the
colours that belong to no family, so families never come near each other.

Nothing here depends on a trace, so a function has the same colour in every
file; and as ids are never renumbered and new functions are appended, a
function keeps its colour when others are added."""
import collections
import math
import sys

# In this order (a family gives up what is near an earlier one): name, hues
# in OKLCh degrees (None: any), chroma range in OKLab, key colour.  OKLCh,
# as its hues are even: blue stays apart from violet, yellow from green.
FAMILIES = [
    ("mpi", None, (0, 0.025), (192, 192, 192)),         # greys
    ("disk", (85, 115), (0.06, 1), (220, 200, 0)),      # golds, yellows, olives
    ("write", (15, 75), (0.06, 1), (255, 64, 0)),       # reds, oranges, browns
    ("read", (140, 270), (0.06, 1), (0, 140, 255)),     # greens, cyans, blues
    ("meta", (280, 355), (0.06, 1), (170, 80, 255)),    # violets, purples, magentas
]
# The arrows' families: to a disk read, a disk write, anything else.
PATHS = ("read", "write", "meta")
# Colours of no family: slog2sdk's preview categories (white, and yellow
# for arrows), the time-0 marker and unknown functions.
PREVIEW = [(255, 255, 255), (255, 255, 0)]
ORIGIN = (255, 0, 160)
UNKNOWN = (128, 128, 128)
# CIE L*: dark enough to read on a white background, light enough on
# Jumpshot's black one.
LIGHTNESS = (35, 88)
APART = 7.5  # CIEDE2000 between families, and from the colours of none
# A family's first functions, the common ones (the oldest MPI-IO calls have
# the lowest ids), take vivid colours (OKLab chroma, CIE L*) while these
# stay VIVID_APART from the family's others, rather than the pale and dark
# ends of the range that lie farthest from the key.
VIVID = (0.12, (45, 80))
VIVID_APART = 15
STEP = 15  # the sRGB grid the colours are taken from: 0, 15, ... 255
# Two colours less than APART apart in CIEDE2000 are less than this apart
# in CIE76 on the grid (46 at the most, in the blues), so that only
# neighbours need comparing.
REACH = 48


def linear(v):
    c = v / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def lab(rgb):
    """sRGB (D65) to CIE Lab."""
    r, g, b = (linear(v) for v in rgb)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883
    f = [t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in (x, y, z)]
    return (116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2]))


def oklch(rgb):
    """sRGB to OKLab's chroma and hue (degrees)."""
    r, g, b = (linear(v) for v in rgb)
    lms = (0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b,
           0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b,
           0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b)
    l, m, s = (v ** (1 / 3) for v in lms)
    a = 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s
    b = 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s
    return math.hypot(a, b), hue(a, b)


def hue(a, b):
    return math.degrees(math.atan2(b, a)) % 360 if a or b else 0.0


def de2000(p, q):
    """CIEDE2000 colour difference of two Lab colours."""
    (L1, a1, b1), (L2, a2, b2) = p, q
    c7 = ((math.hypot(a1, b1) + math.hypot(a2, b2)) / 2) ** 7
    g = 0.5 * (1 - math.sqrt(c7 / (c7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1, h2 = hue(a1, b1), hue(a2, b2)
    dh = 0.0
    if c1 * c2:
        dh = h2 - h1
        dh += -360 if dh > 180 else 360 if dh < -180 else 0
    dL, dC = L2 - L1, c2 - c1
    dH = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    Lm, Cm, hm = (L1 + L2) / 2, (c1 + c2) / 2, h1 + h2
    if c1 * c2:
        hm = hm / 2 if abs(h1 - h2) <= 180 else (hm + 360) / 2 if hm < 360 else (hm - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(hm - 30)) + 0.24 * math.cos(math.radians(2 * hm))
         + 0.32 * math.cos(math.radians(3 * hm + 6)) - 0.20 * math.cos(math.radians(4 * hm - 63)))
    rc = 2 * math.sqrt(Cm ** 7 / (Cm ** 7 + 25 ** 7))
    theta = 30 * math.exp(-(((hm - 275) / 25) ** 2))
    sl = 1 + 0.015 * (Lm - 50) ** 2 / math.sqrt(20 + (Lm - 50) ** 2)
    sc, sh = 1 + 0.045 * Cm, 1 + 0.015 * Cm * t
    rt = -math.sin(math.radians(2 * theta)) * rc
    return math.sqrt((dL / sl) ** 2 + (dC / sc) ** 2 + (dH / sh) ** 2 + rt * (dC / sc) * (dH / sh))


class Colour:
    def __init__(self, rgb):
        self.rgb = rgb
        self.lab = lab(rgb)
        self.chroma, self.hue = oklch(rgb)

    def in_range(self, hues, chroma):
        if not (LIGHTNESS[0] <= self.lab[0] <= LIGHTNESS[1]):
            return False
        if not (chroma[0] <= self.chroma <= chroma[1]):
            return False
        return hues is None or hues[0] <= self.hue <= hues[1]

    def vivid(self):
        return self.chroma >= VIVID[0] and VIVID[1][0] <= self.lab[0] <= VIVID[1][1]


class Near:
    """Colours, found by their neighbourhood in Lab."""

    def __init__(self):
        self.cells = collections.defaultdict(list)

    @staticmethod
    def cell(c):
        return tuple(int(v // (REACH / 2)) for v in c.lab)

    def add(self, c):
        self.cells[self.cell(c)].append(c)

    def within(self, c, limit):
        x, y, z = self.cell(c)
        for dx in range(-2, 3):
            for dy in range(-2, 3):
                for dz in range(-2, 3):
                    for o in self.cells.get((x + dx, y + dy, z + dz), ()):
                        if math.dist(c.lab, o.lab) < REACH and de2000(c.lab, o.lab) < limit:
                            return True
        return False


def read_table(path):
    known = {f[0] for f in FAMILIES}
    rows = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fid, kind, name, family = line.split("\t")
        if family not in known:
            sys.exit(f"{path}: {name}: unknown family '{family}' ({', '.join(sorted(known))})")
        rows.append((int(fid), name, family))
    return sorted(rows)


def farthest(among, nearest):
    """The index of among whose nearest colour taken is farthest; the first
    of equals."""
    return max(among, key=lambda i: (nearest[i], -i))


def choose(rows):
    """{id: rgb} for every function of rows."""
    levels = range(0, 256, STEP)
    grid = [Colour((r, g, b)) for r in levels for g in levels for b in levels]
    kept_off = Near()  # what a family keeps APART from
    for rgb in PREVIEW + [ORIGIN, UNKNOWN]:
        kept_off.add(Colour(rgb))
    colours = {}
    for family, hues, chroma, key in FAMILIES:
        key = Colour(key)
        if not key.in_range(hues, chroma) or kept_off.within(key, APART):
            sys.exit(f"gen_colours.py: the key colour of {family} is outside what it may use")
        own = [c for c in grid if c.in_range(hues, chroma)]
        cands = [c for c in own if not kept_off.within(c, APART)]
        for c in own:
            kept_off.add(c)
        # Each candidate's distance to the nearest colour the family has
        # taken, its key first; rounded, so that the last bit of a libm
        # does not decide between two.
        nearest = [round(de2000(c.lab, key.lab), 6) for c in cands]
        vivid = [i for i, c in enumerate(cands) if c.vivid()]
        for fid, _, _ in (r for r in rows if r[2] == family):
            best = farthest(vivid, nearest) if vivid else None
            if best is None or nearest[best] < VIVID_APART:
                best = farthest(range(len(cands)), nearest)
            colours[fid] = cands[best].rgb
            took = cands[best].lab
            nearest = [min(n, round(de2000(c.lab, took), 6)) for n, c in zip(nearest, cands)]
    return colours


def hexrgb(rgb):
    return "0x%02X%02X%02X" % rgb


def main():
    tsv, out = sys.argv[1:3]
    rows = read_table(tsv)
    colours = choose(rows)
    keys = {f[0]: f[3] for f in FAMILIES}
    with open(out, "w") as c:
        c.write("/* Generated from proto/functions.tsv by gen_colours.py. Do not edit. */\n")
        c.write('#include "export_colours.h"\n\n')
        c.write("static const uint32_t funcs[256] = {\n")
        for fid, name, family in rows:
            c.write(f"    [{fid}] = {hexrgb(colours[fid])}, /* {family}: {name} */\n")
        c.write("};\n\n")
        c.write("const uint32_t xp_colour_path[3] = {%s};\n"
                % ", ".join(hexrgb(keys[f]) for f in PATHS))
        c.write(f"const uint32_t xp_colour_origin = {hexrgb(ORIGIN)};\n\n")
        c.write("uint32_t xp_colour_func(unsigned func)\n{\n")
        c.write(f"    return func < 256 && funcs[func] ? funcs[func] : {hexrgb(UNKNOWN)};\n}}\n")


if __name__ == "__main__":
    main()
