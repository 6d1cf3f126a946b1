"""A FIFO or character device as an audit sink: one chain across records, and never a hang."""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditError, AuditLog, Decision, Engine
from prunewarden.audit import _pipe
from prunewarden.audit._verify import verify_files

# A regression that blocks must fail the test, not hang the suite.
HANG_SECONDS = 30.0


def eviction(segment_id: str) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.1,
        "eviction_candidates": [segment_id],
    }


def within_bound(work: Callable[[], list[Decision]]) -> list[Decision]:
    """Run ``work`` in a thread; fail if it has not returned after HANG_SECONDS."""
    result: list[list[Decision]] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    assert not thread.is_alive(), f"still blocked after {HANG_SECONDS} s"
    return result[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "audit.fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def held_reader(fifo: Path) -> Iterator[int]:
    """A reader that opens the FIFO and never reads it."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    yield fd
    os.close(fd)


class TestFifoSink:
    def test_a_drained_fifo_carries_one_verifiable_chain(self, fifo: Path, tmp_path: Path) -> None:
        """Records through a FIFO chain one to the next: the capture verifies whole."""
        captured = bytearray()
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        done = threading.Event()

        def drain() -> None:
            while True:
                select.select([fd], [], [], 0.05)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk and done.is_set():
                    return
                captured.extend(chunk)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()

        def decide() -> list[Decision]:
            with AuditLog(fifo) as audit:
                engine = Engine.default(audit=audit)
                return [engine.evaluate(eviction(f"s{i}")) for i in range(40)]

        decisions = within_bound(decide)
        done.set()
        reader.join(HANG_SECONDS)
        os.close(fd)
        assert {d.outcome for d in decisions} == {"allow"}
        capture = tmp_path / "capture.jsonl"
        capture.write_bytes(bytes(captured))
        assert len(capture.read_text().splitlines()) == 41  # the activation, then 40 decisions
        result = verify_files([capture])
        assert result.ok, result.findings

    def test_a_fifo_nobody_drains_refuses_instead_of_blocking(
        self, fifo: Path, held_reader: int, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Once the pipe is full, decisions refuse with audit_unavailable within the deadline."""
        monkeypatch.setattr(_pipe, "STREAM_WRITE_SECONDS", 0.01)

        def decide() -> list[Decision]:
            with AuditLog(fifo) as audit:
                engine = Engine.default(audit=audit)
                return [engine.evaluate(eviction(f"s{i}")) for i in range(150)]

        decisions = within_bound(decide)
        assert held_reader >= 0
        assert decisions[0].outcome == "allow"
        assert decisions[-1].codes == ("audit_unavailable",)
        assert decisions[-1].refused

    def test_a_fifo_without_a_reader_refuses(self, fifo: Path) -> None:
        """No reader at all: the decision refuses, naming the FIFO, and nothing blocks."""

        def decide() -> list[Decision]:
            with AuditLog(fifo) as audit:
                return [Engine.default(audit=audit).evaluate(eviction("s1"))]

        (decision,) = within_bound(decide)
        assert decision.codes == ("audit_unavailable",)
        assert "no reader" in decision.reasons[0].message

    def test_opening_a_fifo_without_a_reader_is_an_error(self, fifo: Path) -> None:
        """AuditLog.open() on a FIFO nobody reads raises at once (the CLI exits 2)."""
        with AuditLog(fifo) as audit, pytest.raises(AuditError, match="has no reader"):
            audit.open()

    def test_a_character_device_is_a_stream(self) -> None:
        """/dev/null takes records as a stream: no size, lock or rotation is asked of it."""
        with AuditLog("/dev/null") as audit:
            decision = Engine.default(audit=audit).evaluate(eviction("s1"))
        assert decision.outcome == "allow"
