"""The collector on serve's stack, against hostile senders: a body too slow (408), too many
connections (503), a batch too large (413), a wrong token (401), a failing hook (500, never a
traceback); its /metrics, /healthz, per-replica tokens, status documents, and what it reads
back from its files when it starts again. One collector for the module, with small limits."""

from __future__ import annotations

import gzip
import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from _support.server import PRUNEWARDEN
from _support.shipping import decide
from prometheus_client.parser import text_string_to_metric_families
from prunewarden import AuditLog, Engine
from prunewarden.limits import MAX_SHIP_BATCH_BYTES
from prunewarden.server import CollectorServer
from prunewarden.shipping import Collector

TOKEN = "shared-token-of-the-fleet-0001"  # noqa: S105 - a test's token
TOKEN_EU = "token-of-replica-eu-1-0002"  # noqa: S105 - a test's token
BODY_SECONDS = 0.5
MAX_CONNECTIONS = 4


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The lines of a real log: an activation and 6 decisions."""
    log = tmp_path_factory.mktemp("local") / "local.jsonl"
    with AuditLog(log) as audit:
        decide(Engine.default(audit=audit), 6, "s")
    return log.read_bytes().splitlines(keepends=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorServer]:
    collector = Collector(
        tmp_path_factory.mktemp("collected"), token=TOKEN, tokens={TOKEN_EU: "eu-1"}
    )
    server = CollectorServer(
        collector, max_connections=MAX_CONNECTIONS, header_seconds=5, body_seconds=BODY_SECONDS
    )
    with server:
        yield server


def post(
    server: CollectorServer, body: bytes, replica: str, token: str | None = TOKEN
) -> httpx.Response:
    headers = {
        "Content-Type": "application/x-ndjson",
        "Content-Encoding": "gzip",
        "Prunewarden-Replica": replica,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(f"{server.url}/v1/logs", content=gzip.compress(body), headers=headers)


def metrics(server: CollectorServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def raw(server: CollectorServer, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(data)
    return sock


def answer_of(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    sock.close()
    return b"".join(chunks)


class TestHostileSenders:
    def test_a_body_too_slow_is_408(self, served: CollectorServer) -> None:
        """Headers, then half the body, then nothing: past the body deadline, 408
        request-timeout and the connection closed; nothing is written."""
        head = (
            f"POST /v1/logs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/x-ndjson\r\nPrunewarden-Replica: slow-1\r\n"
            "Content-Length: 1000\r\n\r\n"
        )
        sock = raw(served, head.encode() + b'{"half":')
        started = time.monotonic()
        answer = answer_of(sock)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b"request-timeout" in answer
        assert time.monotonic() - started < BODY_SECONDS + 5
        assert not (served.collector.directory / "slow-1.jsonl").exists()
        assert (
            metrics(served)[
                ("prunewarden_server_limit_reached_total", (("limit", "body_timeout"),))
            ]
            >= 1
        )

    def test_a_connection_past_the_cap_is_503(self, served: CollectorServer) -> None:
        """MAX_CONNECTIONS connections held open: the next one is answered 503 server-busy
        before a byte of it is read; once they close, a sender is served again."""
        held = [raw(served, b"") for _ in range(MAX_CONNECTIONS)]
        time.sleep(0.2)  # the server has accepted them
        try:
            refused = answer_of(raw(served, b""))  # answered before it sends anything
        finally:
            for sock in held:
                sock.close()
        assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]
        assert b"server-busy" in refused
        deadline = time.monotonic() + 10
        while httpx.get(f"{served.url}/healthz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)

    def test_a_batch_too_large_is_413_before_its_body(self, served: CollectorServer) -> None:
        """A Content-Length past MAX_SHIP_BATCH_BYTES is refused from the headers alone."""
        head = (
            f"POST /v1/logs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/x-ndjson\r\nPrunewarden-Replica: big-1\r\n"
            f"Content-Length: {MAX_SHIP_BATCH_BYTES + 1}\r\n\r\n"
        )
        answer = answer_of(raw(served, head.encode()))
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"batch-too-large" in answer

    def test_bad_credentials_are_401(self, served: CollectorServer, lines: list[bytes]) -> None:
        """No token, a wrong one, another scheme: 401 with WWW-Authenticate; nothing written;
        each counted as refused unauthorized."""
        before = metrics(served)[
            ("prunewarden_collect_batches_total", (("outcome", "unauthorized"),))
        ]
        for token in (None, "wrong-token"):
            refused = post(served, b"".join(lines), "anon-1", token)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["type"].endswith("/unauthorized")
        basic = httpx.get(f"{served.url}/v1/replicas", headers={"Authorization": f"Basic {TOKEN}"})
        assert basic.status_code == 401
        assert not (served.collector.directory / "anon-1.jsonl").exists()
        after = metrics(served)[
            ("prunewarden_collect_batches_total", (("outcome", "unauthorized"),))
        ]
        assert after == before + 2

    def test_a_replica_token_ships_only_as_its_replica(
        self, served: CollectorServer, lines: list[bytes]
    ) -> None:
        refused = post(served, b"".join(lines), "us-1", TOKEN_EU)
        assert refused.status_code == 403
        assert refused.json()["type"].endswith("/forbidden-replica")
        assert post(served, b"".join(lines), "eu-1", TOKEN_EU).json()["accepted"] == len(lines)

    def test_unknown_routes_are_problems(self, served: CollectorServer) -> None:
        answer = httpx.get(f"{served.url}/v1/nothing")
        assert answer.status_code == 404
        assert answer.headers["content-type"] == "application/problem+json"
        assert httpx.get(f"{served.url}/v1/logs").status_code == 405


class TestObserved:
    def test_healthz_answers_without_a_token(self, served: CollectorServer) -> None:
        answer = httpx.get(f"{served.url}/healthz")
        assert answer.status_code == 200
        assert answer.json()["status"] == "ok"

    def test_metrics_count_batches_records_and_refusals(
        self, served: CollectorServer, lines: list[bytes]
    ) -> None:
        before = metrics(served)
        assert post(served, b"".join(lines[:4]), "m-1").status_code == 200
        assert post(served, b"".join(lines), "m-1").json()["duplicates"] == 4
        assert post(served, lines[-1], "m-2").status_code == 409  # does not start a chain
        after = metrics(served)
        replica = (("replica", "m-1"),)

        def grew(name: str, labels: tuple[tuple[str, str], ...]) -> float:
            return after[(name, labels)] - before.get((name, labels), 0)

        assert grew("prunewarden_collect_batches_total", (("outcome", "accepted"),)) == 2
        assert grew("prunewarden_collect_batches_total", (("outcome", "chain-gap"),)) == 1
        assert after[("prunewarden_collect_records_total", replica)] == len(lines)
        assert after[("prunewarden_collect_replica_records", replica)] == len(lines)
        assert after[("prunewarden_collect_duplicates_total", replica)] == 4
        assert after[("prunewarden_collect_replica_batches_total", replica)] == 2
        assert metrics(served)[("prunewarden_collect_replicas", ())] >= 1
        assert httpx.get(f"{served.url}/metrics").status_code == 401

    def test_metrics_name_only_what_a_collector_has(self, served: CollectorServer) -> None:
        """The limits a collector keeps are there; serve's session gauges are not (a collector
        holds no session, and a gauge always at 0 would say it does and holds none)."""
        names = {name for name, _ in metrics(served)}
        assert "prunewarden_server_limit_reached_total" in names
        assert not {n for n in names if "session" in n}

    def test_replica_labels_are_bounded(
        self, served: CollectorServer, lines: list[bytes], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past the limit of label values, the other replicas are summed under _other."""
        monkeypatch.setattr("prunewarden.server._collector.MAX_COLLECT_METRIC_REPLICAS", 1)
        assert post(served, b"".join(lines), "zz-1").status_code == 200
        found = metrics(served)
        named = {
            dict(labels)["replica"]
            for name, labels in found
            if name == "prunewarden_collect_records_total"
        }
        assert len(named) == 2
        assert "_other" in named
        everyone = sum(chain.accepted for chain in served.collector.chains())
        total = sum(
            value
            for (name, _), value in found.items()
            if name == "prunewarden_collect_records_total"
        )
        assert total == everyone

    def test_a_failing_hook_is_500_not_a_traceback(
        self, served: CollectorServer, lines: list[bytes]
    ) -> None:
        def broken(_replica: str) -> None:
            raise RuntimeError("the hook broke")

        served.collector.before_answer = broken
        try:
            answer = post(served, b"".join(lines), "hook-1")
        finally:
            served.collector.before_answer = None
        assert answer.status_code == 500
        assert answer.json()["detail"] == "RuntimeError: the hook broke"


