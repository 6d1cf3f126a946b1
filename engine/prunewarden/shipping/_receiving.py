"""The receiving side's chain: one file per replica, taking a batch only where it continues.

A batch is checked whole before a byte of it is written, line by line as it arrives (the first
bad line refuses it, before the rest is read): each line must be a sealed record whose body
hashes to what it claims (a keyed record is checked when the collector has the key; with a key,
or after a keyed record, an unkeyed one is a forgery, as :class:`~prunewarden.AuditLog` refuses
to append one), and each record new to this replica must follow the last one here
(``prev_hash``), or be a
``records_dropped`` record naming the range from the last one here to its own ``prev_hash`` (a
shipper's buffer overflowed: the chain goes on across the range, blind there). A record already
here (its hash is its id) is a duplicate, shipped again after a restart, and is dropped.
Anything else is refused: a gap, a record out of order, a forgery.

A ``log_rotated`` record rotates the replica's file as the shipping log did, so that the files
verify as they would there (``audit verify DIR/REPLICA.jsonl*``). Bytes after the last newline
of the replica's file were never acknowledged (a collector killed while writing): they are cut
away when the file is first read and before each append, so the batch sent again lands on whole
records.
"""

from __future__ import annotations

import hmac
import os
import re
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from prunewarden.audit import rotated_files
from prunewarden.audit._chain import GENESIS, is_keyed, parse_record, record_hash, unseal
from prunewarden.audit._fields import dropped_of
from prunewarden.audit._record import LOG_ROTATED, RECORDS_DROPPED
from prunewarden.audit._rotation import next_sequence, replace_with_new_file, sync_dir, write_all
from prunewarden.limits import SHIP_DEDUP_RECORDS

REPLICA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class BatchRefused(Exception):  # noqa: N818 - a refusal answered as a problem document
    """A batch not taken: ``kind`` is the problem kind (``chain-gap``, ``forged-record``,
    ``invalid-batch``), ``detail`` says which record and why."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Accepted:
    """What a batch added: records written, duplicates dropped, records that records_dropped
    records say were not shipped, and the replica's chain head after it."""

    accepted: int
    duplicates: int
    dropped: int
    head: str


@dataclass(frozen=True, slots=True)
class _Line:
    data: bytes
    hash: str
    prev_hash: str
    kind: str
    gap: int  # records a records_dropped record skips over here (0: it links directly)


