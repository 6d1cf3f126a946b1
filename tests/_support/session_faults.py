"""Faults of a session store, made real: a filesystem that fills up, and a Redis connection that
drops as one chosen command is sent.

``small_filesystem`` mounts a tmpfs of a few hundred KiB (the tests run as root; where mounting
is not allowed the test is skipped, saying why). ``RedisProxy`` forwards a loopback port to a
real redis-server; once armed with a byte string, the connection carrying it is closed before
the command reaches Redis, and every later connection is closed at once, until ``restore``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

MOUNT_SECONDS = 30


@contextlib.contextmanager
def small_filesystem(path: Path, size: str = "512k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (skips the test where mount is refused)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        timeout=MOUNT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], timeout=MOUNT_SECONDS, check=False)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem is full; the file."""
    filler = directory / "filler"
    block = b"\0" * 4096
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(block)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as out:
        while True:  # the last partial block, if any
            out.write(b"\0")
    return filler


class RedisProxy:
    """A loopback TCP proxy in front of a redis-server at ``target`` (a redis:// URL)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._lock = threading.Lock()
        self._armed: bytes | None = None
        self._cut = False
        self._open: list[socket.socket] = []
        self._closed = False
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes) -> None:
        """Drop the connection that next sends ``marker`` (and refuse the later ones)."""
        with self._lock:
            self._armed = marker

    def restore(self) -> None:
        """Forward connections again."""
        with self._lock:
            self._armed, self._cut = None, False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._open = self._open, []
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refuse = self._cut or self._closed
            if refuse:
                client.close()
                continue
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, outbound: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if outbound and self._trips(data):
                    break
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _trips(self, data: bytes) -> bool:
        with self._lock:
            if self._cut:
                return True
            if self._armed is not None and self._armed in data:
                self._cut, self._armed = True, None
                self.cuts += 1
                return True
        return False


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize
