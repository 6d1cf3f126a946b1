"""The session routes of docs/server.md ("Sessions") on the app in process: each POST's answer
and refusals, GET and DELETE, the id's length, the live-session cap, the idle TTL and its
sweep, a stored state failing its integrity check (409) and a store that fails (503)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions
from _support.redis_server import running_redis
from prunewarden import AuditLog, ReloadingEngine
from prunewarden.server import Listen, ServerConfig, create_app
from prunewarden.server._redis import RedisSessionStore, SessionBusyError
from prunewarden.server._service import DecisionService
from prunewarden.server._sessions import SessionService
from prunewarden.session import SqliteSessionStore
from starlette.testclient import TestClient

EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
PRUNE = {"check": "staleness", "spans": [], "keep_top_k": 0}
BEFORE: list[dict[str, Any]] = [
    {"id": "sys", "kind": "system", "text": "You are a coding agent."},
    {"id": "rule", "kind": "constraint", "text": "All timestamps must be UTC."},
]
TRANSITION = {"check": "transition", "before": BEFORE, "after": BEFORE[:1], "tombstones": ["rule"]}
HEALTHY = [{"c": 0.9, "a": 0.6, "b": 0.1}, {"c": 0.88, "a": 0.55, "b": 0.12}]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}
TTL = 100.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FailingSaves(SqliteSessionStore):
    """A store whose saves fail (a full disk)."""

    def save(self, session_id: str, state: Any) -> None:  # noqa: ARG002
        raise OSError("disk full")


class ClosingStore(SqliteSessionStore):
    """A store that notes it was closed."""

    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


class FailingLoads(SqliteSessionStore):
    """A store that raises ``error`` on every load."""

    error: Exception = sqlite3.OperationalError("database is locked")

    def load(self, session_id: str) -> dict[str, Any] | None:  # noqa: ARG002
        raise self.error


class App:
    """A session service and a client of its app, on a clock the test moves."""

    def __init__(self, service: SessionService, http: TestClient, audit: Path) -> None:
        self.service, self.http, self.audit = service, http, audit

    def cycle(self, session_id: str, scores: dict[str, float]) -> Any:
        body = {"scores": scores, "pinned": ["c"]}
        return self.http.post(f"/v1/sessions/{session_id}/cycles", json=body)

    def halt(self, session_id: str) -> None:
        for scores in (*HEALTHY, COLLAPSED, COLLAPSED):
            self.cycle(session_id, scores)

    def evict(self, session_id: str) -> Any:
        return self.http.post(f"/v1/sessions/{session_id}/evictions", json=EVICTION)

    def is_live(self, session_id: str) -> bool:
        """Whether the server holds the session in memory: with its stored copy removed behind
        the server's back, only a live session still has a state (ends the test's use of it)."""
        self.service.store.delete(session_id)
        return self.http.get(f"/v1/sessions/{session_id}").status_code == 200

    def records(self, kind: str) -> list[dict[str, Any]]:
        lines = self.audit.read_text(encoding="utf-8").splitlines()
        return [r for r in map(json.loads, lines) if r["kind"] == kind]


MakeApp = Callable[..., App]


@pytest.fixture
def make_app(policy_file: Path, tmp_path: Path) -> Iterator[MakeApp]:
    """An app over the given store (a fresh SQLite file by default)."""
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.open()
    engines: list[ReloadingEngine] = []

    def make(
        store: SqliteSessionStore | RedisSessionStore | None = None,
        clock: Clock | None = None,
        max_live: int = 10,
    ) -> App:
        store = store if store is not None else SqliteSessionStore(tmp_path / "s.sqlite3")
        engine = ReloadingEngine(str(policy_file), audit=audit, store=store)
        engines.append(engine)
        service = SessionService(engine, store, ttl=TTL, max_live=max_live, clock=clock or Clock())
        config = ServerConfig(str(policy_file), str(audit.path), Listen())
        app = create_app(config, DecisionService(engine, audit), service)
        return App(service, TestClient(app, base_url="http://127.0.0.1"), tmp_path / "audit.jsonl")

    try:
        yield make
    finally:
        for engine in engines:
            engine.close()
        audit.close()


def codes(response: Any) -> list[str]:
    return [reason["code"] for reason in response.json()["reasons"]]


def first_problem(response: Any) -> tuple[int, str, str]:
    problem = response.json()
    return response.status_code, problem["type"].rsplit("/", 1)[1], problem["problems"][0]["path"]


class TestPosts:
    def test_cycles_decide_and_halt(self, make_app: MakeApp) -> None:
        """Each cycle answers the collapse decision; collapsing cycles halt the session."""
        app = make_app()
        answers = [app.cycle("s", scores) for scores in (*HEALTHY, COLLAPSED, COLLAPSED)]
        assert [a.status_code for a in answers] == [200, 200, 200, 200]
        assert answers[0].json()["outcome"] == "allow"
        assert answers[-1].json()["outcome"] == "halt"
        assert answers[-1].headers["prunewarden-decision-ids"] == answers[-1].json()["decision_id"]

    def test_a_cycle_may_leave_its_number_out(self, make_app: MakeApp) -> None:
        """A cycle without a number is the next one; a number that does not follow is 409."""
        app = make_app()
        app.cycle("s", HEALTHY[0])
        app.cycle("s", HEALTHY[1])
        cycles = [c["cycle"] for c in app.http.get("/v1/sessions/s").json()["state"]["snapshots"]]
        repeated = app.http.post("/v1/sessions/s/cycles", json={"cycle": 1, "scores": {"a": 0.5}})
        assert cycles == [1, 2]
        assert first_problem(repeated) == (409, "session-conflict", "$.cycle")

    @pytest.mark.parametrize(
        ("body", "path"),
        [([1], "$"), ({"scores": {"a": 7.0}}, "$.scores.a"), ({"pinned": []}, "$")],
        ids=["array", "range", "no-scores"],
    )
    def test_a_bad_cycle_is_400_in_the_body(
        self, make_app: MakeApp, body: object, path: str
    ) -> None:
        """A cycle that is not an object, or not a snapshot, is 400 located in the body."""
        response = make_app().http.post("/v1/sessions/s/cycles", json=body)
        assert first_problem(response) == (400, "invalid-input", path)

    def test_turns_answer_their_number(self, make_app: MakeApp) -> None:
        """Each turn answers its number, the halt and the policy; a repeated number is 409."""
        app = make_app()
        turn = {"mean_relevance": 0.5, "tokens": 10}
        first, second = (app.http.post("/v1/sessions/t/turns", json=turn) for _ in range(2))
        repeated = app.http.post("/v1/sessions/t/turns", json={**turn, "turn": 1})
        assert first.json()["turn"] == 1
        assert (second.json()["session_id"], second.json()["turn"]) == ("t", 2)
        assert second.json()["halted"] is False
        assert second.json()["policy"]["name"] == "served"
        assert first_problem(repeated) == (409, "session-conflict", "$.turn")
        assert [t["turn"] for t in app.http.get("/v1/sessions/t").json()["state"]["turns"]] == [
            1,
            2,
        ]

    @pytest.mark.parametrize(
        ("body", "path"),
        [([1], "$"), ({"mean_relevance": 0.5}, "$"), ({"tokens": 1}, "$")],
        ids=["array", "no-tokens", "no-relevance"],
    )
    def test_a_bad_turn_is_400(self, make_app: MakeApp, body: object, path: str) -> None:
        """A turn that is not an object, or not a turn, is 400; no session is opened."""
        app = make_app()
        response = app.http.post("/v1/sessions/t/turns", json=body)
        assert first_problem(response) == (400, "invalid-input", path)
        assert app.http.get("/v1/sessions/t").status_code == 404

    def test_evictions_prunes_plans_and_transitions_decide(self, make_app: MakeApp) -> None:
        """Each decision route answers its decision (a plan its pass) with the session's id."""
        http = make_app().http
        evicted = http.post("/v1/sessions/d/evictions", json=EVICTION)
        pruned = http.post("/v1/sessions/d/prunes", json=PRUNE)
        planned = http.post("/v1/sessions/d/plans", json={"segments": [], "keep_top_k": 0})
        verified = http.post("/v1/sessions/d/transitions", json=TRANSITION)
        assert [r.status_code for r in (evicted, pruned, planned, verified)] == [200] * 4
        assert codes(evicted) == ["authorized"]
        assert pruned.json()["check"] == "staleness"
        assert planned.json()["evict"] == []
        assert codes(verified) == ["transition_clean"]

    @pytest.mark.parametrize(
        ("part", "body", "path"),
        [
            ("evictions", PRUNE, "$.check"),
            ("evictions", {**EVICTION, "score": "high"}, "$.score"),
            ("prunes", EVICTION, "$.check"),
            ("prunes", {**PRUNE, "keep_top_k": "x"}, "$.keep_top_k"),
            ("prunes", {**PRUNE, "turns": []}, "$.turns"),
            ("plans", {"segments": [], "keep_top_k": 0, "turns": []}, "$.turns"),
            ("transitions", EVICTION, "$.check"),
            ("transitions", {**TRANSITION, "session_id": "x"}, "$.session_id"),
            ("transitions", {**TRANSITION, "before": 1}, "$.before"),
        ],
    )
    def test_a_document_the_route_does_not_take_is_400(
        self, make_app: MakeApp, part: str, body: dict[str, Any], path: str
    ) -> None:
        """Another check, a bad field or a field the session supplies is 400 at its path."""
        app = make_app()
        response = app.http.post(f"/v1/sessions/r/{part}", json=body)
        assert first_problem(response) == (400, "invalid-input", path)
        assert app.http.get("/v1/sessions/r").status_code == 404

    def test_the_check_refusal_names_the_route(self, make_app: MakeApp) -> None:
        """The wrong check's message says which document the route takes."""
        http = make_app().http
        messages = [
            http.post(f"/v1/sessions/r/{part}", json=body).json()["problems"][0]["message"]
            for part, body in (("evictions", PRUNE), ("prunes", EVICTION))
        ]
        assert messages == [
            "'staleness': this endpoint takes an eviction document",
            "'eviction': this endpoint takes a staleness document",
        ]


