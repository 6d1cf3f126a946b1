"""Review audit logs: find decisions, count them, show the policy behind one.

SQL over the logs: :mod:`prunewarden.review`.

Everything streams: a log is read line by line and never held in memory, and a line is parsed
only when the substrings a match needs occur in it (records are canonical JSON, so a field
``"check":"eviction"`` is spelled exactly so). Lines that are not records are skipped and
counted; ``audit verify`` is the command that judges them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prunewarden.audit import _fields, _record
from prunewarden.audit._chain import canonical_record, parse_record
from prunewarden.audit._pass import decision_rows
from prunewarden.audit._reading import iter_lines
from prunewarden.audit._rotation import order_files
from prunewarden.errors import AuditError

_AGO = re.compile(r"(\d{1,9})([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_time(text: str, now: datetime | None = None) -> str:
    """An RFC 3339 time, a date (``2025-11-14``: its midnight, UTC) or a time ago (``7d``,
    ``12h``, ``30m``, ``90s``, ``2w`` before ``now``) as a record's ``ts`` spelling (UTC,
    microseconds, ``Z``), so that times compare as strings."""
    if ago := _AGO.fullmatch(text.strip()):
        delta = timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
        moment = (now or datetime.now(UTC)) - delta
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        msg = (
            f"{text!r} is not a date, an RFC 3339 time or a time ago "
            "(2025-11-14, 2025-11-14T09:30:00Z, 7d, 12h)"
        )
        raise AuditError(msg) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _comparable_ts(ts: str) -> str:
    return ts if _TS.fullmatch(ts) else parse_time(ts)


FIELD_KEYS = {
    "kind": "kind",
    "decision_id": "decision_id",
    "check": "check",
    "outcome": "outcome",
    "session_id": "session_id",
    "policy_name": "name",
    "policy_version": "version",
    "policy_digest": "digest",
}


def line_marker(name: str, value: str) -> bytes | None:
    """``"key":"value"`` as it appears in a canonical line holding that field's value, or None
    when the record versions spell it differently (beyond printable ASCII: escaped in version 1,
    UTF-8 in version 2; such a filter is applied to parsed records only)."""
    if not _printable(value):
        return None
    return canonical_record({FIELD_KEYS[name]: value})[1:-1]


def value_marker(value: str) -> bytes | None:
    """A string value as it appears anywhere in a canonical line (None, as for
    :func:`line_marker`, when versions spell it differently)."""
    if not _printable(value):
        return None
    return json.dumps(value, ensure_ascii=True).encode("ascii")


def _printable(value: str) -> bool:
    return value.isascii() and value.isprintable()


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which decision records to keep; every field given must match (``since`` inclusive,
    ``until`` exclusive)."""

    policy_name: str | None = None
    policy_version: str | None = None
    policy_digest: str | None = None
    check: str | None = None
    outcome: str | None = None
    reason: str | None = None
    session_id: str | None = None
    subject: str | None = None
    decision_id: str | None = None
    since: str | None = None
    until: str | None = None
    labels: tuple[tuple[str, str], ...] = ()  # each (key, value) must be among the labels

    _FIELDS = (
        "policy_name",
        "policy_version",
        "policy_digest",
        "check",
        "outcome",
        "session_id",
        "decision_id",
    )

    def markers(self) -> list[bytes]:
        """Substrings every matching line contains, ``decision`` and ``pass`` lines alike."""
        found = [
            line_marker(name, value)
            for name in self._FIELDS
            if name != "decision_id" and (value := getattr(self, name)) is not None
        ]
        if self.decision_id is not None:
            # A pass's decisions are <pass_id>-<index>: the line holds the pass id.
            pass_id, dash, _ = self.decision_id.rpartition("-")
            found.append(value_marker(pass_id if dash else self.decision_id))
        if self.reason is not None:
            found.append(value_marker(self.reason))
        if self.subject is not None and not self.subject.isdigit():
            found.append(value_marker(self.subject))
        found += [value_marker(value) for _, value in self.labels]
        return [marker for marker in found if marker is not None]

    def matches(self, record: dict[str, Any]) -> bool:
        """``record`` is a decision (a record, or one row of a pass: :func:`decision_rows`)
        that every given field matches."""
        if _fields.kind_of(record) != _record.DECISION:
            return False
        for name in self._FIELDS:
            wanted = getattr(self, name)
            if wanted is not None and _fields.FIELD_READERS[name](record) != wanted:
                return False
        if self.reason is not None and self.reason not in _fields.reason_codes(record):
            return False
        if self.subject is not None and self.subject not in _fields.subject_ids(record):
            return False
        return self._labelled(record) and self._in_time(record)

    def _labelled(self, record: dict[str, Any]) -> bool:
        if not self.labels:
            return True
        labels = record.get("labels")
        return isinstance(labels, dict) and all(labels.get(k) == v for k, v in self.labels)

    def _in_time(self, record: dict[str, Any]) -> bool:
        if self.since is None and self.until is None:
            return True
        ts = _comparable_ts(_fields.record_ts(record))
        return (self.since is None or ts >= self.since) and (self.until is None or ts < self.until)


@dataclass
class Skipped:
    """Lines that were not records, per file."""

    lines: dict[str, int] = field(default_factory=dict)

    def add(self, path: Path) -> None:
        self.lines[str(path)] = self.lines.get(str(path), 0) + 1

    def messages(self) -> list[str]:
        return [
            f"{name}: {count} line(s) that are not records skipped (see: prunewarden audit verify)"
            for name, count in self.lines.items()
        ]


