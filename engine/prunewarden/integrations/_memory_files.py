"""The memory directory on disk: confined paths, bounded reads, atomic writes and the manifest.

The model names memories by paths under ``/memories`` (the memory tool's convention); each maps
to a regular file under one directory. Nothing here follows a symbolic link: a link inside the
directory could lead out of it or alias a pinned memory under another name, so a path through
one is refused and a directory holding one is not read at all. Hidden names (a leading dot) are
neither written nor read: they are where the atomic writes keep their temporary files.

Every read and every change reaches its file from a descriptor of the directory, one folder at a
time, each opened relative to the one before it with ``O_NOFOLLOW``: a folder swapped for a link
after an edit was judged (by another process, between the judgment and the write) fails the open,
so nothing is ever read or written outside the directory through it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
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
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS: Final = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
# What an open with O_NOFOLLOW gives for a link (ELOOP; EMLINK on FreeBSD), and O_DIRECTORY for
# a file where a folder was.
_NOT_A_FOLDER: Final = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})


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
        flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
        *folders, name = self._parts_of(place)
        try:
            with self._folder(memory_path, folders) as folder:
                descriptor = os.open(name, flags, dir_fd=folder)
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
        then renamed over it, so a crash leaves the old memory or the new one, never half. The
        folders on the way are made where missing, none followed if it is a link."""
        *folders, name = self._parts_of(place)
        with self._folder(_shown([*folders, name]), folders, create=True) as folder:
            temporary = f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
            descriptor = os.open(temporary, flags, _FILE_MODE, dir_fd=folder)
            try:
                with os.fdopen(descriptor, "wb") as stream:
                    stream.write(text.encode("utf-8"))
                    stream.flush()
                    os.fsync(stream.fileno())
                os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise
            _sync(folder)

    def remove(self, place: Path) -> None:
        """Remove a memory or a folder of memories, each entry by its folder's descriptor: a
        link found on the way is removed itself, never followed."""
        *folders, name = self._parts_of(place)
        with self._folder(_shown([*folders, name]), folders) as folder:
            _remove_entry(folder, name)
            _sync(folder)

    def move(self, old: Path, new: Path) -> None:
        """Rename a memory or a folder; refuses to replace what exists at ``new``."""
        *old_folders, old_name = self._parts_of(old)
        *new_folders, new_name = self._parts_of(new)
        shown = _shown([*new_folders, new_name])
        with (
            self._folder(shown, new_folders, create=True) as target,
            self._folder(_shown([*old_folders, old_name]), old_folders) as source,
        ):
            with contextlib.suppress(FileNotFoundError):
                os.stat(new_name, dir_fd=target, follow_symlinks=False)
                raise MemoryFileError(shown, "exists; rename does not replace")
            os.rename(old_name, new_name, src_dir_fd=source, dst_dir_fd=target)
            # A rename keeps the file's mtime; the memory arrives at its new path now, so a
            # tombstone written for an earlier memory there does not stand for it.
            _touch_entry(target, new_name)
            _sync(source)
            _sync(target)

    @contextlib.contextmanager
    def _folder(
        self, memory_path: str, folders: Sequence[str], *, create: bool = False
    ) -> Iterator[int]:
        """A descriptor of the folder ``folders`` names under the root, each opened relative to
        the one before with ``O_NOFOLLOW`` (and made first where missing, with ``create``). A
        link or a file on the way is a :class:`MemoryFileError` naming ``memory_path``."""
        try:
            descriptor = os.open(self.root, _FOLDER_FLAGS)
        except OSError as exc:
            _refuse_not_a_folder(exc, MEMORY_ROOT)
            raise
        try:
            for part in folders:
                try:
                    child = _open_folder(part, descriptor, create=create)
                except OSError as exc:
                    _refuse_not_a_folder(exc, memory_path)
                    raise
                os.close(descriptor)
                descriptor = child
            yield descriptor
        finally:
            os.close(descriptor)

    def _parts_of(self, place: Path) -> list[str]:
        """The names from the root to ``place`` (one of :meth:`locate`'s places)."""
        parts = list(place.relative_to(self.root).parts)
        if not parts:
            raise MemoryFileError(MEMORY_ROOT, "is the memory directory itself")
        return parts

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


def _shown(parts: Sequence[str]) -> str:
    return "/".join([MEMORY_ROOT, *parts])


def _open_folder(name: str, parent: int, *, create: bool) -> int:
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):  # made meanwhile: opened as any other
        os.mkdir(name, _DIRECTORY_MODE, dir_fd=parent)
    return os.open(name, _FOLDER_FLAGS, dir_fd=parent)


def _refuse_not_a_folder(error: OSError, memory_path: str) -> None:
    """Raise what a failed open of a folder on the way means for the memory path, when it
    means something: a link or a file where a folder was, or no folder at all."""
    if error.errno in _NOT_A_FOLDER:
        reason = "is reached through a symbolic link or a file where a folder was; refused"
        raise MemoryFileError(memory_path, reason) from error
    if isinstance(error, FileNotFoundError):
        raise MemoryFileError(memory_path, "does not exist") from error


def _remove_entry(folder: int, name: str) -> None:
    if stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
        child = os.open(name, _FOLDER_FLAGS, dir_fd=folder)
        try:
            for entry in sorted(os.listdir(child), reverse=True):  # noqa: PTH208 - by descriptor
                _remove_entry(child, entry)
        finally:
            os.close(child)
        os.rmdir(name, dir_fd=folder)
    else:
        os.unlink(name, dir_fd=folder)


def _touch_entry(folder: int, name: str) -> None:
    """Set the mtime of a file, or of every file in a folder, to now; links are not followed."""
    if stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
        child = os.open(name, _FOLDER_FLAGS, dir_fd=folder)
        try:
            for entry in os.listdir(child):  # noqa: PTH208 - by descriptor
                _touch_entry(child, entry)
        finally:
            os.close(child)
    else:
        os.utime(name, dir_fd=folder, follow_symlinks=False)


def _sync(folder: int) -> None:
    """Make a rename or removal in ``folder`` durable (where the platform allows it)."""
    with contextlib.suppress(OSError):
        os.fsync(folder)
