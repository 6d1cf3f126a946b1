"""What a writer makes of the bytes after the last record it knows, before it appends.

Those bytes are other writers' whole records, or the remains of an interrupted write: ours,
when the disk filled up mid-record, or another process's, killed mid-write. A writer learns them
into a :class:`Recovery` without taking anything as known: the end of a torn last line and the
``write_recovered`` record accounting for the torn lines are bytes still to be written, and only
once they are does the writer's state move past them (:meth:`AuditLog._recover`). A writer whose
own write failed starts from the last bytes it had terminated, so it learns the tail exactly as
a fresh process reading the file would.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden.audit import _fields, _record
from prunewarden.audit._chain import is_keyed, parse_record
from prunewarden.audit._file_state import Chain
from prunewarden.audit._reading import scan_appended, seal_of
from prunewarden.audit._rotation import write_all
from prunewarden.errors import AuditError
from prunewarden.limits import MAX_PARSED_LINE

# How much a writer whose last write failed writes to a scratch file to learn whether the disk
# takes writes again, when nothing torn is left for it to recover (a write refused whole): room
# for a few decision records.
PROBE_BYTES = 16 * 1024
_COUNT_CHUNK = 1024 * 1024


@dataclass
class Recovery:
    """What the bytes ``[start, end)`` leave to a writer: the chain after them, the torn lines
    to account for, whether the last line must be ended first, and the last whole record
    (where its line starts and ends) to check a key against."""

    chain: Chain
    torn: list[dict[str, Any]] = field(default_factory=list)
    unended: bool = False
    last_line: tuple[int, int] | None = None


def learn_appended(fd: int, start: int, end: int, known: Chain) -> Recovery:
    """Read ``[start, end)`` after a chain ``known`` ends at ``start``; changes nothing."""
    scan = scan_appended(fd, start, end, known.last)
    before = set() if scan.restarted else known.activated
    chain = Chain(scan.last_hash, before | scan.activated)
    recovery = Recovery(chain, list(scan.torn), last_line=scan.last_line)
    if scan.tail is None:
        return recovery
    recovery.unended = True
    if scan.tail_record is not None and not scan.torn:
        # Cut just before its newline: the record itself is whole, and ending it keeps it.
        chain.last = _fields.hash_of(scan.tail_record)
    else:
        recovery.torn.append(scan.tail)
    return recovery


def refuse_other_key(
    fd: int, recovery: Recovery, name: str, key: bytes | None, key_env: str | None
) -> None:
    """Raise :class:`AuditError` when a writer with ``key`` (None: unkeyed) must not chain after
    the last record ``recovery`` found: a plain writer after a keyed record, or a keyed writer
    after a record sealed with another key. Either would append records that fail the log's
    verification, so the append is refused now rather than found out later."""
    if key is None:
        if is_keyed(recovery.chain.last):
            msg = (
                f"cannot write audit log {name}: its records are keyed (HMAC), and "
                "unkeyed records after them would fail its verification; give the key"
            )
            raise AuditError(msg)
        return
    line = recovery.last_line
    seal = None if line is None else seal_of(fd, *line, key)
    if line is not None and seal is not None and is_keyed(seal[0]) and seal[0] != seal[1]:
        msg = (
            f"cannot write audit log {name}: line {line_number(fd, line[0])}: its record is "
            f"sealed with another HMAC key than the one in {key_env}; records under this key "
            "would fail the log's verification"
        )
        raise AuditError(msg)


def refuse_retired(fd: int, recovery: Recovery, name: str) -> None:
    """Raise :class:`AuditError` when the last record ``recovery`` found is of a version written
    before the first release: records chained after it would make a log no reader takes."""
    line = recovery.last_line
    if line is None or line[1] - line[0] > MAX_PARSED_LINE:
        return
    record = parse_record(os.pread(fd, line[1] - line[0], line[0]))
    retired = None if record is None else _record.retired_version(record)
    if retired is not None:
        msg = f"cannot write audit log {name}: line {line_number(fd, line[0])}: {retired}"
        raise AuditError(msg)


def line_number(fd: int, offset: int) -> int:
    """The 1-based number of the line starting at byte ``offset`` (for an error message)."""
    newlines, at = 0, 0
    while at < offset:
        chunk = os.pread(fd, min(_COUNT_CHUNK, offset - at), at)
        if not chunk:
            break
        newlines += chunk.count(b"\n")
        at += len(chunk)
    return newlines + 1


def probe_space(directory: Path) -> None:
    """Raise :class:`OSError` unless :data:`PROBE_BYTES` bytes can be written to a scratch file
    in ``directory``, removed again at once."""
    try:
        # Linux: a file without a name, gone when closed, whatever happens to this process.
        fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        scratch = None
    except (AttributeError, OSError):
        scratch = directory / f".prunewarden-probe.{os.getpid()}"
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, b"\0" * PROBE_BYTES)
    finally:
        os.close(fd)
        if scratch is not None:
            with contextlib.suppress(OSError):
                scratch.unlink()
