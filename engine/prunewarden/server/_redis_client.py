"""The Redis client a ``--sessions`` URL names: one server, or a Redis Cluster.

``redis://HOST:PORT/DB`` (also ``rediss://`` and ``unix://``) is one server (a primary, with or
without replicas). ``redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]`` (TLS:
``rediss+cluster://``) is a Redis Cluster reached through any of the nodes listed (the client
learns the others from them). Either may end with ``?replicas=N``: each save then waits until
``N`` replicas of the key's primary hold it (``WAIT``), so a primary lost just after a save
cannot take the save with it; a save that ``N`` replicas do not confirm within
``REPLICA_WAIT_MS`` is not answered as made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ResponseError
from redis.retry import Retry

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
REPLICA_WAIT_MS = 1000  # how long a save waits for its replicas before it is refused
_TIMEOUTS: dict[str, Any] = {"socket_timeout": 10, "socket_connect_timeout": 10}


@dataclass(frozen=True)
class RedisTarget:
    """What a URL names: a client (of one server or of a cluster), and how many replicas a
    save waits for."""

    client: redis.Redis | RedisCluster
    replicas: int


def redis_target(url: str) -> RedisTarget:
    """The client for ``url``; ``ValueError`` naming the part of the URL that is wrong."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    replicas = _replicas(dict(query).get("replicas"))
    rest = urlencode([(name, value) for name, value in query if name != "replicas"])
    if parts.scheme not in CLUSTER_SCHEMES:
        plain = urlunsplit(parts._replace(query=rest))
        return RedisTarget(redis.Redis.from_url(plain, **_TIMEOUTS), replicas)
    if rest:
        msg = f"unknown setting {rest.split('=', 1)[0]!r} (a cluster URL takes only replicas=N)"
        raise ValueError(msg)
    if parts.path not in ("", "/", "/0"):
        msg = f"a database {parts.path!r}: a Redis Cluster has only database 0"
        raise ValueError(msg)
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    client = RedisCluster(
        startup_nodes=[_node(address) for address in hosts.split(",")],
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=parts.scheme == "rediss+cluster",
        # A few quick tries while a replica takes over, then the error (a 503): a call does
        # not wait out a failover for seconds at every command.
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3),
        **_TIMEOUTS,
    )
    return RedisTarget(client, replicas)


def is_cluster_node(client: redis.Redis | RedisCluster) -> bool:
    """Whether a client of one server reaches a node of a Redis Cluster (which would answer
    ``MOVED`` for most sessions)."""
    if isinstance(client, RedisCluster):
        return False
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    except ResponseError:  # a server that does not answer INFO (some hosted ones) is no node
        return False


def _node(address: str) -> ClusterNode:
    host, colon, port = address.strip().rpartition(":")
    if not colon:
        host, port = port, "6379"
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a node {address!r}: expected HOST:PORT")
    return ClusterNode(host, int(port))  # type: ignore[no-untyped-call]


def _replicas(value: str | None) -> int:
    if value is None:
        return 0
    if not value.isdigit() or int(value) > 16:
        raise ValueError(f"replicas={value!r}: expected a number of replicas from 0 to 16")
    return int(value)
