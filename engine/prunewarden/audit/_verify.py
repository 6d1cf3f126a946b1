"""Verify audit logs: every record sealed, every link of the chain present, nothing cut off.

Reports the first broken record of each file by line number: an altered record (its hash does not
match), a removed, inserted or reordered one (its ``prev_hash`` does not match the record before
it), a beginning that was cut off, a partial last line (the file was truncated, or a writer was
killed mid-write), and a gap between rotated files. Lines left by an interrupted write and
accounted for by a ``write_recovered`` record are reported as notes, not failures. So is a
``records_dropped`` record chained across the range it names: a receiver's copy of a shipped log
goes on from the last record it got to that record, and is blind in between.

What a chain in a file cannot show by itself: whole records cut from the end at a line boundary,
or a whole file replaced. For that, keep the head hash ``verify`` prints somewhere else and pass it
back with ``expect``.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden.audit import _fields, _record
from prunewarden.audit._chain import GENESIS, is_keyed, parse_record, record_hash, unseal
from prunewarden.audit._columns import COLUMNS_VERSION
from prunewarden.audit._columns_check import columns_problem
from prunewarden.audit._reading import iter_lines
from prunewarden.audit._rotation import order_files, rotation_base


@dataclass(frozen=True, slots=True)
class Finding:
    """Something verification found; ``fatal`` ones fail it."""

    file: str
    line: int
    message: str
    fatal: bool = True

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {'' if self.fatal else 'note: '}{self.message}"


@dataclass(slots=True)
class FileReport:
    """How far a file verified."""

    file: str
    records: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    head: str | None = None
    broken_at: int | None = None
    # Records named by records_dropped records and missing from this file (a receiver's copy).
    dropped: int = 0

    @property
    def intact(self) -> bool:
        return self.broken_at is None

    def __str__(self) -> str:
        if self.broken_at is not None:
            return (
                f"{self.file}: FAILED at line {self.broken_at} "
                f"({self.records} records before it verify)"
            )
        span = f", {self.first_ts} .. {self.last_ts}" if self.records else ""
        blind = f", {self.dropped} dropped (not shipped)" if self.dropped else ""
        return f"{self.file}: ok, {self.records} records{blind}{span}, head {self.head or '-'}"


@dataclass(slots=True)
class Verification:
    files: list[FileReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(finding.fatal for finding in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """Whether every chain holds, each file as far as it verified, and every finding (as
        ``audit verify --format json`` prints them)."""
        files = [
            {
                "file": report.file,
                "intact": report.intact,
                "records": report.records,
                "first_ts": report.first_ts,
                "last_ts": report.last_ts,
                "head": report.head,
                "broken_at": report.broken_at,
                "dropped": report.dropped,
            }
            for report in self.files
        ]
        findings = [
            {"file": f.file, "line": f.line, "message": f.message, "fatal": f.fatal}
            for f in self.findings
        ]
        return {"ok": self.ok, "files": files, "findings": findings}


def verify_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    key: bytes | None = None,
    expect: Iterable[str] = (),
) -> Verification:
    """Verify ``paths`` (put in rotation order) as chains; ``key`` checks keyed records (and
    then every record must be keyed); each hash in ``expect`` must occur in the chain.

    Raises :class:`OSError` for a file that cannot be read.
    """
    result = Verification()
    seen: set[str] = set()
    previous: dict[str, FileReport] = {}
    for path in order_files(paths):
        base = rotation_base(path)
        checker = _FileCheck(path, key, previous.get(base), seen)
        checker.run()
        result.files.append(checker.report)
        result.findings.extend(checker.findings)
        previous[base] = checker.report
    result.findings.extend(
        Finding(
            "<expect>",
            0,
            f"{digest} is not in the chain: records were cut from the end, or the log was replaced",
        )
        for digest in expect
        if digest not in seen
    )
    return result


class _Broken(Exception):  # noqa: N818 - control flow inside one file's check, never escapes
    pass


class _FileCheck:
    def __init__(
        self, path: Path, key: bytes | None, previous: FileReport | None, seen: set[str]
    ) -> None:
        self.path = path
        self.key = key
        self.previous = previous
        self.seen = seen
        self.report = FileReport(str(path))
        self.findings: list[Finding] = []
        self.last: str | None = None
        self.last_line: int | None = None  # the line of the record hashed `last`
        self.activated: set[str] = set()
        self.torn: list[tuple[int, bytes]] = []

    def run(self) -> None:
        try:
            for number, line, ended in iter_lines(self.path):
                if ended:
                    self._line(number, line)
                else:
                    self._partial(number, line)
            if self.torn:
                self._fail(
                    self.torn[0][0],
                    "not a record, and no write_recovered record accounts for it: "
                    "an interrupted write not yet recovered, or an edit",
                )
        except _Broken:
            return

    def _fail(self, line: int, message: str) -> None:
        self.findings.append(Finding(str(self.path), line, message))
        self.report.broken_at = line
        raise _Broken

    def _note(self, line: int, message: str) -> None:
        self.findings.append(Finding(str(self.path), line, message, fatal=False))

    def _partial(self, number: int, line: bytes) -> None:
        sealed = _sealed(line)
        if sealed is not None and not self.torn:
            self._record(number, *sealed)
            self._note(number, "the last record has no newline (cut just after it)")
            return
        self._fail(
            number,
            f"partial last record ({len(line)} bytes, no newline): the file was truncated or a "
            f"write was interrupted; the {self.report.records} records before it verify",
        )

    def _line(self, number: int, line: bytes) -> None:
        sealed = _sealed(line)
        if sealed is None:
            self.torn.append((number, line))
            return
        self._record(number, *sealed)

    def _record(self, number: int, record: dict[str, Any], body: bytes, claimed: str) -> None:
        retired = _record.retired_version(record)
        if retired is not None:
            self._fail(number, retired)
        kind = _fields.kind_of(record)
        if self.torn:
            self._recovered(number, record)
        self._seal(number, body, claimed)
        self._link(number, record, kind)
        self._meaning(number, record, kind)
        self.last, self.last_line = claimed, number
        self.seen.add(claimed)
        self.report.records += 1
        self.report.head = claimed
        ts = _fields.record_ts(record)
        self.report.first_ts = self.report.first_ts or ts
        self.report.last_ts = ts

    def _recovered(self, number: int, record: dict[str, Any]) -> None:
        expected = [_record.torn_fields(line) for _, line in self.torn]
        first = self.torn[0][0]
        if _fields.kind_of(record) != _record.WRITE_RECOVERED or (
            _fields.torn_of(record) != expected
        ):
            self._fail(
                first,
                "not a record, and no write_recovered record accounts for it: "
                "an edit, or an inserted line",
            )
        lost = sum(len(line) for _, line in self.torn)
        lines = f"line {first}" if len(self.torn) == 1 else f"lines {first}-{self.torn[-1][0]}"
        self._note(
            first,
            f"{lines}: {lost} bytes of an interrupted write (a record lost), "
            f"accounted for at line {number}",
        )
        self.torn = []

    def _seal(self, number: int, body: bytes, claimed: str) -> None:
        keyed = is_keyed(claimed)
        if keyed and self.key is None:
            self._fail(number, "keyed record (hmac-sha256): verifying it needs the key")
        if self.key is not None and not keyed:
            self._fail(
                number,
                "record is not keyed although a key was given: written without it, or forged",
            )
        # Constant time: with a key, how long an == took would tell a forger how much of a
        # forged hash was right.
        if not hmac.compare_digest(record_hash(body, self.key if keyed else None), claimed):
            reason = "the record was altered" + (" or the key is wrong" if keyed else "")
            self._fail(number, f"hash mismatch: {reason}")

    def _link(self, number: int, record: dict[str, Any], kind: str) -> None:
        prev = _fields.prev_hash_of(record)
        if kind == _record.RECORDS_DROPPED and self._across_gap(number, record, prev):
            return
        if self.last is not None:
            if kind == _record.LOG_ROTATED:
                self._fail(number, "a log_rotated header in the middle of a file")
            if prev != self.last:
                self._fail(
                    number,
                    f"chain broken: prev_hash does not match the hash of line {self.last_line} "
                    "(a record was removed, inserted or reordered)",
                )
            return
        if kind == _record.LOG_ROTATED:
            self._continues(number, record, prev)
        elif prev != GENESIS:
            self._fail(
                number,
                "the chain does not start here: the lines before it were removed "
                "(or the file it continues was not given)",
            )

    def _across_gap(self, number: int, record: dict[str, Any], prev: str) -> bool:
        """Whether a ``records_dropped`` record links to the record before it across the range
        it names (a receiver's copy: the range is missing), noted with what is missing."""
        dropped = _fields.dropped_of(record)
        before = self.last or GENESIS
        if prev == before or dropped.get("after") != before or dropped.get("last") != prev:
            return False
        count = dropped.get("count")
        self.report.dropped += count if isinstance(count, int) else 0
        self._note(
            number,
            f"{count} records not shipped to {dropped.get('sink')}: {dropped.get('first')} .. "
            f"{prev}, after {before} (this copy is blind there)",
        )
        return True

    def _continues(self, number: int, record: dict[str, Any], prev: str) -> None:
        before = str(_fields.rotation_of(record).get("previous_file", "?"))
        previous = self.previous
        if previous is None:
            self._note(number, f"continues {before}, which was not given: verified from here")
        elif previous.intact and prev != previous.head:
            self._fail(
                number,
                f"rotation gap: this file continues {before} at {prev}, but {previous.file} "
                f"ends at {previous.head} (a file is missing, or out of order)",
            )

    def _meaning(self, number: int, record: dict[str, Any], kind: str) -> None:
        version = record.get("record_version")
        if version not in _record.RECORD_VERSIONS:
            self._fail(number, f"record_version {version!r} is not one this verifier knows")
        if kind not in _record.KINDS:
            self._fail(number, f"unknown record kind {kind!r}")
        if kind == _record.RECORDS_DROPPED:
            if _fields.dropped_of(record).get("last") != _fields.prev_hash_of(record):
                self._fail(number, "records_dropped names a range that does not end before it")
            # Writers activate policies again after it (a receiver missed the range).
            self.activated.clear()
        elif kind == _record.POLICY_ACTIVATED:
            if not _fields.digest_matches_document(record):
                self._fail(number, "the activated policy document does not hash to its digest")
            self.activated.add(_fields.policy_digest_of(record))
        elif kind in (_record.DECISION, _record.PRUNING_PASS):
            digest = _fields.policy_digest_of(record)
            if digest not in self.activated:
                self._fail(
                    number,
                    f"decision under policy {digest}, which no earlier record of this file "
                    "activates",
                )
            if kind == _record.PRUNING_PASS and version == COLUMNS_VERSION:
                self._columns(number, record)

    def _columns(self, number: int, record: dict[str, Any]) -> None:
        """A version 3 pass must say one thing: columns that agree (``_columns_check``)."""
        problem = columns_problem(record)
        if problem is not None:
            self._fail(number, f"pass {record.get('pass_id')!r} contradicts itself: {problem}")


def _sealed(line: bytes) -> tuple[dict[str, Any], bytes, str] | None:
    """The record on a line, its hashed body and the hash it claims; None if not a record."""
    split = unseal(line)
    if split is None:
        return None
    record = parse_record(line)
    if record is None or _fields.hash_of(record) != split[1]:
        return None
    return record, *split
