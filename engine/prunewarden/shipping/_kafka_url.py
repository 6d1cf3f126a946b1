"""What a ``kafka://HOST:PORT[,HOST:PORT]/TOPIC[?NAME=VALUE&...]`` destination says, read
without the Kafka client, so that a URL that cannot work is refused (with the part that is
wrong) whether or not the ``kafka`` extra is installed.

The query holds librdkafka producer settings (``acks=all``, ``compression.type=zstd``,
``security.protocol=SSL`` ...), which the client checks when the sink is made. Some are refused
here because they would break what shipping promises: ``acks=0`` (no acknowledgement, so no
at-least-once), the bootstrap servers (the URL's hosts say them), callbacks, and passwords (a
URL is seen in process listings and shell histories: a password comes from
``$PRUNEWARDEN_SHIP_KAFKA_PASSWORD``).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass, field

from prunewarden.shipping._sinks import ShipError, destination_name

DEFAULT_PORT = 9092
PASSWORD_ENV = "PRUNEWARDEN_SHIP_KAFKA_PASSWORD"  # noqa: S105 - the variable's name
# Kafka's own rule for topic names (kafka.common.internals.Topic).
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+")
# Settings the URL may not change: shipping sets them, or they cannot travel in a URL.
_OWNED = frozenset({"bootstrap.servers", "metadata.broker.list", "client.id", "logger"})
_ACKS = frozenset({"all", "-1", "1"})
# What at-least-once shipping asks of a producer unless the URL says otherwise.
DEFAULTS = {"acks": "all", "enable.idempotence": "true"}


class DestinationError(ShipError):
    """A ``--ship`` URL that names no usable destination: ``part`` is where it is wrong (the
    hosts, the topic, or ``?NAME``), ``value`` what it holds there."""

    def __init__(self, url: str, part: str, value: str, problem: str) -> None:
        self.destination = destination_name(url)
        self.part = part
        self.value = value
        super().__init__(f"--ship {self.destination!r}: {part}: {value!r} {problem}", retry=False)


@dataclass(frozen=True, slots=True)
class KafkaDestination:
    """The brokers to bootstrap from, the topic, and the producer settings."""

    servers: tuple[str, ...]
    topic: str
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.servers)


def parse_kafka_url(url: str) -> KafkaDestination:
    """The destination ``url`` names; :class:`DestinationError` for one that cannot work."""
    parts = urllib.parse.urlsplit(url)
    servers = tuple(_server(url, item) for item in parts.netloc.split(","))
    topic = parts.path.removeprefix("/")
    if not _TOPIC.fullmatch(topic) or topic in {".", ".."}:
        problem = "is not a topic name (1 to 249 of A-Z a-z 0-9 . _ -)"
        raise DestinationError(url, "topic", topic, problem)
    settings = dict(DEFAULTS)
    try:
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise DestinationError(url, "query", parts.query, "is not NAME=VALUE&...") from None
    for name, value in query:
        _check_setting(url, name, value)
        settings[name] = value
    password = os.environ.get(PASSWORD_ENV)
    if password:
        settings["sasl.password"] = password
    return KafkaDestination(servers, topic, settings)


def _server(url: str, item: str) -> str:
    """``HOST:PORT`` (the port 9092 when not given)."""
    host, colon, port = item.rpartition(":") if not item.endswith("]") else (item, "", "")
    if not colon:
        host, port = item, str(DEFAULT_PORT)
    if "@" in item or not _HOST.fullmatch(host):
        raise DestinationError(url, "broker", item, "is not HOST:PORT")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise DestinationError(url, "broker", item, "has no port between 1 and 65535")
    return f"{host}:{int(port)}"


def _check_setting(url: str, name: str, value: str) -> None:
    where = f"?{name}"
    if name in _OWNED or name.endswith(("_cb", ".cb")):
        raise DestinationError(url, where, value, "is set by prunewarden, not by the URL")
    if name.endswith("password"):
        problem = f"does not belong in a URL: set ${PASSWORD_ENV}"
        raise DestinationError(url, where, "…", problem)
    if name in {"acks", "request.required.acks"} and value not in _ACKS:
        problem = "cannot ship at least once: expected all, -1 or 1"
        raise DestinationError(url, where, value, problem)
