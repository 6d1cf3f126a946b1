"""``prunewarden status`` over a fleet at once: a real server on loopback, a closed port, a
server answering errors and servers that accept and never answer, each within ``--timeout``,
with the summary line and the exit code of docs/fleet.md."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _support.server import Server, running_server
from prunewarden.cli._main import run
from prunewarden.cli._status import _timed_out, summary

JOIN_SECONDS = 20.0  # how long a test waits for a client to hang up: never reached when it works


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def closed_port() -> int:
    """A loopback port nothing listens on: bound by the kernel's choice, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Silent:
    """A server that accepts one connection and never answers; it notes (in order, by one
    shared lock) when the client connected and when it hung up."""

    def __init__(self, events: list[tuple[str, int]], lock: threading.Lock, index: int) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._events, self._lock, self._index = events, lock, index
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.sock.accept()
        with connection:
            self._note("connected")
            while connection.recv(4096):  # the request, read and never answered
                pass
            self._note("hung up")

    def _note(self, what: str) -> None:
        with self._lock:
            self._events.append((what, self._index))


@contextmanager
def answering_503() -> Iterator[str]:
    """A server answering every request 503 (not a prunewarden server, or one failing)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(503)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def server(policy_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(policy_file, tmp_path_factory.mktemp("fleet")) as running:
        yield running


class TestFleetAtOnce:
    def test_every_server_within_its_deadline_and_a_summary(self, server: Server) -> None:
        """Five servers: one line each in order, then the summary; exit 1. The three silent
        servers are all connected before any is hung up on: asked at once, not in turn."""
        events: list[tuple[str, int]] = []
        lock = threading.Lock()
        silent = [Silent(events, lock, index) for index in range(3)]
        gone = f"http://127.0.0.1:{closed_port()}"
        with answering_503() as failing, ExitStack() as stack:
            for each in silent:
                stack.callback(each.sock.close)
            urls = [server.url, gone, failing, *(s.url for s in silent)]
            code, out, err = cli("status", *urls, "--timeout", "1")
            for each in silent:
                each.thread.join(JOIN_SECONDS)
        lines = out.splitlines()
        assert (code, err) == (1, "")
        assert [line.split("  ")[0] for line in lines[:-1]] == urls
        assert lines[0].startswith(f"{server.url}  healthy  served@1.0.0")
        assert lines[1].startswith(f"{gone}  no answer: ")
        assert lines[2] == f"{failing}  HTTP 503 Service Unavailable"
        assert lines[3:6] == [f"{s.url}  no answer: timed out after 1 s" for s in silent]
        assert lines[-1] == "6 servers: 1 healthy, 1 failed, 1 unreachable, 3 timed out"
        kinds = [what for what, _ in events]
        assert kinds == ["connected"] * 3 + ["hung up"] * 3

    def test_json_names_each_outcome(self, server: Server) -> None:
        """``--format json``: the documents as before, each with its outcome; no summary."""
        gone = f"http://127.0.0.1:{closed_port()}"
        code, out, _ = cli("status", server.url, gone, "--format", "json", "--timeout", "2")
        answers = json.loads(out)
        assert code == 1
        assert [(a["url"], a["outcome"]) for a in answers] == [
            (server.url, "healthy"),
            (gone, "unreachable"),
        ]
        assert answers[0]["status"]["healthy"] is True

    def test_all_healthy_is_0_and_said_so(self, server: Server) -> None:
        started = time.monotonic()
        code, out, _ = cli("status", server.url, server.url)
        assert code == 0
        assert out.splitlines()[-1] == "2 servers: 2 healthy"
        assert time.monotonic() - started < JOIN_SECONDS

    @pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
    def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(self, value: str) -> None:
        code, out, err = cli("status", "http://127.0.0.1:1", "--timeout", value)
        assert (code, out) == (2, "")
        assert f"{value!r} is not a positive number of seconds" in err


def test_the_fleet_page_shows_the_summary_the_command_prints() -> None:
    """docs/fleet.md's example: its summary line is the one its four lines make."""
    page = (Path(__file__).parents[2] / "docs" / "fleet.md").read_text(encoding="utf-8")
    start = page.index("prunewarden status http://10.0.1.7:8181")
    shown = page[start : page.index("```", start)].splitlines()[1:]
    outcomes = []
    for line in shown[:-1]:
        url, what = line.removeprefix("# ").split("  ")[:2]
        outcomes.append(
            {"healthy": "healthy", "no answer: timed out after 5 s": "timed out"}.get(
                what, "unreachable"
            )
        )
        if outcomes[-1] == "timed out":
            assert what == _timed_out(url, 5.0)["error"]
    assert shown[-1] == "# " + summary([{"outcome": outcome} for outcome in outcomes])
