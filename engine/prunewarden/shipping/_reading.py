"""Reading a local chain file from a position, across its rotations: what a shipper sends.

A position names a file by ``(st_dev, st_ino)``, not by name: rotation hard-links ``NAME`` to
``NAME.000001`` and puts a new file in its place, so the file a shipper was reading keeps its
identity under its new name, and the reader finishes it before it goes on to the next.

Records are read opaquely: only the chain fields (``hash``, ``prev_hash``) and, when present,
``kind`` and ``ts`` are looked at, so a record of any version ships as the bytes written. Lines
that are not records (the remains of an interrupted write) are passed over; the
``write_recovered`` record after them is a record like any other, chained to the last whole one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from prunewarden.audit import rotated_files
from prunewarden.audit._chain import GENESIS, parse_record, unseal


@dataclass(frozen=True, slots=True)
class Position:
    """Just after the record hashed ``last_hash`` (GENESIS: before any), at ``offset`` in the
    file identified by ``identity``."""

    identity: tuple[int, int]
    offset: int
    last_hash: str = GENESIS


@dataclass(frozen=True, slots=True)
class Shipped:
    """One record as it is shipped: its line (newline included) and its chain fields."""

    data: bytes
    hash: str
    prev_hash: str
    kind: str
    ts: str | None
    end: Position

    @property
    def size(self) -> int:
        return len(self.data)


class PositionLost(Exception):  # noqa: N818 - a condition the shipper handles, not a bug
    """The file a position names is gone (removed, or truncated below the position)."""


@dataclass(slots=True)
class Skipped:
    """Records passed over without shipping: how many, the first's hash and the last's."""

    count: int = 0
    first: str | None = None
    last: str | None = None

    def add(self, record: Shipped) -> None:
        self.count += 1
        self.first = self.first or record.hash
        self.last = record.hash


def identity_of(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino)


def start_of(path: Path) -> Position | None:
    """The beginning of the log file ``path`` (None while it does not exist)."""
    identity = identity_of(path)
    return None if identity is None else Position(identity, 0)


class ChainReader:
    """Reads whole records after a :class:`Position` of the log ``path`` and its rotations."""

    def __init__(self, path: Path, position: Position | None) -> None:
        self.path = path
        self.position = position

    def read(
        self, max_records: int, max_bytes: int, *, at_least_one: bool = False
    ) -> tuple[list[Shipped], bool]:
        """Up to ``max_records`` records and ``max_bytes`` bytes (``at_least_one``: a first
        record larger than ``max_bytes`` too), and whether more are there already. Moves the
        position past what it returns.

        Raises :class:`PositionLost`.
        """
        out: list[Shipped] = []
        size = 0
        for record in self._records():
            full = len(out) >= max_records or size + record.size > max_bytes
            if full and not (at_least_one and not out and max_records > 0):
                return out, True
            out.append(record)
            size += record.size
            self.position = record.end
        return out, False

    def skip(self, until: tuple[tuple[int, int], int] | None = None) -> Skipped:
        """Pass over every record there is (or up to offset ``until[1]`` of the file
        ``until[0]``), counting them. Moves the position past them.

        Raises :class:`PositionLost`.
        """
        skipped = Skipped()
        for record in self._records(until):
            skipped.add(record)
            self.position = record.end
        if until is not None and self.position is not None:
            identity, offset = until
            if self.position.identity != identity or self.position.offset < offset:
                # Only lines that are not records remain before the tail: step over them.
                self.position = Position(identity, offset, self.position.last_hash)
        return skipped

    def _records(self, until: tuple[tuple[int, int], int] | None = None) -> Iterator[Shipped]:
        """The records after the position, file after file; the position is not moved here."""
        if self.position is None:
            self.position = start_of(self.path)
            if self.position is None:
                return
        position = self.position
        while True:
            files = self._files()
            index = next(
                (i for i, (_, ident) in enumerate(files) if ident == position.identity), None
            )
            if index is None:
                msg = f"{self.path}: the file the shipping position is in is gone"
                raise PositionLost(msg)
            path = files[index][0]
            handle = _open(path, position.identity)
            if handle is None:
                # The live file was archived since it was listed, and its name now holds the
                # new one: list again to find it under its archive's name.
                continue
            stop = until[1] if until is not None and until[0] == position.identity else None
            with handle:
                for record in _records_in(handle, position, stop):
                    position = record.end
                    yield record
            if until is not None and until[0] == position.identity:
                return
            if index == len(files) - 1:
                return  # the live file: more comes later
            # An archived file is complete: go on at the start of the next one.
            position = Position(files[index + 1][1], 0, position.last_hash)
            self.position = Position(position.identity, 0, position.last_hash)

    def _files(self) -> list[tuple[Path, tuple[int, int]]]:
        """The log's files and their identities, oldest first, as they stood at one moment."""
        while True:
            live = identity_of(self.path)
            files = []
            for path in rotated_files(self.path):
                identity = identity_of(path)
                if identity is not None:
                    files.append((path, identity))
            # A rotation that ended while the names were read leaves a listing without the
            # file just archived (the archives read before its link, the live name after its
            # rename): the live name holding the same file before and after rules that out.
            if identity_of(self.path) == live:
                break
        # Mid-rotation the live file is linked as its archive before the new file takes its
        # name: both names then hold one file, which is still the live one.
        last = {identity: index for index, (_, identity) in enumerate(files)}
        return [entry for index, entry in enumerate(files) if last[entry[1]] == index]


def _open(path: Path, identity: tuple[int, int]) -> BinaryIO | None:
    """``path`` opened for reading, if it still is the file ``identity`` (None: the name now
    holds another file). Raises :class:`PositionLost` when there is no file by that name."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        msg = f"{path}: the file the shipping position is in is gone"
        raise PositionLost(msg) from None
    stat = os.fstat(handle.fileno())
    if (stat.st_dev, stat.st_ino) != identity:
        handle.close()
        return None
    return handle


def _records_in(handle: BinaryIO, position: Position, stop: int | None) -> Iterator[Shipped]:
    """The whole records of the open file ``handle`` after ``position`` (up to byte ``stop``,
    if given)."""
    if os.fstat(handle.fileno()).st_size < position.offset:
        msg = f"{handle.name}: the file was truncated below the shipping position"
        raise PositionLost(msg)
    handle.seek(position.offset)
    offset, last = position.offset, position.last_hash
    for line in handle:
        if not line.endswith(b"\n") or (stop is not None and offset + len(line) > stop):
            return  # a record still being written, or past where the caller stops
        offset += len(line)
        record = _record_of(line, Position(position.identity, offset, last))
        if record is None:
            continue  # not a record: the remains of an interrupted write
        last = record.hash
        yield record


def _record_of(line: bytes, end: Position) -> Shipped | None:
    split = unseal(line[:-1])
    if split is None:
        return None
    try:
        # orjson: the reader parses every record it ships, beside the decisions' threads.
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        record = parse_record(line[:-1])  # what orjson refuses (a lone surrogate) json reads
    if not isinstance(record, dict) or record.get("hash") != split[1]:
        return None
    prev, kind, ts = record.get("prev_hash"), record.get("kind"), record.get("ts")
    return Shipped(
        line,
        split[1],
        prev if isinstance(prev, str) else "",
        kind if isinstance(kind, str) else "",
        ts if isinstance(ts, str) else None,
        Position(end.identity, end.offset, split[1]),
    )
