"""records_dropped records: written at the tail under the writers' lock, and policies activated
again after them by every writer of the file, so that a receiver's copy stays reviewable."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from _support.shipping import decide
from prunewarden import AuditLog, Engine
from prunewarden.audit import seal, verify_files
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


class TestVerifyingTheWritersFile:
    def test_the_writers_own_file_is_no_copy_with_a_gap(self, tmp_path: Path) -> None:
        """In the file it was written to, a records_dropped record links to the record before
        it: verify counts no record missing from that file and notes no blind range."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 2, "a")
            audit.write_at_tail(marker)
        result = verify_files([log])
        assert result.ok, [str(finding) for finding in result.findings]
        assert [report.dropped for report in result.files] == [0]
        assert not [f for f in result.findings if "not shipped" in f.message]

    def test_a_marker_linked_to_nothing_breaks_the_chain(self, tmp_path: Path) -> None:
        """A records_dropped record whose prev_hash is neither the record before it nor the end
        of a range after it is a broken chain, like any other record."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 2, "a")
        nowhere = "sha256:" + "9" * 64
        record = records_dropped_record(
            "http://x/v1/logs", 2, "sha256:" + "1" * 64, nowhere, "sha256:" + "3" * 64
        )
        line, _ = seal(record, nowhere, None)
        log.write_bytes(log.read_bytes() + line)
        result = verify_files([log])
        assert not result.ok
        assert next(f.message for f in result.findings if f.fatal).startswith("chain broken")

    def test_a_decision_after_the_marker_needs_its_policy_activated_again(
        self, tmp_path: Path
    ) -> None:
        """Writers activate their policies again after a records_dropped record (a receiver
        may have missed the activations): a decision after it under no new activation fails."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 2, "a")
            audit.write_at_tail(marker)
        *_, decision, last = records(log)
        body = {k: v for k, v in decision.items() if k not in ("hash", "prev_hash")}
        line, _ = seal(body, str(last["hash"]), None)
        log.write_bytes(log.read_bytes() + line)
        result = verify_files([log])
        assert not result.ok
        (message,) = [f.message for f in result.findings if f.fatal]
        assert message.endswith("which no earlier record of this file activates")


class TestVerifyingACopy:
    def test_a_count_that_is_no_number_counts_none(self, tmp_path: Path) -> None:
        """A receiver's copy missing a range: the records_dropped record's count is added to
        what the copy is missing only when it is a number."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 3, "a")
        lines = log.read_bytes().splitlines(keepends=True)
        hashes = [str(json.loads(line)["hash"]) for line in lines]
        record = records_dropped_record("http://x/v1/logs", 2, hashes[1], hashes[2], hashes[3])
        for count, missing in ((2, 2), ("two", 0)):
            line, _ = seal(
                {**record, "dropped": {**record["dropped"], "count": count}}, hashes[3], None
            )
            copy = tmp_path / f"copy-{missing}.jsonl"
            copy.write_bytes(b"".join([*lines[:2], line]))
            result = verify_files([copy])
            assert result.ok, [str(finding) for finding in result.findings]
            assert [report.dropped for report in result.files] == [missing]
