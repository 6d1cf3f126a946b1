"""A real collector on loopback for the shipping tests, and the counts they compare.

The collector is :class:`prunewarden.shipping.Collector` served by
:class:`prunewarden.server.CollectorServer` in a thread; ``gate`` (when given) holds every batch
once it is written until the test opens it, so that a test makes a receiver slow (or hung)
exactly when it needs one, without sleeps.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden import Engine
from prunewarden.audit import rotated_files, verify_files
from prunewarden.server import CollectorServer
from prunewarden.shipping import Collector

WAIT_SECONDS = 60.0  # generous: a loaded 2-core machine


def eviction(segment_id: str) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.1,
        "eviction_candidates": [segment_id],
    }


def decide(engine: Engine, count: int, prefix: str) -> None:
    """``count`` allowed eviction decisions, logged by the engine's audit log."""
    for i in range(count):
        decision = engine.evaluate(eviction(f"{prefix}-{i}"), session_id=prefix)
        assert decision.outcome == "allow"


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def free_port() -> int:
    """A loopback port nothing listens on now (a closed port, until a receiver takes it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Receiver:
    collector: Collector
    url: str
    arrived: threading.Event = field(default_factory=threading.Event)
    batches: int = 0

    def files(self, replica: str) -> list[Path]:
        return rotated_files(self.collector.directory / f"{replica}.jsonl")


@contextmanager
def receiver(
    directory: Path, *, port: int = 0, gate: threading.Event | None = None, **options: Any
) -> Iterator[Receiver]:
    """A collector writing into ``directory`` on ``127.0.0.1:port``; stopped on exit."""
    holder: list[Receiver] = []

    def before(_replica: str) -> None:
        holder[0].batches += 1
        holder[0].arrived.set()
        if gate is not None:
            assert gate.wait(WAIT_SECONDS), "the test never opened the gate"

    collector = Collector(directory, before_answer=before, **options)
    server = CollectorServer(collector, "127.0.0.1", port).start()
    holder.append(Receiver(collector, f"{server.url}/v1/logs"))
    try:
        yield holder[0]
    finally:
        if gate is not None:
            gate.set()
        server.stop()


def records_in(files: list[Path]) -> list[dict[str, Any]]:
    """The records of ``files`` (lines that parse), in order."""
    out = []
    for path in files:
        for line in path.read_bytes().splitlines():
            record = json.loads(line)
            out.append(record)
    return out


def dropped_in(records: list[dict[str, Any]]) -> int:
    """Records that records_dropped records say a copy lacks: each gap they bridge."""
    total, last = 0, None
    for record in records:
        if record["kind"] == "records_dropped" and record["prev_hash"] != last:
            total += record["dropped"]["count"]
        last = record["hash"]
    return total


def verified(files: list[Path]) -> Any:
    result = verify_files(files)
    assert result.ok, [str(finding) for finding in result.findings]
    return result
