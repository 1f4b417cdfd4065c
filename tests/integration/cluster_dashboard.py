#!/usr/bin/env python3
"""The collector host's dashboard as a browser on that host renders it:
run inside the collector host (cluster.sh exec collector python3 THIS URL
JOB...), prints one JSON object of what headless Chromium shows:

  {"agents": {node: {"health", "clock", "drift"}},
   "jobs": {job: {"name", "user", "state", "ranks", "nodes"}},
   "servers": {job: {server: ops}}}

once every job named is listed and, clicked, shows its servers (or after
60 s, with what there was). The test decides what is right."""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import headless_chromium  # noqa: E402

ROWS = """
const rows = (id) => [...document.querySelectorAll('#' + id + ' tbody tr')];
const head = (id) => [...document.querySelectorAll('#' + id + ' thead th')].map(th => th.textContent);
const table = (id, key) => {
  const h = head(id), out = {};
  for (const tr of rows(id)) {
    const o = {};
    [...tr.children].forEach((td, i) => { o[h[i]] = td.textContent; });
    out[tr.dataset[key] || o[h[0]]] = o;
  }
  return out;
};
"""


def main():
    url, jobs = sys.argv[1], sys.argv[2:]
    tmp = tempfile.mkdtemp(prefix="iotrace-dash-")
    driver = headless_chromium(tmp, "--window-size=1400,1000")
    out = {"agents": {}, "jobs": {}, "servers": {}}
    try:
        driver.get(url)
        deadline = time.time() + 60
        while time.time() < deadline:
            out["agents"] = driver.execute_script(ROWS + "return table('agents');")
            out["jobs"] = driver.execute_script(ROWS + "return table('jobs', 'job');")
            clocked = all(a.get("clock offset ± error", "no samples") != "no samples"
                          for a in out["agents"].values())
            if out["agents"] and clocked and all(j in out["jobs"] for j in jobs):
                break
            time.sleep(0.5)
        shots = os.environ.get("IOTRACE_SCREENSHOT_DIR")
        if shots:
            driver.save_screenshot(os.path.join(shots, "dashboard-cluster.png"))
        for job in jobs:
            # Found and clicked in one go: the table is redrawn on every update.
            driver.execute_script(ROWS + """
                const tr = rows('jobs').find(r => r.dataset.job === arguments[0]);
                if (tr) tr.click();""", job)
            servers = {}
            until = time.time() + 30
            while time.time() < until:
                shown = driver.execute_script(
                    ROWS + "return document.getElementById('job-name').textContent;")
                servers = driver.execute_script(ROWS + "return table('servers');")
                if shown == job and servers:
                    break
                time.sleep(0.5)
            out["servers"][job] = {k: v.get("ops") for k, v in servers.items()}
            if shots:
                driver.save_screenshot(os.path.join(shots, f"dashboard-cluster-{job}.png"))
    finally:
        driver.quit()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
