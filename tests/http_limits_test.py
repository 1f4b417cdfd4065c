#!/usr/bin/env python3
"""The collector's HTTP server against a hostile local user (user nobody,
by setpriv), with a real collector, agent and producer on loopback:

downloads   200 clients of nobody, from six loopback addresses, ask for
            downloads of a 400 000-event job (statistics, JSON Lines,
            SLOG-2) and leave mid-download.  At most --http-downloads
            iotrace-export children run at any time, beyond that the
            answer is 503 with Retry-After; every child is gone within 5 s
            of the last client leaving (none orphaned); each runs in its
            own process group with --http-download-memory as its address
            space; the memory of the collector and its children stays
            bounded; afterwards root's downloads are complete, byte for byte
            iotrace-export's.  With 16M for the exporter a JSON Lines
            download ends cut short and an SLOG-2 one is a 500.
slow        200 connections of nobody from 127.0.0.2..127.0.0.7 send their
            request a byte a second, half of them a whole header at once
            and then a body a byte a second (and reconnect when closed); meanwhile
            root's requests from 127.0.0.1 are each answered within 5 s, and
            no slow connection is kept beyond --http-request-timeout.

paths       root's job names files under /scratch/; user nobody asks the
            default collector (loopback, no --http-users) for everything
            the API, /metrics and the event stream give of it, and its
            downloads: no answer contains a path of root's files, the
            timeline's calls say paths_hidden with a null file, the JSON
            Lines and SLOG-2 downloads are 403, the statistics are served.

    http_limits_test.py downloads|slow|paths COLLECTOR AGENT PRODUCER EXPORT
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, finish, free_port, until  # noqa: E402

SCENARIO, COLLECTOR, AGENT, PRODUCER, EXPORT = sys.argv[1:6]
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
JOB = "big"
DOWNLOADS = 4
MEMORY = 256 << 20

# The attacker's script, run as nobody: N clients from six loopback
# addresses, each asks for a download, reads a little and leaves; prints
# how many answers began with each status, and the Retry-After headers seen.
DOWNLOAD_ATTACK = r"""
import json, socket, sys, threading
port, n, job = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
formats = ("stats", "jsonl", "slog2")
seen, retry, lock = {}, set(), threading.Lock()
def one(i):
    status = "refused"
    try:
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i % 6}", 0))
        s.settimeout(3)
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET /api/v1/jobs/{job}/download/{formats[i % 3]} HTTP/1.1\r\n"
                  f"Host: x\r\n\r\n".encode())
        head = s.recv(2000).decode(errors="replace")
        status = head.split(" ")[1] if head.startswith("HTTP/") else "none"
        for line in head.split("\r\n"):
            if line.lower().startswith("retry-after:"):
                with lock:
                    retry.add(line.split(":", 1)[1].strip())
    except OSError as e:
        status = "timeout" if isinstance(e, socket.timeout) else "error"
    finally:
        s.close()
    with lock:
        seen[status] = seen.get(status, 0) + 1
threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"status": seen, "retry_after": sorted(retry)}))
"""

# N connections from 127.0.0.2..7 that send a request a byte a second and
# open a new connection when one is closed, for SECONDS; prints how long
# each closed connection had lived, at most, and how many were opened.
SLOW_ATTACK = r"""
import json, socket, sys, threading, time
port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
req = b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n"
# Half of them send a whole header at once and then a body a byte a second.
post = b"POST /api/v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 230\r\n\r\n"
end = time.time() + seconds
lived, opened, lock = [0.0], [0], threading.Lock()
def one(i):
    while time.time() < end:
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i % 6}", 0))
        t0 = time.time()
        try:
            s.connect(("127.0.0.1", port))
            with lock:
                opened[0] += 1
            if i % 2:
                s.sendall(post)
            for b in req[:230]:
                if time.time() >= end:
                    break
                s.sendall(bytes([b]))
                time.sleep(1)
        except OSError:
            time.sleep(0.2)
        finally:
            if time.time() < end:
                with lock:
                    lived[0] = max(lived[0], time.time() - t0)
            s.close()
threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"longest_s": lived[0], "opened": opened[0]}))
"""


def exports(store, parent):
    """pid: RSS in KiB of each iotrace-export the collector (pid parent)
    runs on our store.  Its children only: in a sanitizer build an export's
    LeakSanitizer clones a tracer at exit, a process of the same command line
    in the export's group."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if os.path.basename(argv[0]) != b"iotrace-export" or store.encode() not in argv:
                continue
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        if f"\nPPid:\t{parent}\n" not in status:
            continue
        rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")]
        out[int(pid)] = rss[0] if rss else 0
    return out


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def get(port, path, timeout):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Service:
    def __init__(self, tmp, *http_options):
        self.store = os.path.join(tmp, "store")
        self.sock = os.path.join(tmp, "agent.sock")
        self.port, self.hport = free_port(), free_port()
        self.log = open(os.path.join(tmp, "service.log"), "wb")
        self.collector = subprocess.Popen(
            [COLLECTOR, "--listen", f"tcp://127.0.0.1:{self.port}", "--store", self.store,
             "--http", f"127.0.0.1:{self.hport}", *http_options], stderr=self.log)
        self.agent = subprocess.Popen(
            [AGENT, "--collector", f"tcp://127.0.0.1:{self.port}", "--listen", "ipc://" + self.sock,
             "--node", "n1", "--state-dir", "none"], stderr=self.log)
        check(until(lambda: os.path.exists(self.sock) and self.answers(), 30),
              "collector and agent did not come up")

    def sanitized(self):
        """The collector is an AddressSanitizer build: download.c leaves its
        children's address space unbounded there (ASan reserves terabytes)."""
        return "libasan" in open(f"/proc/{self.collector.pid}/maps").read()

    def answers(self):
        try:
            return get(self.hport, "/api/v1/status", 2)[0] == 200
        except OSError:
            return False

    def close(self):
        for p in (self.agent, self.collector):
            p.terminate()
            check(p.wait(timeout=60) == 0, f"{p.args[0]} did not stop cleanly")
        self.log.close()


