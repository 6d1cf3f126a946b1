"""The OTLP sink: each record as one OpenTelemetry log record, sent over OTLP/HTTP (protobuf)
by the SDK's exporter (``opentelemetry-exporter-otlp-proto-http``, the ``ship`` extra).

The record's line, exactly as written, is the log record's body, so that whoever receives it can
verify the chain again. The rest follows the OpenTelemetry semantic conventions where they fit:
``event.name`` ``prunewarden.<kind>`` (the log record's event name), the record's ``ts`` as its
timestamp, the record's ``session_id`` (when it has one) as ``gen_ai.conversation.id`` (an
agent's conversation is what a prunewarden session guards), and the resource's
``service.name`` ``prunewarden``, ``service.instance.id`` the replica, ``service.version``. The
chain fields travel as attributes (``prunewarden.record.hash``, ``prunewarden.record.prev_hash``)
so that a receiver drops duplicates without parsing bodies.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Sequence
from datetime import datetime

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from prunewarden.__about__ import __version__
from prunewarden.shipping._reading import Shipped
from prunewarden.shipping._sinks import REQUEST_SECONDS, ShipError, destination_name

SCOPE = InstrumentationScope("prunewarden.shipping", __version__)


class OtlpSink:
    """Sends batches to an OTLP/HTTP logs endpoint: ``otlp+http://HOST:4318/v1/logs`` (the
    path defaults to ``/v1/logs``)."""

    def __init__(self, url: str, *, timeout: float = REQUEST_SECONDS) -> None:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.removeprefix("otlp+")
        path = parts.path if parts.path not in {"", "/"} else "/v1/logs"
        endpoint = urllib.parse.urlunsplit((scheme, parts.netloc, path, parts.query, ""))
        self.name = destination_name(url)
        self._exporter = OTLPLogExporter(
            endpoint=endpoint, timeout=timeout, compression=Compression.Gzip
        )
        self._resources: dict[str, Resource] = {}

    def send(self, replica: str, records: Sequence[Shipped]) -> None:
        resource = self._resources.get(replica)
        if resource is None:
            resource = self._resources[replica] = Resource.create(
                {
                    "service.name": "prunewarden",
                    "service.instance.id": replica,
                    "service.version": __version__,
                }
            )
        batch = [log_record(record, resource) for record in records]
        if self._exporter.export(batch) is not LogRecordExportResult.SUCCESS:
            raise ShipError(f"{self.name}: the OTLP export failed")

    def close(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call] # the SDK leaves it untyped


def log_record(record: Shipped, resource: Resource) -> ReadableLogRecord:
    """``record`` as an OpenTelemetry log record."""
    line = record.data.rstrip(b"\n").decode("utf-8")
    attributes: dict[str, str] = {
        "prunewarden.record.hash": record.hash,
        "prunewarden.record.prev_hash": record.prev_hash,
        "prunewarden.record.kind": record.kind,
    }
    session = _session_id(line)
    if session is not None:
        attributes["gen_ai.conversation.id"] = session
    return ReadableLogRecord(
        LogRecord(
            timestamp=_nanoseconds(record.ts),
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=line,
            attributes=attributes,
            event_name=f"prunewarden.{record.kind or 'record'}",
        ),
        resource=resource,
        instrumentation_scope=SCOPE,
    )


def _session_id(line: str) -> str | None:
    """The record's ``session_id``, when it has one (an optional field: the record is not
    otherwise read)."""
    try:
        document = json.loads(line)
    except ValueError:
        return None
    session = document.get("session_id") if isinstance(document, dict) else None
    return session if isinstance(session, str) else None


def _nanoseconds(ts: str | None) -> int | None:
    if ts is None:
        return None
    try:
        moment = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