class ReplicaChain:
    """The collected files of one replica (``DIR/NAME.jsonl`` and its rotations)."""

    def __init__(self, directory: Path, name: str, key: bytes | None = None) -> None:
        self.name = name
        self.path = directory / f"{name}.jsonl"
        self.key = key
        self.lock = threading.Lock()
        self.head = GENESIS
        self.records = 0
        # Since this collector started: records a gap bridged, duplicates dropped, and the
        # batches and records taken.
        self.dropped = 0
        self.duplicates = 0
        self.batches = 0
        self.accepted = 0
        self._recent: deque[str] = deque(maxlen=SHIP_DEDUP_RECORDS)
        self._known: set[str] = set()
        if self.path.exists():
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            try:
                cut_unended_tail(fd)
            finally:
                os.close(fd)
        for path in rotated_files(self.path):
            self._learn(path)

    @property
    def keyed(self) -> bool:
        """Whether the chain here ends at a keyed record: what follows must be keyed too."""
        return is_keyed(self.head)

    def _learn(self, path: Path) -> None:
        with path.open("rb") as handle:
            for raw in handle:
                record = parse_record(raw.rstrip(b"\n"))
                if record is None:
                    continue
                digest = str(record["hash"])
                self._remember(digest)
                self.head = digest
                self.records += 1

    def _remember(self, digest: str) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._known.discard(self._recent[0])
        self._recent.append(digest)
        self._known.add(digest)

    def accept(self, body: bytes | Iterable[bytes]) -> Accepted:
        """Check the batch ``body`` whole, then append what is new, synced. ``body``: JSON
        lines, or the lines one at a time each with its newline (as they are decompressed:
        an iterator raising :class:`BatchRefused` stops the batch there).

        Raises :class:`BatchRefused` (nothing written) or :class:`OSError` (what was written
        before the failure is kept and known, so the batch sent again continues it).
        """
        with self.lock:
            lines, duplicates = self._check(body)
            self.duplicates += duplicates
            before = self.records
            self._write(lines)
            dropped = sum(line.gap for line in lines)
            self.dropped += dropped
            self.batches += 1
            self.accepted += self.records - before
            return Accepted(self.records - before, duplicates, dropped, self.head)

    def _check(self, body: bytes | Iterable[bytes]) -> tuple[list[_Line], int]:
        if isinstance(body, bytes):
            body = body.splitlines(keepends=True)
        head, new, duplicates = self.head, [], 0
        batch_hashes: set[str] = set()
        for number, ended in enumerate(body, start=1):
            if not ended.endswith(b"\n"):
                raise BatchRefused("invalid-batch", "the batch does not end with a newline")
            line = self._sealed(number, ended[:-1])
            if line.hash in self._known or line.hash in batch_hashes:
                duplicates += 1
                continue
            if not is_keyed(line.hash) and (self.key is not None or is_keyed(head)):
                detail = (
                    f"line {number}: record {line.hash} is not keyed, but the records of replica "
                    f"{self.name} must be (the collector has a key, or the chain here is keyed)"
                )
                raise BatchRefused("forged-record", detail)
            line = self._linked(number, line, head)
            new.append(line)
            batch_hashes.add(line.hash)
            head = line.hash
        return new, duplicates

    def _sealed(self, number: int, raw: bytes) -> _Line:
        split = unseal(raw)
        record = parse_record(raw) if split is not None else None
        if split is None or record is None or record.get("hash") != split[1]:
            raise BatchRefused("invalid-batch", f"line {number}: not a sealed audit record")
        body, claimed = split
        keyed = is_keyed(claimed)
        if (not keyed or self.key is not None) and not hmac.compare_digest(
            record_hash(body, self.key if keyed else None), claimed
        ):
            detail = f"line {number}: record {claimed}: its body does not hash to its hash"
            raise BatchRefused("forged-record", detail)
        prev, kind = record.get("prev_hash"), record.get("kind")
        return _Line(
            raw,
            claimed,
            prev if isinstance(prev, str) else "",
            kind if isinstance(kind, str) else "",
            0,
        )

    def _linked(self, number: int, line: _Line, head: str) -> _Line:
        if line.prev_hash == head:
            return line
        if line.kind == LOG_ROTATED and head == GENESIS:
            return line  # the first record here continues files this collector never had
        if line.kind == RECORDS_DROPPED:
            # Read from the record itself (not the shipper's word): the range must run
            # from the head here to the record's own prev_hash.
            record = parse_record(line.data) or {}
            dropped = dropped_of(record)
            count = dropped.get("count")
            if dropped.get("after") == head and dropped.get("last") == line.prev_hash:
                gap = count if isinstance(count, int) and count > 0 else 0
                return _Line(line.data, line.hash, line.prev_hash, line.kind, gap)
        detail = (
            f"line {number}: record {line.hash} follows {line.prev_hash}, but the chain of "
            f"replica {self.name} here ends at {head}: records are missing before it"
        )
        raise BatchRefused("chain-gap", detail)

    def _write(self, lines: list[_Line]) -> None:
        """Append ``lines``, rotating at each ``log_rotated`` record after the first line."""
        pending: list[_Line] = []
        for line in lines:
            if line.kind == LOG_ROTATED and (pending or self._size()):
                self._append(pending)
                pending = []
                self._rotate(line.data)
                self._known_now([line])
                continue
            pending.append(line)
        self._append(pending)

    def _known_now(self, lines: list[_Line]) -> None:
        """``lines`` are on disk: remember them, and move the head."""
        for line in lines:
            self._remember(line.hash)
            self.head = line.hash
        self.records += len(lines)

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _append(self, lines: list[_Line]) -> None:
        if not lines:
            return
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o644)
        try:
            size = cut_unended_tail(fd)
            try:
                for line in lines:  # one line at a time: no second copy of the batch
                    write_all(fd, line.data + b"\n")
                os.fsync(fd)  # acknowledged means kept: the shipper moves its cursor on our answer
            except OSError:
                # A disk that filled up mid-batch: take the part back, so that the batch sent
                # again lands on whole records.
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        self._known_now(lines)

    def _rotate(self, header: bytes) -> None:
        archived = self.path.with_name(f"{self.path.name}.{next_sequence(self.path):06d}")
        fd = replace_with_new_file(self.path, archived, header + b"\n")
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        sync_dir(self.path.parent)


_TAIL_CHUNK = 64 * 1024


def cut_unended_tail(fd: int) -> int:
    """Cut the bytes after the last newline of the file open (for reading and writing) as
    ``fd``: a write a killed collector never finished, which no sender was told it holds.
    Returns the size the file has then."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            end = start + found + 1
            break
        end = start
    if end != size:
        os.ftruncate(fd, end)
        os.fsync(fd)
    return end
