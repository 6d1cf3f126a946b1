"""RedisSessionStore against a real redis-server on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
from _support.redis_server import running_redis
from prunewarden.server._redis import KEY_PREFIX, RedisSessionStore, SessionBusyError

STATE = {"state_version": 1, "session_id": "s", "halt": {"code": "collapse_detected"}}


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


class TestRedisStore:
    def test_round_trip_and_delete(self, redis_url: str) -> None:
        """save then load gives the state back; delete forgets it."""
        store = RedisSessionStore(redis_url, ttl=60)
        store.save("s", STATE)
        assert store.load("s") == STATE
        assert store.delete("s") is True
        assert store.load("s") is None
        store.close()

    def test_idle_state_expires(self, redis_url: str) -> None:
        """A state not read or written for the TTL is forgotten by Redis."""
        store = RedisSessionStore(redis_url, ttl=0.05)
        store.save("short", STATE)
        watcher = redis.Redis.from_url(redis_url)  # EXISTS does not renew the TTL; load would
        deadline = time.monotonic() + 30
        while watcher.exists(KEY_PREFIX + "short") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.load("short") is None
        watcher.close()
        store.close()

    def test_a_held_session_is_busy_for_another_caller(self, redis_url: str) -> None:
        """While one caller holds a session, another gets SessionBusyError after its wait."""
        first, second = RedisSessionStore(redis_url, ttl=60), RedisSessionStore(redis_url, ttl=60)
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with first.locked("busy"):
                held.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(30)
        with pytest.raises(SessionBusyError), second.locked("busy", wait=0.05):
            pass
        release.set()
        holder.join(30)
        with second.locked("busy", wait=5):  # released: free again
            pass
        first.close()
        second.close()
