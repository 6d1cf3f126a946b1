"""A session held busy (its save waiting on a locked store) wedges neither the event loop nor
the other sessions; live sessions are capped without losing a halt.

The blocker is deterministic: the test holds the session store's write lock, so a call that
saves waits inside the server (holding its session) until the test lets go."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from _support.blocking import GUARD_SECONDS, sqlite_write_lock
from _support.server import Server, audit_decisions, running_server
from prometheus_client.parser import text_string_to_metric_families

ALLOWED = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
HEALTHY = {"scores": {"c": 0.9, "a": 0.5, "b": 0.1}, "pinned": ["c"]}
COLLAPSED = {"scores": {"c": 0.3, "a": 0.31, "b": 0.3}, "pinned": ["c"]}


def metric(server: Server, name: str, **labels: str) -> float:
    """One sample of the server's /metrics (0 when absent)."""
    with server.client() as http:
        text = http.get("/metrics", timeout=GUARD_SECONDS).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds, failing after :data:`GUARD_SECONDS`."""
    deadline = time.monotonic() + GUARD_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            msg = f"never happened: {what}"
            raise AssertionError(msg)
        time.sleep(0.02)


class Call:
    """A request sent from a thread of its own; ``response`` once it is answered."""

    def __init__(self, server: Server, path: str, body: dict[str, Any]) -> None:
        self.response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._send, args=(server, path, body))
        self._thread.start()

    def _send(self, server: Server, path: str, body: dict[str, Any]) -> None:
        with server.client() as http:
            self.response = http.post(path, json=body, timeout=GUARD_SECONDS * 3)

    def result(self) -> httpx.Response:
        self._thread.join(GUARD_SECONDS * 3)
        assert self.response is not None
        return self.response


@contextmanager
def saving_blocked(server: Server, workdir: Path, session_id: str) -> Iterator[Call]:
    """A cycle of ``session_id`` decided and logged, its save waiting on the store's lock (so
    the server holds the session busy) until the block ends; yields that call."""
    logged = len(audit_decisions(server.audit_log))
    with sqlite_write_lock(workdir / "sessions.sqlite3"):
        cycle = Call(server, f"/v1/sessions/{session_id}/cycles", HEALTHY)
        wait_for(lambda: len(audit_decisions(server.audit_log)) > logged, "the cycle decided")
        yield cycle
    assert cycle.result().status_code == 200


class TestABusySession:
    def test_health_and_other_sessions_answer_while_a_session_call_waits(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """A call queued behind a busy session waits off the event loop: /healthz and another
        session answer meanwhile, and the queued call is answered once the session is free."""
        with running_server(policy_file, tmp_path) as server, server.client() as http:
            for session_id in ("busy", "other"):
                http.post(f"/v1/sessions/{session_id}/cycles", json=HEALTHY)
            with saving_blocked(server, tmp_path, "busy"):
                queued = Call(server, "/v1/sessions/busy/evictions", ALLOWED)
                wait_for(
                    lambda: metric(server, "prunewarden_server_session_calls_waiting") == 1,
                    "the eviction waits for its session's turn",
                )
                health = http.get("/healthz", timeout=GUARD_SECONDS)
                other = http.post(
                    "/v1/sessions/other/evictions", json=ALLOWED, timeout=GUARD_SECONDS
                )
                assert queued.response is None
            assert (health.status_code, other.json()["outcome"]) == (200, "allow")
            assert queued.result().json()["outcome"] == "allow"


class TestLiveSessionCap:
    def test_least_recently_used_session_goes_back_to_the_store_with_its_halt(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """--max-live-sessions 2: a third session sends the least recently used (halted) one
        back to the store; its next call reopens it, still halted; the limit is counted."""
        with (
            running_server(policy_file, tmp_path, "--max-live-sessions", "2") as server,
            server.client() as http,
        ):
            for body in (HEALTHY, COLLAPSED, COLLAPSED):
                halted = http.post("/v1/sessions/first/cycles", json=body).json()
            http.post("/v1/sessions/second/cycles", json=HEALTHY)
            http.post("/v1/sessions/third/cycles", json=HEALTHY)
            live = metric(server, "prunewarden_server_live_sessions")
            refused = http.post("/v1/sessions/first/evictions", json=ALLOWED).json()
            reached = metric(
                server, "prunewarden_server_limit_reached_total", limit="live_sessions"
            )
        assert halted["outcome"] == "halt"
        assert live == 2
        assert refused["reasons"][0]["code"] == "pruning_halted"
        assert reached == 2  # "third" sent "first" back; "first" then sent "second" back

    def test_a_new_session_is_refused_when_every_live_one_is_busy(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """At the cap with its one live session busy, a new session is 503 server-busy (retry),
        and the busy one is not dropped."""
        with (
            running_server(policy_file, tmp_path, "--max-live-sessions", "1") as server,
            server.client() as http,
        ):
            http.post("/v1/sessions/held/cycles", json=HEALTHY)
            with saving_blocked(server, tmp_path, "held"):
                refused = http.post(
                    "/v1/sessions/newcomer/evictions", json=ALLOWED, timeout=GUARD_SECONDS
                )
            state = http.get("/v1/sessions/held").json()
        problem = refused.json()
        assert refused.status_code == 503
        assert (problem["type"].rsplit("/", 1)[1], problem["limit"]) == (
            "server-busy",
            "live_sessions",
        )
        assert state["state"]["snapshots"][-1]["cycle"] == 2
