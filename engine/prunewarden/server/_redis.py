"""Session states in Redis, for several server replicas behind one address.

One key per session (``prunewarden:session:<id>``) holding its ``session-state.v2`` document,
written whole by ``SET`` with the idle TTL as its expiry, and read by ``GETEX``, which renews the
TTL: Redis forgets an idle session by itself, on every replica at once.

Replicas must not interleave two calls of one session (each would load the same state and the
later save would drop the earlier change). :meth:`RedisSessionStore.locked` takes a short lease
on the session (``SET NX PX``, released only by its holder): a call that cannot get it within
``LOCK_WAIT_SECONDS`` is refused as a conflict (HTTP 409) rather than risk losing a halt.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import redis

KEY_PREFIX = "prunewarden:session:"
LOCK_PREFIX = "prunewarden:lock:"
LOCK_LEASE_MS = 30_000  # a holder that dies frees the session after this long
LOCK_WAIT_SECONDS = 5.0
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class SessionBusyError(Exception):
    """Another call (on this replica or another) holds the session for longer than we wait."""


class RedisSessionStore:
    """A session store (``load``, ``save``, ``delete``) in Redis, with an idle TTL."""

    def __init__(self, url: str, *, ttl: float) -> None:
        self.url = url
        self.ttl_ms = max(1, int(ttl * 1000))
        self._redis = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)
        self._release = self._redis.register_script(_RELEASE)

    def __repr__(self) -> str:
        return f"RedisSessionStore({self.url!r})"

    def ping(self) -> bool:
        return bool(self._redis.ping())

    def load(self, session_id: str) -> dict[str, Any] | None:
        raw = self._redis.getex(KEY_PREFIX + session_id, px=self.ttl_ms)
        if raw is None:
            return None
        state: dict[str, Any] = json.loads(raw)
        return state

    def peek(self, session_id: str) -> dict[str, Any] | None:
        """The state, without renewing its TTL: looking at a session is not using it."""
        raw = self._redis.get(KEY_PREFIX + session_id)
        if raw is None:
            return None
        state: dict[str, Any] = json.loads(raw)
        return state

    def save(self, session_id: str, state: Mapping[str, Any]) -> None:
        text = json.dumps(state, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        self._redis.set(KEY_PREFIX + session_id, text, px=self.ttl_ms)

    def delete(self, session_id: str) -> bool:
        """Forget a session; whether it was held."""
        return bool(self._redis.delete(KEY_PREFIX + session_id))

    @contextmanager
    def locked(self, session_id: str, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
        """Hold the session for one call; :class:`SessionBusyError` after ``wait`` seconds."""
        key, token = LOCK_PREFIX + session_id, secrets.token_hex(16)
        deadline = time.monotonic() + wait
        pause = 0.001
        while not self._redis.set(key, token, nx=True, px=LOCK_LEASE_MS):
            if time.monotonic() > deadline:
                msg = f"session {session_id!r} is busy with another call"
                raise SessionBusyError(msg)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        try:
            yield
        finally:
            self._release(keys=[key], args=[token])

    def close(self) -> None:
        self._redis.close()