STATUS = {"healthy": True, "tenants": [{"name": "default", "healthy": True}]}


def push(
    server: CollectorServer, replica: str, document: object, token: str = TOKEN
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/status",
        content=json.dumps(document),
        headers={
            "Content-Type": "application/json",
            "Prunewarden-Replica": replica,
            "Prunewarden-Instance": "http://10.0.0.7:8181",
            "Authorization": f"Bearer {token}",
        },
    )


class TestStatusDocuments:
    def test_a_status_is_kept_per_replica_and_served_at_fleet(
        self, served: CollectorServer
    ) -> None:
        assert push(served, "eu-1", STATUS, TOKEN_EU).status_code == 200
        assert push(served, "us-1", {**STATUS, "healthy": False}).status_code == 200
        fleet = httpx.get(f"{served.url}/v1/fleet", headers={"Authorization": f"Bearer {TOKEN}"})
        document = fleet.json()
        assert document["replicas"]["eu-1"]["status"] == STATUS
        assert document["replicas"]["eu-1"]["instance"] == "http://10.0.0.7:8181"
        assert document["healthy"] == document["reporting"] - 1
        kept = json.loads((served.collector.directory / "status" / "eu-1.json").read_text())
        assert kept["status"] == STATUS

    def test_bad_status_documents_are_refused(self, served: CollectorServer) -> None:
        assert push(served, "us-1", STATUS, TOKEN_EU).status_code == 403
        assert push(served, "us-1", [1, 2]).json()["type"].endswith("/invalid-status")
        assert push(served, "bad name", STATUS).status_code == 400
        assert push(served, "us-1", {"pad": "x" * 2**21}).status_code == 413


