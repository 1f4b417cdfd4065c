#!/usr/bin/env python3
"""A local user attacks the agent of the node, as that user (setpriv), and
the others keep their events: its default settings give each user a share
of the pending store of its own."""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import check, failures, finish, until  # noqa: E402
from users_test import Node, job_total  # noqa: E402  (same arguments as users_test.py)


def quota_by_default(tmp):
    """Without --max-pending-per-user, one user's flood with the collector
    down stops at its share (half of --max-pending) and root's batches that
    come afterwards are all stored; before the share was on by default,
    the flood took the whole store and root's 300 events were all counted
    as agent_full, none stored."""
    n = Node(tmp, "default", "--max-pending", "1M")
    try:
        greedy = n.producer("greedy", 400, 1000, "--rate", "100000", user="nobody", wait=False)
        # Until the flood has filled what it may: its share, or the store.
        check(until(lambda: re.search(r"user 65534 holds|pending store full", n.text()), 60),
              "the flood never filled its share nor the store")
        n.producer("victim", 3, 100)
        n.start_collector()
        greedy.communicate(timeout=120)
        made = 400 * 1000
        got = n.counts(lambda g: job_total(g, "greedy") >= made and job_total(g, "victim") >= 300)
        check(got[("victim", False)] == 300, f"root's events not all stored beside the flood: {dict(got)}")
        over, lost = got[("greedy", "over_quota")], got[("greedy", "lost")]
        check(got[("greedy", False)] + over + lost + got[("greedy", "agent_full")] == made,
              f"greedy: stored + counted != made {made}: {dict(got)}")
        print(f"ok: quota by default: nobody made {made} events, {got[('greedy', False)]} stored, "
              f"{over} over_quota, {lost} lost; root's {got[('victim', False)]} of 300 stored")
    finally:
        n.close()


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to run producers as another user")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iotrace-hostile-")
    os.chmod(tmp, 0o755)
    quota_by_default(tmp)
    if not failures:
        print("ok: every attack held")
    sys.exit(finish(tmp))


if __name__ == "__main__":
    main()
