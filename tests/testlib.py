"""What the Python test scripts share: failures collected and printed as
they happen, and a free loopback port."""
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
