"""A FIFO or character device as an audit sink: a stream written without ever blocking.

A pipe has no size to read back, no lock that orders writers and nothing to rotate, so the file
sink's protocol does not apply (it read the size 0 of every ``fstat`` as a truncation and started
the chain again at each record); and a pipe nobody drains would block a writer forever, holding
the sink's lock. Here the chain is kept in memory, as for any stream, and every write is
non-blocking with a deadline: a pipe without a reader, or one that stays full for
``STREAM_WRITE_SECONDS``, fails the write (the engine refuses with ``audit_unavailable``).

A record cut off by the deadline after part of it went out is kept: the next write sends the rest
first, so a reader never sees a torn line, and the chain moves on only over whole records.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prunewarden.errors import AuditError
from prunewarden.limits import STREAM_WRITE_SECONDS

# Called with the chain's new last hash and the policies activated, once a record is all out.
Written = Callable[[str, set[str]], None]


def is_stream_device(path: Path) -> bool:
    """Whether ``path`` names a FIFO or a character device (``/dev/null``, a terminal)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


@dataclass
class _Pending:
    data: memoryview
    whole: int
    last: str
    activated: set[str]


class PipeWriter:
    """The open end of a FIFO or device, and the record still going out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pending: _Pending | None = None

    def finish(self, written: Written, timeout: float | None = None) -> None:
        """Send the rest of a record cut off by an earlier deadline, if any."""
        if self._pending is not None:
            self._drain(_deadline(timeout), written)

    def send(
        self,
        data: bytes,
        last: str,
        activated: set[str],
        written: Written,
        timeout: float | None = None,
    ) -> None:
        """Write ``data`` within ``timeout`` seconds, then call ``written(last, activated)``.

        Raises :class:`AuditError` when there is no reader or the pipe stays full, and
        ``OSError`` when the reader went away (the next write opens the pipe again).
        """
        self._pending = _Pending(memoryview(data), len(data), last, activated)
        self._drain(_deadline(timeout), written)

    def open(self) -> None:
        """Open the pipe now: :class:`AuditError` if nobody reads it, ``OSError`` otherwise."""
        self._open()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _open(self) -> int:
        if self._fd is None:
            flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
            try:
                self._fd = os.open(self.path, flags)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                msg = f"cannot write audit log {self.path}: the FIFO has no reader"
                raise AuditError(msg) from None
        return self._fd

    def _drain(self, deadline: float, written: Written) -> None:
        pending = self._pending
        assert pending is not None  # noqa: S101 - only called with a record going out
        try:
            fd = self._open()
            while pending.data:
                try:
                    pending.data = pending.data[os.write(fd, pending.data) :]
                except BlockingIOError:
                    if not _writable(fd, deadline - time.monotonic()):
                        msg = (
                            f"cannot write audit log {self.path}: the pipe stayed full for "
                            f"{STREAM_WRITE_SECONDS:g} s (is its reader draining it?)"
                        )
                        raise AuditError(msg) from None
        except AuditError:
            if len(pending.data) == pending.whole:
                self._pending = None  # nothing of it went out: the record is simply refused
            raise
        except OSError:
            self._pending = None  # the reader is gone: a new one starts on a whole line
            self.close()
            raise
        self._pending = None
        written(pending.last, pending.activated)


def _deadline(timeout: float | None) -> float:
    return time.monotonic() + (STREAM_WRITE_SECONDS if timeout is None else timeout)


def _writable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` takes more bytes within ``seconds`` (poll: any descriptor number)."""
    if seconds <= 0:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(seconds * 1000))
