"""Connections no client can hold: a deadline on every byte a client owes, and a cap on how many.

uvicorn closes a keep-alive connection left idle after an answer, and nothing else: a client that
connects and sends nothing, sends its headers a byte at a time (slowloris), stalls half-way
through a body, or never reads its answer holds its connection, and the body it sent, for as long
as it likes. Here each phase has its deadline, kept by the connection's protocol on the event
loop (one timer per connection, no thread, no polling):

- headers: from the connection (or the first byte of its next request) until the request's
  headers are in, ``header_seconds``; past it the connection is dropped;
- body: from the headers until the whole body is in, ``body_seconds``; past it the caller gets
  ``408 request-timeout`` and the connection is closed (the handler reading the body sees the
  client gone, and nothing is decided);
- answer: a response the client does not read (the socket's buffer full) for ``body_seconds``
  is dropped;

and a connection beyond ``max_connections`` is answered ``503 server-busy`` and closed at once,
before a byte of it is read. Each one counts in ``prunewarden_server_limit_reached_total``.

This subclasses uvicorn's ``httptools`` protocol (the ``serve`` extra installs ``httptools``),
overriding only its connection and parser callbacks.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from prunewarden.server._metrics import LimitMetrics
from prunewarden.server._problems import PROBLEM_MEDIA_TYPE, ProblemDocument

_REASONS = {408: b"Request Timeout", 503: b"Service Unavailable"}


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one connection may hold, and where the limits reached are counted."""

    max_connections: int
    header_seconds: float
    body_seconds: float
    keep_alive_seconds: float  # uvicorn's own limit, kept here with the others
    metrics: LimitMetrics


def raw_problem(problem: ProblemDocument) -> bytes:
    """A whole HTTP/1.1 response carrying ``problem``, closing the connection."""
    body = json.dumps(problem.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {problem.status} {_REASONS[problem.status].decode()}\r\n"
        f"content-type: {PROBLEM_MEDIA_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, keeping ``limits`` (for ``uvicorn.Config(http=...)``)."""
    busy = ProblemDocument(
        "server-busy",
        f"the server holds {limits.max_connections} connections, its limit",
        extra={"limit": "connections"},
    )
    late = ProblemDocument(
        "request-timeout",
        f"the request body did not arrive within {limits.body_seconds:g} s",
        extra={"limit": "body_timeout"},
    )

    class Guarded(_GuardedProtocol):
        LIMITS = limits
        REFUSED = raw_problem(busy)
        LATE = raw_problem(late)

    return Guarded


class _GuardedProtocol(HttpToolsProtocol):
    """One connection: a request's phase (``header_timeout``, ``body_timeout`` or none) and
    its deadline; and the deadline on an answer the client has stopped reading."""

    LIMITS: ClassVar[ConnectionLimits]
    REFUSED: ClassVar[bytes]
    LATE: ClassVar[bytes]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: str | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._send_deadline: asyncio.TimerHandle | None = None

    # --- the connection ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.LIMITS.max_connections:
            self.transport = transport  # what connection_lost closes
            self.LIMITS.metrics.reached("connections")
            transport.write(self.REFUSED)
            transport.close()
            return
        super().connection_made(transport)
        self._arm("header_timeout", self.LIMITS.header_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stop_send_deadline()
        super().connection_lost(exc)

    # --- the request's phases ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._phase is None:  # a connection's first request is already on the clock
            self._arm("header_timeout", self.LIMITS.header_seconds)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm("body_timeout", self.LIMITS.body_seconds)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._phase = None, None

    def _expired(self) -> None:
        phase, self._deadline, self._phase = self._phase, None, None
        if phase is None or self.transport.is_closing():
            return
        self.LIMITS.metrics.reached(phase)
        cycle = self.cycle
        if phase == "body_timeout" and cycle is not None and not cycle.response_started:
            self.transport.write(self.LATE)
        self._abandon()
        self.transport.close()

    def _abandon(self) -> None:
        """The request in progress is over: its handler reads a disconnect, its answer is not
        sent."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()

    # --- an answer the client does not read --------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._send_deadline = self.loop.call_later(self.LIMITS.body_seconds, self._send_expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_send_deadline()

    def _stop_send_deadline(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _send_expired(self) -> None:
        self._send_deadline = None
        if self.transport.is_closing():
            return
        self.LIMITS.metrics.reached("send_timeout")
        self._abandon()
        self.transport.abort()  # close() would wait for the buffer the client does not read
