"""Checks of `iotrace-export --slog2` against `--jsonl` of the same store,
read back with the project's SLOG-2 reader (`--dump-slog2`, which also
checks the tree's invariants): the file must hold a state for every event
with its CallID, on the timeline of its rank or server thread, without
states on one lane overlapping except by nesting, every category in a
colour of its own, and an arrow of the right category from
each MPI-IO call to each disk operation that carried its CallID, from the
call's start on its rank's timeline to the operation's start on its server
thread's, as many arrows as there are call -> disk operation pairs in the
JSON Lines; and Jumpshot's first view (check_first_view) one row per rank
and per server thread, grouped by node, labelled by rank or by brick and
thread."""
import collections
import re
import subprocess

CAT_RE = re.compile(r'^category index=(-?\d+) name="([^"]*)" topo=(\w+) color=\((\d+),(\d+),(\d+),')
DRAW_RE = re.compile(r'^drawable ID\((\d+),(\d+)\) \w+ \d+ Primitive cat=(-?\d+) topo=(\w+) '
                     r'TimeBBox\(([^,]+),([^)]+)\) \[([^\]]*)\] bsize=\d+ info="([^"]*)"')
VERTEX_RE = re.compile(r'\(([^,]+), (-?\d+)\)')
MAP_RE = re.compile(r'^lineid map=(\d+) line=(-?\d+) values=\[([^\]]*)\]')
MAPHEAD_RE = re.compile(r'^lineidmap (\d+) title="([^"]*)" columns=\[(.*)\] rows=')
# The first map's title: "rank r, brick b thread t = BASE*(b+1)+t", or with
# the node in front when that order would not group the rows by node.
FIRST_TITLE_RE = re.compile(r'^iotrace: (?:rank r, brick b thread t = (\d+)\*\(b\+1\)\+t|'
                            r'(\d+)\*node \+ \(rank r, or (\d+)\*\(b\+1\)\+t for brick b '
                            r'thread t\))$')
DETAIL_TITLE = "iotrace: node, rank or brick, thread, lane"
HEADER_RE = re.compile(r'MaxTreeDepth=(\d+)')
SHADOW_RE = re.compile(r'^shadow ID\((\d+),(\d+)\) child=\S+ \w+ \d+ cat=(-?\d+) TimeBBox\S+ \[(.*?)\] '
                       r'.*Nrobjs=(\d+)')


def fail(msg):
    raise AssertionError(msg)


class Dump:
    """What `iotrace-export --dump-slog2` printed, parsed."""

    def __init__(self, export, path):
        res = subprocess.run([export, "--dump-slog2", path], capture_output=True, text=True,
                             timeout=300)
        if res.returncode != 0:
            fail(f"--dump-slog2 {path} exited {res.returncode}: {res.stderr}\n"
                 + "\n".join(l for l in res.stdout.splitlines() if l.startswith("violation"))[:3000])
        self.categories, self.drawables, self.maps = {}, [], collections.defaultdict(dict)
        self.shadows = []  # preview drawables: {"node": (depth, index), "cat", "verts", "n"}
        self.map_heads = {}  # map number -> (title, column labels)
        self.depth = None
        for line in res.stdout.splitlines():
            if line.startswith("header"):
                self.depth = int(HEADER_RE.search(line).group(1))
            elif m := CAT_RE.match(line):
                self.categories[int(m.group(1))] = (m.group(2), m.group(3),
                                                    tuple(int(m.group(i)) for i in (4, 5, 6)))
            elif m := DRAW_RE.match(line):
                verts = [(float(t), int(l)) for t, l in VERTEX_RE.findall(m.group(7))]
                self.drawables.append({"node": (int(m.group(1)), int(m.group(2))),
                                       "cat": int(m.group(3)), "topo": m.group(4),
                                       "verts": verts, "info": m.group(8)})
            elif m := SHADOW_RE.match(line):
                self.shadows.append({"node": (int(m.group(1)), int(m.group(2))), "cat": int(m.group(3)),
                                     "verts": [(float(t), int(l)) for t, l in VERTEX_RE.findall(m.group(4))],
                                     "n": int(m.group(5))})
            elif m := MAPHEAD_RE.match(line):
                self.map_heads[int(m.group(1))] = (m.group(2), re.findall(r'"([^"]*)"', m.group(3)))
            elif m := MAP_RE.match(line):
                self.maps[int(m.group(1))][int(m.group(2))] = [int(v) for v in m.group(3).split(",")]
        if not res.stdout.rstrip().splitlines()[-1].endswith("violations=0"):
            fail(f"{path}: the reader found violations")

    def name(self, d):
        return self.categories[d["cat"]][0]

    def of_topo(self, topo):
        return [d for d in self.drawables if d["topo"] == topo]

    def line_map(self):
        """line -> [node, rank, brick, thread, lane] from iotrace's map."""
        for rows in self.maps.values():
            if rows and len(next(iter(rows.values()))) == 5:
                return rows
        fail("no line-ID map with node, rank, brick, thread, lane")


def check_first_view(dump, label="--slog2"):
    """Jumpshot opens the file's first line-ID map, shows one row per value
    of its first column (the lanes, its second column, folded below) and
    labels the row with that integer.  That map must give every rank and
    every server thread one row of its own, rank r labelled r and the t-th
    thread (by thread id) of brick b labelled BASE*(b+1)+t, the rows
    grouped by node in the order of the labels; and only when that order
    would split a node, every label gets SCALE*node in front.  The map
    after it gives each line its node, rank, brick, thread id and lane, and
    the Identity Map comes last.  For an export of one job (ranks are
    numbered in (job, rank) order only when two share a number).  Returns
    (mode, rows) for the caller's message: mode "rank" or "node"."""
    heads = dump.map_heads
    if len(heads) != 3 or heads[3] != ("Identity Map", ["LineID"]):
        fail(f"{label}: want the first view, the detail map and the Identity Map, got {heads}")
    title, columns = heads[1]
    m = FIRST_TITLE_RE.match(title)
    if not m:
        fail(f"{label}: the first map is {title!r}, not iotrace's first view")
    base, scale = int(m.group(1) or m.group(3)), int(m.group(2) or 0)
    want_cols = [f"{scale}*node + (rank, or {base}*(brick+1)+thread)" if scale
                 else f"rank, or {base}*(brick+1)+thread", "lane"]
    want_detail = (DETAIL_TITLE, ["node", "rank", "brick", "thread", "lane"])
    if columns != want_cols or heads[2] != want_detail:
        fail(f"{label}: map columns {heads[1]}, {heads[2]}")
    first, detail = dump.maps[1], dump.maps[2]
    if set(first) != set(detail) or set(first) != set(dump.maps[3]):
        fail(f"{label}: the maps list different lines")

    # What each row should be called, from the detail map.  Traced
    # processes without a rank (rank and brick -1) cannot be told apart
    # there when they share a node: they are only checked to come first
    # (negative labels), or after their node's threads.
    timelines = {tuple(v[:4]) for v in detail.values()}   # (node, rank, brick, thread)
    threads = collections.defaultdict(list)
    for node, rank, brick, tid in timelines:
        if brick >= 0:
            threads[brick].append(tid)
    top = base * (max(threads, default=-1) + 2)  # above every brick's labels

    def local(t):
        node, rank, brick, tid = t
        if brick >= 0:
            return base * (brick + 1) + sorted(threads[brick]).index(tid)
        return rank if rank >= 0 else None
    known = sorted((t for t in timelines if local(t) is not None), key=local)
    # processes first, by node (the exporter sorts them by node name, as the
    # node numbers are), then ranks and brick threads by label
    order = [t[0] for t in sorted(timelines, key=lambda t: (
        local(t) is not None, t[0] if local(t) is None else local(t)))]
    runs = [n for i, n in enumerate(order) if i == 0 or n != order[i - 1]]
    if (len(runs) != len(set(runs))) != bool(scale):
        fail(f"{label}: the node goes in front of the labels only when the order of ranks, then "
             f"brick threads splits a node: scale {scale}, nodes in that order {order}")
    label_of = {}
    for line, (value, lane) in first.items():
        t = tuple(detail[line][:4])
        want = local(t)
        ok = (value == scale * t[0] + want if want is not None
              else scale * t[0] + top <= value < scale * (t[0] + 1) if scale else value < 0)
        if not ok or lane != detail[line][4]:
            fail(f"{label}: line {line} ({t}, lane {detail[line][4]}) is row {value} lane {lane}, "
                 f"want row {want if want is None else scale * t[0] + want}")
        label_of.setdefault(value, set()).add(t)
    if any(len(v) != 1 for v in label_of.values()) or \
            len({next(iter(v)) for v in label_of.values()} & set(known)) != len(known):
        fail(f"{label}: rows {label_of} are not one per rank and per server thread")
    nodes = [next(iter(label_of[v]))[0] for v in sorted(label_of)]
    runs = [n for i, n in enumerate(nodes) if i == 0 or n != nodes[i - 1]]
    if len(runs) != len(set(runs)):
        fail(f"{label}: rows in label order visit nodes {runs}: not grouped by node")
    for d in dump.drawables:
        if any(line not in first for _, line in d["verts"]):
            fail(f"{label}: a drawable on a line the first view lacks: {d}")
    return ("node" if scale else "rank"), sorted(label_of)


def export_slog2(export, store, path, *args):
    res = subprocess.run([export, "--store", store, "--slog2", path, *args],
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        fail(f"--slog2 {' '.join(args)} exited {res.returncode}: {res.stderr}")
    return res.stderr


def callid_of(info):
    m = re.match(r"CallID=0x([0-9a-f]+)", info)
    return "0x" + m.group(1) if m else None


def state_name(e):
    return ("disk " if e["kind"] == "disk" else "") + e["func"]


def path_kind(func):
    return "Read Path" if "read" in func else "Write Path" if "write" in func else "Other Path"


def check_colours(dump, label):
    """No two categories of the file share a colour (how far apart they are
    is test_slog2_export's to check, for every category there is), but for
    slog2sdk's white of Preview_Event and Preview_State."""
    by_colour = collections.defaultdict(list)
    for index, (name, _, rgb) in dump.categories.items():
        if index not in (-1, -3):
            by_colour[rgb].append(name)
    shared = {rgb: names for rgb, names in by_colour.items() if len(names) > 1}
    if shared:
        fail(f"{label}: categories sharing a colour: {shared}")


def check_lanes(states):
    """On one line, states nest or follow each other, never cross."""
    by_line = collections.defaultdict(list)
    for d in states:
        by_line[d["verts"][0][1]].append((d["verts"][0][0], d["verts"][1][0]))
    for line, spans in by_line.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for s, e in spans:
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and stack[-1] < e:
                fail(f"line {line}: state [{s}, {e}] crosses an open state ending at {stack[-1]}")
            stack.append(e)


def consistent_export(export, store, jsonl, path, *args):
    """The SLOG-2 file and the JSON Lines of one state of the store: while
    an agent is running, a new clock sample can move aligned times by a few
    nanoseconds between two exports, so both are taken until the JSON Lines
    before and after the SLOG-2 export agree."""
    for _ in range(5):
        before = jsonl()
        summary = export_slog2(export, store, path, *args)
        if jsonl() == before:
            return before, summary
    fail("the store kept changing during the SLOG-2 export")


def check(export, store, jsonl, job, tmp, label):
    """jsonl(): the --jsonl export of the job, as a list of events.
    Returns the dump of the file."""
    path = f"{tmp}/{label.replace(' ', '_')}.slog2"
    events, summary = consistent_export(export, store, jsonl, path, "--job", job)
    dump = Dump(export, path)
    origin = min(e["t_start"] for e in events if e["kind"] != "drop")
    t = lambda ns: (ns - origin) / 1e9  # noqa: E731

    # A state for every event, under its function's category, with its CallID.
    want = collections.Counter((state_name(e), e["callid"] or "0x0") for e in events
                               if e["kind"] in ("mpiio", "posix", "disk"))
    states = dump.of_topo("State")
    got = collections.Counter((dump.name(d), callid_of(d["info"])) for d in states)
    if got != want:
        fail(f"{label}: states differ from the events: missing {list((want - got).items())[:5]}, "
             f"extra {list((got - want).items())[:5]}")
    check_lanes(states)
    check_colours(dump, label)

    # An arrow per call -> disk operation pair, from the call to the disk
    # operation, in the category of the disk operation's kind.
    calls = {}
    for e in events:
        if e["kind"] == "mpiio":
            calls.setdefault((e["job"], e["callid"]), e)
    pairs = [(calls[(e["job"], e["callid"])], e) for e in events
             if e["kind"] == "disk" and e["callid"] and (e["job"], e["callid"]) in calls]
    arrows = dump.of_topo("Arrow")
    if len(arrows) != len(pairs):
        fail(f"{label}: {len(arrows)} arrows for {len(pairs)} call -> disk operation pairs")
    lines = dump.line_map()
    # Times are compared exactly: both sides divide the same integer
    # nanoseconds by 1e9, and the reader prints doubles that read back exact.
    want_arrows = collections.Counter((path_kind(d["func"]), d["callid"], c["mpi_rank"], d["tid"],
                                       t(c["t_start"]), t(d["t_start"])) for c, d in pairs)
    got_arrows = collections.Counter()
    for a in arrows:
        (send, src), (recv, dst) = a["verts"]
        name = dump.categories[a["cat"]][0]
        got_arrows[(name, callid_of(a["info"]), lines[src][1], lines[dst][3], send, recv)] += 1
    if got_arrows != want_arrows:
        fail(f"{label}: arrows differ from the pairs: missing "
             f"{list((want_arrows - got_arrows).items())[:3]}, extra "
             f"{list((got_arrows - want_arrows).items())[:3]}")
    per_kind = collections.Counter(k[0] for k in want_arrows.elements())
    mode, rows = check_first_view(dump, label)
    print(f"ok: {label}: Jumpshot's first view: {len(rows)} rows labelled {rows} "
          f"({'node in front' if mode == 'node' else 'ranks, then brick threads'})")
    print(f"ok: {label}: {len(states)} states, {len(arrows)} arrows "
          f"({', '.join(f'{n} {k}' for k, n in sorted(per_kind.items()))}) = call -> disk "
          f"operation pairs in --jsonl; {summary.strip().split('; ')[1]}")
    return dump


def with_reference(export, store, job, tmp, *args):
    """A variant's dump and the default file's dump of one state of the
    store (see consistent_export)."""
    key = lambda d: (d["cat"], tuple(d["verts"]), d["info"])  # noqa: E731
    for _ in range(5):
        export_slog2(export, store, f"{tmp}/ref-a.slog2", "--job", job)
        export_slog2(export, store, f"{tmp}/variant.slog2", "--job", job, *args)
        export_slog2(export, store, f"{tmp}/ref-b.slog2", "--job", job)
        ref = Dump(export, f"{tmp}/ref-a.slog2")
        if list(map(key, ref.drawables)) == list(map(key, Dump(export, f"{tmp}/ref-b.slog2").drawables)):
            return ref, Dump(export, f"{tmp}/variant.slog2")
    fail("the store kept changing during the SLOG-2 exports")


def check_options(export, store, job, tmp, whole):
    """A tiny leaf size, a layer choice and a time window on the same store."""
    key = lambda d: (d["cat"], tuple(d["verts"]), d["info"])  # noqa: E731
    ref, tiny = with_reference(export, store, job, tmp, "--leaf-size", "512", "--children", "3")
    if tiny.depth < 3:
        fail(f"--leaf-size 512: tree depth {tiny.depth}, want a multi-level tree")
    if collections.Counter(map(key, tiny.drawables)) != collections.Counter(map(key, ref.drawables)):
        fail("--leaf-size 512 holds other drawables than the default file")
    print(f"ok: --leaf-size 512 --children 3: a valid tree of depth {tiny.depth}, "
          f"the same {len(tiny.drawables)} drawables")

    ref, part = with_reference(export, store, job, tmp, "--layers", "mpiio,arrows")
    kinds = {part.categories[d["cat"]][0] for d in part.of_topo("State")}
    if any(not k.startswith("MPI_") for k in kinds):
        fail(f"--layers mpiio,arrows drew {sorted(k for k in kinds if not k.startswith('MPI_'))}")
    want = [d for d in ref.drawables if d["topo"] == "Arrow" or
            (d["topo"] == "State" and ref.name(d).startswith("MPI_"))]
    got = [d for d in part.drawables if d["topo"] != "Event"]

    # Without POSIX states fewer lanes may be needed: timelines are compared
    # by what they stand for (node, rank, brick, thread), not by line ID.
    def where(dump):
        rows = dump.line_map()
        return lambda d: (d["cat"], d["info"],
                          tuple((t, tuple(rows[l][:4])) for t, l in d["verts"]))
    if collections.Counter(map(where(part), got)) != collections.Counter(map(where(ref), want)):
        fail(f"--layers mpiio,arrows: {len(got)} states and arrows, want the {len(want)} "
             "MPI-IO states and arrows of the whole file")
    print(f"ok: --layers mpiio,arrows: the {len(part.of_topo('State'))} MPI-IO states and "
          f"{len(part.of_topo('Arrow'))} arrows, nothing else")

    states = sorted(d["verts"][1][0] for d in whole.of_topo("State"))
    lo, hi = states[len(states) // 3], states[2 * len(states) // 3]
    ref, win = with_reference(export, store, job, tmp, "--from", repr(lo), "--to", repr(hi))
    inside = [d for d in ref.drawables
              if max(v[0] for v in d["verts"]) >= lo and min(v[0] for v in d["verts"]) <= hi]
    if collections.Counter(map(key, win.drawables)) != collections.Counter(map(key, inside)):
        fail(f"--from {lo} --to {hi}: {len(win.drawables)} drawables, want the {len(inside)} "
             "that overlap the window")
    print(f"ok: --from {lo:.6f} --to {hi:.6f}: the {len(inside)} drawables overlapping the window")
