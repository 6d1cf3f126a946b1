"""Session states in Redis, for several server replicas behind one address.

One key per session (``prunewarden:session:{<id>}``) holding its ``session-state.v4`` document
after its integrity seal (:mod:`prunewarden.session._seal`), written whole with the idle TTL as
its expiry, and read by ``GETEX``, which renews the TTL: Redis forgets an idle session by
itself, on every replica at once. The id in braces is the key's hash tag: a session's state and
its lease (``prunewarden:lock:{<id>}``) are in one slot of a Redis Cluster, so the Lua scripts
that touch both run there (:mod:`prunewarden.server._redis_client` names the client).

Replicas must not interleave two calls of one session (each would load the same state and the
later save would drop the earlier change). :meth:`RedisSessionStore.locked` takes a lease on the
session (``SET NX PX`` of a random token, released only by its holder): a call that cannot get
it within ``LOCK_WAIT_SECONDS`` is refused as a conflict (HTTP 409) rather than risk losing a
halt. While the call runs, a background thread renews its lease every third of the lease, so a
long call keeps it; past the call's deadline (:func:`~prunewarden.session.save_deadline`) the
lease is no longer renewed. Every save under a lease is fenced: one Lua script writes the state
only while the lease key still holds the call's token, so a call whose lease ran out (and that
another call may have taken since) cannot write over what that call saved.

Errors of the Redis client name the server's address; the store raises them again as
:class:`SessionStoreUnreachableError`, which says what failed but not where, so no problem
document or decision shows an internal address (the log of the process does).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError, RedisClusterException, RedisError, ResponseError

from prunewarden.server._redis_client import REPLICA_WAIT_MS, is_cluster_node, redis_target
from prunewarden.session._seal import key_from_env, open_state, seal_state, state_text
from prunewarden.session._store import call_deadline, check_deadline

KEY_PREFIX = "prunewarden:session:"
LOCK_PREFIX = "prunewarden:lock:"
LOCK_LEASE_MS = 30_000  # a holder that dies frees the session after this long
LOCK_WAIT_SECONDS = 5.0
SEALED_MARKER = "prunewarden:sealed"  # set once the states of older versions were sealed
TAGGED_MARKER = "prunewarden:tagged"  # set once the untagged keys of older versions were moved
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
# KEYS: the state, the lease; ARGV: the lease's token, the sealed state, its TTL in ms.
_FENCED_SET = """
if redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""
# KEYS: a state; ARGV: the unsealed value read, the same value sealed.
_SEAL_IF_UNCHANGED = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('set', KEYS[1], ARGV[2], 'KEEPTTL')
    return 1
end
return 0
"""

_diagnostics = logging.getLogger("prunewarden.server")


class SessionBusyError(Exception):
    """Another call (on this replica or another) holds the session for longer than we wait."""


class SessionStoreUnreachableError(RedisError):
    """Redis failed (a connection dropped, a timeout...); the message names no address."""


class ReplicasBehindError(RedisError):
    """Fewer replicas than asked confirmed a save in time: a failover could lose it."""


class LeaseLostError(Exception):
    """The call's lease on the session ran out (and may be another call's now): its state is
    not saved."""


@dataclass(eq=False)
class Lease:
    """One call's hold on a session: its token, until when it is renewed, how often it was."""

    key: str
    token: str
    deadline: float | None
    renewals: int = 0
    lost: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_renewals(self, count: int, timeout: float) -> bool:
        """Wait until the lease was renewed ``count`` times (False after ``timeout``)."""
        with self.changed:
            return self.changed.wait_for(lambda: self.renewals >= count, timeout)


