"""What the Python test scripts and benchmarks share: failures collected
and printed as they happen, a free loopback port, CPU time per thread."""
import os
import socket
import sys

failures = []


def check(ok, what):
    """Records a failed check (and says so on stderr); returns ok."""
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process, from /proc (threads of one
    name summed)."""
    clk = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / clk
    return out
