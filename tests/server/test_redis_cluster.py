"""Sessions on a real Redis Cluster on loopback: hash-tagged keys, the fenced save in a slot,
two servers sharing sessions through different nodes, and a primary killed mid-run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from _support.redis_cluster import Cluster, running_cluster
from _support.server import running_server
from prunewarden import SessionStoreError
from prunewarden.server._config import ServerConfigError
from prunewarden.server._redis import (
    KEY_PREFIX,
    LeaseLostError,
    RedisSessionStore,
    SessionStoreUnreachableError,
    lease_key,
    state_key,
)
from prunewarden.server._run import open_store
from redis.crc import key_slot

HEALTHY = [{"c": 0.9, "a": 0.6, "b": 0.1}, {"c": 0.88, "a": 0.55, "b": 0.12}]
COLLAPSED = {"c": 0.3, "a": 0.31, "b": 0.3}
EVICTION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "tool_output", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.12,
}


def halted(number: int) -> dict[str, Any]:
    return {"state_version": 1, "number": number, "halt": {"code": "collapse_detected"}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three primaries, no replicas, for the tests that kill nothing."""
    with running_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three primaries with a replica each; its tests pause or kill nodes."""
    with running_cluster(tmp_path_factory.mktemp("replicated"), replicas=1) as running:
        yield running


def ids_on(cluster: Cluster, primary: int, count: int, prefix: str) -> list[str]:
    """``count`` session ids whose keys the primary on port ``primary`` serves."""
    slots = cluster.slots()[primary]
    ids = (f"{prefix}-{n}" for n in range(10_000))
    return [i for i in ids if key_slot(state_key(i).encode()) in slots][:count]


class TestKeys:
    @pytest.mark.parametrize("session_id", ["run-7", "a}b", "{x}", "é/ü", "x" * 256])
    def test_a_state_and_its_lease_share_a_slot(self, cluster: Cluster, session_id: str) -> None:
        """Whatever the id holds (braces included), the cluster hashes both keys to one slot."""
        with redis.Redis(port=cluster.live_ports()[0]) as node:
            slots = {
                node.cluster("KEYSLOT", key)
                for key in (state_key(session_id), lease_key(session_id))
            }
        assert len(slots) == 1

    def test_sessions_spread_over_the_primaries(self, cluster: Cluster) -> None:
        """Saved, loaded and deleted through the cluster; 30 sessions land on all 3 primaries."""
        store = RedisSessionStore(cluster.url, ttl=60)
        ids = [f"spread-{n}" for n in range(30)]
        for number, session_id in enumerate(ids):
            with store.locked(session_id):
                store.save(session_id, halted(number))
        assert [store.load(i) for i in ids] == [halted(n) for n in range(30)]
        assert len({cluster.primary_of(state_key(i)) for i in ids}) == 3
        assert all(store.delete(i) for i in ids)
        assert store.load(ids[0]) is None
        store.close()


class TestFence:
    def test_a_call_whose_lease_ran_out_cannot_overwrite_a_later_halt(
        self, cluster: Cluster
    ) -> None:
        """The fenced save (one Lua script over the state and its lease) runs on a cluster:
        a call outliving its lease is refused, and the halt saved since stays."""
        slow = RedisSessionStore(cluster.url, ttl=60, lease_ms=100, renew=False)
        other = RedisSessionStore(cluster.url, ttl=60)
        with slow.locked("fenced"):
            time.sleep(0.3)  # the lease (100 ms, not renewed) runs out
            with other.locked("fenced"):
                other.save("fenced", halted(2))
            with pytest.raises(LeaseLostError):
                slow.save("fenced", halted(1))
        assert other.load("fenced") == halted(2)
        slow.close()
        other.close()


class TestServe:
    def test_a_halt_made_through_one_server_is_refused_through_another(
        self, cluster: Cluster, policy_file: Path, tmp_path: Path
    ) -> None:
        """Two `serve --sessions redis+cluster://...`, each naming one node: a session halted
        through the first is refused `pruning_halted` through the second."""
        first, second = (f"redis+cluster://127.0.0.1:{port}" for port in cluster.live_ports()[:2])
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        with (
            running_server(policy_file, tmp_path / "a", "--sessions", first) as one,
            running_server(policy_file, tmp_path / "b", "--sessions", second) as two,
            one.client() as http_one,
            two.client() as http_two,
        ):
            for scores in (*HEALTHY, COLLAPSED, COLLAPSED):
                body = {"scores": scores, "pinned": ["c"]}
                assert http_one.post("/v1/sessions/shared/cycles", json=body).status_code == 200
            refused = http_two.post("/v1/sessions/shared/evictions", json=EVICTION)
            state = http_two.get("/v1/sessions/shared")
        assert [reason["code"] for reason in refused.json()["reasons"]] == ["pruning_halted"]
        assert state.json()["halted"] is True

    def test_a_plain_url_of_a_cluster_node_is_refused(self, cluster: Cluster) -> None:
        """`redis://` naming a cluster node would be answered MOVED for most sessions: the
        server does not start, and says which URL to give."""
        url = cluster.node_url(cluster.live_ports()[0])
        with pytest.raises(ServerConfigError, match=r"a node of a Redis Cluster: name it redis\+"):
            open_store(url, 60)

    @pytest.mark.parametrize(
        ("suffix", "problem"),
        [
            ("/1", "a database '/1': a Redis Cluster has only database 0"),
            ("?db=2", "unknown setting 'db'"),
            ("?replicas=x", "replicas='x': expected a number of replicas"),
            (",127.0.0.1:http", "a node '127.0.0.1:http': expected HOST:PORT"),
        ],
    )
    def test_a_cluster_url_that_cannot_work_is_refused(
        self, cluster: Cluster, suffix: str, problem: str
    ) -> None:
        with pytest.raises(ServerConfigError) as raised:
            open_store(cluster.url + suffix, 60)
        assert problem in str(raised.value)

    def test_untagged_states_of_an_older_version_are_moved(self, cluster: Cluster) -> None:
        """A state under the untagged key of a version before hash tags is moved to its
        tagged key with its TTL, once, when the server opens the store; it loads."""
        raw = redis.RedisCluster.from_url(cluster.node_url(cluster.live_ports()[0]))
        writer = RedisSessionStore(cluster.url, ttl=60)
        writer.save("older", halted(7))
        value = raw.get(state_key("older"))
        assert isinstance(value, bytes)
        raw.delete(state_key("older"), "prunewarden:tagged")
        raw.set(KEY_PREFIX + "older", value, px=50_000)
        store = open_store(cluster.url, 60)
        assert isinstance(store, RedisSessionStore)
        assert (store.load("older"), raw.exists(KEY_PREFIX + "older")) == (halted(7), 0)
        assert 0 < int(raw.pttl(state_key("older"))) <= 60_000
        assert store.tag_untagged() == 0  # once
        for client in (store, writer, raw):
            client.close()


class TestFailover:
    def test_a_save_its_replica_does_not_confirm_is_not_answered_as_made(
        self, replicated: Cluster
    ) -> None:
        """With ?replicas=1, a save waits for the replica of its primary: with that replica
        stopped (SIGSTOP), the save raises, so the session's call is answered 503 and its
        halt is held, rather than acknowledged and lost with the primary."""
        store = RedisSessionStore(replicated.url + "?replicas=1", ttl=60)
        replica = replicated.replica_of(replicated.primary_of(state_key("confirmed")))
        replicated.pause(replica)
        try:
            with store.locked("confirmed"), pytest.raises(SessionStoreUnreachableError) as raised:
                store.save("confirmed", halted(1))
        finally:
            replicated.resume(replica)
        assert "ReplicasBehindError" in str(raised.value)
        with store.locked("confirmed"):
            store.save("confirmed", halted(2))  # confirmed again once the replica runs
        assert store.load("confirmed") == halted(2)
        store.close()

    def test_a_primary_killed_mid_run_loses_no_halt_and_the_fence_holds(
        self, replicated: Cluster
    ) -> None:
        """Halts saved through one store while the primary of their slot is killed (SIGKILL),
        its replica promoted and the killed node started again (it rejoins as the new
        primary's replica): every save acknowledged is read back through another store; the
        saves made while no replica could confirm them were refused, not acknowledged; a call
        that held a lease across the failover and outlived it cannot write over the halt
        another call saved since."""
        victim = replicated.primary_of(state_key("fence"))
        replica = replicated.replica_of(victim)
        ids = ids_on(replicated, victim, 40, "run")
        writer = RedisSessionStore(replicated.url + "?replicas=1", ttl=60)
        reader = RedisSessionStore(replicated.url, ttl=60)
        stale = RedisSessionStore(
            replicated.url + "?replicas=1", ttl=60, lease_ms=1500, renew=False
        )
        acknowledged: dict[str, dict[str, Any]] = {}
        refused = 0
        deadline = time.monotonic() + 20
        leased_at = time.monotonic()
        with stale.locked("fence"):

            def come_back() -> None:
                replicated.wait_ok(lambda: replicated.primary_of(state_key("fence")) == replica)
                replicated.start(victim)

            returning = threading.Thread(target=come_back)
            for number, session_id in enumerate(ids):
                if number == 10:
                    replicated.kill(victim)
                    returning.start()
                while time.monotonic() < deadline:
                    try:
                        with writer.locked(session_id, wait=0.5):
                            writer.save(session_id, halted(number))
                    except (SessionStoreUnreachableError, SessionStoreError):
                        refused += 1
                        time.sleep(0.05)
                        continue
                    acknowledged[session_id] = halted(number)
                    break
            returning.join()
            # The stale call's lease (1.5 s, not renewed) has run out by now, or does soon.
            time.sleep(max(0.0, leased_at + 1.6 - time.monotonic()))
            with reader.locked("fence"):
                reader.save("fence", halted(99))
            with pytest.raises(LeaseLostError):
                stale.save("fence", halted(0))
        assert list(acknowledged) == ids  # each saved in the end
        assert refused > 0  # some saves were refused while the primary was gone
        assert {i: reader.load(i) for i in ids} == acknowledged
        assert reader.load("fence") == halted(99)
        for store in (writer, reader, stale):
            store.close()
