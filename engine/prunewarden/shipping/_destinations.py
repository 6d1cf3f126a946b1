"""A destination chosen by its URL's scheme: the HTTP batch sink, the OTLP sink or the Kafka
sink (the last two imported only when one is asked for: they need the ``ship`` and ``kafka``
extras, and most servers ship over HTTP or not at all)."""

from __future__ import annotations

import urllib.parse

from prunewarden.shipping._kafka_url import parse_kafka_url
from prunewarden.shipping._sinks import REQUEST_SECONDS, HttpSink, ShipError, Sink, destination_name


def open_sink(url: str, *, timeout: float = REQUEST_SECONDS) -> Sink:
    """The sink ``url`` names; raises :class:`ShipError` (``retry`` false) for a URL that
    names none or cannot work, and :class:`ImportError` (saying what to install) for OTLP
    without the ``ship`` extra or Kafka without the ``kafka`` extra."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in {"http", "https"}:
        return HttpSink(url, timeout=timeout)
    # The extras, imported on use (not to dodge a cycle: neither module imports this one).
    if scheme in {"otlp+http", "otlp+https"}:
        try:
            from prunewarden.shipping._otlp import OtlpSink  # noqa: PLC0415
        except ImportError as exc:
            msg = "--ship otlp+http(s)://...: needs the ship extra: pip install 'prunewarden[ship]'"
            raise ImportError(msg) from exc
        return OtlpSink(url, timeout=timeout)
    if scheme == "kafka":
        parse_kafka_url(url)  # a URL that cannot work is refused with or without the extra
        try:
            from prunewarden.shipping._kafka import KafkaSink  # noqa: PLC0415
        except ImportError as exc:
            msg = "--ship kafka://...: needs the kafka extra: pip install 'prunewarden[kafka]'"
            raise ImportError(msg) from exc
        return KafkaSink(url, timeout=timeout)
    msg = (
        f"--ship {destination_name(url)!r}: expected http(s)://HOST/v1/logs, "
        "otlp+http(s)://HOST:4318/v1/logs or kafka://HOST:PORT[,HOST:PORT]/TOPIC"
    )
    raise ShipError(msg, retry=False)
