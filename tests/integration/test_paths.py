#!/usr/bin/env python3
"""Which files the library follows and how it names them:
- by default the /proc and /sys reads a process makes are left out (with
  IOTRACE_EXCLUDE empty they are recorded, so the default is what does it);
- IOTRACE_EXCLUDE and IOTRACE_INCLUDE patterns leave files out entirely;
- IOTRACE_ANONYMIZE=1 records every path component as a keyed hash, the
  same one this test computes (SipHash-2-4 written here, under a key drawn
  with BLAKE2b), and no name of the run's files is stored;
- names are normalized without the file system: "//", "." and ".." do not
  make a second name, nor let /proc/self/../ past the default exclusion;
- the batch systems' job ids (Slurm with its step, PBS, Flux) are taken
  when IOTRACE_JOB_ID is not set, and it wins over them;
- the batch system's job name and the job's user reach --list-jobs."""
import hashlib
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Deployment, parse_bins, sanitizer_env  # noqa: E402


M64 = 0xFFFFFFFFFFFFFFFF


def rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M64


def siphash24(key16, data):
    """SipHash-2-4 (Aumasson and Bernstein's reference), 64-bit result."""
    k0, k1 = int.from_bytes(key16[:8], "little"), int.from_bytes(key16[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261,
         k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & M64
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & M64
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & M64
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & M64
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)

    tail = len(data) % 8
    for i in range(0, len(data) - tail, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    m = (len(data) & 0xFF) << 56 | int.from_bytes(data[len(data) - tail:], "little")
    v[3] ^= m
    rounds(2)
    v[0] ^= m
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def keyed(key, name):
    k = hashlib.blake2b(key.encode(), digest_size=16).digest()
    return siphash24(k, name.encode()).to_bytes(8, "little").hex()


def anonymized(path, key):
    return "/".join(keyed(key, c) if c else "" for c in path.split("/"))


def main():
    bins = parse_bins(sys.argv[1:])
    dep = Deployment(bins).start()
    try:
        base = dict(os.environ, LD_PRELOAD=bins["preload_prefix"] + bins["client"],
                    IOTRACE_AGENT=dep.endpoint, **sanitizer_env(bins))
        for k in ("IOTRACE_EXCLUDE", "IOTRACE_INCLUDE", "IOTRACE_ANONYMIZE", "IOTRACE_JOB_ID",
                  "SLURM_JOB_ID", "SLURM_STEP_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
                  "COBALT_JOBID"):
            base.pop(k, None)

        def run(job, extra, argv):
            env = dict(base, **extra)
            if job is not None:
                env["IOTRACE_JOB_ID"] = job
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
        os.mkdir(os.path.join(dep.tmp, "sub"))
        spelt = dep.tmp + "//sub/./../parent.dat"
        run("paths-norm", {}, ["cat", "/proc/self/../self/status", spelt])
        cases["paths-norm"] = None
        # The batch systems' ids: the job a plain process lands in.
        launchers = {"4242.3": {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3"},
                     "77.pbs-head": {"PBS_JOBID": "77.pbs-head"},
                     "fA2bC9dE": {"FLUX_JOB_ID": "fA2bC9dE"},
                     "paths-wins": {"IOTRACE_JOB_ID": "paths-wins", "SLURM_JOB_ID": "999"}}
        for job, extra in launchers.items():
            run(None, extra, ["cat", parent])
            cases[job] = None

        def files(job, events):
            return {e["file"] for e in events if e["job"] == job and e["kind"] == "posix" and e["file"]}

        events = dep.wait_for(lambda ev: set(cases) - {"paths-default"} <= {e["job"] for e in ev}
                              and len(files("paths-anon", ev)) >= 3)
        got = {job: files(job, events) for job in cases}
        kernel = {f for f in got["paths-all"] if f.startswith(("/proc/", "/sys/"))}
        assert {"/proc/self/status", "/sys/devices/system/cpu/online"} <= kernel, got["paths-all"]
        assert not {f for f in got["paths-default"] if f.startswith(("/proc/", "/sys/"))}, got["paths-default"]
        assert parent in got["paths-exclude"], got["paths-exclude"]
        assert not any(f.endswith(("child.dat", ".creat")) for f in got["paths-exclude"]), got["paths-exclude"]
        assert got["paths-include"] == {parent}, got["paths-include"]
        assert got["paths-norm"] == {parent}, got["paths-norm"]
        for job in launchers:
            assert got[job] == {parent}, (job, got[job])
        assert "999" not in {e["job"] for e in events}, "SLURM_JOB_ID won over IOTRACE_JOB_ID"
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
              f"include, normalized names, {len(launchers) - 1} batch systems' job ids and "
              f"{len(anon)} anonymized names as computed here")
    finally:
        dep.stop()


if __name__ == "__main__":
    main()
