"""Reading the files a user names: regular files only, never more than a limit.

A policy, a base it extends, a lock file, a trace and an input document are all named by whoever
runs prunewarden, and a name can point at something that is not a file: a FIFO blocks ``open``
until a writer comes (forever, in CI), ``/dev/zero`` never ends, ``/dev/stdin`` waits on a
terminal. So every such file is opened without blocking, checked with ``fstat`` to be a regular
file before a byte is read, and read no further than the caller's limit. Standard input is the
one stream taken as it is (it is a pipe by nature), and it too is read only up to the limit.

Failures are :class:`OSError` whose ``strerror`` says why in words a user can act on; callers
turn them into located problems as they do any unreadable file.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import IO

_CHUNK = 1024 * 1024

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def open_regular(path: str | os.PathLike[str]) -> io.BufferedReader:
    """``path`` opened for reading in binary, if it is a regular file; :class:`OSError`
    otherwise. Opening does not block, whatever the file is."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags)
    try:
        refuse_unless_regular(os.fstat(descriptor).st_mode)
        os.set_blocking(descriptor, True)  # a regular file never blocks anyway
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def refuse_unless_regular(mode: int) -> None:
    """:class:`OSError` (``EINVAL``) naming the kind of file, unless ``mode`` is a regular
    file's."""
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        msg = f"{kind}, not a regular file: only regular files are read"
        raise OSError(errno.EINVAL, msg)


def read_bounded(stream: IO[bytes], limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream``; :class:`OSError` (``EFBIG``) when there are more
    (one more byte is read to tell)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        msg = f"larger than the limit of {limit} bytes"
        raise OSError(errno.EFBIG, msg)
    return b"".join(chunks)


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path``, refused past ``limit`` bytes."""
    with open_regular(path) as stream:
        return read_bounded(stream, limit)
