"""records_dropped records: written at the tail under the writers' lock, and policies activated
again after them by every writer of the file, so that a receiver's copy stays reviewable."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from _support.shipping import decide
from prunewarden import AuditLog, Engine
from prunewarden.audit import verify_files
from prunewarden.audit._file_state import Tail
from prunewarden.audit._record import records_dropped_record
from prunewarden.errors import AuditError


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def marker(tail: Tail) -> dict[str, object]:
    return records_dropped_record(
        "http://x/v1/logs", 2, "sha256:" + "1" * 64, "sha256:" + "2" * 64, tail.last_hash
    )


class TestWriteAtTail:
    def test_the_record_follows_the_tail_it_was_built_from(self, tmp_path: Path) -> None:
        """The builder sees the size and last hash under the lock; its record follows them."""
        log = tmp_path / "audit.jsonl"
        seen: list[Tail] = []
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 3, "a")

            def build(tail: Tail) -> dict[str, object]:
                seen.append(tail)
                return marker(tail)

            written = audit.write_at_tail(build)
        (tail,) = seen
        before = records(log)[:-1]
        assert tail.size == sum(len(line) + 1 for line in log.read_bytes().splitlines()[:-1])
        assert tail.last_hash == before[-1]["hash"]
        assert written is not None
        assert records(log)[-1]["prev_hash"] == tail.last_hash
        assert records(log)[-1]["kind"] == "records_dropped"

    def test_nothing_is_written_when_the_builder_declines(self, tmp_path: Path) -> None:
        """A builder returning None writes nothing."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 1, "a")
            size = log.stat().st_size
            assert audit.write_at_tail(lambda _tail: None) is None
        assert log.stat().st_size == size

    def test_a_stream_sink_refuses(self) -> None:
        """Only a file has a tail to write at."""
        with pytest.raises(AuditError):
            AuditLog(io.StringIO()).write_at_tail(marker)


class TestActivationsAfterADroppedRange:
    def test_every_writer_activates_its_policy_again(self, tmp_path: Path) -> None:
        """Writers that activated a policy before the record (this one and another sink on
        the file) activate it again after it, and the file verifies."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as first, AuditLog(log) as second:
            one, two = Engine.default(audit=first), Engine.default(audit=second)
            decide(one, 2, "a")
            decide(two, 2, "b")
            first.write_at_tail(marker)
            decide(two, 1, "c")
            decide(one, 1, "d")
        kinds = [record["kind"] for record in records(log)]
        assert kinds[-4:] == ["records_dropped", "policy_activated", "decision", "decision"]
        result = verify_files([log])
        assert result.ok, [str(finding) for finding in result.findings]
