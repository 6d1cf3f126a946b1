"""A bundle's download under a total deadline, and stoppable at once.

A read timeout alone bounds the wait between two bytes, not the download: a bundle server that
sends a byte every few seconds holds a fetch, and the poller with it, for ever. Each download
here runs under a :class:`Deadline`: when it passes (or :meth:`Deadline.expire` is called, as a
server stopping does), the download's socket is shut down, whatever phase the download is in
(headers, body, a TLS handshake), and the fetch fails saying so.

The standard library's ``urllib`` still does the HTTP: redirects and proxy settings hold. Only
its connection classes are wrapped, to hand each socket to the deadline once connected.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.request
from typing import Any


class Deadline:
    """``seconds`` from now (a timer shuts down every socket handed to :meth:`watch`); or
    sooner, at :meth:`expire`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(0.0, self._ends - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down when the deadline passes (at once if it has)."""
        with self._lock:
            self._sockets.append(sock)
            if not self.expired:
                return
        _shut(sock)

    def expire(self) -> None:
        """End the download now: every socket watched is shut down."""
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def close(self) -> None:
        """The download is over: the timer is not needed any more."""
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def opener(deadline: Deadline) -> urllib.request.OpenerDirector:
    """An opener whose HTTP and HTTPS connections are watched by ``deadline``."""

    def connected(*args: Any, **options: Any) -> socket.socket:
        # The TCP socket, watched before a TLS handshake or a request byte goes over it.
        sock = socket.create_connection(*args, **options)
        deadline.watch(sock)
        return sock

    class Watched(http.client.HTTPConnection):
        def connect(self) -> None:
            self.timeout = min(_timeout(self.timeout), max(deadline.remaining(), 0.001))
            self._create_connection = connected
            super().connect()

    class WatchedTls(http.client.HTTPSConnection):
        def connect(self) -> None:
            self.timeout = min(_timeout(self.timeout), max(deadline.remaining(), 0.001))
            self._create_connection = connected
            super().connect()

    class Http(urllib.request.HTTPHandler):
        def do_open(
            self, http_class: Any, req: urllib.request.Request, **http_conn_args: Any
        ) -> http.client.HTTPResponse:
            del http_class  # the watched one instead
            return super().do_open(Watched, req, **http_conn_args)

    class Https(urllib.request.HTTPSHandler):
        def do_open(
            self, http_class: Any, req: urllib.request.Request, **http_conn_args: Any
        ) -> http.client.HTTPResponse:
            del http_class  # the watched one instead
            return super().do_open(WatchedTls, req, **http_conn_args)

    return urllib.request.build_opener(Http(), Https())


def _timeout(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("inf")
