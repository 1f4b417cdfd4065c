#!/usr/bin/env python3
"""The exports as an analyst uses them, on a real traced job: mpiio_mix under
`mpiexec -n 4` on a 2-brick GlusterFS volume with the iotrace translators,
real agent and collector.

`--jsonl` and `--csv` are loaded with pandas (Debian's python3-pandas):
every row validates against `--jsonl-schema` (python3-jsonschema), integer
columns load as integers from both files, no column name is a DataFrame
attribute, and the two files hold the same table.  Then, the way an analyst
would: calls per function, bytes of the calls (summed over `role == call`),
amplification, and disk operations per call (disk rows joined to call rows on
job and CallID) for the independent calls, each checked against
`--stats --format json`, whose schema, tool, parameters and time span are
checked too."""
import collections
import io
import json
import os
import subprocess
import sys

# pandas and jsonschema are Debian's, for Debian's interpreter.
if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
        and not os.environ.get("IOTRACE_ANALYST_REEXEC"):
    os.environ["IOTRACE_ANALYST_REEXEC"] = "1"
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

sys.path.insert(0, os.path.dirname(__file__))
from test_gluster import Volume, run_mix, settled, start_deployment  # noqa: E402

try:
    import jsonschema
    import pandas as pd
except ImportError as e:
    raise SystemExit(f"{e}: deploy/install-deps.sh installs python3-pandas and python3-jsonschema")

NPROCS = 4
INT_COLUMNS = {"mpi_rank", "pid", "uid", "tid", "offset", "bytes", "xfer", "ret", "t_start", "t_end",
               "coll_seq", "dropped"}
# Calls each rank makes alone: their disk operations carry their own CallID,
# so a plain join gives what the matcher gives.
INDEPENDENT = ("MPI_File_write_at", "MPI_File_read_at", "MPI_File_write", "MPI_File_read",
               "MPI_File_write_at_c")
