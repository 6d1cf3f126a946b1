"""Running a collector: its app on uvicorn with ``serve``'s connection limits, on a socket
bound by :func:`._listening.bind`, in the foreground until SIGTERM or SIGINT (``audit collect``),
or in a thread of its own (a process that ships to itself, and the tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

import uvicorn
from prometheus_client import CollectorRegistry

from prunewarden.limits import BODY_SECONDS, HEADER_SECONDS, KEEP_ALIVE_SECONDS, MAX_CONNECTIONS
from prunewarden.server._collector import CollectorApp
from prunewarden.server._config import Listen
from prunewarden.server._connections import ConnectionLimits
from prunewarden.server._listening import StoppingServer, bind, bound_url, uvicorn_config
from prunewarden.server._metrics import LimitMetrics
from prunewarden.shipping import Collector

START_SECONDS = 30.0  # how long start() waits for uvicorn to listen


class CollectorServer:
    """``collector`` served on ``host:port`` (0: any free port; the socket is bound at once,
    :class:`ServerConfigError` when it cannot be). ``max_connections``, ``header_seconds``,
    ``body_seconds`` and ``keep_alive_seconds`` are ``serve``'s limits of the same names,
    counted in ``prunewarden_server_limit_reached_total`` at ``/metrics``. Use :meth:`run`
    (the foreground, until a signal), or :meth:`start` and :meth:`stop` (or ``with``)."""

    def __init__(  # noqa: PLR0913 - the address and serve's four limits, each with a default
        self,
        collector: Collector,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_connections: int = MAX_CONNECTIONS,
        header_seconds: float = HEADER_SECONDS,
        body_seconds: float = BODY_SECONDS,
        keep_alive_seconds: float = KEEP_ALIVE_SECONDS,
    ) -> None:
        self.collector = collector
        self.registry = CollectorRegistry()
        self.limits = ConnectionLimits(
            max_connections=max_connections,
            header_seconds=header_seconds,
            body_seconds=body_seconds,
            keep_alive_seconds=keep_alive_seconds,
            metrics=LimitMetrics(self.registry),
        )
        self.app = CollectorApp(collector, self.registry).starlette()
        self._listen = Listen(host=host, port=port)
        self._socket = bind(self._listen, 0o600)
        self.port: int = self._socket.getsockname()[1]
        self.url = bound_url(self._listen, self._socket)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def run(self, announce: Callable[[], None] = lambda: None) -> None:
        """Serve in the foreground until SIGTERM or SIGINT (from the main thread);
        ``announce`` is called once either signal stops the server cleanly, before it serves
        (a caller saying where it listens then is never killed by a prompt SIGTERM)."""
        server = self._server = StoppingServer(
            uvicorn_config(self.app, self.limits, lifespan="off")
        )
        try:
            server.run_announced([self._socket], announce)
        finally:
            self._socket.close()

    def start(self) -> Self:
        """Serve from a thread of its own; returns once the socket is served."""
        if self._thread is not None:
            return self
        server = self._server = uvicorn.Server(
            uvicorn_config(self.app, self.limits, lifespan="off")
        )
        self._thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [self._socket]},
            name="prunewarden-collect",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + START_SECONDS
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving: the requests in flight are answered first."""
        server, thread, self._thread = self._server, self._thread, None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join()
        self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self.stop()
