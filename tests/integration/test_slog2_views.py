#!/usr/bin/env python3
"""The line-ID maps of `iotrace-export --slog2` as Jumpshot shows them, read
back with the project's reader (`--dump-slog2`): Jumpshot opens the first
map with only its first column unfolded and labels each row with that
column's integer (docs/slog2-format.md, "How Jumpshot shows the maps"), so
that map must give one row per rank and per server thread, grouped by node,
rank r labelled r and the t-th thread of brick b labelled 1000*(b+1)+t;
and no two of the file's categories share a colour.

Two stores of one synthetic job written by bench_analysis (4 ranks, 2
bricks of 3 threads each, an arrow from every write call to each of its two
disk operations): ranks on one node and both bricks on another (rows in
rank, then brick order already group by node), and each of two nodes
running two ranks and a brick (the node's number then goes in front of
every label).

At the first zoom (the whole file, the tree's root) every arrow is drawn,
itself or inside a preview arrow of the root, from a rank row to a brick
row, also when a small --leaf-size makes the tree deep. The same stores'
--chrome traces list each node's processes together (ranks and bricks of
one node next to each other in the viewer's order).

usage: test_slog2_views.py --export=PATH --bench-analysis=PATH"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import slog2_export  # noqa: E402

LAYOUTS = {
    # name: (bench_analysis layout options, mode, the labels in row order)
    "2 nodes: 4 ranks | 2 bricks": (["-p", "4", "-s", "2"], "rank",
                                    [0, 1, 2, 3, 1000, 1001, 1002, 2000, 2001, 2002]),
    "2 nodes: 2 ranks + 1 brick each": (["-p", "2", "-c"], "node",
                                        [0, 1, 1000, 1001, 1002,
                                         10002, 10003, 12000, 12001, 12002]),
}


def check_first_zoom(export, store, path, name, n_arrows):
    slog2_export.export_slog2(export, store, path, "--job", "bench", "--leaf-size", "4096")
    dump = slog2_export.Dump(export, path)
    detail = dump.maps[2]
    root = (dump.depth, 0)
    real = [d for d in dump.of_topo("Arrow") if d["cat"] >= 0]
    at_root = [s for s in dump.shadows if s["node"] == root and s["cat"] == -2]
    # Long arrows are kept in the root itself; the rest are in its previews.
    shown = sum(s["n"] for s in at_root) + sum(d["node"] == root for d in real)
    bad = [s for s in at_root if detail[s["verts"][0][1]][1] < 0 or detail[s["verts"][-1][1]][2] < 0]
    if dump.depth < 2 or len(real) != n_arrows or shown != n_arrows or bad:
        slog2_export.fail(f"{name}: with --leaf-size 4096: depth {dump.depth}, {len(real)} arrows; "
                          f"the root's preview arrows hold {shown} of {n_arrows}, "
                          f"{len(bad)} not from a rank row to a brick row")
    print(f"ok: {name}: tree depth {dump.depth}; at the first zoom the root's "
          f"{sum(d['node'] == root for d in real)} arrows and {len(at_root)} preview arrows, from "
          f"rank rows to brick rows, stand for all {n_arrows} arrows")


def check_chrome_nodes(export, store, path, name):
    r = subprocess.run([export, "--store", store, "--job", "bench", "--chrome", path],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        slog2_export.fail(f"{name}: --chrome exited {r.returncode}: {r.stderr}")
    procs = {}
    for e in json.load(open(path))["traceEvents"]:
        if e["ph"] == "M" and e["name"] in ("process_name", "process_sort_index"):
            procs.setdefault(e["pid"], {})[e["name"]] = e["args"]
    order = [p["process_name"]["name"] for _, p in
             sorted(procs.items(), key=lambda kv: kv[1]["process_sort_index"]["sort_index"])]
    nodes = [n.split(" \u00b7 ")[0] for n in order]
    runs = [n for i, n in enumerate(nodes) if i == 0 or nodes[i - 1] != n]
    if len(runs) != len(set(nodes)) or len(set(nodes)) < 2:
        slog2_export.fail(f"{name}: --chrome processes not grouped by node: {order}")
    print(f"ok: {name}: --chrome processes in order {order}")


def main():
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    export, bench = args["export"], args["bench-analysis"]
    tmp = tempfile.mkdtemp(prefix="iotrace-slog2-views-")
    try:
        for name, (layout, mode, labels) in LAYOUTS.items():
            store = os.path.join(tmp, f"store-{mode}")
            subprocess.run([bench, "-n", "3000", "-r", "4", "-S", "2", "-t", "3", *layout,
                            "-d", store, "-k"], check=True, capture_output=True, timeout=120)
            path = os.path.join(tmp, f"{mode}.slog2")
            slog2_export.export_slog2(export, store, path, "--job", "bench")
            dump = slog2_export.Dump(export, path)
            got_mode, rows = slog2_export.check_first_view(dump, name)
            slog2_export.check_colours(dump, name)
            if (got_mode, rows) != (mode, labels):
                slog2_export.fail(f"{name}: first view {got_mode} {rows}, want {mode} {labels}")
            arrows = dump.of_topo("Arrow")
            first, detail = dump.maps[1], dump.maps[2]
            ends = {(first[a["verts"][0][1]][0], first[a["verts"][1][1]][0]) for a in arrows}
            if not arrows or any(detail[a["verts"][0][1]][1] < 0 or detail[a["verts"][1][1]][2] < 0
                                 for a in arrows):
                slog2_export.fail(f"{name}: arrows should run from rank rows to brick rows: "
                                  f"{sorted(ends)[:5]}")
            print(f"ok: {name}: Jumpshot's first view {dump.map_heads[1][0]!r}: rows {rows}, "
                  f"lanes folded below, {len(arrows)} arrows from rank rows to brick-thread rows")
            check_first_zoom(export, store, os.path.join(tmp, f"{mode}-deep.slog2"), name, len(arrows))
            check_chrome_nodes(export, store, os.path.join(tmp, f"{mode}.json"), name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
