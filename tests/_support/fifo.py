"""Calling code that might block on a FIFO, so that a regression fails instead of hanging."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
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
