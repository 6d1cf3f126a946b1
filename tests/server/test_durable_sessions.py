"""Sessions kept in the store: a SIGKILL mid-load loses no halt, idle sessions expire, a
deleted session's halt is gone, and replicas on one Redis share sessions."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.redis_server import running_redis
from _support.server import PRUNEWARDEN, Server, policy_text, running_server
from prunewarden.client import Client, ClientSession, ServerError

SEGMENT = {"id": "s1", "kind": "tool_output", "tombstone_written": True}
EVICTION = {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.12}
HEALTHY = [{"c": 0.9, "a": 0.6, "b": 0.1}, {"c": 0.88, "a": 0.55, "b": 0.12}]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}


def halt(session: ClientSession) -> None:
    """Drive a session to a collapse halt."""
    for scores in (*HEALTHY, COLLAPSED, COLLAPSED):
        last = session.observe_cycle(scores, ["c"])
    assert last["outcome"] == "halt"


def refused_code(session: ClientSession) -> str:
    return str(session.authorize(SEGMENT, 0.1, 0.12)["reasons"][0]["code"])


def await_gone(session: ClientSession) -> bool:
    """Whether the session is forgotten within a bounded time (it was idle past its TTL)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            session.state()
        except ServerError as exc:
            return exc.status == 404
        time.sleep(0.05)
    return False


class TestSigkill:
    def test_halts_and_histories_survive_sigkill_mid_load(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """SIGKILL while 4 clients drive sessions; restarted on the same files, every halt
        holds, each session has every cycle it was answered, and the audit log verifies."""
        answered: dict[str, int] = {}
        stop = threading.Event()

        def load(url: str, name: str) -> None:
            with Client(url, timeout=10) as client:
                session = client.session(name)
                for cycle in range(1, 10_000):
                    if stop.is_set():
                        return
                    try:
                        session.observe_cycle({"c": 0.9, "a": 0.5, "b": 0.1}, ["c"], cycle=cycle)
                    except Exception:  # noqa: BLE001 - the server was killed under us
                        return
                    answered[name] = cycle

        with running_server(policy_file, tmp_path) as server:
            with Client(server.url) as client:
                halt(client.session("halted-before-kill"))
            threads = [
                threading.Thread(target=load, args=(server.url, f"busy-{i}")) for i in range(4)
            ]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 60
            while sum(answered.values()) < 40 and time.monotonic() < deadline:
                time.sleep(0.01)
            server.stop(signal.SIGKILL)
            stop.set()
            for thread in threads:
                thread.join(60)
        assert sum(answered.values()) >= 40
        with running_server(policy_file, tmp_path) as restarted, Client(restarted.url) as client:
            assert refused_code(client.session("halted-before-kill")) == "pruning_halted"
            stateless = client.evaluate(EVICTION, session_id="halted-before-kill")
            for name, cycles in answered.items():
                state = client.session(name).state()["state"]
                assert state["cycles_seen"] >= cycles
        verify = subprocess.run(
            [PRUNEWARDEN, "audit", "verify", str(restarted.audit_log)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert stateless["reasons"][0]["code"] == "pruning_halted"
        assert verify.returncode == 0, verify.stdout + verify.stderr


class TestExpiryAndDelete:
    def test_idle_session_is_forgotten_after_the_ttl(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """--session-ttl: a session idle past it is gone, halt included. The halt is reached
        under the default TTL and the server restarted on the same files with a short one, so
        that a slow call on a loaded machine cannot expire the session half-way to its halt."""
        with running_server(policy_file, tmp_path) as server, Client(server.url) as client:
            halt(client.session("idle"))
        with (
            running_server(policy_file, tmp_path, "--session-ttl", "0.3") as server,
            Client(server.url) as client,
        ):
            session = client.session("idle")
            assert await_gone(session)
            assert session.authorize(SEGMENT, 0.1, 0.12)["outcome"] == "allow"

    def test_delete_lifts_the_halt_everywhere(self, server: Server) -> None:
        """After DELETE, neither the session nor a stateless call under its id is halted."""
        with Client(server.url) as client:
            session = client.session("deleted-halt")
            halt(session)
            assert client.evaluate(EVICTION, session_id="deleted-halt")["outcome"] == "deny"
            assert session.delete()["deleted"] is True
            assert client.evaluate(EVICTION, session_id="deleted-halt")["outcome"] == "allow"
            assert refused_code(session) == "authorized"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


class TestRedisReplicas:
    def test_two_replicas_share_one_session(
        self, policy_file: Path, tmp_path: Path, redis_url: str
    ) -> None:
        """Cycles alternate between two servers on one Redis: the halt reached through one
        refuses on the other, and the history is whole."""
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        with (
            running_server(policy_file, a_dir, "--sessions", redis_url) as a,
            running_server(policy_file, b_dir, "--sessions", redis_url) as b,
            Client(a.url) as on_a,
            Client(b.url) as on_b,
        ):
            replicas = [on_a.session("shared"), on_b.session("shared")]
            for index, scores in enumerate((*HEALTHY, COLLAPSED, COLLAPSED)):
                last = replicas[index % 2].observe_cycle(scores, ["c"])
            assert last["outcome"] == "halt"
            assert refused_code(replicas[0]) == "pruning_halted"
            assert replicas[0].state()["state"]["cycles_seen"] == 4

    def test_redis_expires_idle_sessions(
        self, policy_file: Path, tmp_path: Path, redis_url: str
    ) -> None:
        """With Redis, the TTL is the key's expiry: an idle session is gone."""
        with (
            running_server(
                policy_file, tmp_path, "--sessions", redis_url, "--session-ttl", "0.3"
            ) as server,
            Client(server.url) as client,
        ):
            session = client.session("redis-idle")
            session.observe_turn(0.5, 10)
            assert await_gone(session)

    def test_unreachable_redis_is_refused_at_start(self, policy_file: Path, tmp_path: Path) -> None:
        """--sessions naming a Redis nobody listens on: exit 2, saying so."""
        done = subprocess.run(
            [
                PRUNEWARDEN,
                "serve",
                "--policy",
                str(policy_file),
                "--audit-log",
                str(tmp_path / "audit.jsonl"),
                "--sessions",
                "redis://127.0.0.1:1/0",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2
        assert "--sessions redis://127.0.0.1:1/0" in done.stderr


class TestReload:
    def test_a_halt_holds_across_a_policy_reload(self, tmp_path: Path) -> None:
        """The policy file is replaced: the halted session follows the new version, still
        halted."""
        policy = tmp_path / "policy.yaml"
        spec: dict[str, object] = {
            "collapse": {"consecutive_cycles": 2, "spread_floor": 0.1, "canary_margin": 0.2}
        }
        policy.write_text(policy_text(spec, name="rolling", version="1.0.0"), encoding="utf-8")
        with running_server(policy, tmp_path) as server, Client(server.url) as client:
            session = client.session("across-reload")
            halt(session)
            replacement = tmp_path / "next.yaml"
            replacement.write_text(
                policy_text(spec, name="rolling", version="1.1.0"), encoding="utf-8"
            )
            replacement.replace(policy)
            deadline = time.monotonic() + 30
            while client.policy()["policy"]["version"] != "1.1.0":
                assert time.monotonic() < deadline, "the policy was not reloaded"
                time.sleep(0.05)
            refused = session.authorize(SEGMENT, 0.1, 0.12)
        assert refused["reasons"][0]["code"] == "pruning_halted"
        assert refused["policy"]["version"] == "1.1.0"
