"""The OTLP sink: the OpenTelemetry SDK's OTLP/HTTP exporter into a local HTTP server that
decodes the protobuf with the real opentelemetry-proto, as a collector's receiver would."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _support.shipping import decide, records_in, verified
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from prunewarden import AuditLog, Engine
from prunewarden.shipping import LogShipper


@dataclass
class OtlpReceiver:
    url: str
    requests: list[ExportLogsServiceRequest] = field(default_factory=list)

    def log_records(self) -> list[tuple[dict[str, Any], Any]]:
        """Each log record with its resource's attributes, in arrival order."""
        out: list[tuple[dict[str, Any], Any]] = []
        for request in self.requests:
            for resource_logs in request.resource_logs:
                resource = {a.key: a.value.string_value for a in resource_logs.resource.attributes}
                out.extend(
                    (resource, record)
                    for scope in resource_logs.scope_logs
                    for record in scope.log_records
                )
        return out


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    lock = threading.Lock()
    received: list[ExportLogsServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert self.headers["Content-Type"] == "application/x-protobuf"
            request = ExportLogsServiceRequest()
            request.ParseFromString(body)
            with lock:
                received.append(request)
            answer = ExportLogsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield OtlpReceiver(f"otlp+http://127.0.0.1:{port}/v1/logs", received)
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


class TestOtlp:
    def test_records_arrive_as_log_records_that_still_verify(
        self, tmp_path: Path, otlp: OtlpReceiver
    ) -> None:
        """Each record is one log record whose body is its line: the bodies verify as a chain,
        and the attributes follow the semantic conventions."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            decide(Engine.default(audit=audit), 12, "conv-7")
            with LogShipper(audit, [otlp.url], replica="eu-1", poll_seconds=0.02) as shipper:
                assert shipper.wait_caught_up(60)
                (status,) = shipper.status()
        local = records_in([log])
        received = otlp.log_records()
        assert status.shipped == len(local) == len(received)
        copy = tmp_path / "copy.jsonl"
        copy.write_text("".join(record.body.string_value + "\n" for _, record in received))
        assert copy.read_bytes() == log.read_bytes()
        verified([copy])
        resource, first = received[0]
        assert resource["service.name"] == "prunewarden"
        assert resource["service.instance.id"] == "eu-1"
        _, decision = received[1]
        attributes = {a.key: a.value.string_value for a in decision.attributes}
        assert decision.event_name == "prunewarden.decision"
        assert attributes["gen_ai.conversation.id"] == "conv-7"
        assert attributes["prunewarden.record.hash"] == local[1]["hash"]
        assert attributes["prunewarden.record.prev_hash"] == local[0]["hash"]
        assert first.event_name == "prunewarden.policy_activated"
        assert first.time_unix_nano > 0
        assert status.destination == otlp.url
