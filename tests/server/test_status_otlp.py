"""A server shipping to OTLP exports its status as OTLP metrics too: the SDK's exporter into a
local HTTP server decoding the protobuf with the real opentelemetry-proto, as an OpenTelemetry
Collector's receiver would; one receiver for the module."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _support.shipping import eviction
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from prunewarden.server import Listen, ServerConfig, build_app
from prunewarden.server._otlp_status import metrics_endpoint
from starlette.testclient import TestClient


class Received:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.logs = 0

    def points(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Each metric's data points (attributes, value), over every export, the last last."""
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        with self.lock:
            requests = list(self.metrics)
        for request in requests:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        data = metric.gauge if metric.HasField("gauge") else metric.sum
                        for point in data.data_points:
                            attributes = {a.key: a.value.string_value for a in point.attributes}
                            out.setdefault(metric.name, []).append((attributes, point.as_int))
        return out

    def resources(self) -> list[dict[str, str]]:
        with self.lock:
            return [
                {a.key: a.value.string_value for a in resource.resource.attributes}
                for request in self.metrics
                for resource in request.resource_metrics
            ]


@pytest.fixture(scope="module")
def otlp() -> Iterator[tuple[str, Received]]:
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/metrics":
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                with received.lock:
                    received.metrics.append(request)
            else:
                with received.lock:
                    received.logs += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"otlp+http://127.0.0.1:{server.server_address[1]}/v1/logs", received
    finally:
        server.shutdown()
        server.server_close()


def test_the_metrics_endpoint_is_beside_the_logs_one() -> None:
    assert metrics_endpoint("otlp+https://otel.internal:4318/v1/logs") == (
        "https://otel.internal:4318/v1/metrics"
    )


def test_a_server_shipping_to_otlp_exports_its_status(
    otlp: tuple[str, Received], policy_file: Path, tmp_path: Path
) -> None:
    """Policy per tenant, health, decisions, shipped and sessions live arrive as OTLP metrics
    of the replica's resource, at shutdown at the latest."""
    url, received = otlp
    config = ServerConfig(
        str(policy_file),
        str(tmp_path / "audit.jsonl"),
        Listen(),
        ship=(url,),
        ship_replica="eu-3",
        status_interval=60,
    )
    built = build_app(config)
    try:
        with TestClient(built.app, base_url="http://127.0.0.1") as http:
            assert http.post("/v1/evaluate", json=eviction("a")).json()["outcome"] == "allow"
    finally:
        built.close()
    points = received.points()
    identity = built.engine.policy.identity
    ((attributes, held),) = points["prunewarden.tenant.policy"][-1:]
    assert (attributes["tenant"], attributes["policy"], attributes["version"], held) == (
        "default",
        identity.name,
        identity.version,
        1,
    )
    assert points["prunewarden.server.healthy"][-1][1] == 1
    assert points["prunewarden.tenant.healthy"][-1] == ({"tenant": "default"}, 1)
    decisions = {a["outcome"]: v for a, v in points["prunewarden.decisions"][-3:]}
    assert decisions["allow"] == 1
    assert points["prunewarden.server.sessions.live"][-1][1] == 0
    assert "prunewarden.log.records.shipped" in points
    assert {"service.name": "prunewarden", "service.instance.id": "eu-3"}.items() <= (
        received.resources()[-1].items()
    )
