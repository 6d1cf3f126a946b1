"""Reading a log file back, for its readers and for a writer about to append to it.

Any file may hold the remains of an interrupted write: a line that is not a record, or a last line
without its newline. Readers (``verify``, ``audit query`` ...) are told whether each line was
ended; a writer learns where the last whole record is, its hash, the lines torn after it and the
policies already activated, before it writes after them.

What follows the last newline may be anything, of any size (a process killed mid-write, or
garbage appended by hand): it is read in bounded chunks, to hash it and find where it starts, and
parsed only when it is small enough to parse. A writer catching up on a 300 MB newline-less tail
once held several copies of it at once. A line too long to parse is still a record when it ends as
a sealed line does and (unkeyed) its body hashes to what it claims, checked in chunks too: a pass
over 100,000 segments makes a record of some 50 MB, which a restarted writer once took for a torn
line and chained past, breaking the chain.
"""

from __future__ import annotations

import hashlib
import hmac
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prunewarden.audit import _fields, _record
from prunewarden.audit._chain import is_keyed, parse_record, unseal
from prunewarden.limits import MAX_PARSED_LINE

# Below this, the bytes other writers appended are read with pread; above, through mmap.
_MMAP_FROM = 1024 * 1024
# How much of an unended tail is read at a time.
_CHUNK = 1024 * 1024
# Enough of a line's end to hold the sealed ending: ``,"hash":"hmac-sha256:<64 hex>"}``.
_SEALED_END = 128


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
    # The policies activated in the region; after a records_dropped record (``restarted``),
    # only those activated after the last one: writers activate policies again after it.
    activated: set[str]
    torn: list[dict[str, Any]]  # each torn line's length and hash (``torn_fields``)
    tail: dict[str, Any] | None  # the same for what follows the last newline, if anything
    tail_record: dict[str, Any] | None
    # Where the last whole record of the region starts and ends (before its newline): a keyed
    # writer checks its seal before it chains after it.
    last_line: tuple[int, int] | None = None
    restarted: bool = False


def scan_appended(fd: int, start: int, end: int, last_hash: str) -> Scan:
    """What a writer must know about the bytes ``[start, end)`` another writer appended."""
    lines_end = _last_newline(fd, start, end) + 1  # start when no line was ended
    tail, tail_record = _tail(fd, lines_end, end)
    if lines_end - start < _MMAP_FROM:
        buf = os.pread(fd, lines_end - start, start)
        scan = _scan_buffer(buf, last_hash, fd=fd, origin=start)
    else:
        base = start - start % mmap.ALLOCATIONGRANULARITY
        with mmap.mmap(fd, lines_end - base, access=mmap.ACCESS_READ, offset=base) as view:
            scan = _scan_buffer(view, last_hash, start - base, fd=fd, origin=base)
    scan.tail, scan.tail_record = tail, tail_record
    if tail_record is not None and not scan.torn:
        scan.last_line = (lines_end, end)
    if tail_record is not None and _fields.kind_of(tail_record) == _record.POLICY_ACTIVATED:
        scan.activated.add(_fields.policy_digest_of(tail_record))
    if tail_record is not None and _fields.kind_of(tail_record) == _record.RECORDS_DROPPED:
        scan.activated, scan.restarted = set(), True
    return scan


def _last_newline(fd: int, start: int, end: int) -> int:
    """The offset of the last newline in ``[start, end)``, or ``start - 1``; read backwards one
    bounded chunk at a time."""
    at = end
    while at > start:
        size = min(_CHUNK, at - start)
        found = os.pread(fd, size, at - size).rfind(b"\n")
        if found != -1:
            return at - size + found
        at -= size
    return start - 1


def seal_of(fd: int, start: int, end: int, key: bytes | None) -> tuple[str, str] | None:
    """The hash the line ``[start, end)`` (without its newline) claims, and the one its body
    has (keyed with ``key``, if given), read in bounded chunks; None when the line does not end
    as a sealed line does."""
    tail = os.pread(fd, min(_SEALED_END, end - start), end - min(_SEALED_END, end - start))
    split = unseal(tail)
    if split is None:
        return None
    body_end = end - len(tail) + len(split[0]) - 1  # the body's closing brace is not on disk
    digest = hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)
    at = start
    while at < body_end:
        chunk = os.pread(fd, min(_CHUNK, body_end - at), at)
        if not chunk:
            return None
        digest.update(chunk)
        at += len(chunk)
    digest.update(b"}")
    return split[1], ("sha256:" if key is None else "hmac-sha256:") + digest.hexdigest()