def scan(
    paths: Iterable[str | os.PathLike[str]],
    markers: list[bytes],
    skipped: Skipped,
    also: Callable[[bytes], bool] | None = None,
) -> Iterator[tuple[Path, int, bytes, dict[str, Any]]]:
    """``(file, line number, line, record)`` for every line containing all ``markers`` (or for
    which ``also`` says yes), in rotation order."""
    for path in order_files(paths):
        for number, line, _ in iter_lines(path):
            if all(marker in line for marker in markers) or (also is not None and also(line)):
                record = parse_record(line)
                if record is None:
                    skipped.add(path)
                    continue
                retired = _record.retired_version(record)
                if retired is not None:
                    raise AuditError(f"{path}:{number}: {retired}")
                yield path, number, line, record


def query(
    paths: Iterable[str | os.PathLike[str]], where: RecordFilter, skipped: Skipped
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Decisions matching ``where``: the line as written, and the decision (a ``decision``
    record, or one verdict of a ``pass`` record as :func:`decision_rows` shapes it)."""
    for _, _, line, record in scan(paths, where.markers(), skipped):
        for row in decision_rows(record):
            if where.matches(row):
                yield line, row


@dataclass
class Tally:
    count: int = 0
    first: str = ""
    last: str = ""


ReportKey = tuple[str, str, str, str, str]
REPORT_COLUMNS = (
    "policy",
    "policy_version",
    "check",
    "outcome",
    "reason",
    "count",
    "first_seen",
    "last_seen",
)


def report(
    paths: Iterable[str | os.PathLike[str]], where: RecordFilter, skipped: Skipped
) -> list[dict[str, Any]]:
    """Decisions counted per policy version, check, outcome and primary reason, with the first
    and last time each was seen."""
    tallies: dict[ReportKey, Tally] = {}
    for _, record in query(paths, where, skipped):
        tally = tallies.setdefault(_fields.report_key(record), Tally())
        ts = _fields.record_ts(record)
        tally.count += 1
        tally.first = min(tally.first, ts) if tally.first else ts
        tally.last = max(tally.last, ts)
    return [
        dict(zip(REPORT_COLUMNS, (*key, t.count, t.first, t.last), strict=True))
        for key, t in sorted(tallies.items())
    ]


EPISODE_COLUMNS = ("session_id", "halt_episodes", "halt_decisions", "first_halt", "last_halt")


def halt_episodes(
    paths: Iterable[str | os.PathLike[str]], where: RecordFilter, skipped: Skipped
) -> list[dict[str, Any]]:
    """Per session, the collapse halts among the decisions matching ``where``: how many, and in
    how many episodes (a run of halts that no allowing collapse decision of the session
    interrupts is one episode, however many passes it refused). Sessions without a halt are
    left out; decisions without a session count under ``None``."""
    halting: dict[str | None, bool] = {}
    tallies: dict[str | None, dict[str, Any]] = {}
    for _, record in query(paths, where, skipped):
        if record.get("check") != "collapse":
            continue
        session = record.get("session_id")
        halted = record.get("outcome") == "halt"
        if halted:
            ts = _fields.record_ts(record)
            tally = tallies.setdefault(
                session, dict(zip(EPISODE_COLUMNS, (session, 0, 0, ts, ts), strict=True))
            )
            tally["halt_episodes"] += not halting.get(session, False)
            tally["halt_decisions"] += 1
            tally["last_halt"] = ts
        halting[session] = halted
    return [tallies[key] for key in sorted(tallies, key=lambda key: (key is not None, key or ""))]


@dataclass(frozen=True, slots=True)
class Authorization:
    """A decision and the activation record of the policy that authorized it."""

    decision: dict[str, Any]
    activation: dict[str, Any]
    file: Path
    line: int
    activation_line: int

    @property
    def document(self) -> Any:
        return _fields.document_of(self.activation)


def find_authorization(
    paths: Iterable[str | os.PathLike[str]], decision_id: str, skipped: Skipped
) -> Authorization:
    """The decision ``decision_id`` and the policy activated for its digest before it in the same
    file. Raises :class:`AuditError` when either is missing or the policy does not hash to the
    digest the decision names."""
    wanted = RecordFilter(decision_id=decision_id).markers()
    activations: dict[str, tuple[Path, int, dict[str, Any]]] = {}
    for path, number, _, found_record in scan(
        paths, wanted, skipped, also=lambda line: _record.ACTIVATION_MARKER in line
    ):
        kind = _fields.kind_of(found_record)
        if kind == _record.POLICY_ACTIVATED:
            activations[_fields.policy_digest_of(found_record)] = (path, number, found_record)
            continue
        rows = [r for r in decision_rows(found_record) if r.get("decision_id") == decision_id]
        if rows:
            record = rows[0]
            digest = _fields.policy_digest_of(record)
            found = activations.get(digest)
            if found is None or found[0] != path:
                msg = f"{path}:{number}: decision {decision_id} names policy {digest}, which no "
                msg += "earlier record of its file activates (run: prunewarden audit verify)"
                raise AuditError(msg)
            if not _fields.digest_matches_document(found[2]):
                msg = f"{path}:{found[1]}: the activated policy does not hash to {digest}"
                raise AuditError(msg)
            return Authorization(record, found[2], path, number, found[1])
    msg = f"no decision {decision_id} in the given logs"
    raise AuditError(msg)
