"""Reading a log file back, for its readers and for a writer about to append to it.

Any file may hold the remains of an interrupted write: a line that is not a record, or a last line
without its newline. Readers (``verify``, ``audit query`` ...) are told whether each line was
ended; a writer learns where the last whole record is, its hash, the lines torn after it and the
policies already activated, before it writes after them.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prunewarden.audit import _record as auditlog
from prunewarden.audit._chain import parse_record

# Below this, the bytes other writers appended are read with pread; above, through mmap.
_MMAP_FROM = 1024 * 1024


def iter_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, line without newline, ended by a newline)`` for each line of a file."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.endswith(b"\n"):
                yield number, raw[:-1], True
            else:
                yield number, raw, False


@dataclass
class Scan:
    last_hash: str
    activated: set[str]
    torn: list[bytes]
    tail: bytes
    tail_record: dict[str, Any] | None


def scan_appended(fd: int, start: int, end: int, last_hash: str) -> Scan:
    """What a writer must know about the bytes ``[start, end)`` another writer appended."""
    if end - start < _MMAP_FROM:
        return _scan_buffer(os.pread(fd, end - start, start), last_hash)
    base = start - start % mmap.ALLOCATIONGRANULARITY
    with mmap.mmap(fd, end - base, access=mmap.ACCESS_READ, offset=base) as view:
        return _scan_buffer(view, last_hash, start - base)


def _scan_buffer(buf: bytes | mmap.mmap, last_hash: str, start: int = 0) -> Scan:
    end = len(buf)
    activated: set[str] = set()
    at = buf.find(auditlog.ACTIVATION_MARKER, start, end)
    while at != -1:
        line_start = buf.rfind(b"\n", start, at) + 1 or start
        line_end = buf.find(b"\n", at, end)
        line_end = end if line_end == -1 else line_end
        record = parse_record(buf[line_start:line_end])
        if record is not None and auditlog.kind_of(record) == auditlog.POLICY_ACTIVATED:
            activated.add(auditlog.policy_digest_of(record))
        at = buf.find(auditlog.ACTIVATION_MARKER, line_end, end)
    # line_end: the newline ending a whole line (start - 1: none in the region).
    line_end = buf.rfind(b"\n", start, end)
    line_end = start - 1 if line_end == -1 else line_end
    tail = bytes(buf[line_end + 1 : end])
    # Walk back to the last whole record; lines after it are torn writes.
    torn: list[bytes] = []
    while line_end >= start:
        line_start = buf.rfind(b"\n", start, line_end) + 1 or start
        line = bytes(buf[line_start:line_end])
        record = parse_record(line)
        if record is not None:
            last_hash = auditlog.hash_of(record)
            break
        torn.insert(0, line)
        line_end = line_start - 1
    tail_record = parse_record(tail) if tail else None
    return Scan(last_hash, activated, torn, tail, tail_record)
