"""POSIX file locks for the audit log's file sink, kept apart so that nothing else needs them.

``fcntl`` exists only on POSIX systems. Importing it where every ``import prunewarden`` goes
made the package unusable on Windows, stream sink included; here its absence is noted, and only
a file sink refuses, with an error that says why and what works instead.
"""

from __future__ import annotations

import errno

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
