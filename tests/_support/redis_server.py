"""A real redis-server on a loopback port, for the tests of Redis session stores.

Started by the test (no persistence, bound to 127.0.0.1), ready once it answers PING (polled
with a bounded timeout), always terminated. Where the binary is absent, the tests using it are
skipped with a message saying so (``.ci/run`` installs Debian's redis-server).
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
SKIP_REASON = "redis-server is not on PATH (apt-get install redis-server; .ci/run does)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_redis() -> Iterator[str]:
    """The URL of a fresh redis-server; skips the test where there is none."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    port = _free_port()
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
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    break
            if process.poll() is not None:
                pytest.fail("redis-server exited at start")
            time.sleep(0.02)
        else:
            pytest.fail("redis-server did not answer PING")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
