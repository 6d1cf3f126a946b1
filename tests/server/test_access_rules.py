"""The access rules of docs/server.md, on the app in process: only ``Authorization: Bearer
<token>`` opens the data routes (``/metrics`` included), only the probes answer without it,
only real loopback addresses may go without a token, and sessions forget their halts when they
are deleted or expire."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, ReloadingEngine
from prunewarden.server import Listen, ServerConfig, ServerConfigError, build_app
from prunewarden.server._app import create_app
from prunewarden.server._run import Built
from prunewarden.server._service import DecisionService
from prunewarden.server._sessions import SessionService
from prunewarden.session import SqliteSessionStore
from starlette.routing import Route
from starlette.testclient import TestClient

TOKEN = "s3cret-token"  # noqa: S105 - the test app's own token
ANY = "0.0.0.0"  # noqa: S104 - every interface: only configured here, never bound
PROBES = {"/healthz", "/readyz"}
EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "turn", "tombstone_written": True},
    "score": 0.125,
    "perturbed_score": 0.125,
}
FLAT = {f"t{i}": 0.5 for i in range(5)}
TTL = 100.0  # seconds a session may stay idle


@pytest.fixture
def built(policy_file: Path, tmp_path: Path) -> Iterator[Built]:
    config = ServerConfig(str(policy_file), str(tmp_path / "audit.jsonl"), Listen(), token=TOKEN)
    app = build_app(config)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def http(built: Built) -> TestClient:
    return TestClient(built.app, base_url="http://127.0.0.1")


def routes(built: Built) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, with a session id where the path takes one."""
    found: list[tuple[str, str]] = []
    for route in built.app.routes:
        if isinstance(route, Route):
            path = route.path.replace("{session_id}", "s1")
            found.extend((m, path) for m in sorted(route.methods or ()) if m != "HEAD")
    return found