class RedisSessionStore:
    """A session store (``load``, ``save``, ``delete``) in Redis, with an idle TTL.

    ``lease_ms``: how long a call's lease lasts without renewal; ``renew``: whether a thread
    renews the leases of running calls (turned off only to show what it prevents);
    ``hmac_key_env``: the environment variable holding the key states are sealed with."""

    def __init__(
        self,
        url: str,
        *,
        ttl: float,
        lease_ms: int = LOCK_LEASE_MS,
        renew: bool = True,
        hmac_key_env: str | None = None,
    ) -> None:
        self.url = url
        self.ttl_ms = max(1, int(ttl * 1000))
        self.lease_ms = lease_ms
        self._key = key_from_env(hmac_key_env)
        with _reached("connect"):
            target = redis_target(url)
        self._redis = target.client
        self.replicas = target.replicas
        self._release = self._redis.register_script(_RELEASE)
        self._renew = self._redis.register_script(_RENEW)
        self._fenced_set = self._redis.register_script(_FENCED_SET)
        self._seal_if_unchanged = self._redis.register_script(_SEAL_IF_UNCHANGED)
        self._held = threading.local()  # session id -> the Lease this thread holds
        self._leases: set[Lease] = set()
        self._leases_lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._renews = renew

    def __repr__(self) -> str:
        return f"RedisSessionStore({self.url!r})"

    def ping(self) -> bool:
        with _reached("ping"):
            return bool(self._redis.ping())

    def is_cluster_node(self) -> bool:
        """Whether a ``redis://`` URL reached a node of a Redis Cluster (a
        ``redis+cluster://`` URL is what reaches one)."""
        with _reached("ping"):
            return is_cluster_node(self._redis)

    def load(self, session_id: str) -> dict[str, Any] | None:
        with _reached("load"):
            raw = self._redis.getex(state_key(session_id), px=self.ttl_ms)
        return None if raw is None else self._open(session_id, raw)

    def peek(self, session_id: str) -> dict[str, Any] | None:
        """The state, without renewing its TTL: looking at a session is not using it."""
        with _reached("load"):
            raw = self._redis.get(state_key(session_id))
        return None if raw is None else self._open(session_id, raw)

    def save(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Write the state; under this thread's lease on the session, only while it holds
        (:class:`LeaseLostError` once it moved on), and not past the call's deadline."""
        text = state_text(state)
        value = seal_state(session_id, text, self._key) + "\n" + text
        lease = self._lease_of(session_id)
        check_deadline()
        with _reached("save"):
            saved = self._written(state_key(session_id), value, lease)
        if not saved and lease is not None:
            lease.lost = True
            msg = f"the lease on session {session_id!r} ran out before its state was saved"
            raise LeaseLostError(msg)

    def delete(self, session_id: str) -> bool:
        """Forget a session; whether it was held."""
        with _reached("delete"):
            return bool(self._redis.delete(state_key(session_id)))

    @contextmanager
    def locked(self, session_id: str, wait: float = LOCK_WAIT_SECONDS) -> Iterator[Lease]:
        """Hold the session for one call; :class:`SessionBusyError` after ``wait`` seconds."""
        key, token = lease_key(session_id), secrets.token_hex(16)
        deadline = time.monotonic() + wait
        pause = 0.001
        with _reached("lease"):
            while not self._redis.set(key, token, nx=True, px=self.lease_ms):
                if time.monotonic() > deadline:
                    msg = f"session {session_id!r} is busy with another call"
                    raise SessionBusyError(msg)
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        lease = Lease(key, token, call_deadline())
        self._hold(session_id, lease)
        try:
            yield lease
        finally:
            self._let_go(session_id, lease)
            try:
                self._release(keys=[key], args=[token])
            except RedisError as exc:  # the lease runs out by itself
                _diagnostics.warning("a session lease could not be released: %s", exc)

    def seal_unsealed(self) -> int:
        """Seal, as they are, the states a version before seals wrote; once per Redis database
        (the first replica started after the upgrade does it). Later, a state without a seal
        is refused. Returns how many were sealed."""
        sealed = 0
        with _reached("upgrade"):
            if not self._redis.set(SEALED_MARKER, "1", nx=True):
                return 0
            for key in self._redis.scan_iter(match=KEY_PREFIX + "*", count=500):
                raw = self._redis.get(key)
                if not isinstance(raw, bytes) or not raw.startswith(b"{"):
                    continue  # sealed already, gone, or not a state (refused when read)
                session_id = _session_of(key.decode("utf-8", "replace"))
                text = raw.decode("utf-8", "replace")
                value = seal_state(session_id, text, self._key) + "\n" + text
                sealed += int(self._seal_if_unchanged(keys=[key], args=[raw, value]))
        return sealed

    def tag_untagged(self) -> int:
        """Move the states a version before hash tags wrote (``prunewarden:session:<id>``) to
        their tagged keys, TTL kept, once per database (the first replica started after the
        upgrade does it; the marker is set once every key was moved, so a replica killed
        halfway leaves the rest to the next). A tagged state already there is newer and kept.
        Returns how many were moved."""
        moved = 0
        with _reached("upgrade"):
            if self._redis.exists(TAGGED_MARKER):
                return 0
            for key in self._redis.scan_iter(match=KEY_PREFIX + "[^{]*", count=500):
                old = key.decode("utf-8", "replace")
                moved += self._move(old, state_key(old.removeprefix(KEY_PREFIX)))
            self._redis.set(TAGGED_MARKER, "1")
        return moved

    def renew_leases(self) -> None:
        """Renew the lease of every call running (one round of the renewing thread): a call
        past its deadline is not renewed, and one whose lease moved on is marked lost."""
        with self._leases_lock:
            leases = list(self._leases)
        now = time.monotonic()
        for lease in leases:
            if lease.lost or (lease.deadline is not None and now > lease.deadline):
                continue
            try:
                renewed = self._renew(keys=[lease.key], args=[lease.token, self.lease_ms])
            except RedisError as exc:  # tried again next round, while the lease lasts
                _diagnostics.warning("a session lease could not be renewed: %s", exc)
                continue
            with lease.changed:
                lease.lost = not renewed
                lease.renewals += 1 if renewed else 0
                lease.changed.notify_all()

    def close(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        self._redis.close()

    def _written(self, key: str, value: str, lease: Lease | None = None) -> bool:
        """Write a state (fenced by ``lease``); whether it was written. With replicas to wait
        for, the write and its ``WAIT`` go on one connection to the key's primary (``WAIT``
        counts the writes of its own connection); :class:`ReplicasBehindError` when fewer
        replicas confirm it in time."""
        fenced: tuple[list[str], list[str | int]] | None = None
        if lease is not None:
            fenced = ([key, lease.key], [lease.token, value, self.ttl_ms])
        if not self.replicas:
            if fenced is None:
                return bool(self._redis.set(key, value, px=self.ttl_ms))
            return bool(self._fenced_set(keys=fenced[0], args=fenced[1]))
        try:
            written, confirmed = self._written_and_waited(key, value, fenced)
        except (MovedError, RedisConnectionError):
            if not isinstance(self._redis, RedisCluster):
                raise
            # The slot moved (a failover, a resharding): learn where, and try once more.
            self._redis.nodes_manager.initialize()
            written, confirmed = self._written_and_waited(key, value, fenced)
        if written and int(confirmed) < self.replicas:
            msg = f"{confirmed} of {self.replicas} replicas confirmed the save in time"
            raise ReplicasBehindError(msg)
        return bool(written)

    def _written_and_waited(
        self, key: str, value: str, fenced: tuple[list[str], list[str | int]] | None
    ) -> tuple[Any, Any]:
        primary = self._redis
        if isinstance(primary, RedisCluster):
            node = primary.get_node_from_key(key)  # type: ignore[no-untyped-call]
            primary = primary.get_redis_connection(node)
        pipe = primary.pipeline(transaction=False)
        if fenced is None:
            pipe.set(key, value, px=self.ttl_ms)
        else:
            self._fenced_set(keys=fenced[0], args=fenced[1], client=pipe)
        pipe.wait(self.replicas, REPLICA_WAIT_MS)
        written, confirmed = pipe.execute()
        return written, confirmed

    def _move(self, old: str, new: str) -> int:
        """Move one state to its tagged key: atomically on one server (``RENAMENX``); on a
        cluster, where the two keys are in different slots, copied (``DUMP``, ``RESTORE``)
        then deleted. A tagged state already there is newer: the old one is dropped."""
        if not isinstance(self._redis, RedisCluster):
            moved = bool(self._redis.renamenx(old, new))
            if not moved:
                self._redis.delete(old)
            return int(moved)
        dumped = self._redis.dump(old)
        if not isinstance(dumped, bytes):
            return 0  # gone meanwhile
        ttl = int(self._redis.pttl(old))
        moved = True
        try:
            self._redis.restore(new, max(ttl, 0), dumped)
        except ResponseError as exc:
            if "BUSYKEY" not in str(exc):
                raise
            moved = False
        self._redis.delete(old)
        return int(moved)

    def _open(self, session_id: str, raw: bytes | str) -> dict[str, Any]:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        seal, newline, body = text.partition("\n")
        if not newline or text.startswith("{"):  # no seal: written before states were sealed
            return open_state(session_id, text, None, self._key)
        return open_state(session_id, body, seal, self._key)

    def _lease_of(self, session_id: str) -> Lease | None:
        held: dict[str, Lease] = getattr(self._held, "leases", {})
        return held.get(session_id)

    def _hold(self, session_id: str, lease: Lease) -> None:
        if not hasattr(self._held, "leases"):
            self._held.leases = {}
        self._held.leases[session_id] = lease
        with self._leases_lock:
            self._leases.add(lease)
            if self._renews and self._renewer is None:
                self._renewer = threading.Thread(
                    target=self._renew_loop, name="prunewarden-lease-renewer", daemon=True
                )
                self._renewer.start()

    def _let_go(self, session_id: str, lease: Lease) -> None:
        self._held.leases.pop(session_id, None)
        with self._leases_lock:
            self._leases.discard(lease)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_ms / 3000):
            self.renew_leases()


def state_key(session_id: str) -> str:
    """The key of a session's state; its hash tag (the id in braces) is its lease's too."""
    return f"{KEY_PREFIX}{{{session_id}}}"


def lease_key(session_id: str) -> str:
    """The key of the lease on a session, in the slot of its state."""
    return f"{LOCK_PREFIX}{{{session_id}}}"


def _session_of(key: str) -> str:
    tagged = key.removeprefix(KEY_PREFIX)
    return tagged[1:-1] if tagged.startswith("{") and tagged.endswith("}") else tagged


@contextmanager
def _reached(action: str) -> Iterator[None]:
    """Redis errors as :class:`SessionStoreUnreachableError`, without the server's address."""
    try:
        yield
    except SessionStoreUnreachableError:
        raise
    except (RedisError, RedisClusterException) as exc:
        _diagnostics.warning("session store (Redis) %s failed: %s", action, exc)
        msg = f"{type(exc).__name__} during the session store's {action}"
        raise SessionStoreUnreachableError(msg) from None
