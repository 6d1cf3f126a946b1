"""What a writer of the audit file knows of it between appends: its descriptor and identity (to
notice a rotation by another process), its size, the chain's last hash and the policies the file
has activated, and how much is written but not yet synced.

Kept apart from :mod:`._log` so that the append protocol there reads against a small, named state.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from prunewarden.audit._chain import GENESIS


@dataclass
class Chain:
    last: str = GENESIS
    activated: set[str] = field(default_factory=set)

    def advance(self, last: str, activated: set[str]) -> None:
        self.last = last
        self.activated |= activated


@dataclass
class FileState:
    fd: int
    pid: int
    identity: tuple[int, int]
    size: int = 0
    chain: Chain = field(default_factory=Chain)
    unsynced: int = 0
    synced_at: float = field(default_factory=time.monotonic)
    sync_due: bool = False

    def note_written(
        self, count: int, fsync: str, batch_records: int, batch_seconds: float
    ) -> None:
        """Count ``count`` records written and not yet synced; mark a sync due per ``fsync``
        (``batch``: at most ``batch_records`` records or ``batch_seconds`` seconds unsynced)."""
        self.unsynced += count
        if count and (
            fsync == "always"
            or (
                fsync == "batch"
                and (
                    self.unsynced >= batch_records
                    or time.monotonic() - self.synced_at >= batch_seconds
                )
            )
        ):
            self.sync_due = True  # synced once the lock is let go (AuditLog._write_file)
            self.unsynced = 0
            self.synced_at = time.monotonic()


@dataclass(frozen=True, slots=True)
class Tail:
    """Where a log file ends, as a writer holding its lock sees it: the file (its path and
    ``(st_dev, st_ino)``), its size and the hash of its last record."""

    path: Path
    identity: tuple[int, int]
    size: int
    last_hash: str


def file_identity(stat: os.stat_result) -> tuple[int, int]:
    return (stat.st_dev, stat.st_ino)
