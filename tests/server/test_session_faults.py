"""A served session whose store fails: a change not saved is answered 503 and its halt holds; a
stored state edited by hand is a clear 409 (and a record) until DELETE clears it; no problem
document names the store's address; a call past its deadline saves nothing."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from _support.redis_server import running_redis
from _support.server import PRUNEWARDEN, Server, _await_address, running_server
from _support.session_faults import RedisProxy, fill, small_filesystem
from prunewarden.reload import ReloadingEngine
from prunewarden.server._config import ServerConfigError
from prunewarden.server._redis import _FENCED_SET, lease_key, state_key
from prunewarden.server._run import open_store
from prunewarden.server._service import ServiceProblemError
from prunewarden.server._sessions import SessionService
from prunewarden.session import SESSION_KEY_ENV, SqliteSessionStore, save_deadline

SEGMENT = {"id": "s1", "kind": "tool_output", "tombstone_written": True}
EVICTION = {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.12}
HEALTHY = [{"c": 0.9, "a": 0.6, "b": 0.1}, {"c": 0.88, "a": 0.55, "b": 0.12}]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}
FENCED_SAVE = hashlib.sha1(_FENCED_SET.encode()).hexdigest().encode()  # noqa: S324 - its name


def cycle(http: httpx.Client, session_id: str, scores: dict[str, float]) -> httpx.Response:
    return http.post(f"/v1/sessions/{session_id}/cycles", json={"scores": scores, "pinned": ["c"]})


def evict(http: httpx.Client, session_id: str) -> httpx.Response:
    return http.post(f"/v1/sessions/{session_id}/evictions", json=EVICTION)


def audit_records(server: Server, kind: str) -> list[dict[str, Any]]:
    lines = server.audit_log.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


class TestUnsavedHalt:
    def test_redis_dropped_during_the_halting_save(
        self, policy_file: Path, tmp_path: Path, redis_url: str
    ) -> None:
        """The connection to Redis drops as the halting cycle is saved: 503
        session-store-unavailable carrying the decision id, no address in the document; once
        Redis is back the next eviction is refused pruning_halted and Redis holds the halt."""
        proxy, raw = RedisProxy(redis_url), redis.Redis.from_url(redis_url)
        with (
            running_server(policy_file, tmp_path, "--sessions", proxy.url) as server,
            server.client() as http,
        ):
            for scores in (*HEALTHY, COLLAPSED):
                assert cycle(http, "dropped", scores).status_code == 200
            proxy.arm(FENCED_SAVE)
            answer = cycle(http, "dropped", COLLAPSED)
            proxy.restore()
            # Redis was unreachable when the call let go of its lease: it runs out by itself
            # (30 s); the test does not wait for that.
            raw.delete(lease_key("dropped"))
            refused = evict(http, "dropped")
        proxy.close()
        problem = answer.json()
        assert (answer.status_code, problem["type"].rsplit("/", 1)[-1]) == (
            503,
            "session-store-unavailable",
        )
        assert len(problem["decision_ids"]) == 1
        assert str(proxy.port) not in answer.text
        assert "127.0.0.1" not in answer.text
        assert refused.json()["reasons"][0]["code"] == "pruning_halted"
        stored = raw.get(state_key("dropped"))
        raw.close()
        assert isinstance(stored, bytes)
        assert json.loads(stored.split(b"\n", 1)[1])["halt"]["code"] == "collapse_detected"

    def test_sqlite_on_a_full_filesystem_during_the_halt(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """The session database's filesystem is full as the halting cycle is saved: 503, then
        evictions refused (session_state_unavailable); once space is back, pruning_halted, and
        a restarted server is still halted."""
        with small_filesystem(tmp_path / "small") as small:
            options = ("--sessions", f"sqlite:{small / 'sessions.db'}")
            with running_server(policy_file, tmp_path, *options) as server, server.client() as http:
                for scores in (*HEALTHY, COLLAPSED):
                    assert cycle(http, "full", scores).status_code == 200
                filler = fill(small)
                answer = cycle(http, "full", COLLAPSED)
                unsaved = evict(http, "full")
                filler.unlink()
                saved = evict(http, "full")
            with running_server(policy_file, tmp_path, *options) as server, server.client() as http:
                restarted = evict(http, "full")
        assert answer.status_code == 503
        assert answer.json()["type"].endswith("/session-store-unavailable")
        assert unsaved.json()["reasons"][0]["code"] == "session_state_unavailable"
        assert saved.json()["reasons"][0]["code"] == "pruning_halted"
        assert restarted.json()["reasons"][0]["code"] == "pruning_halted"


class TestEditedState:
    @pytest.mark.parametrize("edited", [b"null", b"halt-null"], ids=["null", "halt-null"])
    def test_an_edited_state_is_a_409_until_deleted(
        self, policy_file: Path, tmp_path: Path, redis_url: str, edited: bytes
    ) -> None:
        """A halted session's state edited in Redis: every endpoint but DELETE answers 409
        session-state-rejected with the located problem; DELETE clears it (200) and both are
        recorded (session_state_rejected); the session then starts afresh."""
        raw = redis.Redis.from_url(redis_url)
        with (
            running_server(policy_file, tmp_path, "--sessions", redis_url) as server,
            server.client() as http,
        ):
            for scores in (*HEALTHY, COLLAPSED, COLLAPSED):
                cycle(http, "edited", scores)
            value = raw.get(state_key("edited"))
            assert isinstance(value, bytes)
            seal, state = value.split(b"\n", 1)
            lifted = json.dumps({**json.loads(state), "halt": None}, separators=(",", ":"))
            body = b"null" if edited == b"null" else lifted.encode()
            raw.set(state_key("edited"), seal + b"\n" + body)
            answers = [
                evict(http, "edited"),
                cycle(http, "edited", HEALTHY[0]),
                http.get("/v1/sessions/edited"),
            ]
            deleted = http.delete("/v1/sessions/edited")
            fresh = evict(http, "edited")
            records = audit_records(server, "session_state_rejected")
        raw.close()
        assert [a.status_code for a in answers] == [409, 409, 409]
        problem = answers[0].json()
        assert problem["type"].endswith("/session-state-rejected")
        assert (problem["problems"][0]["file"], problem["problems"][0]["path"]) == (
            "<session-store>",
            "$",
        )
        assert (deleted.status_code, deleted.json()["deleted"]) == (200, True)
        assert fresh.json()["reasons"][0]["code"] == "authorized"
        assert [r["deleted"] for r in records] == [False, False, False, True]


class TestDeadline:
    def test_a_call_past_its_deadline_saves_nothing(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """A session call running past its request deadline is answered 503 and its change
        (here, the halting cycle) is not saved; the halt it decided still refuses."""
        store = SqliteSessionStore(tmp_path / "s.db")
        engine = ReloadingEngine(policy_file, store=store)
        service = SessionService(engine, store, ttl=60)
        for scores in (*HEALTHY, COLLAPSED):
            service.observe_cycle("late", json.dumps({"scores": scores, "pinned": ["c"]}).encode())
        before = store.load("late")
        with save_deadline(time.monotonic() - 1), pytest.raises(ServiceProblemError) as raised:
            service.observe_cycle(
                "late", json.dumps({"scores": COLLAPSED, "pinned": ["c"]}).encode()
            )
        assert raised.value.problem.status == 503
        assert "DeadlinePassedError" in raised.value.problem.detail
        assert store.load("late") == before
        refused = service.authorize("late", json.dumps(EVICTION).encode()).document
        assert refused["reasons"][0]["code"] == "pruning_halted"
        service.close()
        engine.close()


class TestRequestTimeout:
    def test_a_served_call_past_its_timeout_saves_nothing(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """With --request-timeout shorter than any call, a cycle is answered 503
        deadline-exceeded; once the server has stopped (its workers done), the session file
        holds no cycle: the worker that went on past the deadline saved nothing."""
        command = [PRUNEWARDEN, "serve", "--policy", str(policy_file), "--listen", "127.0.0.1:0"]
        command += ["--audit-log", str(tmp_path / "audit.jsonl"), "--request-timeout", "1e-6"]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path
        )
        url, startup = _await_address(process)
        server = Server(process, url, tmp_path / "audit.jsonl", startup)
        try:
            with server.client() as http:
                answer = cycle(http, "late", HEALTHY[0])
        finally:
            stopped = server.stop()  # SIGTERM: exits once every worker has returned
            assert process.stdout is not None
            process.stdout.close()
        assert stopped == 0
        assert (answer.status_code, answer.json()["type"].rsplit("/", 1)[-1]) == (
            503,
            "deadline-exceeded",
        )
        assert [r["session_id"] for r in audit_records(server, "decision")] == ["late"]
        with sqlite3.connect(tmp_path / "sessions.sqlite3") as connection:
            states = [
                json.loads(row[0]) for row in connection.execute("SELECT state FROM sessions")
            ]
        assert [state["cycles_seen"] for state in states] in ([], [0])


class TestSessionKey:
    def test_a_short_key_is_a_usage_error_and_a_good_one_seals(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """PRUNEWARDEN_SESSION_KEY under 32 bytes refuses the store (ServerConfigError, exit 2);
        with a good key, the server's SQLite store seals states with HMAC."""
        monkeypatch.setenv(SESSION_KEY_ENV, "short")
        with pytest.raises(ServerConfigError, match="at least 32"):
            open_store(f"sqlite:{tmp_path / 'short.db'}", 60)
        monkeypatch.setenv(SESSION_KEY_ENV, "k" * 32)
        store = open_store(f"sqlite:{tmp_path / 'keyed.db'}", 60)
        store.save("s", {"session_id": "s"})
        assert isinstance(store, SqliteSessionStore)
        (seal,) = store._connect().execute("SELECT seal FROM sessions").fetchone()
        store.close()
        assert seal.startswith("hmac-sha256:")
