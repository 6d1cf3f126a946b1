"""A real Redis Cluster on loopback: redis-server nodes joined by ``redis-cli --cluster create``.

Each node is started with ``--cluster-enabled yes`` and no persistence in a folder of the test's,
with a node timeout of one second so that a replica takes over a killed primary within a few
seconds. Ready once every node says ``cluster_state:ok`` with all 16384 slots served; every
node is always stopped. Skipped, saying why, where redis-server or redis-cli is missing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from _support.redis_server import (
    REDIS_CLI,
    REDIS_SERVER,
    SKIP_REASON,
    free_port,
    start_server,
    stop_server,
)

NODE_TIMEOUT_MS = 1000


@dataclass
class Cluster:
    """The nodes of a running cluster, by port."""

    folder: Path
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """``redis+cluster://`` naming every node started."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.processes)

    def node_url(self, port: int) -> str:
        return f"redis://127.0.0.1:{port}/0"

    def live_ports(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def nodes(self) -> list[dict[str, str]]:
        """``CLUSTER NODES`` as seen by a live node: each node's port, flags, primary, slots."""
        with redis.Redis(port=self.live_ports()[0], decode_responses=True) as client:
            text = str(client.execute_command("CLUSTER", "NODES"))
        nodes = []
        for line in text.splitlines():
            fields = line.split()
            port = fields[1].split("@")[0].rsplit(":", 1)[1]
            nodes.append(
                {
                    "id": fields[0],
                    "port": port,
                    "flags": fields[2],
                    "primary": fields[3],
                    "slots": " ".join(fields[8:]),
                }
            )
        return nodes

    def primary_of(self, key: str) -> int:
        """The port of the primary serving ``key``'s slot."""
        with redis.Redis(port=self.live_ports()[0]) as client:
            number = int(client.execute_command("CLUSTER", "KEYSLOT", key))
        for port, slots in self.slots().items():
            if number in slots:
                return port
        msg = f"no primary serves {key!r}"
        raise AssertionError(msg)

    def slots(self) -> dict[int, set[int]]:
        """The slots each primary that has not failed serves, by its port."""
        served: dict[int, set[int]] = {}
        for node in self.nodes():
            if "master" in node["flags"] and "fail" not in node["flags"]:
                mine = served.setdefault(int(node["port"]), set())
                for part in node["slots"].split():
                    low, _, high = part.partition("-")
                    if low.isdigit():
                        mine.update(range(int(low), int(high or low) + 1))
        return served

    def replica_of(self, primary: int) -> int:
        nodes = self.nodes()
        (primary_id,) = [node["id"] for node in nodes if node["port"] == str(primary)]
        (replica,) = [int(node["port"]) for node in nodes if node["primary"] == primary_id]
        return replica

    def kill(self, port: int) -> None:
        """SIGKILL a node, as a crash would."""
        self.processes[port].send_signal(signal.SIGKILL)
        self.processes[port].wait(10)

    def start(self, port: int) -> None:
        """Start the node on ``port`` (again: with its nodes file, it rejoins the cluster, as
        the replica of the primary that took its slots if one did)."""
        self.processes[port] = start_server(
            port,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(self.folder / f"nodes-{port}.conf"),
            "--cluster-node-timeout",
            str(NODE_TIMEOUT_MS),
            "--dir",
            str(self.folder),
        )

    def pause(self, port: int) -> None:
        os.kill(self.processes[port].pid, signal.SIGSTOP)

    def resume(self, port: int) -> None:
        os.kill(self.processes[port].pid, signal.SIGCONT)

    def wait_ok(self, also: Callable[[], bool] = lambda: True, seconds: float = 20) -> None:
        """Until every live node says the cluster is ok and ``also`` holds."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all(self._ok(port) for port in self.live_ports()) and also():
                return
            time.sleep(0.05)
        msg = f"the cluster was not ok within {seconds} s"
        raise AssertionError(msg)

    def wait_replicas_synced(self) -> None:
        """Until every replica's link to its primary is up."""

        def synced() -> bool:
            for port in self.live_ports():
                with redis.Redis(port=port, decode_responses=True) as client:
                    info = client.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
            return True

        self.wait_ok(synced)

    def _ok(self, port: int) -> bool:
        with suppress(redis.RedisError), redis.Redis(port=port, decode_responses=True) as client:
            info = str(client.execute_command("CLUSTER", "INFO"))
            return "cluster_state:ok" in info and "cluster_slots_ok:16384" in info
        return False


def _cluster_port() -> int:
    """A free port whose cluster bus port (10000 above it) is free too."""
    for _ in range(100):
        port = free_port()
        if port + 10000 < 65536:
            with suppress(OSError), socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 10000))
                return port
    msg = "no free port with a free cluster bus port"
    raise AssertionError(msg)


@contextmanager
def running_cluster(folder: Path, primaries: int = 3, replicas: int = 0) -> Iterator[Cluster]:
    """A cluster of ``primaries`` primaries with ``replicas`` replicas each, ready."""
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip(SKIP_REASON)
    cluster = Cluster(folder)
    try:
        for _ in range(primaries * (1 + replicas)):
            cluster.start(_cluster_port())
        addresses = [f"127.0.0.1:{port}" for port in cluster.processes]
        command = [REDIS_CLI, "--cluster", "create", *addresses]
        command += ["--cluster-replicas", str(replicas), "--cluster-yes"]
        created = subprocess.run(command, capture_output=True, timeout=60, check=False)
        if created.returncode != 0:
            pytest.fail(f"redis-cli --cluster create failed: {created.stdout[-500:]!r}")
        cluster.wait_ok(seconds=30)
        if replicas:
            cluster.wait_replicas_synced()
        yield cluster
    finally:
        for process in cluster.processes.values():
            with suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
            stop_server(process)
