#!/usr/bin/env python3
"""End to end: collector + agent on loopback, tests/mpi/mpiio_mix under
`mpiexec -n 4` with libiotrace-client preloaded; the --jsonl export must
show exactly the calls the program made.  Then again with
IOTRACE_POSIX=outside: the same MPI-IO calls (shared file pointer offsets
included), none of the POSIX calls made for them, and the program's own
POSIX calls outside MPI-IO still recorded.  That second run starts with
MPI_Init_thread(MPI_THREAD_MULTIPLE) instead of MPI_Init, and rank 0 comes
LATE_MS late to MPI_File_write_at_all: the other ranks' calls last longer
than 2^32 ticks of the raw clock, which the library records in two ring
slots instead of one, and must come out whole."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, mpirun, parse_bins  # noqa: E402

NPROCS, B = 4, 4096
LATE_MS = 4500  # over 2^32 ticks: 1.9 s of a 2.3-GHz TSC, 4.3 s of clock_gettime
Q = B // 4

PER_RANK = {
    "MPI_File_open": 1, "MPI_File_set_atomicity": 1,
    "MPI_File_write_at": 1, "MPI_File_read_at": 1,
    "MPI_File_write_at_all": 1, "MPI_File_read_at_all": 1,
    "MPI_File_write_at_all_begin": 1, "MPI_File_write_at_all_end": 1,
    "MPI_File_iwrite_at": 1, "MPI_Wait": 1, "MPI_File_iread_at": 1, "MPI_Test": 1,
    "MPI_File_iwrite_at_all": 1, "MPI_Waitall": 1,
    "MPI_File_seek_shared": 3, "MPI_File_write_shared": 1,
    "MPI_File_write_ordered": 1, "MPI_File_read_ordered": 1,
    "MPI_File_seek": 5, "MPI_File_write": 1, "MPI_File_read": 1,
    "MPI_File_write_at_c": 1, "MPI_File_set_view": 2,
    "MPI_File_write_all": 1, "MPI_File_read_all_begin": 1, "MPI_File_read_all_end": 1,
    "MPI_File_iread_all": 1, "MPI_Waitany": 1, "MPI_File_read_all": 1,
    "MPI_File_sync": 1, "MPI_File_get_size": 1, "MPI_File_close": 1,
}
# Completion records continue the call that started the operation.
COMPLETIONS = {"MPI_Wait": "MPI_File_iwrite_at", "MPI_Test": "MPI_File_iread_at",
               "MPI_Waitall": "MPI_File_iwrite_at_all", "MPI_Waitany": "MPI_File_iread_all",
               "MPI_File_write_at_all_end": "MPI_File_write_at_all_begin",
               "MPI_File_read_all_end": "MPI_File_read_all_begin"}


def region(r):
    return r * NPROCS * B


# func -> (bytes requested, offset function of rank or None)
DATA = {
    "MPI_File_write_at": (B, lambda k: region(0) + k * B),
    "MPI_File_read_at": (B, lambda k: region(0) + k * B),
    "MPI_File_write_at_all": (B, lambda k: region(1) + k * B),
    "MPI_File_read_at_all": (B, lambda k: region(1) + k * B),
    "MPI_File_write_at_all_begin": (B, lambda k: region(2) + k * B),
    "MPI_File_write_at_all_end": (B, lambda k: region(2) + k * B),
    "MPI_File_iwrite_at": (B, lambda k: region(3) + k * B),
    "MPI_File_iread_at": (B, lambda k: region(3) + k * B),
    "MPI_File_iwrite_at_all": (B, lambda k: region(4) + k * B),
    "MPI_File_write": (B, lambda k: region(7) + k * B),
    "MPI_File_read": (B, lambda k: region(7) + k * B),
    "MPI_File_write_at_c": (B, lambda k: region(8) + k * B),
    # under the strided view, position 0 is the rank's first quarter block
    "MPI_File_write_all": (4 * Q, lambda k: region(9) + k * Q),
    "MPI_File_read_all_begin": (4 * Q, lambda k: region(9) + k * Q),
    "MPI_File_iread_all": (4 * Q, lambda k: region(9) + k * Q),
    "MPI_File_read_all": (4 * Q, lambda k: region(9) + k * Q),
    "MPI_File_write_shared": (B, None),
    "MPI_File_write_ordered": (B, None),
    "MPI_File_read_ordered": (B, None),
}
TRANSFERS = {"pread", "pread64", "pwrite", "pwrite64", "read", "write", "readv", "writev",
             "preadv", "pwritev"}


def fail(msg):
    raise AssertionError(msg)


def check_mpiio(events, data_file):
    mpi = [e for e in events if e["kind"] == "mpiio"]
    by_rank = collections.defaultdict(list)
    for e in mpi:
        by_rank[e["mpi_rank"]].append(e)
    if sorted(by_rank) != list(range(NPROCS)):
        fail(f"ranks seen: {sorted(by_rank)}")
    for rank, evs in by_rank.items():
        counts = collections.Counter(e["func"] for e in evs)
        if counts != collections.Counter(PER_RANK):
            diff = {f: (counts.get(f, 0), PER_RANK.get(f, 0)) for f in set(counts) | set(PER_RANK)
                    if counts.get(f, 0) != PER_RANK.get(f, 0)}
            fail(f"rank {rank}: function counts (got, want) differ: {diff}")
        for e in evs:
            if e["file"] != data_file:
                fail(f"rank {rank} {e['func']}: file {e['file']!r}, want {data_file!r}")
            if e["ret"] != 0:
                fail(f"rank {rank} {e['func']}: ret {e['ret']}")
            if not e["t_start"] <= e["t_end"]:
                fail(f"rank {rank} {e['func']}: t_start after t_end")
            cid = int(e["callid"], 16)
            if cid >> 40 != rank:
                fail(f"rank {rank} {e['func']}: CallID {e['callid']} names rank {cid >> 40}")
            if e["func"] in DATA:
                want_bytes, off = DATA[e["func"]]
                if e["bytes"] != want_bytes:
                    fail(f"rank {rank} {e['func']}: bytes {e['bytes']}, want {want_bytes}")
                if off and e["offset"] != off(rank):
                    fail(f"rank {rank} {e['func']}: offset {e['offset']}, want {off(rank)}")
            if e["func"] in ("MPI_File_write_shared",):
                if not region(5) <= e["offset"] < region(6):
                    fail(f"rank {rank} write_shared offset {e['offset']} outside region 5")
        # The views as set: the strided one (blocks of Q every NPROCS * Q bytes
        # from the rank's first quarter block), then the default one.
        views = [(e["role"], e["offset"], e["bytes"], e["xfer"]) for e in evs
                 if e["func"] == "MPI_File_set_view"]
        want = [("view", region(9) + rank * Q, Q, NPROCS * Q), ("view", 0, 1, 1)]
        if views != want:
            fail(f"rank {rank}: set_view rows (role, offset, bytes, xfer) {views}, want {want}")
        xfers = {e["func"]: e["xfer"] for e in evs}
        for f in ("MPI_File_write_at", "MPI_File_read_at", "MPI_File_write_all", "MPI_File_read_all",
                  "MPI_Wait", "MPI_Test", "MPI_Waitany", "MPI_File_write_ordered"):
            if xfers[f] != B:
                fail(f"rank {rank} {f}: transferred {xfers[f]}, want {B}")
        # CallIDs: unique per initiating call; completions reuse their call's.
        initiating = [e for e in evs if e["func"] not in COMPLETIONS]
        ids = [e["callid"] for e in initiating]
        if len(set(ids)) != len(ids):
            fail(f"rank {rank}: CallIDs not unique")
        by_func = {e["func"]: e["callid"] for e in initiating}
        for done, started in COMPLETIONS.items():
            got = [e["callid"] for e in evs if e["func"] == done]
            if got != [by_func[started]]:
                fail(f"rank {rank}: {done} carries {got}, want the CallID of {started}")
    # Collective calls: the same (coll_seq, func) sequence on every rank.
    seqs = {r: [(e["coll_seq"], e["func"]) for e in sorted(evs, key=lambda e: e.get("coll_seq") or 0)
                if e.get("coll_seq")] for r, evs in by_rank.items()}
    first = seqs[0]
    started = [s for s, f in first if f not in COMPLETIONS]
    if started != list(range(1, len(started) + 1)):
        fail(f"collective sequence numbers are not 1..n: {first}")
    for r in seqs:
        if seqs[r] != first:
            fail(f"rank {r} collective sequence differs from rank 0")
    if any((s, COMPLETIONS[f]) not in first for s, f in first if f in COMPLETIONS):
        fail(f"a completion does not share its call's sequence number: {first}")
    if len(started) < 15:
        fail(f"only {len(first)} collective calls numbered")
    return mpi


# Non-blocking calls: where their data lies, per rank k, as (offset, bytes)
# pieces.  ROMIO posts iwrite_at and iread_at with POSIX AIO, which the
# library runs on a worker thread of its own (AIO_CALLS); iwrite_at_all and
# iread_all do their I/O while the Wait/Test call completes them, on the
# rank's thread, and iread_all's through an aggregator rank.
NONBLOCKING = {
    "MPI_File_iwrite_at": ("pwrite", lambda k: [(region(3) + k * B, B)]),
    "MPI_File_iread_at": ("pread", lambda k: [(region(3) + k * B, B)]),
    "MPI_File_iwrite_at_all": ("pwrite", lambda k: [(region(4) + k * B, B)]),
    "MPI_File_iread_all": ("pread", lambda k: [(region(9) + k * Q + j * NPROCS * Q, Q)
                                               for j in range(4)]),
}
AIO_CALLS = ("MPI_File_iwrite_at", "MPI_File_iread_at")


def initiating_calls(mpi):
    return {e["callid"]: e for e in mpi if e["func"] not in COMPLETIONS}


def check_enclosed(p, calls):
    """A transfer on a thread that made MPI-IO calls lies inside one of them
    and carries its CallID."""
    enclosing = [c for c in calls[(p["pid"], p["tid"])]
                 if c["t_start"] <= p["t_start"] and p["t_end"] <= c["t_end"]]
    if not enclosing:
        fail(f"{p['func']} at {p['offset']} on rank {p['mpi_rank']}'s thread {p['tid']} lies "
             f"outside any MPI-IO call (CallID {p['callid']})")
    want = {c["callid"] for c in enclosing}
    if p["callid"] not in want:
        fail(f"{p['func']} at {p['offset']} inside {[c['func'] for c in enclosing]} "
             f"carries {p['callid']}, want one of {want}")


def check_on_worker(p, mpi, by_callid):
    """A transfer on another thread of the rank (the library's AIO worker)
    carries the CallID of a non-blocking call of that rank, and runs between
    the call's start and the end of the Wait/Test that completed it."""
    call = by_callid.get(p["callid"])
    if not call or call["func"] not in AIO_CALLS or call["pid"] != p["pid"]:
        fail(f"{p['func']} at {p['offset']} on worker thread {p['tid']} carries "
             f"{p['callid']}, not the CallID of a non-blocking call of its rank")
    done = [c for c in mpi if c["callid"] == p["callid"] and c["func"] in COMPLETIONS]
    if len(done) != 1:
        fail(f"{call['func']} of rank {call['mpi_rank']}: {len(done)} completion records")
    if not (call["t_start"] <= p["t_start"] and p["t_end"] <= done[0]["t_end"]):
        fail(f"{p['func']} of {call['func']} (rank {call['mpi_rank']}) ran outside "
             f"[{call['t_start']}, {done[0]['t_end']}]")


def covered(pieces, transfers):
    spans = [(t["offset"], t["offset"] + t["ret"]) for t in transfers]
    return all(any(a <= off and off + n <= b for a, b in spans) for off, n in pieces)


def check_nonblocking(transfers, mpi, by_callid):
    """Every non-blocking call's data shows as POSIX transfers carrying the
    CallID of that call (or, for collective reads, of the same call on the
    aggregator rank), with the right direction, offsets and sizes."""
    main_tid = {e["mpi_rank"]: e["tid"] for e in mpi}
    for func, (op, pieces) in NONBLOCKING.items():
        ids = {c["callid"] for c in by_callid.values() if c["func"] == func}
        mine = [t for t in transfers if t["callid"] in ids]
        if any(t["func"] not in (op, op + "64") or t["ret"] != t["bytes"] for t in mine):
            fail(f"{func}: unexpected transfers {mine}")
        for k in range(NPROCS):
            own = [t for t in mine if by_callid[t["callid"]]["mpi_rank"] == k]
            if not covered(pieces(k), own if func in AIO_CALLS else mine):
                fail(f"rank {k} {func}: data {pieces(k)} not covered by its transfers {own}")
            if func in AIO_CALLS and [(t["offset"], t["bytes"]) for t in own] != pieces(k):
                fail(f"rank {k} {func}: transfers {own}, want exactly {pieces(k)}")
            if func in AIO_CALLS and any(t["tid"] == main_tid[k] for t in own):
                fail(f"rank {k} {func}: ran on the rank's own thread, not the AIO worker")


def check_posix(events, mpi, data_file):
    posix = [e for e in events if e["kind"] == "posix" and e["file"] == data_file]
    transfers = [e for e in posix if e["func"] in TRANSFERS]
    if not transfers:
        fail("no POSIX transfers on the data file were recorded")
    calls = collections.defaultdict(list)
    for e in mpi:
        calls[(e["pid"], e["tid"])].append(e)
    by_callid = initiating_calls(mpi)
    for p in transfers:
        if p["callid"] not in by_callid:
            fail(f"{p['func']} at {p['offset']} carries CallID {p['callid']} of no MPI-IO call")
        if calls[(p["pid"], p["tid"])]:
            check_enclosed(p, calls)
        else:
            check_on_worker(p, mpi, by_callid)
    check_nonblocking(transfers, mpi, by_callid)
    opened = [e for e in posix if e["func"] in ("open", "open64") and e["callid"]]
    if len(opened) < NPROCS:
        fail("the opens ROMIO made inside MPI_File_open did not carry its CallID")
    return len(transfers)


def check_posix_outside(bins, dep, data_file, all_events):
    job = f"itest-outside-{os.getpid()}"
    res = mpirun(bins, NPROCS, [bins["app"], data_file, str(B)],
                 env={"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job,
                      "IOTRACE_POSIX": "outside", "MPIIO_MIX_INIT_THREAD": "1",
                      "MPIIO_MIX_LATE_MS": str(LATE_MS)})
    if res.returncode != 0:
        fail(f"mpiexec with IOTRACE_POSIX=outside failed ({res.returncode}): {res.stderr}")
    want = sum(PER_RANK.values()) * NPROCS
    events = dep.wait_for(lambda ev: sum(e["kind"] == "mpiio" for e in ev) >= want, job=job)
    mpi = check_mpiio(events, data_file)
    nested = [e for e in events if e["kind"] == "posix" and e["callid"]]
    if nested:
        fail(f"IOTRACE_POSIX=outside recorded {len(nested)} POSIX calls made for MPI-IO calls, "
             f"e.g. {nested[0]}")
    own = [e for e in events if e["kind"] == "posix" and e["file"] == data_file]
    # Rank 0's digest: stdio reads through glibc's internal read(), so
    # its fopen and fclose are what is seen of it, in either mode.
    if sorted(e["func"] for e in own if e["func"] in ("fopen", "fopen64", "fclose")) != \
            sorted(("fopen" if any(e["func"] == "fopen" for e in own) else "fopen64", "fclose")):
        fail(f"IOTRACE_POSIX=outside lost rank 0's own fopen and fclose of the file: {own}")
    drops = [e for e in events if e["kind"] == "drop"]
    if drops:
        fail(f"events were dropped: {drops}")
    waited = sorted((e["mpi_rank"], (e["t_end"] - e["t_start"]) / 1e9) for e in events
                    if e["kind"] == "mpiio" and e["func"] == "MPI_File_write_at_all")
    if [r for r, _ in waited] != list(range(NPROCS)) or \
            any(not LATE_MS / 1e3 - 0.05 < s < LATE_MS / 1e3 + 30 for r, s in waited if r):
        fail(f"MPI_File_write_at_all (rank, seconds) with rank 0 {LATE_MS} ms late: {waited}")
    print(f"ok, IOTRACE_POSIX=outside, MPI_Init_thread: {len(mpi)} MPI-IO events, {len(own)} "
          f"POSIX calls of the program's own on the data file, {len(events)} events in all "
          f"(against {all_events}); MPI_File_write_at_all waiting for rank 0 "
          f"{', '.join(f'{s:.2f}' for r, s in waited if r)} s")


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        data_file = os.path.join(dep.tmp, "data.bin")
        job = f"itest-{os.getpid()}"
        res = mpirun(bins, NPROCS, [bins["app"], data_file, str(B)],
                     env={"IOTRACE_AGENT": dep.endpoint, "IOTRACE_JOB_ID": job})
        if res.returncode != 0:
            fail(f"mpiexec failed ({res.returncode}): {res.stderr}")
        print(res.stdout.strip())
        want = sum(PER_RANK.values()) * NPROCS
        events = dep.wait_for(
            lambda ev: sum(e["kind"] == "mpiio" for e in ev) >= want, job=job)
        mpi = check_mpiio(events, data_file)
        n_posix = check_posix(events, mpi, data_file)
        drops = [e for e in events if e["kind"] == "drop"]
        if drops:
            fail(f"events were dropped: {drops}")
        if any(e["job"] != job or e["node"] != "vm" and not e["node"] for e in events):
            fail("events without the job id")
        print(f"ok: {len(mpi)} MPI-IO events, {n_posix} POSIX transfers on the data file, "
              f"{len(events)} events in all")
        check_posix_outside(bins, dep, data_file, len(events))
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
