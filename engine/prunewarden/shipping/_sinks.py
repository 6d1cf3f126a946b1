"""Where shipped records go, chosen by URL: ``http(s)://`` (batches of gzip JSON lines, for
``prunewarden audit collect`` or any receiver of the same protocol) and ``otlp+http(s)://``
(OpenTelemetry log records, :mod:`._otlp`).

A sink sends one batch and either returns (the receiver acknowledged it: it holds the records)
or raises :class:`ShipError`, saying whether trying again may help. The shipper does the
retrying, with backoff; a sink never waits on its own beyond one request's timeout.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import urllib.parse
from collections.abc import Sequence
from typing import Protocol

from prunewarden._locations import shown_location
from prunewarden.errors import PrunewardenError
from prunewarden.shipping._reading import Shipped

# The headers of the HTTP batch protocol (docs/fleet.md, "Shipping decision logs").
REPLICA_HEADER = "Prunewarden-Replica"
MEDIA_TYPE = "application/x-ndjson"
# The bearer token an HTTP sink presents, when the receiver asks for one.
TOKEN_ENV = "PRUNEWARDEN_SHIP_TOKEN"  # noqa: S105 - the name of the variable, not a token
REQUEST_SECONDS = 10.0
# What is read of a receiver's answer: an acknowledgement or a problem document is small, and a
# receiver that answers without end must not hold the shipper's memory or its thread.
ANSWER_BYTES = 64 * 1024
# Statuses worth trying again: the receiver is overloaded, restarting, or timed out.
_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class ShipError(PrunewardenError):
    """A batch the receiver did not acknowledge; ``retry``: whether sending it again may work
    (a receiver down or overloaded) or not without a change (a gap, a forgery, a bad URL)."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class Sink(Protocol):
    """Sends batches of records to one destination."""

    name: str

    def send(self, replica: str, records: Sequence[Shipped]) -> None: ...

    def close(self) -> None: ...


def destination_name(url: str) -> str:
    """The URL as status, metrics and records show it: without credentials, query or
    fragment."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "kafka":  # several brokers, HOST:PORT,HOST:PORT, none a URL's host
        netloc = parts.netloc.rpartition("@")[2]
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return shown_location(url)


class HttpSink:
    """POSTs each batch as gzip-compressed JSON lines, the records' bytes as written, with the
    replica's name in the ``Prunewarden-Replica`` header; 2xx acknowledges."""

    def __init__(self, url: str, *, timeout: float = REQUEST_SECONDS) -> None:
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise ShipError(f"--ship {destination_name(url)!r}: no host", retry=False)
        self.name = destination_name(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        token = os.environ.get(TOKEN_ENV, "").strip()
        self._token = token or None

    def send(self, replica: str, records: Sequence[Shipped]) -> None:
        body = gzip.compress(b"".join(record.data for record in records), mtime=0)
        headers = {
            "Content-Type": MEDIA_TYPE,
            "Content-Encoding": "gzip",
            REPLICA_HEADER: replica,
        }
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        connection: http.client.HTTPConnection
        if self._https:
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout)
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        try:
            connection.request("POST", self._target, body, headers)
            response = connection.getresponse()
            try:
                answer = response.read(ANSWER_BYTES)
            finally:
                response.close()
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise ShipError(f"{self.name}: {reason}") from None
        finally:
            connection.close()
        if 200 <= response.status < 300:
            return
        detail = _problem_detail(answer) or response.reason
        raise ShipError(
            f"{self.name}: HTTP {response.status}: {detail}",
            retry=response.status in _RETRY_STATUSES,
        )

    def close(self) -> None:
        return


def _problem_detail(answer: bytes) -> str | None:
    """The ``detail`` of an RFC 9457 problem document, if the answer is one."""
    try:
        document = json.loads(answer)
    except ValueError:
        return None
    detail = document.get("detail") if isinstance(document, dict) else None
    return detail if isinstance(detail, str) else None
