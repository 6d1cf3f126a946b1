"""A destination chosen by its URL's scheme: the HTTP batch sink, or the OTLP sink (imported
only when one is asked for: it needs the ``ship`` extra, and most servers ship over HTTP or not
at all)."""

from __future__ import annotations

import urllib.parse

from prunewarden.shipping._sinks import REQUEST_SECONDS, HttpSink, ShipError, Sink, destination_name


def open_sink(url: str, *, timeout: float = REQUEST_SECONDS) -> Sink:
    """The sink ``url`` names; raises :class:`ShipError` (``retry`` false) for a URL that
    names none, and :class:`ImportError` (saying what to install) for OTLP without the
    ``ship`` extra."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in {"http", "https"}:
        return HttpSink(url, timeout=timeout)
    if scheme in {"otlp+http", "otlp+https"}:
        # The ship extra, imported on use (not to dodge a cycle: _otlp does not import this).
        from prunewarden.shipping._otlp import OtlpSink  # noqa: PLC0415

        return OtlpSink(url, timeout=timeout)
    msg = (
        f"--ship {destination_name(url)!r}: expected http(s)://HOST/v1/logs or "
        "otlp+http(s)://HOST:4318/v1/logs (Kafka is not provided: docs/fleet.md)"
    )
    raise ShipError(msg, retry=False)
