"""POSIX file locks for the audit log's file sink, kept apart so that nothing else needs them;
and the sink's thread lock, which a forked child gets afresh.

``fcntl`` exists only on POSIX systems. Importing it where every ``import prunewarden`` goes
made the package unusable on Windows, stream sink included; here its absence is noted, and only
a file sink refuses, with an error that says why and what works instead.
"""

from __future__ import annotations

import errno
import os
import threading
import weakref
from types import TracebackType

try:
    import fcntl
except ImportError:  # not POSIX (Windows): only the file sink needs it
    fcntl = None  # type: ignore[assignment]

UNAVAILABLE = (
    "the audit log file sink needs POSIX file locks (fcntl), which this platform lacks; "
    "log to a stream instead (AuditLog(stream), or --audit-log - on the command line)"
)


def require_file_locks() -> None:
    """Raise :class:`OSError` (ENOLCK, saying why) where there are no POSIX file locks: before
    a file sink opens, or creates, its file."""
    if fcntl is None:
        raise OSError(errno.ENOLCK, UNAVAILABLE)


def lock_exclusive(fd: int) -> None:
    """Block until this process holds the exclusive lock on ``fd``."""
    require_file_locks()
    fcntl.flock(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class ForkSafeLock:
    """A thread lock replaced by a fresh one in a forked child: one held by another thread of
    the parent at fork time would never be released in the child."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        _FORK_SAFE.add(self)

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._lock.release()


# Every such lock, renewed in a forked child.
_FORK_SAFE: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for lock in list(_FORK_SAFE):
        lock._lock = threading.Lock()  # noqa: SLF001 - the module's own class


os.register_at_fork(after_in_child=_after_fork_in_child)