BUCKETS = [("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8), ("9-16", 9, 16),
           (">16", 17, 1 << 62)]

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def export(bins, dep, *args):
    r = subprocess.run([bins["export"], "--store", dep.store, *args], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"iotrace-export {' '.join(args)}: {r.stderr}")
    return r.stdout


def check_tables(bins, dep, job):
    schema = json.loads(subprocess.run([bins["export"], "--jsonl-schema"], capture_output=True,
                                       text=True, check=True).stdout)
    jsonl = export(bins, dep, "--job", job, "--jsonl", "-")
    rows = [json.loads(line) for line in jsonl.splitlines()]
    validator = jsonschema.Draft202012Validator(schema)
    bad = [(i, e.message) for i, r in enumerate(rows) for e in validator.iter_errors(r)]
    check(not bad, f"{len(bad)} rows break --jsonl-schema: {bad[:3]}")
    check(list(schema["properties"]) == list(rows[0]), "row keys are not the schema's, in order")
    doc = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../docs/export.md")).read()
    for name, prop in schema["properties"].items():
        check(f"| `{name}` |" in doc and prop["description"] in doc,
              f"docs/export.md, Columns: column {name} missing or described otherwise than --jsonl-schema")

    df = pd.read_json(io.StringIO(jsonl), lines=True, dtype=False)
    csv = pd.read_csv(io.StringIO(export(bins, dep, "--job", job, "--csv", "-")),
                      keep_default_na=False, na_values={c: [""] for c in schema["properties"]
                                                        if c not in INT_COLUMNS})
    for name, frame in (("jsonl", df), ("csv", csv)):
        ints = {c for c in frame.columns if pd.api.types.is_integer_dtype(frame[c])}
        check(ints == INT_COLUMNS, f"{name}: integer columns {sorted(ints)}, want {sorted(INT_COLUMNS)}")
    clash = [c for c in df.columns if hasattr(pd.DataFrame, c)]
    check(not clash, f"columns that are DataFrame attributes: {clash}")
    same = df.astype(str).replace({"None": "", "nan": ""}).equals(
        csv.astype(str).replace({"None": "", "nan": ""}))
    check(same, "--jsonl and --csv hold different tables")
    print(f"ok: {len(df)} rows; every row valid against --jsonl-schema; integer columns stay "
          f"integers in JSON Lines and CSV; no column shadows a DataFrame attribute")
    return df


def check_against_stats(df, stats, job):
    check(stats.get("schema") == "iotrace-stats/2", f"stats schema {stats.get('schema')}")
    check(stats.get("tool", {}).get("name") == "iotrace" and stats["tool"].get("version"),
          f"stats tool {stats.get('tool')}")
    check(stats.get("parameters") == {"lateness_ms": 2000, "grace_ms": 2000, "aligned": True},
          f"stats parameters {stats.get('parameters')}")
    st = next(j for j in stats["jobs"] if j["job"] == job)
    mine = df[df.job == job]

    calls = mine[mine.kind == "mpiio"]
    per_func = calls.groupby("func").size().to_dict()
    want = {f: v["count"] for f, v in st["functions"].items()}
    check(per_func == want, f"calls per function differ from --stats: {per_func} vs {want}")
    for f in set(per_func) & {"MPI_File_write_at", "MPI_File_open"}:
        check(per_func[f] == NPROCS, f"{f}: {per_func[f]} calls, want {NPROCS}")

    # Every row's role follows from its function, and mpiio_mix makes each kind.
    def role(row):
        if row.kind == "disk":
            return "op"
        if row.func.startswith(("MPI_Wait", "MPI_Test")):
            return "completion"
        if row.func.endswith("_end"):
            return "end"
        if row.func in ("MPI_Barrier", "MPI_Send", "MPI_Recv"):
            return "sync"
        return "view" if row.func == "MPI_File_set_view" else "call"
    want_roles = mine[mine.kind.isin(["mpiio", "disk"])].apply(role, axis=1)
    got_roles = mine.loc[want_roles.index, "role"]
    wrong = mine.loc[want_roles.index][got_roles != want_roles]
    check(wrong.empty, f"roles: {wrong[['func', 'role']].head().to_dict('records')}")
    check({"call", "completion", "end", "view", "op"} <= set(got_roles),
          f"roles present: {sorted(set(got_roles))}")

    call_bytes = int(calls[calls.role == "call"].bytes.sum())
    with_completions = int(calls.bytes.sum())
    disk = mine[mine.kind == "disk"]
    check(call_bytes < with_completions, "completion rows repeat no bytes: the role column proves nothing")
    amp = st["amplification"]
    check(amp is not None and abs(int(disk.bytes.sum()) / call_bytes - amp) < 1e-9,
          f"amplification {int(disk.bytes.sum())}/{call_bytes} vs --stats {amp}")

    span = st["time_span"]
    counted = mine[mine.kind.isin(["mpiio", "disk"])]
    check(span["first_ns"] == int(counted.t_start.min()) and span["last_ns"] == int(counted.t_end.max()),
          f"time span {span} vs the rows' {counted.t_start.min()}..{counted.t_end.max()}")

    # Disk operations per call: disk rows joined to the call rows on CallID.
    ops = disk[disk.callid.notna()].groupby("callid").size()
    starts = calls[calls.role == "call"].set_index("callid")
    for f in INDEPENDENT:
        if f not in st["functions"]:
            continue
        ids = starts[starts.func == f].index
        n = [int(ops.get(c, 0)) for c in ids]
        hist = {name: sum(lo <= k <= hi for k in n) for name, lo, hi in BUCKETS}
        got = st["functions"][f]["disk_ops_per_call"]
        check(hist == got["histogram"] and max(n) == got["max"],
              f"{f}: disk ops per call {hist} (max {max(n)}) vs --stats {got}")
        bytes_on_disk = int(disk[disk.callid.isin(ids)].bytes.sum())
        check(bytes_on_disk == st["functions"][f]["disk_bytes"],
              f"{f}: disk bytes {bytes_on_disk} vs --stats {st['functions'][f]['disk_bytes']}")
    print(f"ok: calls per function ({len(per_func)} functions), call bytes {call_bytes} "
          f"(with completions {with_completions}), amplification {amp:.3f}, time span "
          f"{span['duration_ns']} ns and disk operations per call of {', '.join(INDEPENDENT)} "
          f"as --stats has them")


def main():
    bins, dep = start_deployment(sys.argv[1:])
    try:
        vol = Volume(bins, dep, "distribute", 2)
        try:
            job = f"analyst-{os.getpid()}"
            run_mix(bins, dep, os.path.join(vol.mnt, "data.bin"), job)
            settled(dep, job, 1)
        finally:
            vol.stop()
        df = check_tables(bins, dep, job)
        stats = json.loads(export(bins, dep, "--job", job, "--stats", "--format", "json"))
        check_against_stats(df, stats, job)
        roles = collections.Counter(zip(df.kind, df.role))
        print("rows by kind and role:", dict(roles))
    finally:
        dep.stop()
        try:
            os.unlink(f"/dev/shm{dep.registry}-0")
        except OSError:
            pass
    if failures:
        print(dep.logs())
        sys.exit(1)


if __name__ == "__main__":
    main()
