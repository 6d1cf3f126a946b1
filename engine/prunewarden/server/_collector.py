"""``prunewarden audit collect``'s HTTP API: Starlette routes over a
:class:`~prunewarden.shipping.Collector`, on the stack and the limits of ``prunewarden serve``.

- ``POST /v1/logs``: a batch of records (JSON lines, gzip-compressed or not) from the replica
  its ``Prunewarden-Replica`` header names, answered ``{"accepted", "duplicates", "dropped",
  "head"}`` once synced, or an RFC 9457 problem: 400 ``invalid-batch``, 401 ``unauthorized``,
  403 ``forbidden-replica`` (a token bound to another replica), 409 ``chain-gap``, 413
  ``batch-too-large``, 415 ``unsupported-media-type``, 422 ``forged-record``.
- ``POST /v1/status``: a server's status document (``serve --status-url``), kept as its
  replica's; ``GET /v1/fleet``: every replica's last one.
- ``GET /v1/replicas``: each replica's head and counts; ``GET /metrics``: Prometheus text;
  ``GET /healthz``: alive (no token).

The body of a batch is checked line by line as it arrives (:mod:`prunewarden.shipping`): the
check runs in a worker thread (at most :data:`BATCH_WORKERS` at once) that takes each chunk of
the body from the event loop when it needs the next line, so a bad first line is refused before
the rest is read. Tokens are checked as ``serve`` checks them (:class:`._credentials.Credentials`:
constant time, every token compared); connections and body deadlines are kept by ``serve``'s
protocol (:mod:`._connections`: 503 ``server-busy`` past the cap, 408 ``request-timeout`` for a
body too slow).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as MetricsCollector
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from prunewarden.limits import MAX_COLLECT_METRIC_REPLICAS, MAX_SHIP_BATCH_BYTES, MAX_STATUS_BYTES
from prunewarden.server._credentials import CredentialError, Credentials
from prunewarden.server._problems import PROBLEM_BASE, PROBLEM_MEDIA_TYPE
from prunewarden.server._push import INSTANCE_HEADER
from prunewarden.shipping import Collector
from prunewarden.shipping._batch_body import batch_lines
from prunewarden.shipping._receiving import REPLICA_NAME, BatchRefused
from prunewarden.shipping._sinks import REPLICA_HEADER

_diagnostics = logging.getLogger("prunewarden.shipping")
BATCH_WORKERS = 8  # batches checked and written at once; the next ones wait their turn
OTHER_REPLICAS = "_other"  # the label of the replicas past MAX_COLLECT_METRIC_REPLICAS
BATCH_MEDIA = frozenset({"application/x-ndjson", "application/jsonl", "application/json-seq"})

# Each problem kind: its status and title.
KINDS: dict[str, tuple[int, str]] = {
    "invalid-batch": (400, "The batch is not valid"),
    "invalid-status": (400, "The status document is not valid"),
    "unauthorized": (401, "A valid bearer token is required"),
    "forbidden-replica": (403, "The token may not ship as this replica"),
    "not-found": (404, "No such resource"),
    "method-not-allowed": (405, "The method is not allowed on this resource"),
    "request-timeout": (408, "The request was not received in time"),
    "chain-gap": (409, "The batch does not continue the replica's chain"),
    "batch-too-large": (413, "The batch is larger than the limit"),
    "unsupported-media-type": (415, "The batch must be JSON lines, gzip-compressed or not"),
    "forged-record": (422, "A record's hash does not match its content"),
    "internal-error": (500, "Internal error"),
}
# What a batch's answer is counted as in prunewarden_collect_batches_total{outcome}.
OUTCOMES = ("accepted", *(kind for kind in KINDS if kind not in {"not-found", "invalid-status"}))


def problem(kind: str, detail: str) -> Response:
    status, title = KINDS[kind]
    document = {"type": PROBLEM_BASE + kind, "title": title, "status": status, "detail": detail}
    headers = {"WWW-Authenticate": "Bearer"} if kind == "unauthorized" else {}
    # A refused body may be unread: the connection is not used again.
    headers["Connection"] = "close"
    return Response(json.dumps(document, sort_keys=True), status, headers, PROBLEM_MEDIA_TYPE)


def _json(document: Any) -> Response:
    return Response(json.dumps(document, sort_keys=True), 200, media_type="application/json")


class CollectorApp:
    """The routes over ``collector``; what they count goes on ``registry``."""

    def __init__(self, collector: Collector, registry: CollectorRegistry) -> None:
        self.collector = collector
        # Every route takes any of the tokens: a replica's token reads the fleet's views too.
        self.credentials = Credentials(
            collector.token, bound=collector.tokens, anonymous=False, server_routes=frozenset()
        )
        self.registry = registry
        self.batches = Counter(
            "prunewarden_collect_batches",
            "Batches answered: accepted, or refused by problem kind",
            ["outcome"],
            registry=registry,
        )
        for outcome in OUTCOMES:
            self.batches.labels(outcome)
        self.statuses = Counter(
            "prunewarden_collect_status_documents",
            "Status documents answered: accepted, or refused by problem kind",
            ["outcome"],
            registry=registry,
        )
        registry.register(ReplicaMetrics(collector))
        self._workers = anyio.CapacityLimiter(BATCH_WORKERS)

    def starlette(self) -> Starlette:
        routes = [
            Route("/v1/logs", self.logs, methods=["POST"]),
            Route("/v1/status", self.status, methods=["POST"]),
            Route("/v1/fleet", self.reading(self.collector.fleet), methods=["GET"]),
            Route("/v1/replicas", self.reading(self.collector.replicas), methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/healthz", self.health, methods=["GET"]),
        ]
        return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})

    def sender(self, request: Request) -> str:
        """The replica the request's token is bound to, ``""`` for any replica (the shared
        token, or none asked); :class:`CredentialError` for none or a wrong one."""
        bound = self.credentials.identify(request.headers.get("authorization"), request.url.path)
        return bound or ""

    async def logs(self, request: Request) -> Response:
        try:
            sender = self.sender(request)
            replica, length, encoding = batch_headers(request.headers)
            refuse_another_replica(sender, replica)
            body = BodyStream(request)
            accepted = await anyio.to_thread.run_sync(
                lambda: self.collector.accept(replica, batch_lines(body, length, encoding)),
                limiter=self._workers,
            )
        except CredentialError as exc:
            return self._refused(self.batches, "unauthorized", exc.problem.detail)
        except BatchRefused as exc:
            return self._refused(self.batches, exc.kind, exc.detail)
        except ClientDisconnect:  # dropped at the body deadline: nobody reads this
            return self._refused(self.batches, "request-timeout", "the sender is gone")
        except OSError as exc:
            detail = f"cannot write the batch: {exc.strerror or exc}"
            return self._refused(self.batches, "internal-error", detail)
        except Exception as exc:  # noqa: BLE001 - a refusal, never a traceback
            _diagnostics.exception("a batch failed")
            detail = f"{type(exc).__name__}: {exc}"
            return self._refused(self.batches, "internal-error", detail)
        self.batches.labels("accepted").inc()
        return _json(
            {
                "accepted": accepted.accepted,
                "duplicates": accepted.duplicates,
                "dropped": accepted.dropped,
                "head": accepted.head,
            }
        )

    async def status(self, request: Request) -> Response:
        """``POST /v1/status``: the document kept as its replica's (``Prunewarden-Replica``)."""
        try:
            sender = self.sender(request)
            replica = replica_header(request.headers)
            refuse_another_replica(sender, replica)
            document = await status_document(request)
            instance = request.headers.get(INSTANCE_HEADER, "")[:256]
            entry = await anyio.to_thread.run_sync(
                lambda: self.collector.keep_status(replica, instance, document),
                limiter=self._workers,
            )
        except CredentialError as exc:
            return self._refused(self.statuses, "unauthorized", exc.problem.detail)
        except BatchRefused as exc:
            return self._refused(self.statuses, exc.kind, exc.detail)
        except ClientDisconnect:
            return self._refused(self.statuses, "request-timeout", "the sender is gone")
        except OSError as exc:
            detail = f"cannot keep the status: {exc.strerror or exc}"
            return self._refused(self.statuses, "internal-error", detail)
        self.statuses.labels("accepted").inc()
        return _json({"replica": replica, "received_at": entry["received_at"]})

    def reading(self, read: Any) -> Any:
        """A ``GET`` answering ``read()`` to any valid token."""

        async def answer(request: Request) -> Response:
            try:
                self.sender(request)
            except CredentialError as exc:
                return problem("unauthorized", exc.problem.detail)
            return _json(read())

        return answer

    async def metrics(self, request: Request) -> Response:
        try:
            self.sender(request)
        except CredentialError as exc:
            return problem("unauthorized", exc.problem.detail)
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    async def health(self, _request: Request) -> Response:
        return _json({"status": "ok", "replicas": len(self.collector.chains())})

    def _refused(self, counter: Counter, kind: str, detail: str) -> Response:
        counter.labels(kind).inc()
        return problem(kind, detail)


