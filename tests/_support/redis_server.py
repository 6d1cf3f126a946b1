"""A real redis-server on a loopback port, for the tests of Redis session stores, and a real
Redis Cluster of several.

Started by the test (no persistence, bound to 127.0.0.1), ready once it answers PING (polled
with a bounded timeout), always terminated. Where the binary is absent, the tests using it are
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(port: int, *options: str) -> subprocess.Popen[bytes]:
    """A redis-server on ``port``, once it answers PING."""
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
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as conn:
            conn.sendall(b"PING\r\n")
            if conn.recv(16).startswith(b"+PONG"):
                return process
        if process.poll() is not None:
            stop_server(process)
            pytest.fail("redis-server exited at start")
        time.sleep(0.02)
    stop_server(process)
    pytest.fail("redis-server did not answer PING")


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
    port = free_port()
    process = start_server(port)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_server(process)
