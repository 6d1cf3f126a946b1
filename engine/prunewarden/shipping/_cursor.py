"""The shipping cursor: how far a destination has acknowledged the local chain, kept in a file
next to the log (``NAME.ship-<digest>``, one per destination and replica), so that a shipper
killed at any moment starts again from the last acknowledged record and ships again what was
not acknowledged (the receiver drops what it already holds).

The file is replaced whole (written aside, then renamed over), so it is always one cursor or
the other. It is not synced: a cursor lost to a power cut only means records shipped twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from prunewarden.shipping._reading import Position

CURSOR_VERSION = 1


def cursor_path(log: Path, destination: str, replica: str) -> Path:
    """Where the cursor of ``destination`` and ``replica`` for the log ``log`` is kept."""
    digest = hashlib.sha256(f"{destination}\n{replica}".encode()).hexdigest()[:16]
    return log.with_name(f"{log.name}.ship-{digest}")


def load_cursor(path: Path) -> Position | None:
    """The position kept in ``path``; None when there is none, or it cannot be read (the
    shipper then starts at the beginning of the current file)."""
    try:
        document = json.loads(path.read_bytes())
        identity = document["file"]
        return Position(
            (int(identity[0]), int(identity[1])),
            int(document["offset"]),
            str(document["last_hash"]),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def save_cursor(path: Path, position: Position, destination: str, replica: str) -> None:
    """Keep ``position`` in ``path``; raises :class:`OSError`."""
    document = {
        "cursor_version": CURSOR_VERSION,
        "destination": destination,
        "replica": replica,
        "file": list(position.identity),
        "offset": position.offset,
        "last_hash": position.last_hash,
    }
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(document, sort_keys=True) + "\n", encoding="utf-8")
        temporary.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
