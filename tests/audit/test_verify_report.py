"""What ``prunewarden audit verify`` reports of a log, field by field: the records counted, the
head and the times, the notes of recovered writes, and the failures of unrecovered ones
(docs/audit-log.md)."""

from __future__ import annotations

import json
from pathlib import Path

from prunewarden import AuditLog, Engine
from prunewarden.audit._chain import GENESIS, seal
from prunewarden.audit._verify import Verification, verify_files

UNRECOVERED = "an interrupted write not yet recovered, or an edit"
EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "turn", "tombstone_written": True},
    "score": 0.125,
    "perturbed_score": 0.125,
}


def write_log(path: Path, decisions: int = 3) -> Path:
    with AuditLog(path) as audit:
        engine = Engine.default(audit=audit)
        for _ in range(decisions):
            engine.evaluate(EVICTION)
    return path


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def fatal(result: Verification) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in result.findings if f.fatal]


def notes(result: Verification) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in result.findings if not f.fatal]


class TestIntactReport:
    def test_the_report_counts_every_record_and_names_head_and_times(self, tmp_path: Path) -> None:
        """An intact log: every record counted, the head is the last record's hash, and the
        times are the first and last records'."""
        path = write_log(tmp_path / "audit.jsonl")
        written = records(path)
        (report,) = verify_files([path]).files
        assert report.intact
        assert report.records == len(written)
        assert report.head == written[-1]["hash"]
        assert report.first_ts == written[0]["ts"]
        assert report.last_ts == written[-1]["ts"]
        assert str(report).startswith(f"{path}: ok, {len(written)} records, {written[0]['ts']} ..")

    def test_an_expected_head_in_the_chain_passes(self, tmp_path: Path) -> None:
        """A head kept from an earlier verify (expect=) that is in the chain passes; one that
        is not fails, at no line."""
        path = write_log(tmp_path / "audit.jsonl")
        head = str(records(path)[-1]["hash"])
        assert verify_files([path], expect=[head]).ok
        missing = verify_files([path], expect=[GENESIS])
        assert [(f.file, f.line) for f in missing.findings] == [("<expect>", 0)]
        assert str(missing.findings[0]).startswith("<expect>: ")


class TestUnrecoveredWrites:
    def test_a_torn_line_at_the_end_fails(self, tmp_path: Path) -> None:
        """A line at the end that is not a record and that no write_recovered record accounts
        for fails verification at that line."""
        path = write_log(tmp_path / "audit.jsonl")
        count = len(records(path))
        path.write_bytes(path.read_bytes() + b'{"torn\n')
        result = verify_files([path])
        assert fatal(result) == [
            (
                count + 1,
                f"not a record, and no write_recovered record accounts for it: {UNRECOVERED}",
            )
        ]
        assert result.files[0].broken_at == count + 1

    def test_a_last_record_without_its_newline_is_counted_with_a_note(self, tmp_path: Path) -> None:
        """A whole last record cut only of its newline is verified and counted, with a note."""
        path = write_log(tmp_path / "audit.jsonl")
        written = records(path)
        path.write_bytes(path.read_bytes()[:-1])
        result = verify_files([path])
        assert result.ok
        assert result.files[0].records == len(written)
        assert result.files[0].head == written[-1]["hash"]
        assert notes(result) == [
            (len(written), "the last record has no newline (cut just after it)")
        ]


class TestRecoveredWrites:
    def test_one_torn_line_is_named_by_its_line(self, tmp_path: Path) -> None:
        """One torn line recovered by the next writer: the note names "line N" and its bytes
        (without the newline)."""
        path = write_log(tmp_path / "audit.jsonl")
        count = len(records(path))
        path.write_bytes(path.read_bytes() + b'{"torn\n')
        write_log(path, decisions=1)
        assert notes(verify_files([path]))[0][1].startswith(f"line {count + 1}: 6 bytes")

    def test_two_torn_lines_are_named_as_a_range(self, tmp_path: Path) -> None:
        """Two torn lines: the note names "lines N-M" and the bytes of both."""
        path = write_log(tmp_path / "audit.jsonl")
        count = len(records(path))
        path.write_bytes(path.read_bytes() + b'{"torn\n' + b'{"more\n')
        write_log(path, decisions=1)
        (note,) = notes(verify_files([path]))
        assert note[0] == count + 1
        assert note[1].startswith(f"lines {count + 1}-{count + 2}: 12 bytes")


def append_sealed(path: Path, record: dict[str, object]) -> int:
    """Append ``record`` chained after the last one, as a writer would; its line number."""
    written = records(path)
    line, _ = seal(record, str(written[-1]["hash"]), None)
    path.write_bytes(path.read_bytes() + line)
    return len(written) + 1


class TestMeaning:
    def test_an_unknown_record_version_fails(self, tmp_path: Path) -> None:
        """A well-chained record of a version this verifier does not know fails at its line."""
        path = write_log(tmp_path / "audit.jsonl")
        last = {k: v for k, v in records(path)[-1].items() if k not in {"hash", "prev_hash"}}
        number = append_sealed(path, {**last, "record_version": 99})
        assert fatal(verify_files([path])) == [
            (number, "record_version 99 is not one this verifier knows")
        ]

    def test_an_unknown_kind_fails(self, tmp_path: Path) -> None:
        """A well-chained record of an unknown kind fails at its line."""
        path = write_log(tmp_path / "audit.jsonl")
        last = {k: v for k, v in records(path)[-1].items() if k not in {"hash", "prev_hash"}}
        number = append_sealed(path, {**last, "kind": "mystery"})
        assert fatal(verify_files([path])) == [(number, "unknown record kind 'mystery'")]
