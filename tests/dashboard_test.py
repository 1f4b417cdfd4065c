#!/usr/bin/env python3
"""The dashboard is live by default, on a loaded machine.

Every core runs a busy loop for the whole test (the load a collector host
beside running ranks has).  With the collector's defaults, headless Chromium
opens the page of a job before the job exists and is told it waits for it,
on a connected stream (the stream of an unknown job was a 404, the page said
"reconnecting…" for good).  Four synthetic ranks of the job then send events
in real time: the page shows the job running, and while it runs

- each update of the page fetches what changed, not the whole timeline: the
  timeline after its cursor, the statistics at most every 2 s; its bytes per
  update stay a fraction of the whole timeline's (2.8 MB per update for a
  4-rank job before);
- what the page shows is never more than 2 s behind its stream (9 to 12 s
  under load before).

Then a collector with --analysis-yield 30 under the same load: its analysis
leaves the store unread, and the page's banner says how far behind it is and
names the option."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from testlib import BusyCores, check, failures, finish, free_port, stop_all, until  # noqa: E402
from harness import headless_chromium  # noqa: E402

COLLECTOR, AGENT, PRODUCER = sys.argv[1:4]
RANKS = 4
RATE = 400          # events per second and rank, half of them MPI-IO calls
RUN_S = 30
MAX_LAG_S = 2.0     # what the page shows, behind its stream
WATCH_S = 12        # how long a running job's page is watched


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read()


def status(port):
    return json.loads(get(port, "/api/v1/status"))


class Collector:
    def __init__(self, tmp, name, *extra):
        self.port, self.hport = free_port(), free_port()
        self.sock = os.path.join(tmp, name + ".sock")
        log = open(os.path.join(tmp, name + ".log"), "wb")
        self.procs = [subprocess.Popen(
            [COLLECTOR, "--listen", f"tcp://127.0.0.1:{self.port}", "--store",
             os.path.join(tmp, name + "-store"), "--http", f"127.0.0.1:{self.hport}", *extra],
            stderr=log)]
        self.procs.append(subprocess.Popen(
            [AGENT, "--collector", f"tcp://127.0.0.1:{self.port}", "--listen", "ipc://" + self.sock,
             "--node", "n1", "--state-dir", "none"], stderr=log))
        if not until(lambda: os.path.exists(self.sock), 30) or not until(self.up, 30):
            raise AssertionError(f"{name}: the collector or the agent did not come up")

    def up(self):
        try:
            return status(self.hport)
        except OSError:
            return None

    def ranks(self, job, seconds):
        """RANKS producers of one job, sending in real time for about seconds."""
        per_batch = RATE // 4
        return [subprocess.Popen(
            [PRODUCER, "--agent", "ipc://" + self.sock, "--node", "n1", "--job", job,
             "--rank", str(r), "--realtime", "--rate", str(RATE), "--events-per-batch",
             str(per_batch), "--batches", str(seconds * RATE // per_batch)],
            stdout=subprocess.DEVNULL) for r in range(RANKS)]

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
            p.wait(timeout=30)


def page(driver, script, *args):
    return driver.execute_script(script, *args)


def job_badge(driver):
    return page(driver, "return [document.getElementById('job-state').textContent,"
                        " document.getElementById('conn').textContent];")


def watch(driver, c, job):
    """While the job runs: the page's lag behind its stream, and what it
    fetched per update."""
    page(driver, "performance.setResourceTimingBufferSize(100000);"
                 " performance.clearResourceTimings();")
    lags, t_end = [], time.time() + WATCH_S
    while time.time() < t_end:
        # The page's clock is the collector's: one machine.
        lags.append(page(driver, """
            const d = document.body.dataset, now = Date.now() / 1000;
            return [now - parseFloat(d.shownS), now - parseFloat(d.timelineS)];"""))
        time.sleep(0.25)
    fetched = page(driver, """
        return performance.getEntriesByType('resource')
            .filter(e => /\\/api\\/v1\\/jobs\\//.test(e.name))
            .map(e => [e.name, e.encodedBodySize]);""")
    whole = len(get(c.hport, f"/api/v1/jobs/{job}/timeline"))
    return lags, fetched, whole


def main():
    tmp = tempfile.mkdtemp(prefix="iotrace-dashboard-")
    procs, driver, collectors = [], None, []
    with BusyCores() as busy:
        try:
            c = Collector(tmp, "live")
            collectors.append(c)
            driver = headless_chromium(tmp, "--window-size=1400,2000")
            job = "dash-1"
            # The job's page before the job: it waits for it, on a live stream.
            driver.get(f"http://127.0.0.1:{c.hport}/?job={job}")
            want = [f"waiting for job {job}…", "live"]
            shown = until(lambda: job_badge(driver) == want and job_badge(driver), 30)
            check(shown == want, f"before the job, the page says {job_badge(driver)}, not {want}")
            # Anonymous, on loopback: the page says what that means.
            viewer = page(driver, "return document.getElementById('viewer').textContent;")
            check("anonymous" in viewer and "without file paths" in viewer,
                  f"the page's viewer line says {viewer!r}")

            t0 = time.time()
            procs = c.ranks(job, RUN_S)
            appeared = until(lambda: job_badge(driver)[0] == "running", 30)
            took = time.time() - t0
            check(appeared, f"the page never showed the job running: {job_badge(driver)}")
            # The first full timeline has been drawn before the page is watched.
            until(lambda: page(driver, "return document.body.dataset.timelineS"), 10)
            lags, fetched, whole = watch(driver, c, job)
            st = status(c.hport)
            worst = max(max(x) for x in lags)
            timeline = [(n, b) for n, b in fetched if "/timeline" in n]
            stats = [n for n, _ in fetched if n.endswith("/stats")]
            per_update = sum(b for _, b in timeline) / max(1, len(timeline))
            print(f"defaults, {busy.n} busy loops, {RANKS} ranks at {RATE} events/s each: the "
                  f"job shown running {took:.1f} s after its ranks started; over {WATCH_S} s "
                  f"the page was at most {worst:.2f} s behind its stream, fetched the timeline "
                  f"{len(timeline)} times ({per_update / 1e3:.1f} kB per update; the whole "
                  f"timeline is {whole / 1e3:.1f} kB) and the statistics {len(stats)} times; "
                  f"analysis {st['analysis_events']} of the events, "
                  f"{st['analysis_behind_batches']} batches behind")
            check(worst <= MAX_LAG_S, f"the page was {worst:.2f} s behind its stream")
            check(len(timeline) >= WATCH_S / 2, f"{len(timeline)} timeline updates in {WATCH_S} s")
            check(all("since=" in n for n, _ in timeline),
                  "the page fetched the whole timeline again while the job ran: "
                  f"{[n for n, _ in timeline if 'since=' not in n]}")
            check(per_update * 4 <= whole,
                  f"{per_update:.0f} bytes per timeline update, the whole timeline {whole}")
            check(len(stats) <= WATCH_S / 2 + 1, f"the statistics fetched {len(stats)} times "
                  f"in {WATCH_S} s")
            # What the job does now, in its summary: half of each rank's
            # events are MPI-IO calls.
            summary = next(j for j in json.loads(get(c.hport, "/api/v1/jobs"))["jobs"]
                           if j["job"] == job)
            want_cps = RANKS * RATE / 2
            print(f"its summary: {summary['mpiio_calls_per_s']:.0f} MPI-IO calls/s "
                  f"(sent at {want_cps:.0f}), {summary['write_bytes_per_s']:.0f} B/s written")
            check(0.5 * want_cps <= summary["mpiio_calls_per_s"] <= 1.5 * want_cps,
                  f"mpiio_calls_per_s {summary['mpiio_calls_per_s']}, the ranks send {want_cps}")
            stop_all(procs)

            # Asked to yield, the analysis leaves the store unread under this
            # load: the page says so and names the option.
            y = Collector(tmp, "yield", "--analysis-yield", "30")
            collectors.append(y)
            driver.get(f"http://127.0.0.1:{y.hport}/")
            time.sleep(1.5)  # the collector's measure of idle cores covers the loops
            procs = y.ranks("dash-2", 5)
            banner = until(lambda: page(driver, """
                const b = document.getElementById('lag');
                return b.hidden ? null : b.textContent;"""), 30)
            print(f"--analysis-yield 30: the banner says: {banner}")
            check(banner and "--analysis-yield 30" in banner and "analysis-yield = 0" in banner,
                  f"the page's banner: {banner!r}")
        finally:
            if driver:
                driver.quit()
            stop_all(procs)
            for c in collectors:
                c.stop()
    sys.exit(finish(tmp))


if __name__ == "__main__":
    main()