class BodyStream:
    """A request's body as a blocking ``read`` for a worker thread started by anyio: each chunk
    is taken from the event loop when the reader needs more."""

    def __init__(self, request: Request) -> None:
        self._chunks = request.stream()
        self._buffer = b""

    def read(self, size: int = -1, /) -> bytes:
        if not self._buffer:
            self._buffer = anyio.from_thread.run(self._next)
        if size < 0 or size >= len(self._buffer):
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    async def _next(self) -> bytes:
        return await anext(self._chunks, b"")


def replica_header(headers: Headers) -> str:
    replica = headers.get(REPLICA_HEADER, "")
    if not REPLICA_NAME.fullmatch(replica):
        detail = f"the {REPLICA_HEADER} header must name the replica ([A-Za-z0-9._-], 1-128)"
        raise BatchRefused("invalid-batch", detail)
    return replica


def batch_headers(headers: Headers) -> tuple[str, int, str]:
    """The replica, the length and the encoding a batch's headers give; :class:`BatchRefused`
    before a byte of the body is read when they do not do."""
    replica = replica_header(headers)
    media = headers.get("content-type", "").split(";")[0].strip()
    if media not in BATCH_MEDIA:
        raise BatchRefused("unsupported-media-type", f"Content-Type {media!r}")
    length = headers.get("content-length", "")
    if not length.isdigit():
        raise BatchRefused("invalid-batch", "a Content-Length is required")
    if int(length) > MAX_SHIP_BATCH_BYTES:
        raise BatchRefused("batch-too-large", f"{length} bytes; at most {MAX_SHIP_BATCH_BYTES}")
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding not in {"gzip", "identity"}:
        raise BatchRefused("unsupported-media-type", f"Content-Encoding {encoding!r}")
    return replica, int(length), encoding


