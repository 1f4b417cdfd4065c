#!/usr/bin/env python3
"""Each HTTP user sees their own jobs (docs/http-api.md, Access).

One collector with --http-users: alice an admin, carol restricted to uid
65534 (nobody). Two jobs reach it through one agent, one sent by root's
process, one by nobody's (setpriv), so the agent stamps them with those
uids. Then:

- the API as carol lists nobody's job only; root's job is, on every
  route, the 404 of a job that does not exist; /metrics as carol has no
  series of root's job; as alice both jobs everywhere;
- headless Chromium, logged in as carol (an Authorization header on every
  request), shows nobody's job in the job table and not root's, and says
  in its header whose jobs these are; logged in as alice it shows both.

Then a storage server (tests/server/server_api_demo.c) records 2 000
operations through the agent, 1 800 of them for jobs: /api/v1/servers has
it with those 1 800 in all and in the window of its rates, latency quantiles and
its top jobs (for carol none: no job of those is nobody's), and alice's
page lists it under *Storage servers now*.

    dashboard_users_test.py COLLECTOR AGENT PRODUCER SERVER_DEMO
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from testlib import check, failures, finish, free_port, stop_all, until  # noqa: E402
from harness import headless_chromium  # noqa: E402

COLLECTOR, AGENT, PRODUCER, SERVER_DEMO = sys.argv[1:5]
SERVER_OPS, SERVER_JOBS = 2000, 5
# The demo serves no MPI-IO call with every tenth operation: those have no
# job, and the servers' view counts the operations of jobs.
TAGGED = SERVER_OPS * 9 // 10
NOBODY = 65534
PASSWORD = "s3cret"


def auth(user):
    return "Basic " + base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()


def get(port, path, user):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 headers={"Authorization": auth(user)})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def jobs(port, user):
    status, body = get(port, "/api/v1/jobs", user)
    return sorted(j["job"] for j in json.loads(body)["jobs"]) if status == 200 else None


def table(driver):
    return sorted(driver.execute_script(
        "return [...document.querySelectorAll('#jobs tbody tr')].map(tr => tr.dataset.job);"))


def as_user(driver, port, user):
    """The page as USER: every request of the page carries USER's
    credentials, as a browser sends them once logged in."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": auth(user)}})
    driver.get(f"http://127.0.0.1:{port}/")


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (a producer run as nobody)")
        return 77
    tmp = tempfile.mkdtemp(prefix="iotrace-users-dash-")
    os.chmod(tmp, 0o755)
    hashed = subprocess.run(["openssl", "passwd", "-6", PASSWORD], check=True,
                            capture_output=True, text=True).stdout.strip()
    users = os.path.join(tmp, "users")
    with open(users, "w") as f:
        f.write(f"alice:{hashed}:admin\ncarol:{hashed}:{NOBODY}\n")
    port, hport = free_port(), free_port()
    sock = os.path.join(tmp, "agent.sock")
    log = open(os.path.join(tmp, "daemons.log"), "wb")
    procs, driver = [], None
    try:
        procs.append(subprocess.Popen(
            [COLLECTOR, "--listen", f"tcp://127.0.0.1:{port}", "--store", os.path.join(tmp, "store"),
             "--http", f"127.0.0.1:{hport}", "--http-users", users], stderr=log))
        procs.append(subprocess.Popen(
            [AGENT, "--collector", f"tcp://127.0.0.1:{port}", "--listen", "ipc://" + sock,
             "--node", "n1", "--state-dir", "none"], stderr=log))
        check(until(lambda: os.path.exists(sock), 30), "the agent made no socket")
        producer = [PRODUCER, "--agent", "ipc://" + sock, "--node", "n1", "--rank", "0", "--batches", "5",
                    "--events-per-batch", "200"]
        for cmd in (producer + ["--job", "root-job"],
                    ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
                    + producer + ["--job", "nobody-job"]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"{cmd[-1]}: {r.stdout} {r.stderr}")
        both = ["nobody-job", "root-job"]
        check(until(lambda: jobs(hport, "alice") == both, 60), f"alice's jobs: {jobs(hport, 'alice')}")

        # The API.
        check(jobs(hport, "carol") == ["nobody-job"], f"carol's jobs: {jobs(hport, 'carol')}")
        for route in ("stats", "timeline", "series", "download/stats"):
            status, body = get(hport, f"/api/v1/jobs/root-job/{route}", "carol")
            _, none = get(hport, f"/api/v1/jobs/no-such-job/{route}", "carol")
            check(status == 404 and body.replace("root-job", "J") == none.replace("no-such-job", "J"),
                  f"carol's root-job/{route}: {status} {body} (a job that does not exist: {none})")
            status, _ = get(hport, f"/api/v1/jobs/nobody-job/{route}", "carol")
            check(status == 200, f"carol's own nobody-job/{route}: {status}")
            status, _ = get(hport, f"/api/v1/jobs/root-job/{route}", "alice")
            check(status == 200, f"alice's root-job/{route}: {status}")
        _, metrics = get(hport, "/metrics", "carol")
        check('job_id="root-job"' not in metrics and 'job_id="nobody-job"' in metrics,
              "carol's /metrics: root-job's series there, or nobody-job's not")
        _, metrics = get(hport, "/metrics", "alice")
        check('job_id="root-job"' in metrics, "alice's /metrics lacks root-job")
        info = [x for x in metrics.splitlines() if x.startswith('iotrace_job_info{job_id="nobody-job"')]
        check(info == ['iotrace_job_info{job_id="nobody-job",user="nobody",uid="65534",name=""} 1'],
              f"nobody-job's info series: {info}")
        print("API: carol sees nobody-job only, root-job is a 404 like no job; alice sees both")


        # The dashboard, in Chromium.
        driver = headless_chromium(tmp, "--window-size=1400,1200")
        as_user(driver, hport, "carol")
        shown = until(lambda: table(driver) == ["nobody-job"] and table(driver), 30)
        check(shown == ["nobody-job"], f"carol's page lists {table(driver)}")
        viewer = driver.execute_script("return document.getElementById('viewer').textContent;")
        check(viewer.startswith("carol: ") and "its uid" in viewer, f"carol's page says {viewer!r}")
        as_user(driver, hport, "alice")
        shown = until(lambda: table(driver) == both and table(driver), 30)
        check(shown == both, f"alice's page lists {table(driver)}")
        viewer = driver.execute_script("return document.getElementById('viewer').textContent;")
        check(viewer.startswith("alice: ") and "admin" in viewer, f"alice's page says {viewer!r}")
        # The job table sorts by a column (a click on its header; again for
        # the other way) and filters on job, name or user.
        order = "return [...document.querySelectorAll('#jobs tbody tr')].map(tr => tr.dataset.job);"
        click = ("[...document.querySelectorAll('#jobs thead th')]"
                 ".find(th => th.textContent === arguments[0]).click();")
        driver.execute_script(click, "job")
        check(until(lambda: driver.execute_script(order) == ["root-job", "nobody-job"], 10),
              f"sorted by job, descending: {driver.execute_script(order)}")
        driver.execute_script(click, "job")
        check(until(lambda: driver.execute_script(order) == ["nobody-job", "root-job"], 10),
              f"sorted by job, ascending: {driver.execute_script(order)}")
        driver.execute_script("const f = document.getElementById('job-filter'); f.value = 'ROOT';"
                              " f.dispatchEvent(new Event('input'));")
        check(until(lambda: driver.execute_script(order) == ["root-job"], 10),
              f"filtered on 'ROOT': {driver.execute_script(order)}")
        count = driver.execute_script("return document.getElementById('job-count').textContent;")
        check(count == "1 of 2 jobs", f"the count says {count!r}")
        driver.execute_script("const f = document.getElementById('job-filter'); f.value = 'nobody';"
                              " f.dispatchEvent(new Event('input'));")
        check(until(lambda: driver.execute_script(order) == ["nobody-job"], 10),
              f"filtered on 'nobody' (the user): {driver.execute_script(order)}")
        # A storage server's operations, now: the facility's view of it.
        r = subprocess.run([SERVER_DEMO, "demo:/bricks/b1", str(SERVER_OPS), str(SERVER_JOBS)],
                           env=dict(os.environ, IOTRACE_AGENT="ipc://" + sock),
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and f"recorded {SERVER_OPS} dropped 0" in r.stdout,
              f"server_api_demo: {r.stdout} {r.stderr}")

        def server(user):
            status, body = get(hport, "/api/v1/servers", user)
            found = [v for v in json.loads(body)["servers"] if v["server"] == "demo:/bricks/b1"] \
                if status == 200 else []
            return found[0] if found else None

        # Its operations enter the rates once their seconds are in the
        # window (2 to 7 s old).
        v = until(lambda: (server("alice") or {}).get("ops_per_s", 0) * 5 >= TAGGED and server("alice"), 30)
        print(f"servers: {v}")
        check(v and v["ops"] == TAGGED and round(v["ops_per_s"] * 5) == TAGGED,
              f"the server's operations: {v}")
        check(v and v["p50_ns"] and v["p99_ns"] and v["p99_ns"] >= v["p50_ns"], f"latency: {v}")
        check(v and len(v["top_jobs"]) == 3 and v["top_jobs"][0]["bytes_per_s"] >= v["top_jobs"][-1]["bytes_per_s"],
              f"top jobs: {v and v['top_jobs']}")
        # /metrics: the server's operations by direction and a latency
        # histogram whose buckets only grow, ending at its operations.
        _, metrics = get(hport, "/metrics", "alice")
        lines = [x for x in metrics.splitlines() if 'server="demo:/bricks/b1"' in x]
        buckets = [int(x.split()[-1]) for x in lines
                   if x.startswith("iotrace_server_disk_latency_seconds_bucket")]
        ops = sum(int(x.split()[-1]) for x in lines if x.startswith("iotrace_server_disk_ops_total"))
        count = [int(x.split()[-1]) for x in lines if x.startswith("iotrace_server_disk_latency_seconds_count")]
        check(ops == TAGGED and count == [TAGGED] and buckets and buckets[-1] == TAGGED
              and buckets == sorted(buckets), f"the server's /metrics: {lines}")
        lint = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True,
                              text=True)
        check(lint.returncode == 0, f"promtool check metrics: {lint.stdout} {lint.stderr}")
        c = server("carol")
        check(c and c["ops"] == TAGGED and c["top_jobs"] == [],
              f"carol's view of the server (no job of hers on it): {c}")
        as_user(driver, hport, "alice")
        until(lambda: driver.execute_script(
            "return document.querySelectorAll('#bricks tbody tr').length;"), 30)
        bricks = driver.execute_script(
            "return [...document.querySelectorAll('#bricks tbody tr')].map(tr => tr.dataset.server);")
        check("demo:/bricks/b1" in bricks, f"alice's page lists the servers {bricks}")
        print(f"dashboard: carol's page lists {['nobody-job']}, alice's {both}, servers {bricks}")
    finally:
        if driver:
            driver.quit()
        stop_all(procs)
        log.close()
    if failures:
        print(open(os.path.join(tmp, "daemons.log"), errors="replace").read()[-3000:], file=sys.stderr)
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
