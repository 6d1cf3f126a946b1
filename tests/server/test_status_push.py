"""``serve --status-url``: the status document pushed to a real receiver on loopback, at start,
periodically and after each activation; failures counted and shown, never in a decision's way."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.server import Server, policy_text, running_server
from _support.shipping import receiver as shipping_receiver
from _support.status_receiver import PATIENCE, Receiver, status_receiver
from jsonschema import Draft202012Validator
from prunewarden import ReloadingEngine
from prunewarden.server import openapi_document
from prunewarden.server._fleet import FleetStatus
from prunewarden.server._push import INSTANCE_HEADER, STATUS_PUSH_DETAIL, StatusPush

ROOT = Path(__file__).resolve().parents[2]
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())


def status_problems(document: dict[str, Any]) -> list[str]:
    """What the status document lacks of the OpenAPI ``Status`` schema's required fields, and
    how its ``status_push`` detail fails that detail's schema."""
    schema = openapi_document()["components"]["schemas"]["Status"]
    missing = [f"no {name}" for name in schema["required"] if name not in document]
    detail = Draft202012Validator(STATUS_PUSH_DETAIL).iter_errors(document["status_push"])
    return missing + [error.message for error in detail]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with status_receiver() as running:
        yield running


@pytest.fixture
def fleet() -> FleetStatus:
    return FleetStatus()


@pytest.fixture
def engine(tmp_path: Path, fleet: FleetStatus) -> Iterator[ReloadingEngine]:
    """An engine on prod@1.0.0, its decisions counted by ``fleet``, reloaded when asked."""
    policy = tmp_path / "prod.yaml"
    policy.write_text(policy_text({}, name="prod", version="1.0.0"), encoding="utf-8")
    with ReloadingEngine(policy, interval=0, on_decision=fleet) as reloading:
        fleet.watch(reloading)
        yield reloading


def pushing(
    receiver_url: str, engine: ReloadingEngine, fleet: FleetStatus, interval: float = 600
) -> StatusPush:
    """A status push of ``engine``'s status document, wired as ``serve`` wires it."""
    push = StatusPush(receiver_url, lambda: fleet.document(engine), interval=interval)
    fleet.push = push
    engine.add_reload_hook(push.observe)
    return push


class TestStatusPush:
    def test_a_push_posts_the_status_document(
        self, receiver: Receiver, engine: ReloadingEngine, fleet: FleetStatus
    ) -> None:
        """The body is the status document, valid against its schema; the header names the
        server; the detail counts the push."""
        push = pushing(receiver.url, engine, fleet)
        assert push.push() is None
        received = receiver.next()
        assert received.headers[INSTANCE_HEADER] == ""
        assert received.document["policy"]["name"] == "prod"
        assert status_problems(received.document) == []
        detail = push.detail()
        assert (detail["pushed"], detail["failed"], detail["last_failure"]) == (1, 0, None)
        assert detail["last_push_at"] is not None

    def test_a_receiver_error_is_counted_and_shown(
        self, receiver: Receiver, engine: ReloadingEngine, fleet: FleetStatus
    ) -> None:
        """A 500 is a failed push: counted, its problem kept, the next push says so."""
        push = pushing(receiver.url, engine, fleet)
        receiver.status = 500
        problem = push.push()
        assert problem == f"{receiver.url}: HTTP 500 Internal Server Error"
        receiver.status = 200
        assert push.push() is None
        second = receiver.until(lambda d: d["status_push"]["failed"] == 1)
        assert second.document["status_push"]["last_failure"]["problem"] == problem
        assert (push.detail()["pushed"], push.detail()["failed"]) == (1, 1)

    def test_an_absent_receiver_is_a_failed_push(
        self, engine: ReloadingEngine, fleet: FleetStatus
    ) -> None:
        """Nothing listening: the push fails with the reason, and nothing raises."""
        push = pushing(f"http://127.0.0.1:{closed_port()}/status", engine, fleet)
        problem = push.push()
        assert problem is not None
        assert "cannot push" in problem
        assert push.detail()["failed"] == 1

    def test_the_audit_collector_keeps_the_status_per_replica(
        self, tmp_path: Path, engine: ReloadingEngine, fleet: FleetStatus
    ) -> None:
        """``audit collect`` takes the push (POST /v1/status) as the replica's, with the token
        it is pushed with, keeps it in DIR/status/REPLICA.json and shows it at GET /v1/fleet."""
        token = "fleet-token-0001"  # noqa: S105 - a test's token
        with shipping_receiver(tmp_path / "out", token=token) as collector:
            url = collector.url.removesuffix("/v1/logs") + "/v1/status"
            push = StatusPush(
                url,
                lambda: fleet.document(engine),
                interval=600,
                replica="eu-1",
                token=token,
            )
            assert push.push() is None
            assert StatusPush(url, lambda: fleet.document(engine), replica="eu-1").push() == (
                f"{url}: HTTP 401 Unauthorized"
            )
            shown = httpx.get(
                url.removesuffix("/status") + "/fleet",
                headers={"Authorization": f"Bearer {token}"},
            ).json()
        assert push.detail()["pushed"] == 1
        assert shown["replicas"]["eu-1"]["status"]["policy"]["version"] == "1.0.0"
        assert (tmp_path / "out" / "status" / "eu-1.json").exists()

    def test_a_receiver_that_does_not_answer_delays_no_decision(
        self, receiver: Receiver, engine: ReloadingEngine, fleet: FleetStatus
    ) -> None:
        """While a push waits on a receiver holding its answer, decisions and the status
        document are made; once released, the push is counted."""
        push = pushing(receiver.url, engine, fleet)
        receiver.hold.clear()
        push.start("http://127.0.0.1:1")
        try:
            first = receiver.next()  # the push in flight, held by the receiver
            assert first.headers[INSTANCE_HEADER] == "http://127.0.0.1:1"
            decision = engine.evaluate(EVICTION)
            assert decision.outcome == "allow"
            assert push.detail()["pushed"] == 0
            receiver.hold.set()
            push.nudge()
            later = receiver.until(lambda d: d["status_push"]["pushed"] >= 1)
            assert later.document["decisions"]["allow"] == 1
        finally:
            push.stop()

    def test_pushes_come_every_interval(
        self, receiver: Receiver, engine: ReloadingEngine, fleet: FleetStatus
    ) -> None:
        """Without any event, the status is pushed again every interval."""
        push = pushing(receiver.url, engine, fleet, interval=0.05)
        push.start("pdp")
        try:
            pushed = [receiver.next().document["status_push"]["pushed"] for _ in range(3)]
        finally:
            push.stop()
        assert pushed == [0, 1, 2]

    def test_an_activation_is_pushed_and_a_lasting_failure_once(
        self, receiver: Receiver, engine: ReloadingEngine, fleet: FleetStatus, tmp_path: Path
    ) -> None:
        """A new policy swapped in is pushed at once; a failure seen at every reload is
        pushed when it first appears, not again."""
        push = pushing(receiver.url, engine, fleet)
        push.start("pdp")
        try:
            assert receiver.next().document["policy"]["version"] == "1.0.0"
            path = tmp_path / "prod.yaml"
            path.write_text(policy_text({}, name="prod", version="1.1.0"), encoding="utf-8")
            assert engine.reload().changed
            activated = receiver.next()
            assert activated.document["policy"]["version"] == "1.1.0"
            path.write_text("not: [a policy", encoding="utf-8")
            assert engine.reload().problems
            failed = receiver.next()
            assert failed.document["healthy"] is False
            assert engine.reload().problems
            assert engine.reload().problems
            path.write_text(policy_text({}, name="prod", version="1.2.0"), encoding="utf-8")
            assert engine.reload().changed
            after = receiver.next()
        finally:
            push.stop()
        assert after.document["policy"]["version"] == "1.2.0"
        assert receiver.pushes.empty()


