#!/usr/bin/env python3
"""The live collector: a real traced MPI job on a GlusterFS volume through a
real agent, watched over the collector's HTTP server while it runs.

- the job appears in /api/v1/jobs as running and its counts grow while
  mpiexec runs (three runs of mpiio_mix under one job id), and so do the
  live statistics of /api/v1/jobs/JOB/stats;
- once finished, /api/v1/jobs/JOB/stats is byte for byte the output of
  `iotrace-export --stats --format json --job JOB` over the same store, and
  its downloads (JSON Lines, the statistics as text, SLOG-2) are what
  iotrace-export writes;
- a real Prometheus (Debian's) scrapes /metrics, and a query to its HTTP API
  returns the job's MPI-IO call count; promtool accepts the exposition;
- bad input: an unknown job is a 404 with a JSON error, a bad window a 400,
  idle and slow HTTP clients and a client that leaves mid-download do not
  stop ingest;
- headless Chromium has the dashboard open while the job runs and sees the
  job appear and its call count grow; once the job is finished it finds the
  per-function table equal to the statistics, clicks a call on the timeline
  and sees its disk operations (screenshots go to $IOTRACE_SCREENSHOT_DIR
  when set).

All of it with a busy loop on every core for the whole test, started by the
test: the dashboard of a service is live on a loaded machine too (with the
former --analysis-yield 60 the job never appeared while it ran)."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, free_port, headless_chromium, parse_bins  # noqa: E402
from testlib import BusyCores  # noqa: E402
from test_gluster import NPROCS, B, Volume, run_mix  # noqa: E402

JOB = "live-job-1"


def fail(msg):
    raise AssertionError(msg)


def get(port, path, timeout=30):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(port, path):
    status, body = get(port, path)
    if status != 200:
        fail(f"GET {path}: {status} {body[:300]!r}")
    return json.loads(body)


def job_row(port, job):
    for j in get_json(port, "/api/v1/jobs")["jobs"]:
        if j["job"] == job:
            return j
    return None


def watch_running_job(bins, dep, vol, hport, driver):
    """Three runs under one job id; the API and the dashboard are watched
    while they run."""
    seen = []
    path = os.path.join(vol.mnt, "live.bin")
    for run in range(3):
        run_mix(bins, dep, path, JOB)
        deadline = time.time() + 20
        while time.time() < deadline:
            row = job_row(hport, JOB)
            if row and (not seen or row["mpiio_calls"] > seen[-1]["mpiio_calls"]):
                break
            time.sleep(0.2)
        if not row:
            fail("the job never appeared in /api/v1/jobs\n" + dep.logs())
        if row["state"] != "running":
            fail(f"the job is {row['state']} between runs (job-idle is 9 s)")
        listed = {st: [j["job"] for j in get_json(hport, f"/api/v1/jobs?state={st}")["jobs"]]
                  for st in ("running", "finished")}
        if JOB not in listed["running"] or JOB in listed["finished"]:
            fail(f"a running job in the filtered job lists: {listed}")
        row["shown"] = browser_calls(driver, JOB, row["mpiio_calls"])
        row["stats_calls"] = running_stats_calls(hport)
        seen.append(row)
    calls = [r["mpiio_calls"] for r in seen]
    shown = [r["shown"] for r in seen]
    if not (calls[0] < calls[1] < calls[2]) or not (shown[0] < shown[1] < shown[2]):
        fail(f"MPI-IO call counts did not grow while the job ran: API {calls}, dashboard {shown}")
    # The statistics count what the merge has released, --lateness behind the
    # newest event, and a call once --grace has passed after it; when the
    # job falls quiet, its processes and servers stop holding them back after
    # --producer-idle (2 s), and every call is in them before --job-idle.
    in_stats = [r["stats_calls"] for r in seen]
    deadline = time.time() + 20
    while True:
        row = job_row(hport, JOB)
        n = running_stats_calls(hport)
        if row["state"] != "running" or time.time() > deadline:
            fail(f"the quiet job's /stats never had all its {row['mpiio_calls']} MPI-IO calls "
                 f"while it was running (after each run: {in_stats}); it is {row['state']}")
        if n == row["mpiio_calls"]:
            break
        time.sleep(0.2)
    quiet_s = time.time() - row["last_s"]
    in_stats.append(n)
    if in_stats != sorted(in_stats):
        fail(f"the running job's /stats went back: MPI-IO calls in them {in_stats}")
    print(f"while running: mpiio_calls {calls} (dashboard {shown}), events "
          f"{[r['events'] for r in seen]}; /stats {in_stats}, all {n} calls "
          f"{quiet_s:.1f} s after the last batch")


def running_stats_calls(hport):
    """/api/v1/jobs/JOB/stats of a running job: the live statistics, in the
    shape of iotrace-export --stats --format json, of no more calls than the
    job list counts."""
    st = get_json(hport, f"/api/v1/jobs/{JOB}/stats")
    jobs = st.get("jobs", [])
    if len(jobs) != 1 or jobs[0].get("job") != JOB or "functions" not in jobs[0]:
        fail(f"the running job's /stats: {json.dumps(st)[:400]}")
    # As the job list counts them: completion records are not calls.
    n = sum(f["count"] for name, f in jobs[0]["functions"].items()
            if name.startswith("MPI_") and not name.startswith(("MPI_Wait", "MPI_Test"))
            and not name.endswith("_end"))
    listed = job_row(hport, JOB)["mpiio_calls"]  # read after: it can only have grown
    if n > listed:
        fail(f"the running job's /stats count {n} MPI-IO calls, the job list {listed}")
    return n


def wait_finished(hport):
    deadline = time.time() + 60
    while time.time() < deadline:
        row = job_row(hport, JOB)
        # Finished, and every node has a clock sample after the job's end:
        # until then a sample still to come may move its aligned times.
        if row and row["state"] == "finished" and row["clock_settled"]:
            latest = get_json(hport, "/api/v1/jobs?state=finished&limit=1")["jobs"]
            running = get_json(hport, "/api/v1/jobs?state=running")["jobs"]
            if [j["job"] for j in latest] != [JOB] or running:
                fail(f"finished: ?state=finished&limit=1 gives {latest}, "
                     f"?state=running {running}")
            return row
        time.sleep(0.3)
    fail("the job was not finished with settled clocks 60 s after its last run")


def check_stats_equal(bins, dep, hport):
    status, api = get(hport, f"/api/v1/jobs/{JOB}/stats")
    if status != 200:
        fail(f"stats: {status}")
    cli = subprocess.run([bins["export"], "--store", dep.store, "--job", JOB, "--stats",
                          "--format", "json"], capture_output=True, check=True).stdout
    if api != cli:
        open(os.path.join(dep.tmp, "api.json"), "wb").write(api)
        open(os.path.join(dep.tmp, "cli.json"), "wb").write(cli)
        fail("the API's statistics differ from iotrace-export --stats --format json")
    stats = json.loads(api)["jobs"][0]
    calls = sum(f["count"] for f in stats["functions"].values())
    print(f"finished: /stats equals --stats ({len(api)} bytes, {calls} MPI-IO events, "
          f"{sum(s['ops'] for s in stats['servers'].values())} disk operations)")
    return stats


def check_downloads(bins, dep, hport):
    """The three downloads of a finished job are, byte for byte, what
    iotrace-export makes of the same store, with their types and names."""
    sizes = []
    for fmt, args, ctype in (("jsonl", ["--jsonl", "-"], "application/x-ndjson"),
                             ("stats", ["--stats"], "text/plain; charset=utf-8"),
                             ("slog2", ["--slog2", os.path.join(dep.tmp, "cli.slog2")],
                              "application/octet-stream")):
        url = f"http://127.0.0.1:{hport}/api/v1/jobs/{JOB}/download/{fmt}"
        with urllib.request.urlopen(url, timeout=120) as r:
            body, headers = r.read(), r.headers
        cli = subprocess.run([bins["export"], "--store", dep.store, "--job", JOB, *args],
                             capture_output=True, check=True).stdout
        if fmt == "slog2":
            cli = open(args[1], "rb").read()
        if body != cli:
            open(os.path.join(dep.tmp, f"download.{fmt}"), "wb").write(body)
            fail(f"/download/{fmt} ({len(body)} bytes) differs from iotrace-export "
                 f"{' '.join(args)} ({len(cli)} bytes)")
        disposition = headers.get("Content-Disposition", "")
        if headers.get("Content-Type") != ctype or "attachment" not in disposition:
            fail(f"/download/{fmt}: Content-Type {headers.get('Content-Type')!r}, "
                 f"Content-Disposition {disposition!r}")
        sizes.append(f"{fmt} {len(body)} B")
    print(f"downloads equal iotrace-export's output: {', '.join(sizes)}")


def check_prometheus(dep, hport, stats):
    status, text = get(hport, "/metrics")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
    if r.returncode != 0:
        fail("promtool check metrics: " + r.stdout.decode() + r.stderr.decode())
    pport = free_port()
    pdir = os.path.join(dep.tmp, "prometheus")
    os.makedirs(pdir)
    cfg = os.path.join(pdir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n"
                "  - job_name: iotrace\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{hport}']\n")
    prom = subprocess.Popen(["prometheus", "--config.file", cfg, "--storage.tsdb.path",
                             os.path.join(pdir, "data"), "--web.listen-address",
                             f"127.0.0.1:{pport}"], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(pdir, "log"), "w"))
    try:
        query = urllib.request.quote(f'sum(iotrace_job_mpiio_calls_total{{job_id="{JOB}"}})')
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                doc = get_json(pport, f"/api/v1/query?query={query}")
                if doc["data"]["result"]:
                    break
            except (OSError, AssertionError):
                pass
            time.sleep(0.5)
        else:
            fail("Prometheus returned nothing for the job's calls:\n" +
                 open(os.path.join(pdir, "log")).read()[-2000:])
        got = int(float(doc["data"]["result"][0]["value"][1]))
        want = sum(f["count"] for f in stats["functions"].values())
        if got != want:
            fail(f"Prometheus says {got} MPI-IO calls, --stats {want}")
        print(f"prometheus: sum(iotrace_job_mpiio_calls_total) = {got}, as --stats")
    finally:
        prom.terminate()
        prom.wait(timeout=30)


def check_bad_input(bins, dep, vol, hport):
    status, body = get(hport, "/api/v1/jobs/no-such-job/stats")
    if status != 404 or json.loads(body).get("status") != 404:
        fail(f"unknown job: {status} {body!r}")
    for q in ("from=abc", "from=5&to=1", "to=inf"):
        status, body = get(hport, f"/api/v1/jobs/{JOB}/timeline?{q}")
        if status != 400 or "error" not in json.loads(body):
            fail(f"timeline?{q}: {status} {body!r}")
    if get(hport, "/api/v2/jobs")[0] != 404 or get(hport, "/../etc/passwd")[0] != 404:
        fail("unknown API version or a path outside the web root was served")
    # Clients that connect and stay silent, clients half way through a
    # request, SSE clients that never read, and one that leaves a download.
    idle = []
    for i in range(28):  # the per-address limit is --http-clients / 2 + 1 (33)
        s = socket.create_connection(("127.0.0.1", hport))
        if i % 3 == 1:
            s.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n")
        elif i % 3 == 2:
            s.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.append(s)
    s = socket.create_connection(("127.0.0.1", hport))
    s.sendall(f"GET /api/v1/jobs/{JOB}/download/jsonl HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.recv(100)
    s.close()
    before = dep.export()
    t0 = time.time()
    run_mix(bins, dep, os.path.join(vol.mnt, "other.bin"), "live-job-2")
    dep.wait_for(lambda ev: sum(e["job"] == "live-job-2" and e["kind"] == "mpiio" for e in ev) > 0,
                 timeout=30)
    took = time.time() - t0
    for s in idle:
        s.close()
    if len(dep.export()) <= len(before):
        fail("nothing was ingested while HTTP clients hung")
    print(f"bad input: 404, 400s, 28 idle/slow clients and a dropped download; "
          f"another job ingested in {took:.1f} s meanwhile")


def start_browser(dep, hport):
    driver = headless_chromium(dep.tmp, "--window-size=1400,2000")
    driver.get(f"http://127.0.0.1:{hport}/")
    return driver


def browser_calls(driver, job, at_least, timeout=15):
    """The MPI-IO calls the dashboard's job table shows for the job, once
    they reach at_least (the page updates from its event stream)."""
    deadline = time.time() + timeout
    shown = None
    while time.time() < deadline:
        shown = driver.execute_script("""
            const tr = [...document.querySelectorAll('#jobs tbody tr')]
                .find(r => r.dataset.job === arguments[0]);
            const col = [...document.querySelectorAll('#jobs thead th')]
                .findIndex(th => th.textContent === 'MPI-IO calls');
            return tr ? parseInt(tr.children[col].textContent) : null;""", job)
        if shown is not None and shown >= at_least:
            return shown
        time.sleep(0.2)
    fail(f"the dashboard shows {shown} MPI-IO calls for the job, the API {at_least}")


def check_browser(driver, hport, stats):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.action_chains import ActionChains
    shots = os.environ.get("IOTRACE_SCREENSHOT_DIR")
    if shots:
        driver.save_screenshot(os.path.join(shots, "dashboard-cluster.png"))
    # Found and clicked in one go: the table is redrawn on every update, so
    # an element looked up first may be gone by the time it is clicked.
    if not driver.execute_script("""
            const tr = [...document.querySelectorAll('#jobs tbody tr')]
                .find(r => r.dataset.job === arguments[0]);
            if (tr) tr.click();
            return !!tr;""", JOB):
        fail("the dashboard does not list the job")
    want = {name: f["count"] for name, f in stats["functions"].items()}
    got = {}
    deadline = time.time() + 30
    while time.time() < deadline and got != want:
        # Read in one go: the table is redrawn on every update.
        got = driver.execute_script("""
            const out = {};
            for (const tr of document.querySelectorAll('#functions tbody tr'))
                out[tr.dataset.function] = parseInt(tr.children[1].textContent);
            return out;""")
        time.sleep(0.3)
    if got != want:
        fail(f"the dashboard's function table {got} is not --stats's {want}")
    # Click the first drawn call whose CallID reached a disk.
    target = driver.execute_script("""
        const t = timeline; if (!t) return null;
        const hit = new Set(t.pairs.map(p => p.call));
        const b = boxes.find(b => hit.has(b.call.id)); if (!b) return null;
        const cv = document.getElementById('timeline'), r = cv.getBoundingClientRect();
        return {x: ((b.x0 + b.x1) / 2) * r.width / cv.width - r.width / 2,
                y: ((b.y0 + b.y1) / 2) * r.height / cv.height - r.height / 2,
                callid: b.call.callid};""")
    if not target:
        fail("the timeline shows no call with a disk operation")
    canvas = driver.find_element(By.ID, "timeline")
    driver.execute_script("arguments[0].scrollIntoView()", canvas)
    ActionChains(driver).move_to_element_with_offset(canvas, int(target["x"]),
                                                     int(target["y"])).click().perform()
    detail = driver.find_element(By.ID, "detail")
    deadline = time.time() + 5
    while time.time() < deadline and not detail.is_displayed():
        time.sleep(0.2)
    if not detail.is_displayed() or int(detail.get_attribute("data-ops") or 0) < 1:
        fail("clicking a call did not show its disk operations")
    if shots:
        driver.save_screenshot(os.path.join(shots, "dashboard-job.png"))
    print(f"browser: function table equals --stats ({sum(want.values())} calls); clicked "
          f"CallID={detail.get_attribute('data-callid')}: "
          f"{detail.get_attribute('data-ops')} disk operations")


def main():
    bins = parse_bins(sys.argv[1:])
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: needs root and /dev/fuse for a GlusterFS mount")
        return 77
    dep = Deployment(bins, node="livenode")
    dep.registry = f"/iotrace-live-{os.getpid()}"
    hport = free_port()
    vol = None
    busy = BusyCores()
    try:
        busy.__enter__()
        # Its downloads are compared with iotrace-export byte for byte, file
        # paths included.
        dep.start_collector("--http", f"127.0.0.1:{hport}", "--job-idle", "9000", "--http-show-paths")
        dep.start_agent()
        vol = Volume(bins, dep, "distribute", 2)
        driver = start_browser(dep, hport)
        try:
            watch_running_job(bins, dep, vol, hport, driver)
            wait_finished(hport)
            stats = check_stats_equal(bins, dep, hport)
            check_downloads(bins, dep, hport)
            check_prometheus(dep, hport, stats)
            check_browser(driver, hport, stats)
        finally:
            driver.quit()
        check_bad_input(bins, dep, vol, hport)
        print(f"all of it beside {busy.n} busy loops")
    except Exception:
        print(dep.logs(), file=sys.stderr)
        raise
    finally:
        busy.__exit__()
        if vol:
            vol.stop()
        dep.stop()
        try:
            os.unlink(f"/dev/shm{dep.registry}-{os.geteuid()}")
        except OSError:
            pass
    # A clean exit: under the sanitizers a leak makes it non-zero.
    if dep.collector.returncode != 0:
        fail(f"the collector exited with {dep.collector.returncode}\n" + dep.logs())
    print("live collector: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
