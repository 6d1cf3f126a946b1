"""Decision logs shipped from the local chain file to other destinations, and received.

:class:`LogShipper` reads an :class:`~prunewarden.audit.AuditLog`'s file from a cursor kept
next to it and sends batches to destinations chosen by URL (``http(s)://``: gzip JSON lines;
``otlp+http(s)://``: OpenTelemetry log records, the ``ship`` extra; ``kafka://``: one message
per record, the ``kafka`` extra, tested against librdkafka's mock cluster), at least once, never
holding a decision back; a full buffer drops records and says so in the chain
(``records_dropped``). :class:`Collector` is the receiving side (``prunewarden audit collect``):
one file per replica, each batch taken only where it continues the chain. See docs/fleet.md.
"""

from __future__ import annotations

from prunewarden.shipping._collect import Collector
from prunewarden.shipping._destinations import open_sink
from prunewarden.shipping._shipper import (
    DEFAULT_BUFFER_BYTES,
    DEFAULT_BUFFER_RECORDS,
    LogShipper,
    SinkStatus,
)
from prunewarden.shipping._sinks import ShipError, Sink, destination_name
from prunewarden.shipping._tokens import TokensError, read_collect_tokens

__all__ = [
    "DEFAULT_BUFFER_BYTES",
    "DEFAULT_BUFFER_RECORDS",
    "Collector",
    "LogShipper",
    "ShipError",
    "Sink",
    "SinkStatus",
    "TokensError",
    "destination_name",
    "open_sink",
    "read_collect_tokens",
]
