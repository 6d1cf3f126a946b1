"""Where traces come from: local files, or anywhere fsspec reads, gzip- or zstd-compressed.

A week of a fleet's traces sits in object storage, compressed, named by date; copying it to one
machine first is the step a platform team wants to skip. A trace name with a protocol
(``s3://bucket/traces/2026-11-*/*.jsonl.gz``, ``memory://...``) is a glob that fsspec expands and
opens; a plain name is a local file, opened as :mod:`prunewarden._files` opens every file a user
names (regular files only, never blocking). Either way a name ending in ``.gz`` or ``.zst`` is
decompressed as it is read.

Every name is held to what a local name is: a ``file://`` URL is opened as the local file (never
a FIFO or a device), and anything else fsspec opens must say it is a file before it is opened. The
reader above takes one line at a time and never more than its line limit, so a remote or
compressed trace is read in bounded memory just as a local one is; a compressed trace is also read
in bounded time, refused once it has decompressed to
:data:`~prunewarden.limits.MAX_DECOMPRESSED_BYTES` or to more than
:data:`~prunewarden.limits.MAX_DECOMPRESSION_RATIO` times the bytes it was read from (a 16 KB
bomb of one endless line was otherwise decompressed to its end, 135 s, only to be skipped). A glob
may name at most :data:`~prunewarden.limits.MAX_TRACE_FILES` traces. fsspec and zstandard are
optional (``pip install 'prunewarden[remote]'``): they are imported when a name needs them, with
an error saying what to install when they are missing.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import zlib
from collections.abc import Iterable
from typing import IO, Any

from prunewarden._files import open_regular, refuse_unless_regular
from prunewarden._optional import optional_module
from prunewarden.errors import InputError, Problem
from prunewarden.limits import (
    DECOMPRESSION_RATIO_GRACE_BYTES,
    MAX_DECOMPRESSED_BYTES,
    MAX_DECOMPRESSION_RATIO,
    MAX_TRACE_FILES,
)

_GLOB_CHARACTERS = frozenset("*?[")
# Compressed bytes given to the zstd decompressor at once: a few MiB of output at the most.
_ZSTD_FEED = 256
REMOTE_EXTRA = "pip install 'prunewarden[remote]'"


def is_remote(name: str) -> bool:
    """A name with a protocol (``s3://``, ``gs://``, ``memory://``, ``file://``)."""
    return "://" in name


def open_trace(name: str | os.PathLike[str]) -> IO[bytes]:
    """The trace ``name`` opened for reading in binary, decompressed when its name ends in
    ``.gz`` or ``.zst``. :class:`OSError` when it cannot be read (a local name that is not a
    regular file included)."""
    text = os.fspath(name)
    raw = _open_remote(text) if is_remote(text) else open_regular(text)
    try:
        return _decompressed(text, raw)
    except BaseException:
        raw.close()
        raise


def _open_remote(name: str) -> IO[bytes]:
    """A URL's file, if it is one: ``file://`` through :func:`open_regular` (checked on the
    opened descriptor, so a FIFO never blocks the open), any other store by what it says the
    name is before it is opened (a chained ``simplecache::file://`` reaches the local kind)."""
    fsspec = optional_module("fsspec", f"reading {name} needs fsspec: {REMOTE_EXTRA}")
    try:
        filesystem, path = fsspec.core.url_to_fs(name)
        if isinstance(filesystem, fsspec.implementations.local.LocalFileSystem):
            return open_regular(path)
        info = filesystem.info(path)
        if info.get("type") != "file":
            mode = info.get("mode")
            if isinstance(mode, int):
                refuse_unless_regular(mode)
            kind = "a directory" if info.get("type") == "directory" else "not a regular file"
            raise OSError(errno.EINVAL, f"{kind}, not a regular file: only regular files are read")
        raw: IO[bytes] = filesystem.open(path, "rb")
    except FileNotFoundError:
        raise OSError(errno.ENOENT, "no such file") from None
    except (ValueError, ImportError) as exc:  # an unknown protocol, or its driver missing
        raise OSError(errno.EINVAL, str(exc)) from None
    return raw


def _decompressed(name: str, raw: IO[bytes]) -> IO[bytes]:
    if name.endswith(".gz"):
        counted = _Counted(raw)
        return _Owning(_Bounded(gzip.GzipFile(fileobj=counted, mode="rb"), counted), raw)
    if name.endswith(".zst"):
        zstandard = optional_module("zstandard", f"reading {name} needs zstandard: {REMOTE_EXTRA}")
        counted = _Counted(raw)
        return _Owning(_Bounded(_ZstdFrames(zstandard, counted), counted), raw)
    return raw


class DecompressionLimitError(OSError):
    """A compressed trace decompressed past a limit; ``strerror`` names it."""


class _Counted(io.RawIOBase):
    """The compressed bytes under a decompressor, counted as they are read."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        chunk = self._source.read(-1 if size is None else size)
        self.count += len(chunk)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


class _Bounded(io.RawIOBase):
    """A decompressor's output, refused past :data:`MAX_DECOMPRESSED_BYTES`, or past
    :data:`MAX_DECOMPRESSION_RATIO` times the compressed bytes read once
    :data:`DECOMPRESSION_RATIO_GRACE_BYTES` are out. The limits are read from the module at each
    check, so a test can lower them."""

    def __init__(self, stream: Any, compressed: _Counted) -> None:
        self._stream = stream
        self._compressed = compressed
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size: int = self._stream.readinto(buffer)
        self.count += size
        if self.count > MAX_DECOMPRESSED_BYTES:
            message = (
                f"decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes "
                "(MAX_DECOMPRESSED_BYTES); refused"
            )
            raise DecompressionLimitError(errno.EFBIG, message)
        if (
            self.count > DECOMPRESSION_RATIO_GRACE_BYTES
            and self.count > MAX_DECOMPRESSION_RATIO * self._compressed.count
        ):
            message = (
                f"decompresses to more than {MAX_DECOMPRESSION_RATIO} times its compressed size "
                f"(MAX_DECOMPRESSION_RATIO: {self.count} bytes from {self._compressed.count}); "
                "refused"
            )
            raise DecompressionLimitError(errno.EFBIG, message)
        return size

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            super().close()


class _Owning(io.BufferedReader):
    """A buffered decompressing stream that closes the file under it too (``readline`` with a
    limit, as the trace reader needs, comes from the buffering)."""

    def __init__(self, stream: Any, source: IO[bytes]) -> None:
        super().__init__(stream)
        self._source = source

    def readline(self, size: int | None = -1, /) -> bytes:
        """A line, or :class:`OSError` (``EIO``) when the compressed data is corrupt or cut
        short, whatever the decompressor raised."""
        try:
            return super().readline(size)
        except DecompressionLimitError:
            raise
        except (OSError, EOFError, zlib.error) as exc:
            raise OSError(errno.EIO, f"cannot decompress: {exc}") from None

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._source.close()

    def fileno(self) -> int:
        """No descriptor whose size is the trace's: the decompressed length is unknown."""
        raise io.UnsupportedOperation("a decompressed stream")


class _ZstdFrames(io.RawIOBase):
    """Zstandard frames decompressed from ``source``, fed :data:`_ZSTD_FEED` bytes at a time so
    that one call never expands a dense frame far past the reader's line limit, and an
    :class:`OSError` when the data ends inside a frame (zstandard's own stream reader takes a
    cut-off trace for a short one)."""

    def __init__(self, zstandard: Any, source: io.RawIOBase) -> None:
        self._zstandard = zstandard
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._source = source
        self._pending = b""
        self._started = False  # some input was fed to the current frame

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            if self._frame.eof:
                rest = self._frame.unused_data
                self._frame = self._zstandard.ZstdDecompressor().decompressobj()
                self._started = False
                if rest:
                    self._feed(rest)
                    continue
            chunk = self._source.read(_ZSTD_FEED)
            if not chunk:
                if self._started and not self._frame.eof:
                    raise OSError(errno.EIO, "the compressed data ends inside a frame")
                return 0
            self._feed(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def _feed(self, chunk: bytes) -> None:
        self._started = True
        try:
            self._pending = self._frame.decompress(chunk)
        except self._zstandard.ZstdError as exc:
            raise OSError(errno.EIO, str(exc)) from None


def expand_traces(names: Iterable[str]) -> list[str]:
    """Each name as given, except a remote glob, which becomes the traces it matches, sorted
    (local globs are the shell's). :class:`InputError` when a glob matches nothing, more than
    :data:`~prunewarden.limits.MAX_TRACE_FILES`, or its store cannot be listed."""
    expanded: list[str] = []
    for name in names:
        if not (is_remote(name) and _GLOB_CHARACTERS & set(name)):
            expanded.append(name)
            continue
        try:
            fsspec = optional_module("fsspec", f"reading {name} needs fsspec: {REMOTE_EXTRA}")
            filesystem, pattern = fsspec.core.url_to_fs(name)
            found = sorted(filesystem.glob(pattern))
        except (OSError, ValueError, ImportError) as exc:
            raise _unreadable(name, f"cannot list: {exc}") from None
        if not found:
            raise _unreadable(name, "no trace matches this pattern")
        if len(expanded) + len(found) > MAX_TRACE_FILES:
            raise _unreadable(name, f"more than {MAX_TRACE_FILES} traces match")
        expanded += [filesystem.unstrip_protocol(path) for path in found]
    return expanded


def _unreadable(name: str, message: str) -> InputError:
    return InputError([Problem(name, 0, 0, "$", message)])
