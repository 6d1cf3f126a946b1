"""A bounded load on loopback: concurrent clients driving sessions, then the audit log holds
exactly the decisions they were given, chained and verified.

Bounded in count (CLIENTS x ROUNDS requests) and in time (each client stops at the deadline,
whatever it has done): the test stops by itself on any machine.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from _support.server import PRUNEWARDEN, audit_decisions, running_server
from prunewarden.client import Client

CLIENTS = 8
ROUNDS = 40  # each round: one cycle and one eviction
DEADLINE_SECONDS = 120.0
SEGMENT = {"id": "s1", "kind": "tool_output", "tombstone_written": True}


def drive(url: str, name: str, deadline: float, returned: list[str]) -> None:
    """One client: its own session, a cycle and an eviction per round, until done or late."""
    with Client(url) as client:
        session = client.session(name)
        for cycle in range(1, ROUNDS + 1):
            if time.monotonic() > deadline:
                return
            scores = {"c": 0.9, "a": 0.5 + cycle / 1000, "b": 0.1}
            returned.append(session.observe_cycle(scores, ["c"], cycle=cycle)["decision_id"])
            returned.append(session.authorize(SEGMENT, 0.1, 0.12)["decision_id"])


class TestLoad:
    def test_concurrent_sessions_log_every_decision_returned(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """N clients at once: every decision returned is logged once, and the chain verifies."""
        returned: list[str] = []
        with running_server(policy_file, tmp_path, "--audit-fsync", "batch") as server:
            deadline = time.monotonic() + DEADLINE_SECONDS
            threads = [
                threading.Thread(target=drive, args=(server.url, f"load-{i}", deadline, returned))
                for i in range(CLIENTS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(DEADLINE_SECONDS + 30)
            assert server.stop() == 0
        verify = subprocess.run(
            [PRUNEWARDEN, "audit", "verify", str(server.audit_log)],
            capture_output=True,
            text=True,
            check=False,
        )
        logged = [record["decision_id"] for record in audit_decisions(server.audit_log)]
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert len(returned) > 0
        assert sorted(logged) == sorted(returned)