class TestSchemes:
    @pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
    def test_the_bearer_scheme_in_any_case_is_accepted(self, http: TestClient, scheme: str) -> None:
        """The scheme name is case-insensitive (RFC 6750, RFC 9110): any case of Bearer opens
        the route."""
        response = http.post(
            "/v1/evaluate", json=EVICTION, headers={"Authorization": f"{scheme} {TOKEN}"}
        )
        assert response.status_code == 200
        assert response.json()["outcome"] == "allow"

    @pytest.mark.parametrize(
        "header",
        [
            f"Basic {TOKEN}",
            f"Token {TOKEN}",
            f"Digest {TOKEN}",
            TOKEN,
            f"Bearer{TOKEN}",
            f"Bearer {TOKEN[:-1]}",
            f"Bearer {TOKEN}x",
            f"Bearer {TOKEN.upper()}",
            "Bearer ",
            "",
        ],
        ids=[
            "basic",
            "token",
            "digest",
            "bare",
            "no-space",
            "prefix",
            "longer",
            "case",
            "empty",
            "nothing",
        ],
    )
    def test_anything_else_is_401(self, http: TestClient, header: str) -> None:
        """Another scheme, the token alone, a token of another length or case is refused with
        401 and WWW-Authenticate: Bearer."""
        response = http.post("/v1/evaluate", json=EVICTION, headers={"Authorization": header})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["type"].endswith("/unauthorized")

    def test_the_token_is_compared_in_constant_time(
        self, http: TestClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The presented token is compared with hmac.compare_digest, as docs/server.md says."""
        compared: list[tuple[bytes, bytes]] = []
        real = hmac.compare_digest

        def spy(a: Any, b: Any) -> bool:
            compared.append((a, b))
            return real(a, b)

        monkeypatch.setattr(hmac, "compare_digest", spy)
        response = http.get("/v1/policy", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200
        assert (TOKEN.encode(), TOKEN.encode()) in compared


class TestEveryRouteButTheProbes:
    def test_every_route_but_the_probes_needs_the_token(
        self, built: Built, http: TestClient
    ) -> None:
        """Without the token every route answers 401, /metrics and /openapi.json included;
        only /healthz and /readyz answer."""
        served = routes(built)
        assert ("GET", "/metrics") in served
        for method, path in served:
            response = http.request(method, path)
            if path in PROBES:
                assert response.status_code == 200, path
            else:
                assert response.status_code == 401, f"{method} {path}"

    def test_metrics_with_the_token(self, http: TestClient) -> None:
        """With the token /metrics serves the Prometheus text."""
        response = http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200
        assert "prunewarden_http_requests_total" in response.text


class TestLoopback:
    @pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost"])
    def test_loopback_hosts(self, host: str) -> None:
        """Loopback addresses (127.0.0.0/8, ::1) and the name localhost are loopback."""
        assert Listen(host=host).is_loopback

    def test_a_unix_socket_is_local(self) -> None:
        """A unix socket counts as local: its file mode guards it."""
        assert Listen(unix_path="/tmp/pdp.sock").is_loopback  # noqa: S108 - never opened

    @pytest.mark.parametrize(
        "host",
        [
            ANY,
            "::",
            "10.0.0.1",
            "192.168.1.2",
            "example.com",
            "localhost.example.com",
            "my-localhost",
            "127.0.0.1.nip.io",
        ],
    )
    def test_anything_else_is_not(self, host: str) -> None:
        """Any other address or host name is not loopback (a name may resolve to anything)."""
        assert not Listen(host=host).is_loopback

    @pytest.mark.parametrize("host", [ANY, "example.com"])
    def test_beyond_loopback_without_a_token_is_refused(self, host: str, tmp_path: Path) -> None:
        """A server configured beyond loopback without a token is refused before it starts."""
        with pytest.raises(ServerConfigError, match="without a token"):
            ServerConfig("p.yaml", str(tmp_path / "a.jsonl"), Listen(host=host))

    def test_beyond_loopback_with_a_token_is_allowed(self, tmp_path: Path) -> None:
        """With a token it is configured (the control)."""
        config = ServerConfig("p.yaml", str(tmp_path / "a.jsonl"), Listen(host=ANY), token=TOKEN)
        assert config.token == TOKEN


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FailingSaves(SqliteSessionStore):
    """A store whose saves fail once ``failing`` is set: a halt is then held by the engine's
    memory alone."""

    failing = False

    def save(self, session_id: str, state: Any) -> None:
        if self.failing:
            raise OSError("disk full")
        super().save(session_id, state)


def halt(service: SessionService, session_id: str) -> str:
    """Three cycles with no canary under a collapsed spread: the default policy halts."""
    body = json.dumps({"scores": FLAT, "pinned": []}).encode()
    for _ in range(3):
        answer = service.observe_cycle(session_id, body)
    return codes(answer.document)[0]


def codes(decision: dict[str, Any]) -> list[str]:
    return [reason["code"] for reason in decision["reasons"]]


@pytest.fixture
def sessions_app(
    policy_file: Path, tmp_path: Path
) -> Iterator[Callable[..., tuple[SessionService, TestClient]]]:
    """An app whose sessions live in the given store, on a clock the test moves."""
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.open()
    engines: list[ReloadingEngine] = []

    def make(store: SqliteSessionStore, clock: Clock) -> tuple[SessionService, TestClient]:
        engine = ReloadingEngine(str(policy_file), audit=audit, store=store)
        engines.append(engine)
        service = SessionService(engine, store, ttl=TTL, clock=clock)
        config = ServerConfig(str(policy_file), str(audit.path), Listen())
        app = create_app(config, DecisionService(engine, audit), service)
        return service, TestClient(app, base_url="http://127.0.0.1")

    try:
        yield make
    finally:
        for engine in engines:
            engine.close()
        audit.close()


SessionsApp = Callable[..., tuple[SessionService, TestClient]]


class TestSessionLifetimes:
    def test_delete_lifts_the_halt_the_engine_remembers(
        self, sessions_app: SessionsApp, tmp_path: Path
    ) -> None:
        """DELETE forgets the session and the halt the engine remembers under its id: a
        stateless call naming it is no longer refused with pruning_halted."""
        store = FailingSaves(tmp_path / "s.sqlite3")
        _, http = sessions_app(store, Clock())
        body = {"scores": FLAT, "pinned": []}
        saved = [http.post("/v1/sessions/s1/cycles", json=body) for _ in range(2)]
        store.failing = True
        unsaved = http.post("/v1/sessions/s1/cycles", json=body)
        # The halting change fails to save (503), yet the halt it decided holds meanwhile.
        assert [r.status_code for r in saved] == [200, 200]
        assert unsaved.json()["type"].endswith("/session-store-unavailable")
        assert (
            codes(http.post("/v1/evaluate?session_id=s1", json=EVICTION).json())[0]
            == "pruning_halted"
        )
        assert http.delete("/v1/sessions/s1").status_code == 200
        assert codes(http.post("/v1/evaluate?session_id=s1", json=EVICTION).json()) == [
            "authorized"
        ]

    def test_an_idle_session_expires_when_it_is_next_used(
        self, sessions_app: SessionsApp, tmp_path: Path
    ) -> None:
        """A session idle past the TTL starts afresh at its next call, even when the sweep
        (at most every tenth of the TTL) has not run since it expired."""
        clock = Clock()
        service, http = sessions_app(SqliteSessionStore(tmp_path / "s.sqlite3"), clock)
        assert halt(service, "idle") == "no_canary"
        clock.now += 95.0
        http.get("/v1/sessions/other")  # a call now: the sweep runs, "idle" is not yet expired
        clock.now += 6.0  # "idle" is 101 s idle; the last sweep was 6 s ago (< TTL / 10)
        response = http.post("/v1/sessions/idle/evictions", json=EVICTION)
        assert codes(response.json()) == ["authorized"]

    def test_a_session_used_within_the_ttl_keeps_its_halt(
        self, sessions_app: SessionsApp, tmp_path: Path
    ) -> None:
        """Within the TTL the halt holds (the control)."""
        clock = Clock()
        service, http = sessions_app(SqliteSessionStore(tmp_path / "s.sqlite3"), clock)
        halt(service, "busy")
        clock.now += 99.0
        response = http.post("/v1/sessions/busy/evictions", json=EVICTION)
        assert codes(response.json())[0] == "pruning_halted"
