"""``prunewarden audit collect --from kafka://...``: the consuming side of the Kafka sink.

Reads the topic a :class:`~prunewarden.shipping._kafka.KafkaSink` produces to, as a member of
a consumer group (``group.id``, default ``prunewarden-collect``), and writes each replica's
records (the message key) into ``DIR/REPLICA.jsonl`` through the same
:class:`~prunewarden.shipping._receiving.ReplicaChain` the HTTP collector writes with: a
record is taken only where it continues its replica's chain, a duplicate (at-least-once
delivery brings them) is dropped, a ``records_dropped`` record bridges a gap, a
``log_rotated`` record rotates the file. Offsets are committed only once what was read is
synced to the files, so a collector killed at any moment reads again from the last commit
and drops what it had.

A message that cannot be taken (no replica key, not a sealed record, a gap in its replica's
chain, a forgery) is skipped and reported through ``on_refused``, naming its partition and
offset; the replica's file stays at its last good record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from prunewarden.__about__ import __version__
from prunewarden.shipping._kafka_url import DestinationError, parse_kafka_url
from prunewarden.shipping._receiving import REPLICA_NAME, BatchRefused, ReplicaChain
from prunewarden.shipping._sinks import ShipError, destination_name

DEFAULT_GROUP = "prunewarden-collect"
BATCH_MESSAGES = 1000  # read at most this many messages before writing and committing
# Settings that the producer side's defaults add and a consumer has no use for.
_PRODUCER_ONLY = frozenset({"acks", "request.required.acks", "enable.idempotence"})
_client_log = logging.getLogger("prunewarden.shipping.kafka")


class KafkaCollector:
    """Consumes ``url`` (``kafka://HOST:PORT[,HOST:PORT]/TOPIC[?NAME=VALUE&...]``, the query
    holding librdkafka consumer settings) into one file per replica under ``directory``;
    ``key``: the HMAC key keyed records are checked with (None: their links only)."""

    def __init__(
        self,
        url: str,
        directory: Path,
        *,
        key: bytes | None = None,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        try:
            source = parse_kafka_url(url)
        except DestinationError as exc:
            raise ShipError(str(exc).replace("--ship", "--from", 1), retry=False) from None
        self.name = destination_name(url)
        self.directory = directory
        self.group = source.settings.get("group.id", DEFAULT_GROUP)
        self._topic = source.topic
        self._key = key
        self._on_refused = on_refused or (lambda _line: None)
        self.chains: dict[str, ReplicaChain] = {}
        self.refused = 0
        config: dict[str, Any] = {
            "group.id": DEFAULT_GROUP,
            "auto.offset.reset": "earliest",
            **{k: v for k, v in source.settings.items() if k not in _PRODUCER_ONLY},
            "enable.auto.commit": "false",
            "bootstrap.servers": source.bootstrap,
            "client.id": f"prunewarden-collect-{__version__}",
            "logger": _client_log,
        }
        directory.mkdir(parents=True, exist_ok=True)
        try:
            self._consumer = Consumer(config)
        except KafkaException as exc:
            raise ShipError(f"--from {self.name!r}: {_reason(exc)}", retry=False) from None
        self._consumer.subscribe([self._topic])

    def run(self, stop: threading.Event, poll_seconds: float = 0.5) -> None:
        """Collect until ``stop`` is set."""
        while not stop.is_set():
            self.step(poll_seconds)

    def step(self, poll_seconds: float = 0.5) -> int:
        """Read what arrived within ``poll_seconds``, write it, commit; the records taken."""
        messages = self._consumer.consume(BATCH_MESSAGES, poll_seconds)
        by_replica: dict[str, list[Message]] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:  # noqa: SLF001 - librdkafka's name
                    _client_log.warning("%s: %s", self.name, error.str())
                continue
            replica = _replica_of(message)
            if replica is None:
                self._refuse(message, "no replica in its key")
                continue
            by_replica.setdefault(replica, []).append(message)
        taken = sum(self._take(replica, batch) for replica, batch in by_replica.items())
        if messages:
            try:
                self._consumer.commit(asynchronous=False)
            except KafkaException as exc:  # read again after a restart, and dropped then
                _client_log.warning("%s: offsets not committed: %s", self.name, _reason(exc))
        return taken

    def close(self) -> None:
        self._consumer.close()

    def _take(self, replica: str, messages: list[Message]) -> int:
        chain = self.chains.get(replica)
        if chain is None:
            chain = self.chains[replica] = ReplicaChain(self.directory, replica, self._key)
        try:
            return chain.accept(b"".join(_line(m) for m in messages)).accepted
        except BatchRefused:
            pass  # one message spoils the batch: take them one by one, skipping the bad ones
        taken = 0
        for message in messages:
            try:
                taken += chain.accept(_line(message)).accepted
            except BatchRefused as refusal:
                self._refuse(message, f"replica {replica}: {refusal.kind}: {refusal.detail}")
        return taken

    def _refuse(self, message: Message, why: str) -> None:
        self.refused += 1
        where = f"{self._topic}[{message.partition()}]@{message.offset()}"
        self._on_refused(f"{self.name}: {where}: skipped: {why}")


def _replica_of(message: Message) -> str | None:
    key = message.key()
    name = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    return name if isinstance(name, str) and REPLICA_NAME.fullmatch(name) else None


def _line(message: Message) -> bytes:
    value = message.value()
    data = value if isinstance(value, bytes) else (value or "").encode("utf-8")
    return data.rstrip(b"\n") + b"\n"


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)