class TestStateAndDelete:
    def test_state_of_a_session(self, make_app: MakeApp) -> None:
        """GET answers the session's state, whether it is halted, and the policy."""
        app = make_app()
        app.cycle("s", HEALTHY[0])
        running = app.http.get("/v1/sessions/s").json()
        app.halt("h")
        halted = app.http.get("/v1/sessions/h").json()
        assert (running["session_id"], running["halted"]) == ("s", False)
        assert running["state"]["halt"] is None
        assert running["policy"]["name"] == "served"
        assert halted["halted"] is True
        assert halted["state"]["halt"]["code"] == "collapse_detected"

    def test_an_unknown_session_is_404(self, make_app: MakeApp) -> None:
        """GET of a session the server does not hold is 404 naming it."""
        response = make_app().http.get("/v1/sessions/nobody")
        assert response.status_code == 404
        assert response.json()["detail"] == "no session 'nobody' is held"

    def test_state_of_a_stored_session_after_a_restart(self, make_app: MakeApp) -> None:
        """A session only in the store (the server restarted) is read from it."""
        make_app().halt("h")
        response = make_app().http.get("/v1/sessions/h")
        assert response.status_code == 200
        assert response.json()["halted"] is True

    def test_delete_forgets_history_and_halt(self, make_app: MakeApp) -> None:
        """DELETE answers deleted true, the state is then 404 and the next call starts afresh;
        deleting it again answers deleted false."""
        app = make_app()
        app.halt("h")
        deleted = app.http.delete("/v1/sessions/h")
        again = app.http.delete("/v1/sessions/h")
        assert (deleted.status_code, deleted.json()["deleted"]) == (200, True)
        assert deleted.json()["session_id"] == "h"
        assert app.http.get("/v1/sessions/h").status_code == 404
        assert codes(app.evict("h")) == ["authorized"]
        assert again.json()["deleted"] is False

    def test_delete_of_a_session_held_only_in_the_store(self, make_app: MakeApp) -> None:
        """After a restart, DELETE of a stored session answers deleted true."""
        make_app().halt("h")
        app = make_app()
        assert app.http.delete("/v1/sessions/h").json()["deleted"] is True
        assert app.http.get("/v1/sessions/h").status_code == 404

    def test_delete_of_a_session_held_only_in_memory(
        self, make_app: MakeApp, tmp_path: Path
    ) -> None:
        """A session whose saves failed is held in memory: DELETE still says it was there."""
        app = make_app(FailingSaves(tmp_path / "f.sqlite3"))
        app.cycle("m", HEALTHY[0])
        assert app.http.delete("/v1/sessions/m").json()["deleted"] is True

    @pytest.mark.parametrize("method", ["GET", "DELETE", "POST"])
    def test_an_id_too_long_is_400(self, make_app: MakeApp, method: str) -> None:
        """A session id over 256 characters is 400 at $.session_id on every route."""
        app = make_app()
        path = f"/v1/sessions/{'x' * 257}" + ("/evictions" if method == "POST" else "")
        response = app.http.request(method, path, json=EVICTION if method == "POST" else None)
        assert first_problem(response) == (400, "invalid-input", "$.session_id")
        assert "1 to 256 characters" in response.json()["detail"]

    def test_an_id_of_256_characters_is_a_session(self, make_app: MakeApp) -> None:
        """An id of exactly 256 characters is accepted."""
        app = make_app()
        name = "x" * 256
        assert codes(app.evict(name)) == ["authorized"]
        assert app.http.get(f"/v1/sessions/{name}").json()["session_id"] == name

    def test_close_closes_the_store(self, make_app: MakeApp, tmp_path: Path) -> None:
        """close() forgets the live sessions and closes the store."""
        store = ClosingStore(tmp_path / "c.sqlite3")
        app = make_app(store)
        app.evict("a")
        assert app.service.live_count == 1
        app.service.close()
        assert app.service.live_count == 0
        assert store.closed


