"""What the server counts of itself: requests, their latency, and every limit it enforced.

The HTTP metrics live in the process-wide registry (one process serves one app). What a server
counts of its limits and its sessions lives in the app's own registry (:class:`ServerMetrics`),
served at ``/metrics`` beside the decision metrics, so that an operator sees each limit reached:
``prunewarden_server_limit_reached_total{limit="..."}``, one label value per limit of
docs/limits.md ("The server").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from prunewarden.shipping import LogShipper

# Requests answered, by route template and status; and how long they took.
REQUESTS = Counter("prunewarden_http_requests_total", "HTTP requests answered", ["route", "status"])
LATENCY = Histogram(
    "prunewarden_http_request_seconds",
    "Time from a request's arrival to its answer",
    ["route"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
)

# The limits a server enforces, as the label of prunewarden_server_limit_reached_total.
LIMITS = (
    "connections",  # a connection over --max-connections, refused at once (503)
    "header_timeout",  # a request's headers not received within --header-timeout: dropped
    "body_timeout",  # a request's body not received within --body-timeout: 408, dropped
    "send_timeout",  # a response the client did not read within --body-timeout: dropped
    "request_bytes",  # a body over --max-request-bytes (413)
    "pending_body_bytes",  # bodies being read together over their budget (503)
    "request_timeout",  # an answer not ready within --request-timeout (503)
    "live_sessions",  # a live session sent back to the store, or a new one refused (503)
)


class LimitMetrics:
    """Each limit a server keeps, counted when reached, on ``registry``: what ``serve`` and
    ``audit collect`` both report."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._limits = Counter(
            "prunewarden_server_limit_reached",
            "Times a server limit refused, dropped or evicted something",
            ["limit"],
            registry=registry,
        )
        for limit in LIMITS:
            self._limits.labels(limit)  # every limit shows, at 0 until reached

    def reached(self, limit: str) -> None:
        """Count one time ``limit`` (one of :data:`LIMITS`) acted."""
        self._limits.labels(limit).inc()


class ServerMetrics(LimitMetrics):
    """``serve``'s own metrics, on ``registry``: each limit reached, calls waiting for their
    session's turn, and sessions live in memory (read from ``live`` when scraped)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.waiting = Gauge(
            "prunewarden_server_session_calls_waiting",
            "Calls waiting on the event loop for another call of their session to finish",
            registry=registry,
        )
        self._live = Gauge(
            "prunewarden_server_live_sessions",
            "Sessions held in memory between calls",
            registry=registry,
        )

    def count_live(self, live: Callable[[], int]) -> None:
        """Report ``live()`` as the number of live sessions at each scrape."""
        self._live.set_function(live)


class ShippingMetrics(Collector):
    """The audit log's shipping, read from the shipper at each scrape: records acknowledged
    (``prunewarden_log_records_shipped_total``) and dropped because a buffer was full
    (``prunewarden_log_records_dropped_total``), and records buffered, per destination."""

    def __init__(self, shipper: LogShipper) -> None:
        self._shipper = shipper

    def collect(self) -> Iterator[Metric]:
        shipped = CounterMetricFamily(
            "prunewarden_log_records_shipped",
            "Audit records a destination acknowledged",
            labels=["destination"],
        )
        dropped = CounterMetricFamily(
            "prunewarden_log_records_dropped",
            "Audit records not shipped because the buffer was full (records_dropped)",
            labels=["destination"],
        )
        buffered = GaugeMetricFamily(
            "prunewarden_log_records_buffered",
            "Audit records read and not yet acknowledged",
            labels=["destination"],
        )
        for status in self._shipper.status():
            shipped.add_metric([status.destination], status.shipped)
            dropped.add_metric([status.destination], status.dropped)
            buffered.add_metric([status.destination], status.buffered_records)
        yield shipped
        yield dropped
        yield buffered


DIGEST_PREFIX = len("sha256:") + 12  # a policy digest as a label: enough to tell versions apart


class StatusMetrics(Collector):
    """The status document (``GET /v1/status``) as metrics, read at each scrape: the policy
    each tenant holds (``prunewarden_tenant_policy_info``, 1, labelled by tenant, policy name,
    version, digest prefix and bundle revision) and its health (``prunewarden_tenant_healthy``,
    0 or 1), and the server's (``prunewarden_server_healthy``). The tenants are those the
    server holds (its tenants file), never a request's, so the label values stay bounded."""

    def __init__(self, document: Callable[[], dict[str, Any]]) -> None:
        self._document = document

    def collect(self) -> Iterator[Metric]:
        status = self._document()
        policy = GaugeMetricFamily(
            "prunewarden_tenant_policy_info",
            "The policy each tenant holds: 1 for the one in force",
            labels=["tenant", "policy", "version", "digest", "bundle_revision"],
        )
        healthy = GaugeMetricFamily(
            "prunewarden_tenant_healthy",
            "1 while the tenant's last reload (or bundle fetch) succeeded, else 0",
            labels=["tenant"],
        )
        for tenant in status["tenants"]:
            held = tenant["policy"]
            labels = [
                tenant["name"],
                held["name"],
                held["version"],
                held["digest"][:DIGEST_PREFIX],
                tenant.get("bundle_revision") or "",
            ]
            policy.add_metric(labels, 1)
            healthy.add_metric([tenant["name"]], 1 if tenant["healthy"] else 0)
        yield policy
        yield healthy
        yield GaugeMetricFamily(
            "prunewarden_server_healthy",
            "1 while every tenant is healthy (the status document's healthy), else 0",
            value=1 if status["healthy"] else 0,
        )
