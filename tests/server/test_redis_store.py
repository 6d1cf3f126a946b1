"""RedisSessionStore against a real redis-server on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from _support.redis_server import running_redis
from _support.session_faults import RedisProxy
from prunewarden import Engine, SessionIntegrityError, SessionStoreError
from prunewarden.server._redis import (
    KEY_PREFIX,
    RedisSessionStore,
    SessionBusyError,
    SessionStoreUnreachableError,
    lease_key,
    state_key,
)
from prunewarden.session import DeadlinePassedError, save_deadline

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
        while watcher.exists(state_key("short")) and time.monotonic() < deadline:
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


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def await_gone(client: redis.Redis, key: str) -> bool:
    """Whether ``key`` is gone (its expiry passed) within a bounded time."""
    deadline = time.monotonic() + 30
    while client.exists(key):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class TestLeases:
    def test_a_call_whose_lease_ran_out_cannot_overwrite_a_later_halt(self, redis_url: str) -> None:
        """A call outlives its (short, unrenewed) lease; another replica takes the session and
        halts it; the first call's save is refused (SessionStoreError naming LeaseLostError)
        and Redis keeps the halt."""
        slow = RedisSessionStore(redis_url, ttl=60, lease_ms=100, renew=False)
        other = RedisSessionStore(redis_url, ttl=60)
        watcher = redis.Redis.from_url(redis_url)
        with slow.locked("outlived"):
            session = Engine.default(store=slow).session("outlived")
            assert await_gone(watcher, lease_key("outlived"))  # the lease ran out
            with other.locked("outlived"):
                for cycle in range(1, 6):
                    Engine.default(store=other).session("outlived").observe_cycle(
                        narrowing(cycle), ["task"]
                    )
            with pytest.raises(SessionStoreError) as raised:
                session.observe_turn(0.5, 10)
        assert raised.value.error.startswith("LeaseLostError")
        assert other.load("outlived")["halt"]["code"] == "collapse_detected"  # type: ignore[index]
        for client in (slow, other, watcher):
            client.close()

    def test_a_running_call_keeps_its_lease(self, redis_url: str) -> None:
        """A 300 ms lease renewed every 100 ms: a call holding the session for more than a
        lease keeps it (another caller is busy meanwhile) and saves."""
        store, other = (
            RedisSessionStore(redis_url, ttl=60, lease_ms=300),
            RedisSessionStore(redis_url, ttl=60),
        )
        with store.locked("long") as lease:
            assert lease.wait_renewals(4, 30)
            with pytest.raises(SessionBusyError), other.locked("long", wait=0):
                pass
            store.save("long", STATE)
        assert (lease.lost, store.load("long")) == (False, STATE)
        store.close()
        other.close()

    def test_a_call_past_its_deadline_saves_nothing(self, redis_url: str) -> None:
        """Past the call's deadline its lease is not renewed and a save raises
        DeadlinePassedError: the stored state is unchanged."""
        store = RedisSessionStore(redis_url, ttl=60, lease_ms=300)
        store.save("late", STATE)
        with save_deadline(time.monotonic() - 1), store.locked("late") as lease:
            store.renew_leases()
            with pytest.raises(DeadlinePassedError):
                store.save("late", {**STATE, "halt": None})
        assert (lease.renewals, store.load("late")) == (0, STATE)
        store.close()


class TestSealedStates:
    @pytest.mark.parametrize(
        "edit",
        [
            lambda raw: raw.replace(b'"halt":{"code":"collapse_detected"}', b'"halt":null'),
            lambda _raw: b"null",
            lambda raw: raw.split(b"\n", 1)[1],  # the state alone, as an older version wrote it
        ],
        ids=["halt-null", "null", "unsealed"],
    )
    def test_an_edited_state_is_refused(self, redis_url: str, edit: Any) -> None:
        """A stored state edited in Redis raises SessionIntegrityError instead of loading."""
        store, raw_client = RedisSessionStore(redis_url, ttl=60), redis.Redis.from_url(redis_url)
        store.save("edited", STATE)
        raw = raw_client.get(state_key("edited"))
        assert isinstance(raw, bytes)
        raw_client.set(state_key("edited"), edit(raw))
        with pytest.raises(SessionIntegrityError):
            store.load("edited")
        store.close()
        raw_client.close()

    def test_errors_do_not_name_the_redis_address(self, redis_url: str) -> None:
        """A dropped connection is raised as SessionStoreUnreachableError, saying what failed
        and not where."""
        proxy = RedisProxy(redis_url)
        store = RedisSessionStore(proxy.url, ttl=60)
        store.save("far", STATE)
        proxy.arm(b"GETEX")
        with pytest.raises(SessionStoreUnreachableError) as raised:
            store.load("far")
        assert str(raised.value) == "ConnectionError during the session store's load"
        assert str(proxy.port) not in str(raised.value)
        store.close()
        proxy.close()

    def test_states_of_an_older_version_are_sealed_once(self, redis_url: str) -> None:
        """The first store to seal a database seals the unsealed states as they are (they load);
        a later one seals nothing, and a state written unsealed after that is refused."""
        url = redis_url.rsplit("/", 1)[0] + "/1"  # a database of its own: the marker is per db
        raw_client = redis.Redis.from_url(url)
        raw_client.set(KEY_PREFIX + "old", json.dumps(STATE))  # untagged, as it was then
        first, second = RedisSessionStore(url, ttl=60), RedisSessionStore(url, ttl=60)
        assert first.tag_untagged() == 1
        assert (first.seal_unsealed(), second.seal_unsealed()) == (1, 0)
        assert second.load("old") == STATE
        raw_client.set(state_key("later"), json.dumps(STATE))
        with pytest.raises(SessionIntegrityError, match="no integrity seal"):
            second.load("later")
        for client in (first, second, raw_client):
            client.close()


class TestHashTags:
    def test_untagged_states_of_an_older_version_are_moved_once(self, redis_url: str) -> None:
        """A version before hash tags kept ``prunewarden:session:<id>``: the first store to
        tag a database moves each such state to its tagged key (TTL kept), where it loads
        with its halt; a later one moves nothing; one already tagged is left as it is."""
        url = redis_url.rsplit("/", 1)[0] + "/2"  # a database of its own: the marker is per db
        raw_client = redis.Redis.from_url(url)
        writer = RedisSessionStore(url, ttl=60)
        for session_id in ("older", "kept"):
            writer.save(session_id, STATE)
        raw_client.rename(state_key("older"), KEY_PREFIX + "older")
        raw_client.pexpire(KEY_PREFIX + "older", 40_000)
        first, second = RedisSessionStore(url, ttl=60), RedisSessionStore(url, ttl=60)
        assert (first.tag_untagged(), second.tag_untagged()) == (1, 0)
        assert (second.load("older"), second.load("kept")) == (STATE, STATE)
        assert raw_client.exists(KEY_PREFIX + "older") == 0
        assert 0 < int(raw_client.pttl(state_key("older"))) <= 60_000
        for client in (writer, first, second, raw_client):
            client.close()

    def test_a_plain_url_cannot_take_a_cluster_setting(self, redis_url: str) -> None:
        """``?replicas=N`` is read by the store; a value that is not a count is refused."""
        with pytest.raises(ValueError, match="replicas='two'"):
            RedisSessionStore(redis_url + "?replicas=two", ttl=60)
        store = RedisSessionStore(redis_url + "?replicas=0", ttl=60)
        store.save("plain", STATE)
        assert store.load("plain") == STATE
        store.close()

    def test_a_save_no_replica_confirms_is_refused(self, redis_url: str) -> None:
        """``?replicas=1`` on a primary without replicas: every save waits for one, none
        confirms it, and the save raises rather than being taken as kept."""
        store = RedisSessionStore(redis_url + "?replicas=1", ttl=60)
        with store.locked("unconfirmed"), pytest.raises(SessionStoreUnreachableError) as raised:
            store.save("unconfirmed", STATE)
        assert str(raised.value) == "ReplicasBehindError during the session store's save"
        store.close()
