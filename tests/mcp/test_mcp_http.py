"""``prunewarden mcp --transport http``: streamable HTTP on a loopback port the kernel picks,
driven by the SDK's own client over the network; the same session as over stdio, then a
clean stop on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import anyio
import httpx
import pytest
from _support.mcp_session import Scripted, SessionBehaviour, scripted_session
from _support.server import STOP_SECONDS, _await_address
from mcp import Client

pytestmark = pytest.mark.spawns  # spawns the server


class Running:
    """The server process, its endpoint, and what it printed when it stopped."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.status: int | None = None

    def stop(self) -> int:
        """SIGTERM, and the exit status once it has stopped (SIGKILL if it does not)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)
        self.status = self.process.returncode
        return self.status


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-http") / "audit.jsonl"


@pytest.fixture(scope="module")
def server(audit_log: Path) -> Iterator[Running]:
    command = [sys.executable, "-m", "prunewarden", "mcp", "--transport", "http"]
    process = subprocess.Popen(
        [*command, "--listen", "127.0.0.1:0", "--audit-log", str(audit_log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=audit_log.parent,
    )
    running: Running | None = None
    try:
        url, _ = _await_address(process)
        running = Running(process, url)
        yield running
    finally:
        if running is not None:
            running.stop()
        elif process.poll() is None:
            process.kill()
        with suppress(subprocess.TimeoutExpired):
            process.wait(STOP_SECONDS)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="module")
def scripted(server: Running) -> Scripted:
    async def session() -> Scripted:
        async with Client(server.url) as client:
            return await scripted_session(client)

    return anyio.run(session)


class TestHttpSession(SessionBehaviour):
    """The scripted session over streamable HTTP."""


class TestHttpEndpoint:
    def test_listens_on_loopback_at_the_mcp_path(self, server: Running) -> None:
        """The announced endpoint is http://127.0.0.1:PORT/mcp."""
        assert server.url.startswith("http://127.0.0.1:")
        assert server.url.endswith("/mcp")

    def test_a_foreign_host_header_is_refused(self, server: Running) -> None:
        """A request naming another host (DNS rebinding) is refused before any tool runs."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Host": "attacker.example", "Accept": "application/json, text/event-stream"}
        response = httpx.post(server.url, json=body, headers=headers, timeout=30)
        assert response.status_code == 421

    def test_stops_cleanly_on_sigterm(self, server: Running, scripted: Scripted) -> None:
        """After a session, SIGTERM stops the server with exit status 0."""
        assert scripted.evaluated.is_error is False
        assert server.stop() == 0
