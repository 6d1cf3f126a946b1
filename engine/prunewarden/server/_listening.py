"""Where a server listens: the socket bound before uvicorn starts, and uvicorn as the project
runs it (``serve`` and ``audit collect`` alike).

The socket is bound here, not by uvicorn, for two reasons: a unix socket gets the permissions
asked for from its first instant (uvicorn makes its own world-writable), and a TCP port 0 is
known before the first request, so the caller can say where the server listens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from prunewarden.server._config import Listen, ServerConfigError
from prunewarden.server._connections import ConnectionLimits, guarded_protocol

__all__ = ["GRACEFUL_SECONDS", "StoppingServer", "bind", "bound_url", "uvicorn_config"]

GRACEFUL_SECONDS = 10  # how long requests in flight may take to finish once asked to stop


def bind(listen: Listen, socket_mode: int) -> socket.socket:
    """A listening socket for ``listen``; a unix socket with ``socket_mode`` permissions."""
    if listen.unix_path is None:
        family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
        # without it a response written in two parts waits ~40 ms for a delayed ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((listen.host, listen.port))
        except OSError as exc:
            sock.close()
            raise ServerConfigError(f"cannot listen on {listen.url()}: {exc.strerror}") from None
    else:
        path = Path(listen.unix_path)
        if not path.parent.is_dir():
            msg = f"cannot listen on {listen.url()}: the directory {path.parent} does not exist"
            raise ServerConfigError(msg)
        _remove_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Never world-accessible, not even between bind and chmod.
        previous = os.umask(0o177)
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise ServerConfigError(f"cannot listen on {listen.url()}: {exc.strerror}") from None
        finally:
            os.umask(previous)
        path.chmod(socket_mode)
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def bound_url(listen: Listen, sock: socket.socket) -> str:
    """Where ``sock`` listens, as a client names it (the real port when 0 was asked)."""
    if listen.unix_path is not None:
        return listen.url()
    return listen.url(port=sock.getsockname()[1])


def uvicorn_config(app: ASGIApp, limits: ConnectionLimits, lifespan: str = "on") -> uvicorn.Config:
    """uvicorn as the project runs it: the connection limits of ``limits`` kept by the protocol,
    silent (no log, no access log, no server header), a graceful stop of GRACEFUL_SECONDS."""
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan=lifespan,  # type: ignore[arg-type]
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        # uvicorn hands the number to loop.call_later, which takes any real number of seconds.
        timeout_keep_alive=limits.keep_alive_seconds,  # type: ignore[arg-type]
    )


class StoppingServer(uvicorn.Server):
    """uvicorn, asked to stop by SIGTERM or SIGINT, returns instead of re-raising the signal
    once it has stopped: the caller still has its socket file to remove and its exit code to
    give (0: stopped as asked)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        stopping = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stopping}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def run_announced(self, sockets: list[socket.socket], announce: Callable[[], None]) -> None:
        """Serve ``sockets`` until SIGTERM or SIGINT (from the main thread), calling
        ``announce`` (say where it listens) once either signal already stops the server
        cleanly: a caller that signals as soon as it reads the line never kills it."""
        with self.capture_signals():
            announce()
            self.run(sockets=sockets)


def _remove_stale_socket(path: Path) -> None:
    """A socket file left by a server that died is removed; a live one is in use."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ServerConfigError(f"cannot listen on unix:{path}: the file exists, not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()
        return
    finally:
        probe.close()
    raise ServerConfigError(f"cannot listen on unix:{path}: another server is listening there")
