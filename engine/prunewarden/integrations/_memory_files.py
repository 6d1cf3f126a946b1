"""The memory directory on disk: confined paths, bounded reads, atomic writes and the manifest.

The model names memories by paths under ``/memories`` (the memory tool's convention); each maps
to a regular file under one directory. Nothing here follows a symbolic link: a link inside the
directory could lead out of it or alias a pinned memory under another name, so a path through
one is refused and a directory holding one is not read at all. Hidden names (a leading dot) are
neither written nor read: they are where the atomic writes keep their temporary files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from prunewarden._json import canonical_digest
from prunewarden.errors import PrunewardenError
from prunewarden.limits import MAX_MEMORY_FILE_BYTES, MAX_MEMORY_FILES, MAX_MEMORY_PATH_CHARS

MEMORY_ROOT: Final = "/memories"
DEFAULT_MAX_FILE_BYTES: Final = MAX_MEMORY_FILE_BYTES
DEFAULT_MAX_FILES: Final = MAX_MEMORY_FILES
_TEMP_PREFIX: Final = ".prunewarden-"
_DIRECTORY_MODE: Final = 0o700
_FILE_MODE: Final = 0o600


class MemoryFileError(PrunewardenError):
    """A memory path or file the tool will not act on: ``path`` and why (``reason``)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def file_digest(text: str) -> str:
    """SHA-256 (hex) of a memory's UTF-8 bytes: its entry in the manifest."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def manifest_of(files: Mapping[str, str]) -> dict[str, str]:
    """Memory path -> :func:`file_digest`, sorted by path."""
    return {path: file_digest(files[path]) for path in sorted(files)}


def manifest_digest(manifest: Mapping[str, str]) -> str:
    """``sha256:`` over the RFC 8785 form of a manifest: one value naming every memory's bytes."""
    return canonical_digest(dict(manifest))


@dataclass(frozen=True, slots=True)
class MemoryDirectory:
    """The directory holding ``/memories``; every limit is checked on every read."""

    root: Path
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_files: int = DEFAULT_MAX_FILES

    def locate(self, memory_path: str) -> tuple[str, Path]:
        """The normalized memory path and its place on disk. Refuses a path outside
        ``/memories``, ``.`` and ``..`` components, hidden names and any link on the way."""
        parts = _parts(memory_path)
        place = self.root
        for part in parts:
            place = place / part
            try:
                mode = os.lstat(place).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break  # the rest does not exist yet: nothing on the way can be a link
            if stat.S_ISLNK(mode):
                raise MemoryFileError(memory_path, "is reached through a symbolic link; refused")
        return "/".join([MEMORY_ROOT, *parts]), self.root.joinpath(*parts)

    def snapshot(self) -> dict[str, str]:
        """Every memory: path -> text, sorted by path. Refuses (fails closed) on a symbolic link,
        a file that is not regular, not UTF-8 or over the size limit, or too many files."""
        files: dict[str, str] = {}
        for memory_path, place in self._walk():
            if len(files) >= self.max_files:
                message = f"holds more than {self.max_files} files; the limit is max_files"
                raise MemoryFileError(MEMORY_ROOT, message)
            files[memory_path] = self.read(memory_path, place)
        return dict(sorted(files.items()))

    def read(self, memory_path: str, place: Path) -> str:
        """A memory's text, read without following a link and no further than the size limit."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            descriptor = os.open(place, flags)
        except FileNotFoundError as exc:
            raise MemoryFileError(memory_path, "does not exist") from exc
        except OSError as exc:
            raise MemoryFileError(memory_path, f"cannot be read ({exc.strerror})") from exc
        with os.fdopen(descriptor, "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise MemoryFileError(memory_path, "is not a regular file")
            data = stream.read(self.max_file_bytes + 1)
        self.check_size(memory_path, len(data))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryFileError(memory_path, "is not UTF-8 text") from exc

    def written_at(self, memory_path: str) -> int:
        """When a memory was last written or moved into place (its mtime, in nanoseconds)."""
        _, place = self.locate(memory_path)
        return os.lstat(place).st_mtime_ns

    def check_size(self, memory_path: str, size: int) -> None:
        if size > self.max_file_bytes:
            message = f"would hold over {self.max_file_bytes} bytes, the limit (max_file_bytes)"
            raise MemoryFileError(memory_path, message)

    def write(self, place: Path, text: str) -> None:
        """Write ``text`` to ``place`` atomically: a temporary file beside it, flushed to disk,
        then renamed over it, so a crash leaves the old memory or the new one, never half."""
        self._make_parents(place)
        descriptor, temporary = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=place.parent)
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(text.encode("utf-8"))
                stream.flush()
                os.fsync(stream.fileno())
            Path(temporary).chmod(_FILE_MODE)
            Path(temporary).replace(place)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _sync_directory(place.parent)

    def remove(self, place: Path) -> None:
        """Remove a memory or a folder of memories (a snapshot has refused any link in it)."""
        if stat.S_ISDIR(os.lstat(place).st_mode):
            for child in sorted(place.iterdir(), reverse=True):
                self.remove(child)
            place.rmdir()
        else:
            place.unlink()
        _sync_directory(place.parent)

    def move(self, old: Path, new: Path) -> None:
        """Rename a memory or a folder; refuses to replace what exists at ``new``."""
        self._make_parents(new)
        if os.path.lexists(new):
            raise MemoryFileError(new.name, "exists; rename does not replace")
        old.rename(new)
        # A rename keeps the file's mtime; the memory arrives at its new path now, so a
        # tombstone written for an earlier memory there does not stand for it.
        moved = [new] if not new.is_dir() else [p for p in new.rglob("*") if p.is_file()]
        for place in moved:
            os.utime(place, follow_symlinks=False)
        _sync_directory(old.parent)
        _sync_directory(new.parent)

    def _make_parents(self, place: Path) -> None:
        missing = []
        parent = place.parent
        while not parent.exists() and parent != self.root:
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            directory.mkdir(mode=_DIRECTORY_MODE)

    def _walk(self) -> Iterator[tuple[str, Path]]:
        pending = [(MEMORY_ROOT, self.root)]
        while pending:
            memory_path, place = pending.pop()
            with os.scandir(place) as entries:
                listed = sorted(entries, key=lambda entry: entry.name)
            for entry in listed:
                if entry.name.startswith("."):
                    continue
                child = f"{memory_path}/{entry.name}"
                if entry.is_symlink():
                    message = "is a symbolic link; the memory directory holds regular files only"
                    raise MemoryFileError(child, message)
                if entry.is_dir(follow_symlinks=False):
                    pending.append((child, Path(entry.path)))
                elif entry.is_file(follow_symlinks=False):
                    yield child, Path(entry.path)
                else:
                    raise MemoryFileError(child, "is not a regular file")


def _parts(memory_path: str) -> list[str]:
    if not isinstance(memory_path, str) or "\x00" in memory_path or "\\" in memory_path:
        raise MemoryFileError(str(memory_path), "is not a memory path")
    if len(memory_path) > MAX_MEMORY_PATH_CHARS:
        message = f"is over {MAX_MEMORY_PATH_CHARS} characters"
        raise MemoryFileError(memory_path[:60] + "...", message)
    if memory_path != MEMORY_ROOT and not memory_path.startswith(MEMORY_ROOT + "/"):
        raise MemoryFileError(memory_path, f"is outside {MEMORY_ROOT}; every path starts there")
    parts = memory_path[len(MEMORY_ROOT) :].rstrip("/").split("/")[1:]
    for part in parts:
        if part in {"", ".", ".."}:
            raise MemoryFileError(memory_path, "has an empty, '.' or '..' component; refused")
        if part.startswith("."):
            raise MemoryFileError(memory_path, "names a hidden file; memories are not hidden")
    return parts


def _sync_directory(directory: Path) -> None:
    """Make a rename or removal in ``directory`` durable (where the platform allows it)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