async def status_document(request: Request) -> dict[str, Any]:
    """The JSON object of a status push, at most MAX_STATUS_BYTES."""
    media = request.headers.get("content-type", "").split(";")[0].strip()
    if media != "application/json":
        raise BatchRefused("unsupported-media-type", f"Content-Type {media!r}: send JSON")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_STATUS_BYTES:
            detail = f"a status document of more than {MAX_STATUS_BYTES} bytes"
            raise BatchRefused("batch-too-large", detail)
        chunks.append(chunk)
    try:
        document = json.loads(b"".join(chunks))
    except ValueError as exc:
        raise BatchRefused("invalid-status", f"not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("tenants"), list):
        raise BatchRefused("invalid-status", "not a status document (GET /v1/status)")
    return document


def refuse_another_replica(sender: str, replica: str) -> None:
    """A token bound to replica ``sender`` may ship as that replica only."""
    if sender and sender != replica:
        detail = f"this token ships as replica {sender!r}, not {replica!r}"
        raise BatchRefused("forbidden-replica", detail)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "not-found", 405: "method-not-allowed"}.get(status, "internal-error")
    served = "POST /v1/logs, POST /v1/status, GET /v1/replicas, /v1/fleet, /metrics, /healthz"
    return problem(kind, f"{request.method} {request.url.path}: the collector serves {served}")


class ReplicaMetrics(MetricsCollector):
    """Each replica's counts, read from the collector at each scrape. A replica is a label
    value only among the first :data:`~prunewarden.limits.MAX_COLLECT_METRIC_REPLICAS` by name;
    the others are summed under ``replica="_other"``, so a sender inventing names cannot grow
    the series without bound."""

    def __init__(self, collector: Collector) -> None:
        self._collector = collector

    def collect(self) -> Iterator[Metric]:
        chains = self._collector.chains()
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "records": GaugeMetricFamily(
                "prunewarden_collect_replica_records",
                "Records the replica's files hold",
                labels=["replica"],
            ),
            "accepted": CounterMetricFamily(
                "prunewarden_collect_records",
                "Records taken from the replica since start",
                labels=["replica"],
            ),
            "batches": CounterMetricFamily(
                "prunewarden_collect_replica_batches",
                "Batches taken from the replica since start",
                labels=["replica"],
            ),
            "duplicates": CounterMetricFamily(
                "prunewarden_collect_duplicates",
                "Records the replica sent again, dropped, since start",
                labels=["replica"],
            ),
            "dropped": CounterMetricFamily(
                "prunewarden_collect_records_dropped",
                "Records the replica's records_dropped records say were never shipped",
                labels=["replica"],
            ),
        }
        other = dict.fromkeys(families, 0)
        for index, chain in enumerate(chains):
            for name, family in families.items():
                value = getattr(chain, name)
                if index < MAX_COLLECT_METRIC_REPLICAS:
                    family.add_metric([chain.name], value)
                else:
                    other[name] += value
        if len(chains) > MAX_COLLECT_METRIC_REPLICAS:
            for name, family in families.items():
                family.add_metric([OTHER_REPLICAS], other[name])
        yield from families.values()
        yield GaugeMetricFamily(
            "prunewarden_collect_replicas", "Replicas the collector holds files of", len(chains)
        )
        yield GaugeMetricFamily(
            "prunewarden_collect_replicas_reporting",
            "Replicas whose status document the collector holds",
            self._collector.fleet()["reporting"],
        )