def downloads(tmp):
    # --http-show-paths: JSON Lines and SLOG-2 are served to requests
    # without a user too, and so all three formats are bounded here.
    svc = Service(tmp, "--http-downloads", str(DOWNLOADS), "--http-download-memory", str(MEMORY),
                  "--http-show-paths")
    try:
        r = subprocess.run([PRODUCER, "--agent", "ipc://" + svc.sock, "--node", "n1", "--job", JOB,
                            "--batches", "400", "--events-per-batch", "1000"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"producer: {r.stderr}")
        check(until(lambda: any(j["job"] == JOB and j["events"] >= 400000 for j in
                                json.loads(get(svc.hport, "/api/v1/jobs", 10)[1])["jobs"]), 60),
              "the job did not arrive")

        peak = {"children": 0, "kib": 0, "limits": set(), "groups": set()}
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                kids = exports(svc.store, svc.collector.pid)
                peak["children"] = max(peak["children"], len(kids))
                peak["kib"] = max(peak["kib"], rss_kib(svc.collector.pid) + sum(kids.values()))
                for pid in kids:
                    try:
                        peak["groups"].add(os.getpgid(pid) == pid)
                        for line in open(f"/proc/{pid}/limits"):
                            if line.startswith("Max address space"):
                                peak["limits"].add(line.split()[3])
                    except OSError:
                        pass
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        t0 = time.time()
        r = subprocess.run(NOBODY + [sys.executable, "-c", DOWNLOAD_ATTACK, str(svc.hport), "200", JOB],
                           capture_output=True, text=True, timeout=300)
        left = time.time()
        check(r.returncode == 0, f"attacker: {r.stderr}")
        got = json.loads(r.stdout or "{}")
        gone = until(lambda: not exports(svc.store, svc.collector.pid), 60)
        gone_after = time.time() - left
        stop.set()
        watcher.join()
        print(f"200 clients of nobody in {left - t0:.1f} s: answers {got.get('status')}, "
              f"Retry-After {got.get('retry_after')}; at most {peak['children']} iotrace-export "
              f"at once; collector + children at most {peak['kib'] // 1024} MiB; the last child "
              f"gone {gone_after:.1f} s after the last client left")
        check(gone and gone_after < 5, f"iotrace-export children outlived their clients by "
              f"{gone_after:.1f} s: {exports(svc.store, svc.collector.pid)}")
        check(peak["children"] <= DOWNLOADS, f"{peak['children']} downloads ran at once "
              f"(--http-downloads {DOWNLOADS})")
        check(got.get("status", {}).get("503", 0) > 0 and got.get("retry_after"),
              f"no 503 with Retry-After beyond the bound: {got}")
        limits = {"unlimited"} if svc.sanitized() else {str(MEMORY)}
        check(peak["limits"] <= limits and peak["groups"] <= {True},
              f"a child without its memory limit or group: {peak}")
        # (ASan's shadow memory doubles what each process holds)
        bound = (2 if svc.sanitized() else 1) * 1024 * 1024
        check(peak["kib"] < bound, f"collector and children took {peak['kib']} KiB")
        # Every slot was given back: root's downloads now succeed, complete.
        slog2 = os.path.join(tmp, "cli.slog2")
        for fmt, args in (("stats", ["--stats"]), ("jsonl", ["--jsonl", "-"]), ("slog2", ["--slog2", slog2])):
            status, body = get(svc.hport, f"/api/v1/jobs/{JOB}/download/{fmt}", 120)
            cli = subprocess.run([EXPORT, "--store", svc.store, "--job", JOB, *args],
                                 capture_output=True, check=True).stdout
            if fmt == "slog2":
                cli = open(slog2, "rb").read()
            check(status == 200 and body == cli, f"root's {fmt} download after the attack: "
                  f"{status}, {len(body)} bytes, iotrace-export {len(cli)}")
        print("root's downloads after the attack: complete, as iotrace-export")
    finally:
        svc.close()
    # An export beyond its memory fails, and its download is never whole.
    svc = Service(tmp, "--http-download-memory", "16M", "--http-show-paths")
    try:
        if svc.sanitized():
            print("--http-download-memory: not applied in this AddressSanitizer build")
            return
        try:
            status, body = get(svc.hport, f"/api/v1/jobs/{JOB}/download/jsonl", 120)
            cut = f"{status}, {len(body)} bytes, whole"
        except http.client.IncompleteRead as e:
            cut = f"cut after {len(e.partial)} bytes"
        check("whole" not in cut, f"jsonl with 16M for iotrace-export: {cut}")
        status, body = get(svc.hport, f"/api/v1/jobs/{JOB}/download/slog2", 120)
        check(status == 500, f"slog2 with 16M for iotrace-export: {status}, {len(body)} bytes")
        print(f"--http-download-memory 16M: JSON Lines {cut}, SLOG-2 {status}")
    finally:
        svc.close()


def slow(tmp):
    timeout = 5
    svc = Service(tmp, "--http-request-timeout", str(timeout))
    try:
        seconds = 40
        attacker = subprocess.Popen(NOBODY + [sys.executable, "-c", SLOW_ATTACK, str(svc.hport), "200",
                                              str(seconds)], stdout=subprocess.PIPE, text=True)
        time.sleep(3)  # the slow connections are open (the server's slots, before)
        worst, failed, n = 0.0, [], 0
        end = time.time() + seconds - 8
        while time.time() < end:
            t0 = time.time()
            try:
                status, _ = get(svc.hport, "/api/v1/status", 20)
            except OSError as e:
                status = str(e)
            took = time.time() - t0
            worst = max(worst, took)
            n += 1
            if status != 200 or took > 5:
                failed.append(f"{status} in {took:.1f} s")
            time.sleep(0.5)
        out, _ = attacker.communicate(timeout=120)
        got = json.loads(out or "{}")
        print(f"200 slow connections of nobody ({got.get('opened')} opened in {seconds} s, the "
              f"longest kept {got.get('longest_s', 0):.1f} s): root's {n} requests, slowest "
              f"{worst:.2f} s, {len(failed)} failed or over 5 s")
        check(not failed, f"root's requests during the attack: {failed[:10]}")
        check(got.get("longest_s", 99) < timeout + 3,
              f"a slow connection was kept {got.get('longest_s')} s (--http-request-timeout {timeout})")
    finally:
        svc.close()


# User nobody's script: every document of the job it can get, and whether
# root's file paths ("/scratch/") are in any; prints {path: [status, leaks]}.
PATHS_ATTACK = r"""
import json, socket, sys, urllib.error, urllib.request
port, job = int(sys.argv[1]), sys.argv[2]
out = {}
for path in ("/api/v1/jobs", "/api/v1/status", "/api/v1/nodes", "/metrics",
             f"/api/v1/jobs/{job}/stats", f"/api/v1/jobs/{job}/series",
             f"/api/v1/jobs/{job}/timeline?from=0&to=1e9",
             f"/api/v1/jobs/{job}/download/stats", f"/api/v1/jobs/{job}/download/jsonl",
             f"/api/v1/jobs/{job}/download/slog2"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    out[path] = [status, b"/scratch/" in body, body.decode(errors="replace") if "timeline" in path else ""]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(f"GET /api/v1/events?job={job} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
buf = b""
while b"\n\n" not in buf.split(b"\r\n\r\n", 1)[-1]:
    buf += s.recv(65536)
out["/api/v1/events"] = [200, b"/scratch/" in buf, ""]
print(json.dumps(out))
"""


def paths(tmp):
    svc = Service(tmp)
    try:
        r = subprocess.run([PRODUCER, "--agent", "ipc://" + svc.sock, "--node", "n1", "--job", JOB,
                            "--batches", "20", "--events-per-batch", "100"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"producer: {r.stderr}")
        check(until(lambda: json.loads(get(svc.hport, f"/api/v1/jobs/{JOB}/timeline?from=0&to=1e9",
                                           10)[1]).get("calls"), 60),
              "the job's calls did not reach the timeline")
        r = subprocess.run(NOBODY + [sys.executable, "-c", PATHS_ATTACK, str(svc.hport), JOB],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"attacker: {r.stderr}")
        got = json.loads(r.stdout or "{}")
        leaks = [p for p, (status, leak, _) in got.items() if leak]
        print(f"user nobody asked for {len(got)} documents of root's job: "
              f"{', '.join(f'{p.split(JOB)[-1] or p} {st}' for p, (st, _, _) in got.items())}; "
              f"root's paths in {len(leaks)} of them {leaks}")
        check(not leaks, f"root's file paths shown to user nobody in {leaks}")
        tl = json.loads(got.get(f"/api/v1/jobs/{JOB}/timeline?from=0&to=1e9", [0, 0, "{}"])[2])
        check(tl.get("paths_hidden") is True and tl.get("calls")
              and all(c["file"] is None for c in tl["calls"]),
              f"timeline without paths_hidden or with files: {str(tl)[:300]}")
        want = {"stats": 200, "jsonl": 403, "slog2": 403}
        for fmt, status in want.items():
            st = got.get(f"/api/v1/jobs/{JOB}/download/{fmt}", [0])[0]
            check(st == status, f"{fmt} download for nobody: {st}, expected {status}")
    finally:
        svc.close()


def main():
    tmp = tempfile.mkdtemp(prefix="iotrace-http-limits-")
    os.chmod(tmp, 0o755)
    {"downloads": downloads, "slow": slow, "paths": paths}[SCENARIO](tmp)
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
