"""A real redis-server on a loopback port, for the tests of Redis session stores, and a real
Redis Cluster of several.

Started by the test (no persistence, bound to 127.0.0.1), ready once it answers PING (polled
with a bounded timeout) and says it is the process started (``INFO server``: another test's
redis-server on a port that was free a moment ago is not taken for it; a port taken meanwhile
is given up for another), always terminated. Where the binary is absent, the tests using it are
skipped with a message saying so (``.ci/run`` installs Debian's redis-server, which brings
redis-cli).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
SKIP_REASON = "redis-server is not on PATH (apt-get install redis-server; .ci/run does)"
ATTEMPTS = 5


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int, pid: int) -> bool:
    """Whether the redis-server on ``port`` is process ``pid`` and answers."""
    with suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as conn:
        conn.sendall(b"INFO server\r\n")
        reply = b""
        while b"process_id:" not in reply or not reply.endswith(b"\r\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            reply += chunk
        return f"process_id:{pid}\r\n".encode() in reply
    return False


def _try_start(port: int, *options: str) -> subprocess.Popen[bytes] | None:
    """redis-server on ``port``, once it answers; None if it exited (the port was taken)."""
    assert REDIS_SERVER is not None
    process = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
            *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _answers(port, process.pid):
            return process
        if process.poll() is not None:
            return None
        time.sleep(0.02)
    stop_server(process)
    pytest.fail("redis-server did not answer PING")


def start_server(port: int, *options: str) -> subprocess.Popen[bytes]:
    """A redis-server on ``port`` (a port the caller must have: a cluster node restarted on
    its own), once it answers."""
    process = _try_start(port, *options)
    if process is None:
        pytest.fail(f"redis-server exited at start on port {port}")
    return process


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@contextmanager
def running_redis() -> Iterator[str]:
    """The URL of a fresh redis-server; skips the test where there is none."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    for _ in range(ATTEMPTS):
        port = free_port()
        if (process := _try_start(port)) is not None:
            break
    else:
        pytest.fail(f"redis-server exited at start {ATTEMPTS} times")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_server(process)
