"""A fleet on loopback: ``serve`` replicas sharing sessions on a 3-node Redis Cluster, each
shipping its audit log and pushing its status to one ``audit collect``.

    python -m benchmarks.serve_fleet [--replicas 4] [--sessions 64] [--calls 25] [--clients 8]
                                     [--seconds 120]

Each session's calls go to the replicas in turn (call k of session s to replica (s + k) mod N),
so every call reads the state the previous one saved through another replica. The calls are
``POST /v1/sessions/ID/evictions``, one session per client at a time, ``--clients`` at once,
at most ``--sessions`` x ``--calls`` of them and none after ``--seconds``. Reported: p50 and p99
per call, calls per second, errors by status; then, once every shipper has caught up, the
records each replica wrote, shipped (its ``/v1/status``) and the collector holds, which must
be equal; every chain verifying, the local logs and the collected files; the replicas whose
status the collector holds (``GET /v1/fleet``); and the load average. Results go to
benchmarks/results/serve_fleet.json. Needs redis-server and redis-cli (Debian's redis-server).
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden.audit import rotated_files, verify_files

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "default.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "serve_fleet.json"
PRUNEWARDEN = str(Path(sys.executable).with_name("prunewarden"))
BODY = json.dumps(
    {
        "check": "eviction",
        "segment": {"id": "tool-42", "kind": "tool_output", "tombstone_written": True},
        "score": 0.1,
        "perturbed_score": 0.12,
    }
).encode()
STARTUP_SECONDS = 90.0
CATCH_UP_SECONDS = 60.0
_URL = re.compile(r"listening on (http://\S+?),? ")


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)
    drain: threading.Thread | None = None


def _spawn(command: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own command, fixed arguments
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd
    )


def _listening(name: str, popen: subprocess.Popen[str]) -> Process:
    """The process started as ``popen``, once it has printed where it listens."""
    if popen.stdout is None:
        raise SystemExit(f"{name}: no pipe")
    line = popen.stdout.readline()
    found = _URL.search(line + " ")
    if found is None:
        popen.kill()
        rest = popen.stdout.read()
        raise SystemExit(f"{name} did not start: {line}{rest}")
    process = Process(name, popen, found.group(1))
    # Drain what it prints, so that a full pipe never stops it.
    process.drain = threading.Thread(target=_drain, args=(popen, process.output), daemon=True)
    process.drain.start()
    return process


def _drain(popen: subprocess.Popen[str], into: list[str]) -> None:
    if popen.stdout is not None:
        into.extend(popen.stdout)


def _stop(process: Process) -> None:
    if process.popen.poll() is None:
        process.popen.send_signal(signal.SIGTERM)
    try:
        process.popen.wait(30)
    except subprocess.TimeoutExpired:
        process.popen.kill()
        process.popen.wait(10)
    if process.drain is not None:
        process.drain.join(10)
    if process.popen.stdout is not None:
        process.popen.stdout.close()


def _kill_unstarted(popen: subprocess.Popen[str]) -> None:
    """A replica that never got as far as listening (another failed first)."""
    if popen.poll() is None:
        popen.kill()
        popen.wait(10)
    if popen.stdout is not None and popen.returncode is not None:
        with suppress(OSError):
            popen.stdout.close()


@contextmanager
def running(process: Process) -> Iterator[Process]:
    try:
        yield process
    finally:
        _stop(process)


def _get(url: str, path: str) -> Any:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return json.loads(response.read()) if response.status == 200 else None
    finally:
        connection.close()


def _await(predicate: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while True:
        with suppress(OSError, ValueError):
            if predicate():
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


@dataclass
class Calls:
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def drive(urls: list[str], sessions: list[int], calls: int, stop: float, out: Calls) -> None:
    """One client: each of its sessions' calls in turn, call k to replica (s + k) mod N, over
    one keep-alive connection per replica."""
    connections = []
    for url in urls:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        connections.append(http.client.HTTPConnection(host, int(port), timeout=30))
    headers = {"Content-Type": "application/json"}
    mine: list[float] = []
    errors: Counter[str] = Counter()
    for session in sessions:
        for call in range(calls):
            if time.monotonic() > stop:
                break
            index = (session + call) % len(urls)
            began = time.perf_counter()
            try:
                connections[index].request(
                    "POST", f"/v1/sessions/load-{session}/evictions", BODY, headers
                )
                response = connections[index].getresponse()
                response.read()
                if response.status != 200:
                    errors[str(response.status)] += 1
            except (OSError, http.client.HTTPException) as exc:
                errors[type(exc).__name__] += 1
                connections[index].close()
            mine.append(time.perf_counter() - began)
    for connection in connections:
        connection.close()
    with out.lock:
        out.latencies.extend(mine)
        out.errors.update(errors)


def run(  # noqa: PLR0913 - the fleet's shape and the load's
    folder: Path,
    cluster_url: str,
    *,
    replicas: int = 4,
    sessions: int = 64,
    calls: int = 25,
    clients: int = 8,
    seconds: float = 120.0,
) -> dict[str, Any]:
    """The load over ``replicas`` servers on the cluster at ``cluster_url`` and one collector,
    in ``folder``; what it measured and checked."""
    collected = folder / "collected"
    with ExitStack() as stack:
        command = [PRUNEWARDEN, "audit", "collect", "--listen", "127.0.0.1:0"]
        collector = stack.enter_context(
            running(
                _listening("audit collect", _spawn([*command, "--out", str(collected)], folder))
            )
        )
        started = []  # every replica starts at once: they import side by side
        for number in range(replicas):
            workdir = folder / f"r{number}"
            workdir.mkdir()
            command = [PRUNEWARDEN, "serve", "--policy", str(POLICY)]
            command += ["--audit-log", str(workdir / "audit.jsonl"), "--listen", "127.0.0.1:0"]
            command += ["--sessions", cluster_url, "--ship", f"{collector.url}/v1/logs"]
            command += ["--ship-replica", f"r{number}", "--status-url"]
            command += [f"{collector.url}/v1/status", "--status-interval", "1"]
            popen = _spawn(command, workdir)
            stack.callback(_kill_unstarted, popen)
            started.append(popen)
        servers = [
            stack.enter_context(running(_listening(f"r{number}", popen)))
            for number, popen in enumerate(started)
        ]
        urls = [server.url for server in servers]
        for url in urls:
            _await(lambda url=url: _get(url, "/readyz") is not None, STARTUP_SECONDS, "ready")
        measured = Calls()
        began = time.monotonic()
        stop = began + seconds
        threads = [
            threading.Thread(
                target=drive,
                args=(urls, list(range(client, sessions, clients)), calls, stop, measured),
            )
            for client in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - began
        load_average = os.getloadavg()
        logs = [folder / f"r{number}" / "audit.jsonl" for number in range(replicas)]

        def caught_up() -> bool:
            return all(
                _bytes(collected / f"r{number}.jsonl") == _bytes(log)
                for number, log in enumerate(logs)
            )

        def shipped_count() -> int:
            return sum(
                destination["shipped"]
                for url in urls
                for destination in _get(url, "/v1/status")["log_shipping"]["destinations"]
            )

        _await(caught_up, CATCH_UP_SECONDS, "every shipper to catch up")
        # A batch is on the collector's disk a moment before its shipper reads the answer and
        # counts it: the count is read once it has caught up too (or, past the wait, as it is).
        with suppress(SystemExit):
            _await(
                lambda: shipped_count() == sum(_records(log) for log in logs),
                CATCH_UP_SECONDS,
                "every shipper to count what it shipped",
            )
        shipped = shipped_count()
        _await(
            lambda: _get(collector.url, "/v1/fleet")["reporting"] == replicas,
            CATCH_UP_SECONDS,
            "every replica's status",
        )
        fleet = _get(collector.url, "/v1/fleet")
    local = sum(_records(log) for log in logs)
    held = sum(_records(collected / f"r{number}.jsonl") for number in range(replicas))
    verified = all(
        verify_files(rotated_files(path)).ok
        for path in [*logs, *(collected / f"r{n}.jsonl" for n in range(replicas))]
    )
    return {
        "replicas": replicas,
        "redis_cluster_primaries": cluster_url.count(",") + 1,
        "clients": clients,
        "calls": len(measured.latencies),
        "wall_seconds": round(wall, 3),
        "calls_per_second": round(len(measured.latencies) / wall, 1) if wall else 0.0,
        "p50_ms": round(percentile(measured.latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(measured.latencies, 0.99) * 1000, 2),
        "errors": dict(measured.errors),
        "records_local": local,
        "records_shipped": shipped,
        "records_collected": held,
        "chains_verify": verified,
        "replicas_reporting": fleet["reporting"],
        "replicas_healthy": fleet["healthy"],
        "load_average": [round(value, 2) for value in load_average],
        "cpus": os.cpu_count(),
    }


def _bytes(path: Path) -> bytes:
    return b"".join(part.read_bytes() for part in rotated_files(path))


def _records(path: Path) -> int:
    return _bytes(path).count(b"\n")


def report(result: dict[str, Any]) -> list[str]:
    """What ``make bench`` prints of ``result`` (docs/scale.md shows it)."""
    fleet = (
        f"serve fleet: {result['replicas']} replicas on a {result['redis_cluster_primaries']}-node "
        f"Redis Cluster, one collector, {result['clients']} clients"
    )
    calls = (
        f"  {result['calls']} calls in {result['wall_seconds']} s "
        f"({result['calls_per_second']}/s): p50 {result['p50_ms']} ms, "
        f"p99 {result['p99_ms']} ms, errors {result['errors'] or 0}"
    )
    records = (
        f"  records: local {result['records_local']}, shipped {result['records_shipped']}, "
        f"collected {result['records_collected']}; every chain verifies: "
        f"{result['chains_verify']}; status from {result['replicas_reporting']} replicas "
        f"({result['replicas_healthy']} healthy)"
    )
    machine = f"  load average {result['load_average']} on {result['cpus']} CPUs"
    return [fleet, calls, records, machine]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--calls", type=int, default=25)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    # The tests' cluster (tests/_support/redis_cluster.py), not a copy of it.
    running_cluster = importlib.import_module("_support.redis_cluster").running_cluster

    with tempfile.TemporaryDirectory(prefix="serve-fleet-") as scratch:
        folder = Path(scratch)
        (folder / "cluster").mkdir()
        with running_cluster(folder / "cluster") as cluster:
            result = run(
                folder,
                cluster.url,
                replicas=args.replicas,
                sessions=args.sessions,
                calls=args.calls,
                clients=args.clients,
                seconds=args.seconds,
            )
    for line in report(result):
        print(line)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    consistent = result["records_local"] == result["records_shipped"] == result["records_collected"]
    if result["errors"] or not consistent or not result["chains_verify"]:
        raise SystemExit("serve fleet: errors, or records lost, or a chain that does not verify")


if __name__ == "__main__":
    main()
