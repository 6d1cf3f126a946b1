"""API v1 of docs/server.md on the app in process: each route's answer and problem documents,
the headers naming the policy and the decisions, the body limit (413), the request deadline,
the probes, the bundled schemas and /metrics."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prunewarden import AuditLog, ReloadingEngine
from prunewarden.server import Built, Listen, ServerConfig, build_app, create_app
from prunewarden.server._openapi import openapi_document
from prunewarden.server._service import Answer, DecisionService
from prunewarden.server._sessions import SessionService
from prunewarden.session import SqliteSessionStore
from starlette.testclient import TestClient

ALLOWED = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}
PROBLEM = "application/problem+json"


def window(segment_id: str, score: float) -> dict[str, object]:
    """A window segment the plan may evict: scored on its current text, stable, tombstoned."""
    text = f"text of {segment_id}"
    return {
        "id": segment_id,
        "kind": "tool_output",
        "text": text,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "score": score,
        "perturbed_score": score,
        "tombstone_written": True,
        "tokens": 10,
    }


def plan_of(count: int) -> dict[str, object]:
    return {"segments": [window(f"s{i}", 0.5) for i in range(count)], "keep_top_k": 0}


@pytest.fixture
def built(policy_file: Path, tmp_path: Path) -> Iterator[Built]:
    app = build_app(ServerConfig(str(policy_file), str(tmp_path / "audit.jsonl"), Listen()))
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def http(built: Built) -> TestClient:
    return TestClient(built.app, base_url="http://127.0.0.1")


def policy_header(built: Built) -> str:
    identity = built.engine.policy.identity
    return f"{identity.name}@{identity.version} {identity.digest}"


class _Scripted(DecisionService):
    """A decision service whose /v1/policy answer the test chooses, and whose readiness fails."""

    def __init__(self, engine: ReloadingEngine, audit: AuditLog) -> None:
        super().__init__(engine, audit)
        self.release = threading.Event()
        self.policy_call: str = "answer"

    def policy_document(
        self, labels: Mapping[str, str] | None = None, credential: str | None = None
    ) -> Answer:
        del labels, credential  # one answer, whatever the tenant
        if self.policy_call == "raise":
            msg = "boom"
            raise RuntimeError(msg)
        if self.policy_call == "block":
            self.release.wait()
        return Answer({"ok": True}, headers={"Retry-After": "7"})

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        return False, {"status": "not ready", "checks": {"audit_log": False}}


@pytest.fixture
def scripted(policy_file: Path, tmp_path: Path) -> Iterator[tuple[_Scripted, list[str], Any]]:
    """An app over :class:`_Scripted`, a list its shutdown appends to, and its config maker."""
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.open()
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    engine = ReloadingEngine(str(policy_file), audit=audit, store=store)
    service = _Scripted(engine, audit)
    shutdowns: list[str] = []

    def make(**limits: Any) -> TestClient:
        config = ServerConfig(str(policy_file), str(audit.path), Listen(), **limits)
        sessions = SessionService(engine, store, ttl=100.0)
        app = create_app(config, service, sessions, on_shutdown=lambda: shutdowns.append("done"))
        return TestClient(app, base_url="http://127.0.0.1")

    try:
        yield service, shutdowns, make
    finally:
        service.release.set()
        engine.close()
        audit.close()


class TestDecisionHeaders:
    def test_one_decision_is_counted_and_named(self, http: TestClient, built: Built) -> None:
        """POST /v1/evaluate: the policy, a count of 1 and the decision's id in the headers."""
        response = http.post("/v1/evaluate", json=ALLOWED)
        body = response.json()
        assert response.status_code == 200
        assert response.headers["prunewarden-policy"] == policy_header(built)
        assert response.headers["prunewarden-decision-count"] == "1"
        assert response.headers["prunewarden-decision-ids"] == body["decision_id"]

    def test_up_to_64_ids_are_listed(self, http: TestClient) -> None:
        """A plan of 64 decisions lists every id, in the body's order."""
        response = http.post("/v1/plan", json=plan_of(63))  # one per segment, and the pass's
        ids = [decision["decision_id"] for decision in response.json()["decisions"]]
        assert len(ids) == 64
        assert response.headers["prunewarden-decision-count"] == "64"
        assert response.headers["prunewarden-decision-ids"].split(",") == ids

    def test_past_64_only_the_count(self, http: TestClient) -> None:
        """A plan of 65 decisions is counted in the header; the ids are in the body only."""
        response = http.post("/v1/plan", json=plan_of(64))
        assert len(response.json()["decisions"]) == 65
        assert response.headers["prunewarden-decision-count"] == "65"
        assert "prunewarden-decision-ids" not in response.headers

    def test_an_answer_without_decisions_has_no_count(self, http: TestClient) -> None:
        """GET /v1/policy carries no decision: no count, no ids; the policy header still."""
        response = http.get("/v1/policy")
        assert response.status_code == 200
        assert "prunewarden-decision-count" not in response.headers
        assert "prunewarden-decision-ids" not in response.headers
        assert response.headers["content-type"] == "application/json"

    def test_an_answers_own_headers_are_sent(self, scripted: Any) -> None:
        """Headers an answer carries are sent with it."""
        _, _, make = scripted
        response = make().get("/v1/policy")
        assert response.json() == {"ok": True}
        assert response.headers["retry-after"] == "7"


