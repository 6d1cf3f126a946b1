"""ChainReader following a log that rotates between its own steps.

The interleavings are driven by hand, with no thread and no sleep: the log rotates exactly where
a loaded machine can rotate it, inside the listing of the files (after the archives are read and
before the live name is) or between the listing and the opening of a file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from _support.shipping import decide, records_in
from prunewarden import AuditLog, Engine
from prunewarden.audit import rotated_files
from prunewarden.shipping import _reading
from prunewarden.shipping._reading import ChainReader, Shipped, identity_of, start_of

T = TypeVar("T")

MAX_BYTES = 4_000  # a few decisions a file


def rotate(engine: Engine, log: Path) -> None:
    """Write decisions until the log has rotated once more."""
    files = len(rotated_files(log))
    for i in range(100):
        decide(engine, 1, f"rotate-{files}-{i}")
        if len(rotated_files(log)) > files:
            return
    raise AssertionError("the log did not rotate")


def then_rotate(engine: Engine, log: Path, step: Callable[[], T]) -> Callable[[], T]:
    """``step``, after which the log rotates (the first time only)."""
    rotated: list[bool] = []

    def step_then_rotate() -> T:
        result = step()
        if not rotated:
            rotated.append(True)
            rotate(engine, log)
        return result

    return step_then_rotate


def read_all(reader: ChainReader) -> list[Shipped]:
    records, more = reader.read(10_000, 2**24)
    assert not more
    return records


def hashes_in(log: Path) -> list[str]:
    return [record["hash"] for record in records_in(rotated_files(log))]


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, Engine]:
    """A log of one file and the engine writing it."""
    log = tmp_path / "audit.jsonl"
    engine = Engine.default(audit=AuditLog(log, max_bytes=MAX_BYTES))
    decide(engine, 1, "first")
    assert rotated_files(log) == [log]
    return log, engine


class TestRotationWhileListing:
    def test_the_live_file_archived_while_listing_is_still_found(
        self, logged: tuple[Path, Engine], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A position in the live file survives its archiving between the two name reads."""
        log, engine = logged
        reader = ChainReader(log, start_of(log))
        first = read_all(reader)
        listing = then_rotate(engine, log, lambda: rotated_files(log))
        monkeypatch.setattr(_reading, "rotated_files", lambda _log: listing())
        rest = read_all(reader)
        assert [record.hash for record in first + rest] == hashes_in(log)

    def test_the_file_after_an_archive_is_not_passed_over(
        self, logged: tuple[Path, Engine], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An archive finished while the live file after it is archived goes on into that
        file, not the new live one."""
        log, engine = logged
        reader = ChainReader(log, start_of(log))
        first = read_all(reader)
        rotate(engine, log)  # the reader's file is an archive now, the live one after it
        listing = then_rotate(engine, log, lambda: rotated_files(log))
        monkeypatch.setattr(_reading, "rotated_files", lambda _log: listing())
        rest = read_all(reader)
        assert len(rotated_files(log)) == 3
        assert [record.hash for record in first + rest] == hashes_in(log)


class TestRotationBeforeOpening:
    def test_the_live_file_archived_after_listing_is_read_as_the_archive(
        self, logged: tuple[Path, Engine], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A live file archived after the listing is read from the position in it, not the
        new live file at that offset."""
        log, engine = logged
        reader = ChainReader(log, start_of(log))
        first = read_all(reader)
        live = identity_of(log)
        monkeypatch.setattr(reader, "_files", then_rotate(engine, log, reader._files))
        rest = read_all(reader)
        assert identity_of(log) != live
        assert [record.hash for record in first + rest] == hashes_in(log)