def _long_record_hash(fd: int, start: int, end: int) -> str | None:
    """The hash of the record on a line too long to parse, or None when it is not one: it must
    end as a sealed line does and, unkeyed, hash to what it claims (a keyed one can only be
    checked with the key: a keyed writer does, before it chains after it)."""
    seal = seal_of(fd, start, end, None)
    if seal is None or os.pread(fd, 1, start) != b"{":
        return None
    claimed, computed = seal
    return claimed if is_keyed(claimed) or claimed == computed else None


def _tail(fd: int, start: int, end: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The fields of the unended bytes ``[start, end)``, and the record they hold, if any (of
    a record too long to parse, only its hash)."""
    if start >= end:
        return None, None
    digest = hashlib.sha256()
    at = start
    while at < end:
        chunk = os.pread(fd, min(_CHUNK, end - at), at)
        if not chunk:
            break
        digest.update(chunk)
        at += len(chunk)
    fields = {"bytes": at - start, "sha256": digest.hexdigest()}
    if end - start > MAX_PARSED_LINE:
        claimed = _long_record_hash(fd, start, end)
        return fields, None if claimed is None else {"hash": claimed}
    return fields, parse_record(os.pread(fd, end - start, start))


def _scan_buffer(
    buf: bytes | mmap.mmap, last_hash: str, start: int = 0, *, fd: int, origin: int
) -> Scan:
    """Activations and the last whole record of ``buf[start:]``, which ends with a newline (or
    is empty); ``buf`` holds the bytes of ``fd`` from ``origin``."""
    end = len(buf)
    view = memoryview(buf)
    activated: set[str] = set()
    restart = _last_dropped(buf, view, start, end)
    at = buf.find(_record.ACTIVATION_MARKER, start if restart is None else restart, end)
    while at != -1:
        line_start = buf.rfind(b"\n", start, at) + 1 or start
        line_end = buf.find(b"\n", at, end)
        line_end = end if line_end == -1 else line_end
        record = _parse_line(view, line_start, line_end)
        if record is not None and _fields.kind_of(record) == _record.POLICY_ACTIVATED:
            activated.add(_fields.policy_digest_of(record))
        at = buf.find(_record.ACTIVATION_MARKER, line_end, end)
    # line_end: the newline ending a whole line (start - 1: none in the region).
    line_end = buf.rfind(b"\n", start, end)
    line_end = start - 1 if line_end == -1 else line_end
    # Walk back to the last whole record; lines after it are torn writes.
    torn: list[dict[str, Any]] = []
    last_line = None
    while line_end >= start:
        line_start = buf.rfind(b"\n", start, line_end) + 1 or start
        if line_end - line_start > MAX_PARSED_LINE:
            claimed = _long_record_hash(fd, origin + line_start, origin + line_end)
        else:
            record = _parse_line(view, line_start, line_end)
            claimed = None if record is None else _fields.hash_of(record)
        if claimed is not None:
            last_hash = claimed
            last_line = (origin + line_start, origin + line_end)
            break
        line = view[line_start:line_end]
        torn.insert(0, {"bytes": len(line), "sha256": hashlib.sha256(line).hexdigest()})
        line_end = line_start - 1
    view.release()
    return Scan(last_hash, activated, torn, None, None, last_line, restart is not None)


def _last_dropped(buf: bytes | mmap.mmap, view: memoryview, start: int, end: int) -> int | None:
    """Where the line after the last ``records_dropped`` record of ``buf[start:end]`` starts,
    or None when there is none."""
    at = buf.rfind(_record.DROPPED_MARKER, start, end)
    while at != -1:
        line_start = buf.rfind(b"\n", start, at) + 1 or start
        line_end = buf.find(b"\n", at, end)
        line_end = end if line_end == -1 else line_end
        record = _parse_line(view, line_start, line_end)
        if record is not None and _fields.kind_of(record) == _record.RECORDS_DROPPED:
            return line_end
        at = buf.rfind(_record.DROPPED_MARKER, start, line_start)
    return None


def _parse_line(view: memoryview, line_start: int, line_end: int) -> dict[str, Any] | None:
    if line_end - line_start > MAX_PARSED_LINE:
        return None
    return parse_record(bytes(view[line_start:line_end]))