class TestProblems:
    def test_malformed_json_is_a_located_400(self, http: TestClient, built: Built) -> None:
        """A body that is not JSON is 400 invalid-input, located, naming the policy in force."""
        response = http.post("/v1/evaluate", content=b'{"check": ')
        problem = response.json()
        assert response.status_code == 400
        assert response.headers["content-type"] == PROBLEM
        assert response.headers["prunewarden-policy"] == policy_header(built)
        assert problem["type"].endswith("/invalid-input")
        assert problem["problems"][0]["file"] == "<request>"

    def test_a_plan_that_is_not_an_object_is_400(self, http: TestClient) -> None:
        """POST /v1/plan with a JSON array is 400 invalid-input."""
        response = http.post("/v1/plan", json=[1])
        assert response.status_code == 400
        assert response.json()["type"].endswith("/invalid-input")

    def test_unknown_route_and_method(self, http: TestClient) -> None:
        """No such route is 404 not-found, a wrong method 405; both problem documents."""
        missing, wrong = http.get("/v2/evaluate"), http.get("/v1/evaluate")
        assert (missing.status_code, wrong.status_code) == (404, 405)
        assert missing.json()["type"].endswith("/not-found")
        assert wrong.json()["type"].endswith("/method-not-allowed")
        assert wrong.json()["detail"] == "GET /v1/evaluate"
        assert wrong.headers["content-type"] == PROBLEM

    def test_a_failing_handler_is_500_not_a_traceback(
        self, scripted: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An unexpected error is 500 internal-error naming it, and logged for the operator."""
        service, _, make = scripted
        service.policy_call = "raise"
        with caplog.at_level(logging.ERROR, logger="prunewarden.server"):
            response = make().get("/v1/policy")
        assert response.status_code == 500
        assert response.json()["detail"] == "RuntimeError: boom"
        assert "prunewarden-policy" in response.headers
        assert [r.getMessage() for r in caplog.records] == ["request failed: GET /v1/policy"]

    def test_past_the_deadline_is_503(self, scripted: Any) -> None:
        """A request taking longer than --request-timeout is 503 deadline-exceeded."""
        service, _, make = scripted
        service.policy_call = "block"
        response = make(request_seconds=0.05).get("/v1/policy")
        service.release.set()
        problem = response.json()
        assert response.status_code == 503
        assert problem["type"].endswith("/deadline-exceeded")
        assert problem["detail"] == "no answer within 0.05 s"
        assert "prunewarden-policy" in response.headers


class TestBodyLimit:
    def test_a_declared_length_over_the_limit_is_413(self, scripted: Any) -> None:
        """A body whose Content-Length passes --max-request-bytes is 413, naming the limit."""
        _, _, make = scripted
        text = json.dumps(ALLOWED).encode()
        response = make(max_request_bytes=64).post("/v1/evaluate", content=text)
        problem = response.json()
        assert response.status_code == 413
        assert problem["type"].endswith("/request-too-large")
        assert problem["limit"] == 64
        assert problem["detail"].endswith("; the limit is 64 bytes")
        assert problem["detail"].startswith(f"the body is {len(text)} bytes")

    def test_a_streamed_body_over_the_limit_is_413(self, scripted: Any) -> None:
        """A body sent without a length is refused as soon as it passes the limit."""
        _, _, make = scripted
        chunks = iter([b"{" + b" " * 40, b" " * 40 + b"}"])
        response = make(max_request_bytes=64).post("/v1/evaluate", content=chunks)
        assert response.status_code == 413
        assert response.json()["limit"] == 64

    @pytest.mark.parametrize("streamed", [False, True])
    def test_a_body_of_exactly_the_limit_is_read(self, scripted: Any, streamed: bool) -> None:
        """A body of exactly --max-request-bytes is read and decided."""
        _, _, make = scripted
        text = json.dumps(ALLOWED).encode()
        limit = len(text)
        content: Any = iter([text[:10], text[10:]]) if streamed else text
        response = make(max_request_bytes=limit).post(
            "/v1/evaluate", content=content, headers={"content-type": "application/json"}
        )
        assert response.status_code == 200
        assert response.json()["outcome"] == "allow"


class TestRoutes:
    def test_probes_answer(self, http: TestClient, built: Built) -> None:
        """/healthz says ok with the policy; /readyz 200 with both checks true."""
        health, ready = http.get("/healthz"), http.get("/readyz")
        assert (health.status_code, ready.status_code) == (200, 200)
        assert health.json()["status"] == "ok"
        assert health.json()["policy"] == built.engine.policy.identity.to_dict()
        assert ready.json()["checks"] == {"policy": True, "audit_log": True}

    def test_not_ready_is_503_with_the_checks(self, scripted: Any) -> None:
        """/readyz answers 503 not-ready, carrying the checks, when the log cannot be written."""
        _, _, make = scripted
        response = make().get("/readyz")
        problem = response.json()
        assert response.status_code == 503
        assert problem["type"].endswith("/not-ready")
        assert problem["checks"] == {"audit_log": False}

    def test_openapi_document(self, http: TestClient) -> None:
        """GET /openapi.json serves the server's OpenAPI document."""
        response = http.get("/openapi.json")
        assert response.status_code == 200
        assert response.json() == openapi_document()

    def test_bundled_schema_and_a_missing_one(self, http: TestClient) -> None:
        """GET /schemas/NAME serves the schema of that $id; an unknown name is 404."""
        found = http.get("/schemas/input.v1.schema.json")
        missing = http.get("/schemas/nothing.v1.schema.json")
        assert found.status_code == 200
        assert found.json()["$id"].endswith("/input.v1.schema.json")
        assert missing.status_code == 404
        assert missing.json()["detail"] == "no bundled schema 'nothing.v1.schema.json'"

    def test_shutdown_runs_when_the_app_stops(self, scripted: Any) -> None:
        """on_shutdown runs once the app stops, not before."""
        _, shutdowns, make = scripted
        with make() as client:
            client.get("/healthz")
            assert shutdowns == []
        assert shutdowns == ["done"]


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


class TestMetrics:
    def test_requests_are_counted_by_route_and_status(self, http: TestClient) -> None:
        """Each answered request adds one to its route's and status's counter."""
        key = (("route", "/schemas/{name}"), ("status", "404"))
        before = samples(http.get("/metrics").text, "prunewarden_http_requests_total").get(key, 0)
        http.get("/schemas/none.json")
        http.get("/schemas/none.json")
        after = samples(http.get("/metrics").text, "prunewarden_http_requests_total")
        assert after[key] == before + 2

    def test_decision_metrics_are_served_once(self, http: TestClient) -> None:
        """The engine's decision metrics are served, and no metric family twice."""
        http.post("/v1/evaluate", json=ALLOWED)
        text = http.get("/metrics").text
        types = [line for line in text.splitlines() if line.startswith("# TYPE ")]
        assert len(types) == len(set(types))
        allowed = samples(text, "prunewarden_decisions_total")
        assert any(dict(labels)["outcome"] == "allow" and v >= 1 for labels, v in allowed.items())


class TestSessionIds:
    def test_an_escaped_utf8_id_is_that_id(self, http: TestClient) -> None:
        """/v1/sessions/caf%C3%A9 is the session 'café'."""
        http.post("/v1/sessions/caf%C3%A9/turns", json={"mean_relevance": 0.5, "tokens": 10})
        response = http.get("/v1/sessions/caf%C3%A9")
        assert response.status_code == 200
        assert response.json()["session_id"] == "café"

    @pytest.mark.parametrize("path", ["/v1/sessions/%FF", "/v1/evaluate?session_id=%FF"])
    def test_an_id_that_is_not_utf8_is_400(self, http: TestClient, path: str) -> None:
        """A session id whose escapes are not UTF-8 is 400 at $.session_id."""
        response = http.get(path) if "sessions" in path else http.post(path, json=ALLOWED)
        problem = response.json()["problems"][0]
        assert response.status_code == 400
        assert (problem["path"], problem["line"], problem["column"]) == ("$.session_id", 0, 0)


def limit_reached(text: str, limit: str) -> float:
    return samples(text, "prunewarden_server_limit_reached_total")[(("limit", limit),)]


class TestServerMetrics:
    def test_live_sessions_are_reported(self, http: TestClient) -> None:
        """prunewarden_server_live_sessions is the number of sessions held in memory."""
        http.post("/v1/sessions/a/evictions", json=ALLOWED)
        http.post("/v1/sessions/b/evictions", json=ALLOWED)
        text = http.get("/metrics").text
        assert samples(text, "prunewarden_server_live_sessions") == {(): 2.0}

    def test_limits_reached_are_counted(self, scripted: Any) -> None:
        """Each 413 and each deadline passed adds one to its limit's counter, served at
        /metrics by an app given no registry of its own."""
        service, _, make = scripted
        http = make(max_request_bytes=64, request_seconds=0.05)
        http.post("/v1/evaluate", content=b" " * 65)
        http.post("/v1/evaluate", content=iter([b" " * 40, b" " * 40]))  # no length declared
        service.policy_call = "block"
        http.get("/v1/policy")
        service.release.set()
        text = http.get("/metrics").text
        assert limit_reached(text, "request_bytes") == 2
        assert limit_reached(text, "request_timeout") == 1
        assert limit_reached(text, "live_sessions") == 0


class TestRoutesWithoutBody:
    @pytest.mark.parametrize(
        ("method", "path", "status"),
        [
            ("GET", "/healthz", 200),
            ("GET", "/readyz", 200),
            ("GET", "/openapi.json", 200),
            ("GET", "/schemas/input.v1.schema.json", 200),
            ("GET", "/v1/policy", 200),
            ("GET", "/v1/status", 200),
            ("GET", "/v1/sessions/none", 404),
            ("DELETE", "/v1/sessions/none", 200),
        ],
    )
    def test_a_body_sent_anyway_is_not_read(
        self, policy_file: Path, tmp_path: Path, method: str, path: str, status: int
    ) -> None:
        """A route that takes no body answers as without one: a body over the limit sent
        with it is not read, so not refused 413."""
        config = ServerConfig(
            str(policy_file), str(tmp_path / "audit.jsonl"), Listen(), max_request_bytes=16
        )
        built = build_app(config)
        try:
            http = TestClient(built.app, base_url="http://127.0.0.1")
            response = http.request(method, path, content=b"x" * 64)
        finally:
            built.close()
        assert response.status_code == status


Message = dict[str, Any]


def asgi_scope(path: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    """The ASGI scope a server gives a POST of JSON to ``path``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8181),
    }


class Upload:
    """A request whose body is ``first``, then (once ``gate`` is set) ``rest``; ``reading``
    is set when the app has taken ``first`` and asks for more. Without ``rest``, the client
    is gone after ``first``."""

    def __init__(self, first: bytes, rest: bytes | None, gate: asyncio.Event) -> None:
        self.first, self.rest, self.gate = first, rest, gate
        self.asked = 0
        self.reading = asyncio.Event()
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        self.asked += 1
        if self.asked == 1:
            return {"type": "http.request", "body": self.first, "more_body": True}
        self.reading.set()
        if self.asked == 2 and self.rest is not None:
            await self.gate.wait()
            return {"type": "http.request", "body": self.rest, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def answer(self) -> tuple[int, dict[str, Any]]:
        body = b"".join(m.get("body", b"") for m in self.sent[1:])
        return int(self.sent[0]["status"]), json.loads(body)


async def post(app: Any, upload: Upload) -> None:
    await app(asgi_scope("/v1/evaluate"), upload.receive, upload.send)


class TestBodiesReadTogether:
    def test_past_four_bodies_of_the_limit_is_503(self, scripted: Any) -> None:
        """Bodies being read together hold at most 4 x --max-request-bytes: four bodies of
        the limit are read, one more byte is 503 server-busy (pending_body_bytes); the four
        are then decided, and their bytes are free again."""
        _, _, make = scripted
        text = json.dumps(ALLOWED).encode()
        app = make(max_request_bytes=len(text)).app

        async def run() -> tuple[list[Upload], Upload, Upload]:
            gate, open_gate = asyncio.Event(), asyncio.Event()
            open_gate.set()
            held = [Upload(text, b"", gate) for _ in range(4)]
            tasks = [asyncio.create_task(post(app, upload)) for upload in held]
            for upload, task in zip(held, tasks, strict=True):
                # Until the app asks for the rest of the body (or has answered).
                reading = asyncio.create_task(upload.reading.wait())
                await asyncio.wait({reading, task}, return_when=asyncio.FIRST_COMPLETED)
                reading.cancel()
            one_more = Upload(b"{", b"}", open_gate)
            await post(app, one_more)
            gate.set()
            await asyncio.gather(*tasks)
            after = Upload(text, b"", open_gate)
            await post(app, after)
            return held, one_more, after

        held, one_more, after = asyncio.run(run())
        status, problem = one_more.answer()
        assert (status, problem["limit"]) == (503, "pending_body_bytes")
        assert problem["type"].endswith("/server-busy")
        assert [upload.answer()[0] for upload in held] == [200, 200, 200, 200]
        assert after.answer()[0] == 200
        metrics = TestClient(app, base_url="http://127.0.0.1").get("/metrics").text
        assert limit_reached(metrics, "pending_body_bytes") == 1

    def test_a_client_gone_mid_body_is_answered_408(self, scripted: Any) -> None:
        """A client that disconnects before its body is in gets 408 request-timeout."""
        _, _, make = scripted
        app = make().app
        gone = Upload(b'{"check"', None, asyncio.Event())
        asyncio.run(app(asgi_scope("/v1/evaluate"), gone.receive, gone.send))
        status, problem = gone.answer()
        assert status == 408
        assert problem["type"].endswith("/request-timeout")

    def test_a_declared_length_is_refused_before_reading(self, scripted: Any) -> None:
        """A Content-Length over the limit is 413 before any of the body is read (a client
        that then goes away changes nothing)."""
        _, _, make = scripted
        app = make(max_request_bytes=64).app
        upload = Upload(b"", None, asyncio.Event())
        scope = asgi_scope("/v1/evaluate", (b"content-length", b"1000"))
        asyncio.run(app(scope, upload.receive, upload.send))
        status, problem = upload.answer()
        assert (status, problem["limit"]) == (413, 64)
        assert problem["detail"] == "the body is 1000 bytes or more; the limit is 64 bytes"
        assert upload.asked == 0

    def test_a_server_without_raw_path_uses_the_decoded_path(self, scripted: Any) -> None:
        """Under an ASGI server that gives no raw_path, the session id is the decoded path."""
        _, _, make = scripted
        app = make().app
        scope = {**asgi_scope("/v1/sessions/nobody"), "method": "GET"}
        del scope["raw_path"]
        upload = Upload(b"", None, asyncio.Event())
        asyncio.run(app(scope, upload.receive, upload.send))
        status, problem = upload.answer()
        assert status == 404
        assert problem["detail"] == "no session 'nobody' is held"