class TestLiveSessionCap:
    def test_the_least_recently_used_goes_back_to_the_store(self, make_app: MakeApp) -> None:
        """Past the cap, the least recently used idle session goes back to the store, keeping
        its halt; its next call finds it there."""
        app = make_app(max_live=2)
        app.halt("old")
        app.evict("mid")
        app.evict("new")
        assert app.service.live_count == 2
        assert codes(app.evict("old")) == ["pruning_halted"]

    def test_a_recent_session_is_kept_live(self, make_app: MakeApp) -> None:
        """Using a session makes it the most recent: the other one goes back to the store."""
        app = make_app(max_live=2)
        app.evict("a")
        app.evict("b")
        app.evict("a")
        app.evict("c")
        assert app.is_live("a")
        assert not app.is_live("b")

    def test_no_saved_session_to_drop_is_503(self, make_app: MakeApp, tmp_path: Path) -> None:
        """When every live session is unsaved, a new one is 503 server-busy (live_sessions),
        and the held one keeps its change."""
        app = make_app(FailingSaves(tmp_path / "f.sqlite3"), max_live=1)
        first = app.cycle("held", HEALTHY[0])
        refused = app.evict("other")
        assert first.status_code == 503
        assert refused.status_code == 503
        assert refused.json()["type"].endswith("/server-busy")
        assert refused.json()["limit"] == "live_sessions"
        assert app.is_live("held")


