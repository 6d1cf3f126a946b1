"""Calling code that might block on a FIFO or read a device forever, so that a regression
fails instead of hanging the suite or exhausting the machine."""

from __future__ import annotations

import contextlib
import os
import resource
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Generous: the guarded calls take milliseconds; only a blocked one reaches this.
GUARD_SECONDS = 20.0


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def call_guarded(function: Callable[[], Any], *fifos: Path) -> Any:
    """Run ``function`` in a thread; if it is still running after :data:`GUARD_SECONDS`, open
    each FIFO for writing (which releases a reader blocked on it) and fail. Returns what the
    function returned, or raises what it raised."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(GUARD_SECONDS)
    if thread.is_alive():
        for fifo in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(GUARD_SECONDS)
        msg = f"blocked for more than {GUARD_SECONDS} s (on a FIFO)"
        raise AssertionError(msg)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# A child that reads without bound dies here instead of taking the machine's memory with it.
CHILD_MEMORY = 2 * 1024**3


def run_bounded(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code args...`` with its memory capped and a timeout, so that a read that
    never ends fails the test (a MemoryError, or a TimeoutExpired) instead of stalling it."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))

    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS * 3,
        preexec_fn=cap,
        check=False,
    )


@contextlib.contextmanager
def sqlite_write_lock(database: Path) -> Iterator[None]:
    """Hold ``database``'s write lock (``BEGIN IMMEDIATE``) until the block ends: a writer in
    another process waits for it (up to its busy timeout), a reader of the WAL does not."""
    connection = sqlite3.connect(database, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
    finally:
        connection.execute("ROLLBACK")
        connection.close()
