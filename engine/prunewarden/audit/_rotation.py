"""How the files of a rotated log are named, found and put back in order.

A log ``NAME`` that rotates leaves archives ``NAME.000001``, ``NAME.000002`` ... beside it, and
its chain runs through them oldest first, then through ``NAME``. The writer choosing the next
archive's number and the readers (``verify``, ``audit query`` ...) following the chain across
files rely on the same naming, so it is spelled here once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path

from prunewarden.audit._locking import lock_exclusive

_ROTATED = re.compile(r"(.*)\.(\d{6,})")


def rotated_files(path: str | os.PathLike[str]) -> list[Path]:
    """The archived files of a log (``NAME.000001`` ...), oldest first, then the log itself."""
    path = Path(path)
    pattern = re.compile(re.escape(path.name) + r"\.(\d{6,})")
    archived = []
    with contextlib.suppress(OSError):
        for entry in path.parent.iterdir():
            found = pattern.fullmatch(entry.name)
            if found:
                archived.append((int(found.group(1)), entry))
    return [entry for _, entry in sorted(archived)] + ([path] if path.exists() else [])


def next_sequence(path: Path) -> int:
    """The number the next archive of the log at ``path`` takes."""
    names = rotated_files(path)
    numbers = [int(p.name.rsplit(".", 1)[1]) for p in names if p != path]
    return max(numbers, default=0) + 1


def rotation_base(path: str | os.PathLike[str]) -> str:
    """The log a file belongs to: ``NAME`` for ``NAME.000003`` and for ``NAME`` itself."""
    found = _ROTATED.fullmatch(os.fspath(path))
    return found.group(1) if found else os.fspath(path)


def order_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files in rotation order: ``NAME.000001``, ``NAME.000002`` ... before ``NAME``; files of
    different logs keep the order given."""
    ordered = [Path(p) for p in paths]

    def sequence(path: Path) -> float:
        found = _ROTATED.fullmatch(str(path))
        return int(found.group(2)) if found else float("inf")

    first_seen: dict[str, int] = {}
    for index, path in enumerate(ordered):
        first_seen.setdefault(rotation_base(path), index)
    return sorted(ordered, key=lambda p: (first_seen[rotation_base(p)], sequence(p)))


def replace_with_new_file(path: Path, archived: Path, first_line: bytes) -> int:
    """Archive the file at ``path`` as ``archived`` and put a new file holding ``first_line``
    in its place; return the new file's descriptor, locked. Raises :class:`OSError` with
    everything as it was."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o644)
    linked = False
    try:
        lock_exclusive(fd)
        # The first line is written before the file takes the name: a disk too full for it
        # leaves the current file as it was, not a new one starting with a torn header.
        write_all(fd, first_line)
        # Link, then rename over: NAME always exists, so no writer creates a stray file.
        os.link(path, archived)
        linked = True
        temporary.replace(path)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            temporary.unlink()
        if linked:
            with contextlib.suppress(OSError):
                archived.unlink()
        raise
    return fd


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``; raises :class:`OSError` when the OS takes only part of it (what
    it took stays in the file, as a torn tail)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def sync_file(fd: int) -> None:
    """Flush a file's data to the disk (nothing to do for a character device or a pipe)."""
    try:
        getattr(os, "fdatasync", os.fsync)(fd)
    except OSError as exc:
        # A character device or pipe (/dev/null, a FIFO to a shipper) has nothing to sync.
        if exc.errno != errno.EINVAL:
            raise


def sync_dir(directory: Path) -> None:
    """Flush a directory's entries (a rename, a new link) to the disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
