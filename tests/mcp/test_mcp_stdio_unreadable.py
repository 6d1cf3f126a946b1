"""``prunewarden mcp`` over stdio answers every line it cannot read as a JSON-RPC message with
a JSON-RPC error, as the HTTP transport does, and serves the next line: spawned as a host spawns
it, each answer read as the SDK's client reads it."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import mcp_types
import pytest
from prunewarden.mcp._stdio import unreadable_answer
from pydantic import ValidationError

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"},
    },
}
ANSWER_SECONDS = 60  # a loaded 2-core machine starts the server slowly; answers come at once


class _Server:
    """The command on pipes: a line written, the next line it answers read (bounded wait)."""

    def __init__(self, audit_log: Path) -> None:
        command = [sys.executable, "-m", "prunewarden", "mcp", "--audit-log", str(audit_log)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            cwd=audit_log.parent,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        assert self.process.stdout is not None
        self.reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        self.reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self) -> Any:
        """The next message the server writes, as the SDK parses it."""
        line = self.lines.get(timeout=ANSWER_SECONDS)
        return mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=ANSWER_SECONDS)

    def stop(self) -> None:
        """Ended whatever state it is in; its pipes closed."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.reader.join(timeout=ANSWER_SECONDS)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    running = _Server(tmp_path / "audit.jsonl")
    try:
        running.send(json.dumps(INITIALIZE))
        assert isinstance(running.answer(), mcp_types.JSONRPCResponse)
        running.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield running
    finally:
        running.stop()


def _error(answer: Any) -> tuple[Any, int]:
    assert isinstance(answer, mcp_types.JSONRPCError), answer
    return answer.id, answer.error.code


@pytest.mark.spawns  # spawns the server
class TestUnreadableLines:
    def test_each_unreadable_line_is_answered_and_the_next_served(self, server: _Server) -> None:
        """Not JSON: -32700 with id null; JSON that is no JSON-RPC message: -32600 with its id;
        each followed by a request answered as usual, and the session ends cleanly."""
        unreadable = [
            ("not json", (None, -32700)),
            ('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"', (None, -32700)),
            ("[1, 2", (None, -32700)),
            ('{"jsonrpc": "2.0", "id": 3}', (3, -32600)),
            ('{"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": "x"}', ("c", -32600)),
            ('{"jsonrpc": "1.0", "id": 4, "method": "ping"}', (4, -32600)),
            ("[]", (None, -32600)),
        ]
        for number, (line, expected) in enumerate(unreadable, start=100):
            server.send(line)
            assert _error(server.answer()) == expected, line
            server.send(json.dumps({"jsonrpc": "2.0", "id": number, "method": "ping"}))
            answer = server.answer()
            assert isinstance(answer, mcp_types.JSONRPCResponse)
            assert answer.id == number
        server.send(json.dumps({"jsonrpc": "2.0", "id": 200, "method": "tools/list"}))
        listed = server.answer()
        assert isinstance(listed, mcp_types.JSONRPCResponse)
        assert {tool["name"] for tool in listed.result["tools"]} >= {"evaluate", "plan"}
        assert server.close() == 0

    def test_a_blank_line_is_no_message(self, server: _Server) -> None:
        """An empty line between messages is not answered; the next message is."""
        server.send("")
        server.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        answer = server.answer()
        assert isinstance(answer, mcp_types.JSONRPCResponse)
        assert answer.id == 9


def _parse_failure(line: str) -> Exception:
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as error:
        return error
    raise AssertionError(line)


class TestAnswers:
    @pytest.mark.parametrize(
        ("line", "expected"),
        [
            ("{", (None, -32700)),
            ('{"jsonrpc": "2.0", "id": true, "method": "ping", "params": 1}', (None, -32600)),
            ('{"jsonrpc": "2.0", "id": 1.5, "result": 1, "error": 2}', (None, -32600)),
            ('"ping"', (None, -32600)),
        ],
    )
    def test_the_answer_to_a_parser_failure(self, line: str, expected: tuple[Any, int]) -> None:
        """A boolean or fractional id is none JSON-RPC allows: the answer's id is null."""
        answer = unreadable_answer(_parse_failure(line))
        assert answer is not None
        assert (answer.id, answer.error.code) == expected

    def test_a_failure_that_is_not_the_parsers_is_a_parse_error(self) -> None:
        """Whatever else the transport hands on instead of a message is answered -32700."""
        answer = unreadable_answer(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid"))
        assert answer is not None
        assert (answer.id, answer.error.code) == (None, -32700)
        assert answer.error.message == "Parse error: UnicodeDecodeError"
