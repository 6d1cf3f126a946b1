"""The Kafka sink: each record one message, produced by librdkafka (``confluent-kafka``, the
``kafka`` extra) to ``kafka://HOST:PORT[,HOST:PORT]/TOPIC[?NAME=VALUE&...]``.

A message's key is the replica, so one replica's records share a partition and Kafka keeps them
in the chain's order; its value is the record's line as written (without the newline), so the
chain can be verified again; headers name the record's hash (a consumer drops the duplicates
that at-least-once delivery brings), the replica, the record's kind and its ``prev_hash``. The
producer asks every in-sync replica (``acks=all``) and is idempotent unless the URL says
otherwise. A batch is acknowledged only when every message's delivery report succeeded within
the sink's timeout; otherwise the batch raises :class:`ShipError` and the shipper sends it again.

The tests run this sink against librdkafka's mock cluster (``test.mock.num.brokers``), not a
JVM broker: docs/fleet.md says what that covers. The consuming side is
:mod:`prunewarden.shipping._kafka_collect`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from prunewarden.__about__ import __version__
from prunewarden.shipping._kafka_url import parse_kafka_url
from prunewarden.shipping._reading import Shipped
from prunewarden.shipping._sinks import REQUEST_SECONDS, ShipError, destination_name

REPLICA_HEADER = "prunewarden-replica"
KIND_HEADER = "prunewarden-kind"
PREV_HASH_HEADER = "prunewarden-prev-hash"
HASH_HEADER = "prunewarden-hash"

# librdkafka's own log lines, at the levels it gives them: silent unless the caller's logging
# shows them (the CLI does, for warnings).
_client_log = logging.getLogger("prunewarden.shipping.kafka")


class KafkaSink:
    """Produces each batch to a Kafka topic and waits for every delivery report."""

    def __init__(self, url: str, *, timeout: float = REQUEST_SECONDS) -> None:
        destination = parse_kafka_url(url)
        self.name = destination_name(url)
        self._topic = destination.topic
        self._timeout = timeout
        self._last_error: str | None = None
        self._config: dict[str, Any] = {
            # A message not delivered within the timeout fails, rather than being retried by
            # librdkafka for minutes while the shipper has already sent its batch again.
            "message.timeout.ms": str(max(1, round(timeout * 1000))),
            **destination.settings,
            "bootstrap.servers": destination.bootstrap,
            "client.id": f"prunewarden-{__version__}",
            "error_cb": self._client_error,
            "logger": _client_log,
        }
        self._producer: Producer | None = self._open()

    def send(self, replica: str, records: Sequence[Shipped]) -> None:
        producer = self._producer or self._open()
        self._producer = producer
        failed: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failed.append(error)

        for record in records:
            headers: list[tuple[str, str | bytes | None]] = [
                (HASH_HEADER, record.hash),
                (REPLICA_HEADER, replica),
                (KIND_HEADER, record.kind),
                (PREV_HASH_HEADER, record.prev_hash),
            ]
            try:
                producer.produce(
                    self._topic,
                    value=record.data.rstrip(b"\n"),
                    key=replica,
                    headers=headers,
                    on_delivery=delivered,
                )
            except BufferError:
                self._discard_queued(producer)
                raise ShipError(f"{self.name}: the producer's queue is full") from None
            except KafkaException as exc:
                self._discard_queued(producer)
                raise ShipError(f"{self.name}: {_reason(exc)}") from None
        left = producer.flush(self._timeout)
        detail = f" (last: {self._last_error})" if self._last_error else ""
        if left:
            self._discard_queued(producer)
            message = (
                f"{self.name}: {left} of {len(records)} records not acknowledged within "
                f"{self._timeout:g} s{detail}"
            )
            raise ShipError(message)
        if failed:
            first = failed[0]
            if first.fatal():
                # An idempotent producer that cannot go on (fenced, sequence lost): the next
                # batch gets a new one.
                self.close()
            message = f"{self.name}: {len(failed)} of {len(records)} records not acknowledged"
            raise ShipError(f"{message}: {first.str()}{detail}", retry=not first.fatal())
        self._last_error = None

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        # What is not acknowledged is shipped again at the next start: do not wait for it.
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.flush(0)
        producer.close()

    def _open(self) -> Producer:
        try:
            return Producer(self._config)
        except KafkaException as exc:
            raise ShipError(f"--ship {self.name!r}: {_reason(exc)}", retry=False) from None

    def _discard_queued(self, producer: Producer) -> None:
        """Drop the messages not yet sent (their batch goes again as a whole), so that a
        broker that stays down does not grow the queue by a batch each try."""
        producer.purge(in_queue=True, in_flight=False, blocking=False)
        producer.poll(0)

    def _client_error(self, error: KafkaError) -> None:
        self._last_error = error.str()


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)