class TestTtl:
    def test_idle_past_the_ttl_starts_afresh(self, make_app: MakeApp) -> None:
        """A session idle longer than the TTL is forgotten: its halt is gone."""
        clock = Clock()
        app = make_app(clock=clock)
        app.halt("h")
        clock.now += TTL + 1
        assert codes(app.evict("h")) == ["authorized"]

    def test_idle_exactly_the_ttl_is_kept(self, make_app: MakeApp) -> None:
        """A session idle exactly the TTL is not yet forgotten."""
        clock = Clock()
        app = make_app(clock=clock)
        app.halt("h")
        clock.now += TTL
        assert codes(app.evict("h")) == ["pruning_halted"]

    def test_the_sweep_forgets_sessions_nobody_calls(self, make_app: MakeApp) -> None:
        """A call on another session a tenth of the TTL after the last sweep sweeps: an
        expired session is removed from the store without being called."""
        clock = Clock()
        app = make_app(clock=clock)
        app.halt("h")
        clock.now += 95.0
        app.evict("other")  # sweeps; "h" is 95 s idle, kept
        assert app.service.store.load("h") is not None
        clock.now += TTL / 10  # "h" 105 s idle; exactly a tenth of the TTL since the sweep
        app.evict("other")
        assert app.service.store.load("h") is None
        assert not app.is_live("h")

    def test_no_sweep_within_a_tenth_of_the_ttl(self, make_app: MakeApp) -> None:
        """Sweeps run at most every tenth of the TTL: an expired session nobody calls stays
        stored until then."""
        clock = Clock()
        app = make_app(clock=clock)
        app.halt("h")
        clock.now += 95.0
        app.evict("other")
        clock.now += TTL / 10 - 0.5  # "h" 104.5 s idle, 9.5 s since the last sweep
        app.evict("other")
        assert app.service.store.load("h") is not None

    def test_a_stored_session_counts_as_used_at_start(self, make_app: MakeApp) -> None:
        """Sessions found in the store at start count as used then: swept a TTL later."""
        make_app().halt("h")
        clock = Clock()
        app = make_app(clock=clock)
        clock.now += TTL + 1
        app.evict("other")
        assert app.service.store.load("h") is None


