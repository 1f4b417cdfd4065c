#!/usr/bin/env python3
"""Next to another tool: libiotrace-client preloaded together with
fake_darshan (tests/tools/fake_darshan.c: Darshan's way of interposing, with
PMPI_ aliases, forwarding to PMPI_ and MPI-IO queries of its own inside its
wrappers) and with fake_recorder (the same, wrapping the MPI_File_get_*
queries too, as Recorder does, so that its own queries pass through its
query wrappers), each in both orders, under `mpiexec -n 2` running
tests/mpi/mpiio_mix and tests/mpi/queries (every MPI_File_get_* query, one
of them by its PMPI_ name, and MPI_File_get_position_shared under an empty
view).

Checked for each tool and order against a run with iotrace alone and one
with the fake tool alone:
- iotrace records the same MPI-IO calls per rank and function, so each of
  the application's calls exactly once and none of the tool's queries
  (MPI_File_get_byte_offset, get_position); for `queries`, exactly the calls
  the program makes, its queries included;
- iotrace records the same POSIX calls on the data file per rank and
  function;
- every POSIX call made while a recorded MPI_File_get_position_shared runs
  (ROMIO reads the shared file pointer's file) carries its CallID, and each
  such call made one;
- the fake tool saw the same calls as alone, and as many as iotrace recorded
  for the functions it wraps (POSIX: on the rank's main thread);
- the program's output and the file it writes are those of an untraced run.
"""
import collections
import filecmp
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

NPROCS, B = 2, 4096
QUERIES = {"MPI_File_get_byte_offset", "MPI_File_get_position"}
# What tests/mpi/queries calls per rank (its header): ROUNDS rounds of every
# query, then ROUNDS MPI_File_get_position_shared and a get_view under the
# empty view, and one MPI_File_get_size by its PMPI_ name.
ROUNDS = 3
EVERY_QUERY = ("get_position", "get_position_shared", "get_size", "get_byte_offset", "get_view",
               "get_info", "get_amode", "get_group", "get_atomicity", "get_type_extent",
               "get_errhandler")
PROGRAM_QUERIES = collections.Counter({"MPI_File_" + q: ROUNDS for q in EVERY_QUERY})
PROGRAM_QUERIES.update({"MPI_File_get_position_shared": ROUNDS, "MPI_File_get_view": 1,
                        "MPI_File_get_size": 1, "MPI_File_open": 1, "MPI_File_write_at": 1,
                        "MPI_File_write_shared": 1, "MPI_File_set_view": 2,
                        "MPI_File_read_at": 1, "MPI_File_close": 1})


def fail(msg):
    raise AssertionError(msg)


