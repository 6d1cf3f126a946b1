"""The server's status as OpenTelemetry metrics, exported over OTLP/HTTP beside its log when it
ships to an OTLP endpoint (``--ship otlp+http://HOST:4318/v1/logs``: the metrics go to
``/v1/metrics`` of the same host), so that one OpenTelemetry Collector receives both.

The instruments are observed from the status document (``GET /v1/status``) and the server's
counts at each export, every ``--status-interval`` seconds and once more at shutdown:

- ``prunewarden.tenant.policy``: 1 for the policy each tenant holds (attributes ``tenant``,
  ``policy``, ``version``, ``digest``, ``bundle_revision``), the Prometheus
  ``prunewarden_tenant_policy_info``;
- ``prunewarden.tenant.healthy`` (attribute ``tenant``) and ``prunewarden.server.healthy``: 0 or 1;
- ``prunewarden.log.records.shipped`` and ``prunewarden.log.records.dropped`` (attribute
  ``destination``): the log shipping's counts since start;
- ``prunewarden.server.sessions.live``: sessions held in memory;
- ``prunewarden.decisions`` (attribute ``outcome``): decisions since start.

The resource is the log's: ``service.name`` ``prunewarden``, ``service.instance.id`` the replica,
``service.version``. Needs the ``ship`` extra (the SDK and its OTLP/HTTP exporter), imported
only when a server ships to OTLP (:func:`._run.build_app`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from prunewarden.__about__ import __version__
from prunewarden.server._metrics import DIGEST_PREFIX
from prunewarden.shipping._sinks import REQUEST_SECONDS

OTLP_SCHEMES = ("otlp+http://", "otlp+https://")


def metrics_endpoint(ship_url: str) -> str:
    """The OTLP/HTTP metrics endpoint beside the logs endpoint ``ship_url`` names."""
    parts = urllib.parse.urlsplit(ship_url)
    scheme = parts.scheme.removeprefix("otlp+")
    return urllib.parse.urlunsplit((scheme, parts.netloc, "/v1/metrics", parts.query, ""))


class StatusExport:
    """Exports ``document()`` (the status document) and ``live()`` (sessions live) to
    ``endpoint`` every ``interval`` seconds as ``replica``; :meth:`close` exports once more
    and stops. An export that fails is the SDK's to retry and report (on the
    ``opentelemetry`` logger): it never reaches a decision."""

    def __init__(
        self,
        endpoint: str,
        document: Callable[[], dict[str, Any]],
        live: Callable[[], int],
        *,
        replica: str,
        interval: float,
    ) -> None:
        self._document = document
        self._live = live
        exporter = OTLPMetricExporter(
            endpoint=endpoint, timeout=REQUEST_SECONDS, compression=Compression.Gzip
        )
        reader = PeriodicExportingMetricReader(
            exporter, export_interval_millis=interval * 1000, export_timeout_millis=30_000
        )
        resource = Resource.create(
            {
                "service.name": "prunewarden",
                "service.instance.id": replica,
                "service.version": __version__,
            }
        )
        self._provider = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._provider.get_meter("prunewarden.server", __version__)
        meter.create_observable_gauge(
            "prunewarden.tenant.policy",
            [self._policies],
            description="The policy each tenant holds: 1 for the one in force",
        )
        meter.create_observable_gauge(
            "prunewarden.tenant.healthy",
            [self._tenants_healthy],
            description="1 while the tenant's last reload (or bundle fetch) succeeded, else 0",
        )
        meter.create_observable_gauge(
            "prunewarden.server.healthy",
            [self._server_healthy],
            description="1 while every tenant is healthy, else 0",
        )
        meter.create_observable_counter(
            "prunewarden.log.records.shipped",
            [self._shipping("shipped")],
            description="Audit records a destination acknowledged",
        )
        meter.create_observable_counter(
            "prunewarden.log.records.dropped",
            [self._shipping("dropped")],
            description="Audit records not shipped because the buffer was full",
        )
        meter.create_observable_gauge(
            "prunewarden.server.sessions.live",
            [lambda _options: [Observation(self._live())]],
            description="Sessions held in memory between calls",
        )
        meter.create_observable_counter(
            "prunewarden.decisions",
            [self._decisions],
            description="Decisions since the server started, by outcome",
        )

    def close(self) -> None:
        """Export what is observed now, then stop (idempotent)."""
        self._provider.shutdown()

    def _policies(self, _options: CallbackOptions) -> Iterable[Observation]:
        for tenant in self._document()["tenants"]:
            held = tenant["policy"]
            attributes = {
                "tenant": tenant["name"],
                "policy": held["name"],
                "version": held["version"],
                "digest": held["digest"][:DIGEST_PREFIX],
                "bundle_revision": tenant.get("bundle_revision") or "",
            }
            yield Observation(1, attributes)

    def _tenants_healthy(self, _options: CallbackOptions) -> Iterable[Observation]:
        for tenant in self._document()["tenants"]:
            yield Observation(1 if tenant["healthy"] else 0, {"tenant": tenant["name"]})

    def _server_healthy(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(1 if self._document()["healthy"] else 0)

    def _shipping(self, count: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            shipping = self._document()["log_shipping"] or {"destinations": []}
            for destination in shipping["destinations"]:
                yield Observation(destination[count], {"destination": destination["destination"]})

        return observe

    def _decisions(self, _options: CallbackOptions) -> Iterable[Observation]:
        for outcome, count in self._document()["decisions"].items():
            yield Observation(count, {"outcome": outcome})
