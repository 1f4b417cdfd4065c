#!/usr/bin/env python3
"""The collector's HTTP server: access control and option errors.

Runs the real collector with --http-users (a crypt(3) SHA-512 hash made by
`openssl passwd -6`) and --http-cert/--http-key (a self-signed certificate
made by `openssl req`), and checks: HTTPS only, 401 without or with wrong
credentials (on the API, /metrics and the dashboard alike), 200 with the
right ones; an address beyond loopback without a password file, a
certificate without a key and a bad --http are usage errors (exit 2); an
unreadable or malformed password file stops the collector (exit 1) with a
message naming it.  Where the machine has IPv6 loopback: --http [::1]:PORT
serves there and not on 127.0.0.1, and [::] needs a password file like
0.0.0.0.

    http_test.py COLLECTOR
"""
import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from testlib import check, failures, free_port  # noqa: E402

COLLECTOR = sys.argv[1]


def request(url, ctx, user=None, password=None):
    req = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run(args):
    return subprocess.run([COLLECTOR, *args], capture_output=True, text=True, timeout=30)


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def check_ipv6(tmp, store):
    if not ipv6_loopback():
        print("no IPv6 loopback here: --http [::1]:PORT not checked")
        return
    port = free_port()
    r = run(["--store", store, "--http", f"[::]:{port}"])
    check(r.returncode == 2 and "--http-users" in r.stderr, f"[::] without users: {r.returncode} {r.stderr}")
    log = open(os.path.join(tmp, "collector-v6.log"), "w")
    proc = subprocess.Popen([COLLECTOR, "--store", store, "--listen",
                             f"tcp://127.0.0.1:{free_port()}", "--http", f"[::1]:{port}"],
                            stdout=log, stderr=log)
    try:
        status, body = None, b""
        deadline = time.time() + 20
        while time.time() < deadline and status is None:
            try:
                status, body = request(f"http://[::1]:{port}/api/v1/status", None)
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        check(status == 200 and "events_stored" in json.loads(body), f"[::1]: {status} {body[:200]!r}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            check(False, "--http [::1]:PORT also answered on 127.0.0.1")
        except OSError:
            pass
    finally:
        proc.terminate()
        check(proc.wait(timeout=30) == 0, "collector on [::1] did not stop cleanly")
        log.close()
    print("ok: --http [::1]:PORT served on IPv6 loopback only; [::] needs --http-users")


def main():
    tmp = tempfile.mkdtemp(prefix="iotrace-http-")
    store = os.path.join(tmp, "store")
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    hashed = subprocess.run(["openssl", "passwd", "-6", "s3cret"], check=True,
                            capture_output=True, text=True).stdout.strip()
    users = os.path.join(tmp, "users")
    with open(users, "w") as f:
        f.write(f"# iotrace dashboard users\nalice:{hashed}:admin\ncarol:{hashed}:65534\n")

    # Option errors.
    port = free_port()
    r = run(["--store", store, "--http", f"0.0.0.0:{port}"])
    check(r.returncode == 2 and "--http-users" in r.stderr, f"beyond loopback without users: {r.returncode} {r.stderr}")
    r = run(["--store", store, "--http", f"127.0.0.1:{port}", "--http-cert", cert])
    check(r.returncode == 2 and "go together" in r.stderr, f"cert without key: {r.returncode} {r.stderr}")
    r = run(["--store", store, "--http", "nonsense"])
    check(r.returncode == 2, f"--http nonsense: {r.returncode} {r.stderr}")
    r = run(["--store", store, "--listen", f"tcp://127.0.0.1:{free_port()}",
             "--http", f"127.0.0.1:{port}", "--http-users", os.path.join(tmp, "missing")])
    check(r.returncode == 1 and "missing" in r.stderr, f"missing users file: {r.returncode} {r.stderr}")
    bad = os.path.join(tmp, "bad-users")
    with open(bad, "w") as f:
        f.write("alice-without-hash\n")
    r = run(["--store", store, "--listen", f"tcp://127.0.0.1:{free_port()}",
             "--http", f"127.0.0.1:{port}", "--http-users", bad])
    check(r.returncode == 1 and "bad-users:1" in r.stderr, f"malformed users file: {r.returncode} {r.stderr}")
    # A user the file gives no uid to, without a local account of its name:
    # refused, not shown every job.
    for line, want in ((f"nosuchlocalaccount:{hashed}", "has no local account"),
                       (f"alice:{hashed}:root", "neither a uid nor 'admin'")):
        with open(bad, "w") as f:
            f.write(line + "\n")
        r = run(["--store", store, "--listen", f"tcp://127.0.0.1:{free_port()}",
                 "--http", f"127.0.0.1:{port}", "--http-users", bad])
        check(r.returncode == 1 and want in r.stderr, f"users file '{line[:20]}...': {r.returncode} {r.stderr}")

    # The server itself.
    log = open(os.path.join(tmp, "collector.log"), "w")
    proc = subprocess.Popen([COLLECTOR, "--store", store, "--listen",
                             f"tcp://127.0.0.1:{free_port()}", "--http", f"127.0.0.1:{port}",
                             "--http-users", users, "--http-cert", cert, "--http-key", key],
                            stdout=log, stderr=log)
    ctx = ssl.create_default_context(cafile=cert)
    base = f"https://127.0.0.1:{port}"
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        for path in ("/api/v1/jobs", "/metrics", "/"):
            status, _ = request(base + path, ctx)
            check(status == 401, f"{path} without credentials: {status}")
            status, _ = request(base + path, ctx, "alice", "wrong")
            check(status == 401, f"{path} with a wrong password: {status}")
            status, _ = request(base + path, ctx, "bob", "s3cret")
            check(status == 401, f"{path} as an unknown user: {status}")
        status, body = request(base + "/api/v1/jobs", ctx, "alice", "s3cret")
        check(status == 200 and json.loads(body) == {"jobs": []}, f"jobs with credentials: {status} {body!r}")
        status, body = request(base + "/metrics", ctx, "alice", "s3cret")
        check(status == 200 and b"iotrace_collector_batches_total" in body, f"metrics: {status}")
        # Who asks, as the collector sees it.
        status, body = request(base + "/api/v1/status", ctx, "carol", "s3cret")
        viewer = json.loads(body).get("viewer") if status == 200 else None
        check(viewer and viewer["user"] == "carol" and viewer["uid"] == 65534,
              f"carol's status: {status} {viewer}")
        status, body = request(base + "/api/v1/status", ctx, "alice", "s3cret")
        viewer = json.loads(body).get("viewer") if status == 200 else None
        check(viewer and viewer["user"] == "alice" and viewer["uid"] is None and "admin" in viewer["sees"],
              f"alice's status: {status} {viewer}")
        status, body = request(base + "/api/v1/jobs/nope/stats", ctx, "alice", "s3cret")
        check(status == 404 and json.loads(body)["status"] == 404, f"unknown job: {status} {body!r}")
        # Plain HTTP on the HTTPS port gets no answer.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/jobs", timeout=5)
            check(False, "plain HTTP was answered on the HTTPS port")
        except (urllib.error.URLError, OSError, ValueError):
            pass
    finally:
        proc.terminate()
        check(proc.wait(timeout=30) == 0, "collector did not stop cleanly")
        log.close()
    check_ipv6(tmp, store)
    if failures:
        print(open(os.path.join(tmp, "collector.log")).read()[-3000:], file=sys.stderr)
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    print("http access control: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