def run(bins, dep, name, preload, job=None, app="app"):
    """Runs mpiio_mix (or bins[app]) with `preload` (a list of libraries, in
    order, or None for no preloading at all); returns its output and the
    fake tool's reports by rank."""
    data = os.path.join(dep.tmp, name + ".bin")
    report = os.path.join(dep.tmp, name + ".fake")
    env = {"FAKE_TOOL_OUT": report, "FAKE_TOOL_MATCH": data}
    if job:
        env.update({"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job})
    if preload is not None:
        env["LD_PRELOAD"] = bins["preload_prefix"] + ":".join(preload)
    argv = [bins[app], data] + ([str(B)] if app == "app" else [])
    res = mpirun(bins, NPROCS, argv, env=env, preload=False)
    if res.returncode != 0:
        fail(f"{name}: exit {res.returncode}\n{res.stderr}")
    fake = {}
    for rank in range(NPROCS):
        path = f"{report}.{rank}"
        if os.path.exists(path):
            fake[rank] = json.load(open(path))
    return res.stdout.replace(data, "FILE"), data, fake


def counts(events, data):
    """(MPI-IO counts, POSIX counts on the data file) by rank and function."""
    mpi = collections.defaultdict(collections.Counter)
    posix = collections.defaultdict(collections.Counter)
    posix_main = collections.defaultdict(collections.Counter)
    for e in events:
        if e["kind"] == "mpiio":
            mpi[e["mpi_rank"]][e["func"]] += 1
        elif e["kind"] == "posix" and e["file"] == data:
            posix[e["mpi_rank"]][e["func"]] += 1
            if e["tid"] == e["pid"]:
                posix_main[e["mpi_rank"]][e["func"]] += 1
    return mpi, posix, posix_main


def closes(events):
    return sum(e["kind"] == "mpiio" and e["func"] == "MPI_File_close" for e in events)


def shared_position_io(name, events):
    """Every POSIX call on a rank's thread while one of its recorded
    MPI_File_get_position_shared runs carries that call's CallID, and each
    such call made at least one (the read of the shared file pointer)."""
    calls = [e for e in events if e["kind"] == "mpiio" and e["func"] == "MPI_File_get_position_shared"]
    if not calls:
        fail(f"{name}: no MPI_File_get_position_shared recorded")
    posix = [e for e in events if e["kind"] == "posix"]
    for c in calls:
        inside = [p for p in posix if p["pid"] == c["pid"] and p["tid"] == c["tid"]
                  and c["t_start"] <= p["t_start"] <= c["t_end"]]
        wrong = [p for p in inside if p["callid"] != c["callid"]]
        if wrong:
            fail(f"{name}: rank {c['mpi_rank']}: {wrong[0]['func']} on {wrong[0]['file']} inside "
                 f"MPI_File_get_position_shared carries CallID {wrong[0]['callid']}, "
                 f"not {c['callid']}")
        if not inside:
            fail(f"{name}: rank {c['mpi_rank']}: an MPI_File_get_position_shared made no POSIX call")
    return len(calls)


def traced(bins, dep, name, preload, plain, app="app"):
    job = f"{name}-{os.getpid()}"
    out, data, fake = run(bins, dep, name, preload, job, app)
    if out != plain[0]:
        fail(f"{name}: output {out!r}, untraced {plain[0]!r}")
    if not filecmp.cmp(data, plain[1], shallow=False):
        fail(f"{name}: the file differs from the untraced run's")
    # Until every rank's MPI_File_close is in (the last MPI-IO records) and
    # the last batches (rank 0's digest reads) have had a moment; without
    # the closes (a tool that hides them), once nothing more comes.
    events, stable, deadline = [], 0, time.time() + 30
    while time.time() < deadline and stable < (2 if closes(events) >= NPROCS else 6):
        time.sleep(0.5)
        later = dep.export(job) if os.path.isdir(dep.store) else []
        stable = stable + 1 if len(later) == len(events) else 0
        events = later
    mpi, posix, posix_main = counts(events, data)
    return {"mpi": mpi, "posix": posix, "posix_main": posix_main, "fake": fake, "events": events}


def same(name, what, got, want):
    for rank in range(NPROCS):
        g, w = got.get(rank, collections.Counter()), want.get(rank, collections.Counter())
        if g != w:
            diff = {f: (g.get(f, 0), w.get(f, 0)) for f in set(g) | set(w)
                    if g.get(f, 0) != w.get(f, 0)}
            fail(f"{name}: rank {rank} {what} (got, alone) differ: {diff}")


def check_fake(name, fake, alone, iot):
    if sorted(fake) != list(range(NPROCS)):
        fail(f"{name}: the fake tool reported for ranks {sorted(fake)}")
    if any(fake[r]["queries"] == 0 for r in range(NPROCS)):
        fail(f"{name}: the fake tool made no queries of its own")
    for rank in range(NPROCS):
        for part in ("mpi", "posix"):
            if fake[rank][part] != alone[rank][part]:
                fail(f"{name}: rank {rank}: the fake tool saw {fake[rank][part]}, "
                     f"alone {alone[rank][part]}")
        for func, n in fake[rank]["mpi"].items():
            if n != iot["mpi"][rank].get(func, 0):
                fail(f"{name}: rank {rank} {func}: the fake tool saw {n}, "
                     f"iotrace recorded {iot['mpi'][rank].get(func, 0)}")
        for func, n in fake[rank]["posix"].items():
            if n != iot["posix_main"][rank].get(func, 0):
                fail(f"{name}: rank {rank} {func}: the fake tool saw {n}, "
                     f"iotrace recorded {iot['posix_main'][rank].get(func, 0)} on the main thread")


def fake_alone_run(bins, dep, name, fake_lib, app="app"):
    _, _, fake_alone = run(bins, dep, name, [fake_lib], app=app)
    if sorted(fake_alone) != list(range(NPROCS)):
        fail(f"{name}: the fake tool alone reported for ranks {sorted(fake_alone)}")
    # Otherwise "none of the tool's queries recorded" below would hold trivially.
    made = [fake_alone[r]["queries"] for r in range(NPROCS)]
    if 0 in made:
        fail(f"{name}: the fake tool made no queries of its own: {made}")
    return fake_alone


def both_orders(bins, dep, tool, fake_lib, plain, alone, fake_alone, app="app"):
    """Both preload orders of iotrace and one fake tool: the same calls as
    iotrace alone, the tool's own view unchanged."""
    client = bins["client"]
    for order, preload in (("first", [fake_lib, client]), ("after", [client, fake_lib])):
        name = f"{app.replace('_app', '')}-{tool}-{order}"
        got = traced(bins, dep, name, preload, plain, app)
        same(name, "MPI-IO calls", got["mpi"], alone["mpi"])
        same(name, "POSIX calls on the file", got["posix"], alone["posix"])
        check_fake(name, got["fake"], fake_alone, got)
        if app == "queries_app":
            shared_position_io(name, got["events"])
        print(f"{name}: rank 0: {sum(got['mpi'][0].values())} MPI-IO calls, "
              f"{sum(got['posix'][0].values())} POSIX calls on the file; the fake tool "
              f"{sum(got['fake'][0]['mpi'].values())} MPI-IO calls, "
              f"{got['fake'][0]['queries']} queries of its own, "
              f"{sum(got['fake'][0]['posix'].values())} POSIX calls")


def queries(bins, dep, tools):
    """tests/mpi/queries: iotrace alone records exactly the program's calls
    (its PMPI_File_get_size too), and so does it next to each tool."""
    out, data, _ = run(bins, dep, "queries-plain", None, app="queries_app")
    plain = (out, data)
    alone = traced(bins, dep, "queries-iotrace-alone", [bins["client"]], plain, "queries_app")
    for rank in range(NPROCS):
        same(f"queries, iotrace alone, rank {rank}", "MPI-IO calls (got, the program's)",
             {rank: alone["mpi"][rank]}, {rank: PROGRAM_QUERIES})
    n = shared_position_io("queries-iotrace-alone", alone["events"])
    print(f"queries, iotrace alone: {sum(alone['mpi'][0].values())} MPI-IO calls on rank 0, "
          f"{n} MPI_File_get_position_shared with their POSIX calls")
    for tool, fake_lib in tools:
        fake_alone = fake_alone_run(bins, dep, f"queries-{tool}-alone", fake_lib, "queries_app")
        both_orders(bins, dep, tool, fake_lib, plain, alone, fake_alone, "queries_app")


def main():
    bins = parse_bins(sys.argv[1:])
    client = bins["client"]
    tools = (("darshan", bins["fake_tool"]), ("recorder", bins["fake_recorder"]))
    dep = Deployment(bins).start()
    try:
        out, data, _ = run(bins, dep, "plain", None)
        plain = (out, data)
        print("untraced:", out.strip())
        fake_alone = fake_alone_run(bins, dep, "fake-alone", bins["fake_tool"])
        alone = traced(bins, dep, "iotrace-alone", [client], plain)
        if any(alone["mpi"][r][q] for r in alone["mpi"] for q in QUERIES):
            fail("iotrace alone recorded queries mpiio_mix does not make")
        if sorted(alone["mpi"]) != list(range(NPROCS)) or not alone["posix"]:
            fail(f"iotrace alone: ranks {sorted(alone['mpi'])}, POSIX {dict(alone['posix'])}")
        for rank in range(NPROCS):
            for func, n in fake_alone[rank]["mpi"].items():
                if n != alone["mpi"][rank].get(func, 0):
                    fail(f"fake alone saw {n} {func} on rank {rank}, iotrace alone "
                         f"{alone['mpi'][rank].get(func, 0)}")
        print(f"iotrace alone, rank 0: {sum(alone['mpi'][0].values())} MPI-IO calls, "
              f"{sum(alone['posix'][0].values())} POSIX calls on the file; fake alone, rank 0: "
              f"{sum(fake_alone[0]['mpi'].values())} MPI-IO calls, {fake_alone[0]['queries']} "
              f"queries of its own, {sum(fake_alone[0]['posix'].values())} POSIX calls")
        both_orders(bins, dep, "darshan", bins["fake_tool"], plain, alone, fake_alone)
        recorder_alone = fake_alone_run(bins, dep, "recorder-alone", bins["fake_recorder"])
        both_orders(bins, dep, "recorder", bins["fake_recorder"], plain, alone, recorder_alone)
        queries(bins, dep, tools)
        print("ok: both orders record each call once, in both tools, with unchanged results")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