def until_failed(client: httpx.Client) -> dict[str, Any]:
    """The status_push detail once a failed push is counted (it is counted once the receiver
    has answered, a moment after the push arrived)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        detail: dict[str, Any] = client.get("/v1/status").json()["status_push"]
        if detail["failed"]:
            return detail
        time.sleep(0.05)
    raise AssertionError(f"no failed push counted: {detail}")


class TestServeToTheCollector:
    def test_serve_pushes_its_status_to_audit_collect(self, tmp_path: Path) -> None:
        """serve --status-url at audit collect's /v1/status, with --ship-replica and the ship
        token: the collector's /v1/fleet shows the server's status under the replica's name."""
        policy = tmp_path / "prod.yaml"
        policy.write_text(policy_text({}, name="prod", version="1.0.0"), encoding="utf-8")
        token = "fleet-token-0002"  # noqa: S105 - a test's token
        with shipping_receiver(tmp_path / "out", token=token) as collector:
            base = collector.url.removesuffix("/v1/logs")
            options = ("--status-url", f"{base}/v1/status", "--ship-replica", "eu-7")
            env = {"PRUNEWARDEN_SHIP_TOKEN": token}
            with running_server(policy, tmp_path, *options, env=env) as server:
                deadline = time.monotonic() + PATIENCE
                while not (tmp_path / "out" / "status" / "eu-7.json").exists():
                    assert time.monotonic() < deadline, "no status arrived"
                    time.sleep(0.05)
                headers = {"Authorization": f"Bearer {token}"}
                fleet = httpx.get(f"{base}/v1/fleet", headers=headers).json()
        entry = fleet["replicas"]["eu-7"]
        assert entry["instance"] == server.url
        assert entry["status"]["policy"]["version"] == "1.0.0"
        assert fleet["healthy"] == 1


class TestServeStatusUrl:
    @pytest.fixture
    def server(self, tmp_path: Path, receiver: Receiver) -> Iterator[Server]:
        policy = tmp_path / "prod.yaml"
        policy.write_text(policy_text({}, name="prod", version="1.0.0"), encoding="utf-8")
        options = ("--status-url", receiver.url, "--status-interval", "600")
        with running_server(policy, tmp_path, *options) as running:
            yield running

    def test_serve_pushes_at_start_and_shows_failed_pushes(
        self, server: Server, receiver: Receiver, tmp_path: Path
    ) -> None:
        """The first push names the server's address; a policy change is pushed; a push the
        receiver refuses is counted in /v1/status while decisions go on."""
        first = receiver.next()
        assert first.headers[INSTANCE_HEADER] == server.url
        assert first.document["policy"]["version"] == "1.0.0"
        assert first.document["status_push"]["url"] == receiver.url
        receiver.status = 503
        policy = tmp_path / "prod.yaml"
        policy.write_text(policy_text({}, name="prod", version="1.1.0"), encoding="utf-8")
        receiver.until(lambda d: d["policy"]["version"] == "1.1.0")
        with server.client() as client:
            decision = client.post("/v1/evaluate", json=EVICTION).json()
            assert decision["outcome"] == "allow"
            detail = until_failed(client)
        assert (detail["pushed"], detail["failed"]) == (1, 1)
        assert "HTTP 503" in detail["last_failure"]["problem"]