class TestStoreFaults:
    def edit(self, path: Path, session_id: str) -> None:
        with sqlite3.connect(path) as connection:
            connection.execute(
                "UPDATE sessions SET state = ? WHERE session_id = ?", ("null", session_id)
            )
        connection.close()

    def test_an_edited_state_is_409_until_deleted(self, make_app: MakeApp, tmp_path: Path) -> None:
        """A stored state edited outside prunewarden: every route but DELETE is 409
        session-state-rejected, each recorded; DELETE clears it (recorded deleted)."""
        make_app().halt("e")
        self.edit(tmp_path / "s.sqlite3", "e")
        app = make_app()
        answers = [
            app.evict("e"),
            app.cycle("e", HEALTHY[0]),
            app.http.get("/v1/sessions/e"),
        ]
        deleted = app.http.delete("/v1/sessions/e")
        fresh = app.evict("e")
        assert [a.status_code for a in answers] == [409, 409, 409]
        problem = answers[2].json()
        assert problem["type"].endswith("/session-state-rejected")
        assert problem["detail"].endswith("; DELETE the session to start it afresh")
        assert problem["problems"][0]["file"] == "<session-store>"
        assert (deleted.status_code, deleted.json()["deleted"]) == (200, True)
        assert codes(fresh) == ["authorized"]
        records = app.records("session_state_rejected")
        assert [r["deleted"] for r in records] == [False, False, False, True]

    def test_a_state_this_policy_cannot_use_is_a_located_conflict(self, make_app: MakeApp) -> None:
        """A stored state that keeps its seal but fails the state schema is 409
        session-conflict, located at its path in the session state."""
        app = make_app()
        app.halt("e")
        state = app.http.get("/v1/sessions/e").json()["state"]
        app.service.store.save("x", {**state, "session_id": "x", "cycles_seen": -1})
        response = make_app().cycle("x", HEALTHY[0])
        problem = response.json()
        assert first_problem(response) == (409, "session-conflict", "$.cycles_seen")
        assert problem["problems"][0]["file"] == "<session-state>"

    def test_an_unsaved_change_is_503_naming_its_decisions(
        self, make_app: MakeApp, tmp_path: Path
    ) -> None:
        """A change that cannot be saved is 503 session-store-unavailable, naming the decisions
        it logged; retry."""
        app = make_app(FailingSaves(tmp_path / "f.sqlite3"))
        response = app.cycle("u", HEALTHY[0])
        problem = response.json()
        assert response.status_code == 503
        assert problem["type"].endswith("/session-store-unavailable")
        assert problem["detail"].endswith("; retry the call")
        assert len(problem["decision_ids"]) == 1

    def test_a_store_that_fails_to_read_is_503(self, make_app: MakeApp, tmp_path: Path) -> None:
        """A store that cannot be read is 503 session-store-unavailable naming the error."""
        app = make_app(FailingLoads(tmp_path / "f.sqlite3"))
        for response in (app.http.get("/v1/sessions/x"), app.http.delete("/v1/sessions/x")):
            assert response.status_code == 503
            assert response.json()["detail"] == "OperationalError: database is locked"

    def test_a_redis_error_does_not_name_the_server(
        self, make_app: MakeApp, tmp_path: Path
    ) -> None:
        """A Redis client's error (which names the server's address) is answered by its type."""
        store = FailingLoads(tmp_path / "f.sqlite3")
        store.error = redis.exceptions.ConnectionError("Error connecting to 10.0.0.5:6379")
        response = make_app(store).http.get("/v1/sessions/x")
        assert response.status_code == 503
        assert response.json()["detail"] == "ConnectionError in the session store"

    def test_a_session_busy_elsewhere_is_409(self, make_app: MakeApp, tmp_path: Path) -> None:
        """A session whose lease another replica holds is 409 session-conflict."""
        store = FailingLoads(tmp_path / "f.sqlite3")
        store.error = SessionBusyError("session 'x' is busy")
        response = make_app(store).http.get("/v1/sessions/x")
        assert response.status_code == 409
        assert response.json()["type"].endswith("/session-conflict")


