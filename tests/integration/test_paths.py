#!/usr/bin/env python3
"""Which files the library follows and how it names them:
- by default the /proc and /sys reads a process makes are left out (with
  IOTRACE_EXCLUDE empty they are recorded, so the default is what does it);
- IOTRACE_EXCLUDE and IOTRACE_INCLUDE patterns leave files out entirely;
- IOTRACE_ANONYMIZE=1 records every path component as a keyed hash, the
  same one this test computes, and no name of the run's files is stored;
- the batch system's job name and the job's user reach --list-jobs."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, parse_bins, sanitizer_env  # noqa: E402


def fnv_keyed(key, name):
    h = 1469598103934665603
    for b in key.encode() + b"\xff" + name.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def anonymized(path, key):
    return "/".join(f"{fnv_keyed(key, c):016x}" if c else "" for c in path.split("/"))


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        base = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"],
                    IOTRACE_AGENT=dep.endpoint, **sanitizer_env(bins))
        for k in ("IOTRACE_EXCLUDE", "IOTRACE_INCLUDE", "IOTRACE_ANONYMIZE"):
            base.pop(k, None)

        def run(job, extra, argv):
            env = dict(base, IOTRACE_JOB_ID=job, **extra)
            r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, (argv, r.stderr)

        cases = {
            "paths-default": ({}, ["cat", "/proc/self/status", "/sys/devices/system/cpu/online"]),
            "paths-all": ({"IOTRACE_EXCLUDE": "", "SLURM_JOB_NAME": "my analysis"},
                          ["cat", "/proc/self/status", "/sys/devices/system/cpu/online"]),
            "paths-exclude": ({"IOTRACE_EXCLUDE": "*/child.dat:*.creat"}, [bins["posix_app"], dep.tmp]),
            "paths-include": ({"IOTRACE_INCLUDE": "*/parent.dat"}, [bins["posix_app"], dep.tmp]),
            "paths-anon": ({"IOTRACE_ANONYMIZE": "1", "IOTRACE_ANONYMIZE_KEY": "site-secret"},
                           [bins["posix_app"], dep.tmp]),
        }
        for job, (extra, argv) in cases.items():
            run(job, extra, argv)
        parent = os.path.join(dep.tmp, "parent.dat")

        def files(job, events):
            return {e["file"] for e in events if e["job"] == job and e["kind"] == "posix" and e["file"]}

        events = dep.wait_for(lambda ev: {"paths-all", "paths-exclude", "paths-include", "paths-anon"}
                              <= {e["job"] for e in ev} and len(files("paths-anon", ev)) >= 3)
        got = {job: files(job, events) for job in cases}
        kernel = {f for f in got["paths-all"] if f.startswith(("/proc/", "/sys/"))}
        assert {"/proc/self/status", "/sys/devices/system/cpu/online"} <= kernel, got["paths-all"]
        assert not {f for f in got["paths-default"] if f.startswith(("/proc/", "/sys/"))}, got["paths-default"]
        assert parent in got["paths-exclude"], got["paths-exclude"]
        assert not any(f.endswith(("child.dat", ".creat")) for f in got["paths-exclude"]), got["paths-exclude"]
        assert got["paths-include"] == {parent}, got["paths-include"]
        anon = got["paths-anon"]
        assert all(re.fullmatch(r"(/[0-9a-f]{16})+", f) for f in anon), anon
        assert anonymized(parent, "site-secret") in anon, (anonymized(parent, "site-secret"), anon)
        # The batch system's job name and the user travel with the job.
        listed = subprocess.run([bins["export"], "--store", dep.store, "--list-jobs"], capture_output=True,
                                text=True).stdout
        row = [line for line in listed.splitlines() if line.startswith("paths-all ")]
        assert row and f" uid={os.getuid()}" in row[0] and row[0].endswith(" name=my_analysis"), listed
        words = [w for w in parent.split("/") if w]
        assert not any(w in f for f in anon for w in words), anon
        print(f"ok: /proc and /sys left out by default ({len(kernel)} recorded without it); exclude, "
              f"include and {len(anon)} anonymized names as computed here")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