class TestRestart:
    def test_a_restarted_collector_knows_its_replicas_and_their_records(
        self, tmp_path: Path, lines: list[bytes]
    ) -> None:
        """Replicas and their status are read back from the files at start: listed before any
        batch, and what a shipper sends again across the restart is dropped as duplicates."""
        with CollectorServer(Collector(tmp_path)) as first:
            assert post(first, b"".join(lines[:5]), "r-1", None).status_code == 200
            assert push(first, "r-1", STATUS).status_code == 200
        with CollectorServer(Collector(tmp_path)) as second:
            listed = httpx.get(f"{second.url}/v1/replicas").json()
            assert listed["r-1"]["records"] == 5
            assert httpx.get(f"{second.url}/v1/fleet").json()["replicas"]["r-1"]["status"] == STATUS
            again = post(second, b"".join(lines), "r-1", None).json()
        assert (again["duplicates"], again["accepted"]) == (5, len(lines) - 5)
        assert (tmp_path / "r-1.jsonl").read_bytes() == b"".join(lines)


@pytest.mark.spawns
def test_a_sigterm_right_after_the_listening_line_stops_it_cleanly(tmp_path: Path) -> None:
    """The command says where it listens only once SIGTERM stops it cleanly: a SIGTERM sent at
    once is exit 0 and "stopped", not a kill."""
    command = [PRUNEWARDEN, "audit", "collect", "--listen", "127.0.0.1:0", "--out", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert "listening on http://127.0.0.1:" in process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert stdout == "prunewarden audit collect: stopped\n"


def test_status_pushes_of_one_replica_at_once_each_land_whole(tmp_path: Path) -> None:
    """Pushes of one replica arriving together are each kept whole: every one answered 200,
    and the file left is one of them, not a mix."""
    documents = [{**STATUS, "started_at": f"push-{n}"} for n in range(24)]
    with CollectorServer(Collector(tmp_path, token=TOKEN)) as server, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda d: push(server, "race-1", d).status_code, documents))
    assert answers == [200] * len(documents)
    kept = json.loads((tmp_path / "status" / "race-1.json").read_text())
    assert kept["status"] in documents