class TestRefusalsAreLocated:
    @pytest.mark.parametrize(
        ("part", "body", "takes"),
        [
            ("evictions", PRUNE, "'staleness': this endpoint takes an eviction document"),
            ("prunes", EVICTION, "'eviction': this endpoint takes a staleness document"),
            ("transitions", EVICTION, "'eviction': this endpoint takes a transition document"),
        ],
    )
    def test_the_wrong_check_is_at_check_without_a_line(
        self, make_app: MakeApp, part: str, body: dict[str, Any], takes: str
    ) -> None:
        """The wrong check is refused at $.check, a problem of the document, not of a line of
        its text (line and column 0), and the message says what the route takes."""
        response = make_app().http.post(f"/v1/sessions/r/{part}", json=body)
        problem = response.json()["problems"][0]
        assert (problem["line"], problem["column"], problem["path"]) == (0, 0, "$.check")
        assert problem["text"] == f"<request>: $.check: {takes}"

    def test_a_bad_plan_opens_no_session(self, make_app: MakeApp) -> None:
        """A plan that is not a plan document is 400 before the session is opened."""
        app = make_app()
        response = app.http.post("/v1/sessions/p/plans", json={"segments": [], "keep_top_k": "x"})
        assert first_problem(response) == (400, "invalid-input", "$.keep_top_k")
        assert app.http.get("/v1/sessions/p").status_code == 404

    def test_a_long_id_is_refused_without_a_line(self, make_app: MakeApp) -> None:
        """An id too long is a problem at $.session_id with no line of a body."""
        response = make_app().http.get(f"/v1/sessions/{'x' * 257}")
        problem = response.json()["problems"][0]
        assert (problem["line"], problem["column"]) == (0, 0)


class TestLiveCapCounted:
    def test_the_cap_is_counted_at_metrics(self, make_app: MakeApp) -> None:
        """Each time the live-session cap acts, limit live_sessions is counted at /metrics."""
        app = make_app(max_live=1)
        app.evict("a")
        app.evict("b")
        text = app.http.get("/metrics").text
        line = 'prunewarden_server_limit_reached_total{limit="live_sessions"} 1.0'
        assert line in text.splitlines()


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


class TestRedis:
    def test_sessions_in_redis(self, make_app: MakeApp, redis_url: str) -> None:
        """With Redis no session is kept live: each call opens it from Redis, GET reads it
        there, DELETE removes it."""
        app = make_app(RedisSessionStore(redis_url, ttl=TTL))
        app.halt("r")
        refused = app.evict("r")
        state = app.http.get("/v1/sessions/r")
        deleted = app.http.delete("/v1/sessions/r")
        assert codes(refused) == ["pruning_halted"]
        assert app.service.live_count == 0
        assert (state.status_code, state.json()["halted"]) == (200, True)
        assert deleted.json()["deleted"] is True
        assert app.http.get("/v1/sessions/r").status_code == 404
