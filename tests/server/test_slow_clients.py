"""Clients that hold a connection without finishing a request are dropped; connections are
capped. Raw sockets against a real server on loopback; every wait bounded by GUARD_SECONDS."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.blocking import GUARD_SECONDS
from _support.server import Server, audit_decisions, running_server
from prometheus_client.parser import text_string_to_metric_families
from prunewarden.server import openapi_document

OPENAPI_BYTES = len(json.dumps(openapi_document(), separators=(",", ":")))
# Short limits, so a dropped connection is seen in well under a second; generous bounds below.
LIMITS = ("--header-timeout", "0.3", "--body-timeout", "0.3", "--keep-alive-timeout", "0.3")


@pytest.fixture(scope="module")
def strict(policy_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with sub-second header, body and keep-alive limits."""
    with running_server(policy_file, tmp_path_factory.mktemp("strict"), *LIMITS) as server:
        yield server


def connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=GUARD_SECONDS)
    sock.settimeout(GUARD_SECONDS)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def limit_reached(server: Server, limit: str, http: httpx.Client | None = None) -> float:
    """prunewarden_server_limit_reached_total{limit=...}, asked over ``http`` if given."""
    if http is None:
        with server.client() as fresh:
            return limit_reached(server, limit, fresh)
    text = http.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "prunewarden_server_limit_reached_total" and (
                sample.labels["limit"] == limit
            ):
                return sample.value
    return 0.0


class TestDeadlines:
    def test_a_silent_connection_is_dropped(self, strict: Server) -> None:
        """A connection that never sends a byte is closed at --header-timeout."""
        with connect(strict) as sock:
            assert read_until_closed(sock) == b""

    def test_slowloris_connections_are_dropped(self, strict: Server) -> None:
        """Fifty connections that never finish their headers are all closed, and counted."""
        before = limit_reached(strict, "header_timeout")
        sockets = [connect(strict) for _ in range(50)]
        try:
            for sock in sockets:
                sock.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: pdp\r\nX-Slow: ")
            assert [read_until_closed(sock) for sock in sockets] == [b""] * 50
        finally:
            for sock in sockets:
                sock.close()
        assert limit_reached(strict, "header_timeout") >= before + 50

    def test_a_stalled_body_is_408_and_closed_and_decides_nothing(self, strict: Server) -> None:
        """A body announced at 1 MB that stops after 1 KB: 408 request-timeout, then closed,
        and no decision is logged."""
        logged = len(audit_decisions(strict.audit_log))
        with connect(strict) as sock:
            sock.sendall(
                b"POST /v1/evaluate HTTP/1.1\r\nHost: pdp\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000\r\n\r\n" + b" " * 1024
            )
            answer = read_until_closed(sock)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ")
        problem = json.loads(body)
        assert (problem["type"].rsplit("/", 1)[1], problem["limit"]) == (
            "request-timeout",
            "body_timeout",
        )
        assert len(audit_decisions(strict.audit_log)) == logged
        assert limit_reached(strict, "body_timeout") >= 1

    def test_an_idle_keep_alive_connection_is_closed(self, strict: Server) -> None:
        """--keep-alive-timeout: after an answer, an idle connection is closed."""
        with connect(strict) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: pdp\r\n\r\n")
            answer = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert answer.endswith(b"}")  # the whole answer came before the close

    def test_an_answer_left_unread_is_dropped(self, strict: Server) -> None:
        """A client that asks for megabytes of answers and reads none: once the server's buffer
        is full for --body-timeout, the connection is dropped, and counted."""
        before = limit_reached(strict, "send_timeout")
        host, port = strict.url.removeprefix("http://").rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a window that fills
            sock.settimeout(GUARD_SECONDS)
            sock.connect((host, int(port)))
            sock.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: pdp\r\n\r\n" * 400)
            deadline = time.monotonic() + GUARD_SECONDS
            while limit_reached(strict, "send_timeout") == before:
                assert time.monotonic() < deadline, "the unread answer was never dropped"
                time.sleep(0.05)
            received = 0
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(65536):
                    received += len(chunk)
        assert received < 400 * OPENAPI_BYTES  # dropped before all the answers were sent

    def test_the_server_answers_after_dropping_them(self, strict: Server) -> None:
        """The dropped clients cost nothing lasting: the next request is answered."""
        with strict.client() as http:
            assert http.get("/healthz").status_code == 200


class TestConnectionCap:
    def test_a_connection_over_the_cap_is_503_at_once(
        self, policy_file: Path, tmp_path: Path
    ) -> None:
        """--max-connections 3: with three open, a fourth is answered 503 server-busy and
        closed before it sends anything; the three are served, and the refusal counted."""
        options = ("--max-connections", "3", "--header-timeout", "60", "--keep-alive-timeout")
        with (
            running_server(policy_file, tmp_path, *options, "60") as server,
            server.client() as http,
        ):
            assert http.get("/healthz").status_code == 200  # one kept-alive connection
            idle = [connect(server) for _ in range(2)]
            try:
                with connect(server) as fourth:
                    answer = read_until_closed(fourth)
                reached = limit_reached(server, "connections", http)  # kept-alive connection
            finally:
                for sock in idle:
                    sock.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ")
        assert json.loads(body)["limit"] == "connections"
        assert reached == 1
