"""``prunewarden serve`` under load on loopback, against the in-process Session it wraps.

    python benchmarks/bench_server.py [--clients 8] [--requests 8000] [--seconds 60]

Starts a real server (a subprocess, ``--audit-fsync batch``) on a loopback port, then CLIENTS
processes each drive their own session with ``POST /v1/sessions/{id}/evictions`` over a
keep-alive connection (the standard library's ``http.client``: the lightest client there is, so
the numbers are the server's), until REQUESTS requests are answered or SECONDS have passed.
Reports p50, p99 and throughput, and the same calls made in-process (``Session.authorize`` with
an audit file under ``fsync=batch``) by as many threads: the ratio is what crossing HTTP costs.

Targets (issue 16): p50 <= 2 ms and p99 <= 10 ms with 8 clients.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prunewarden import AuditLog, Engine, load_policy

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "default.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "server.json"
SEGMENT = {"id": "tool-42", "kind": "tool_output", "tombstone_written": True}
BODY = json.dumps(
    {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.12}
).encode()
TARGET_P50_MS = 2.0
TARGET_P99_MS = 10.0
WARMUP = 200


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def start_server(workdir: Path, fsync: str) -> tuple[subprocess.Popen[str], str, int]:
    prunewarden = str(Path(sys.executable).with_name("prunewarden"))
    process = subprocess.Popen(  # noqa: S603 - our own command, fixed arguments
        [
            prunewarden,
            "serve",
            "--policy",
            str(POLICY),
            "--audit-log",
            str(workdir / "audit.jsonl"),
            "--audit-fsync",
            fsync,
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if process.stdout is None:
        raise SystemExit("no pipe to the server")
    line = process.stdout.readline()  # the server prints its address first, or fails
    found = re.search(r"http://([\d.]+):(\d+)", line)
    if found is None:
        process.kill()
        raise SystemExit(f"the server did not start: {line}{process.stdout.read()}")
    return process, found.group(1), int(found.group(2))


def await_ready(host: str, port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection(host, port, timeout=5)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server never became ready")


@dataclass(frozen=True)
class Load:
    """Where the clients send, how many requests each, and when they stop regardless."""

    host: str
    port: int
    quota: int
    stop: float


def drive_process(load: Load, name: str) -> list[float]:
    """A client in a process of its own (so that the clients do not share one interpreter's
    lock): its latencies."""
    out: list[float] = []
    drive(load, name, out)
    return out


def drive(load: Load, name: str, out: list[float]) -> None:
    """One client: its session's evictions over one keep-alive connection."""
    connection = http.client.HTTPConnection(load.host, load.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    path = f"/v1/sessions/{name}/evictions"
    for _ in range(load.quota):
        if time.monotonic() > load.stop:
            break
        began = time.perf_counter()
        connection.request("POST", path, BODY, headers)
        response = connection.getresponse()
        response.read()
        out.append(time.perf_counter() - began)
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}")
    connection.close()


def over_http(clients: int, requests: int, seconds: float, fsync: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="prunewarden-bench-") as tmp:
        process, host, port = start_server(Path(tmp), fsync)
        try:
            await_ready(host, port)
            drive(Load(host, port, WARMUP, time.monotonic() + seconds), "warmup", [])
            load = Load(host, port, requests // clients, time.monotonic() + seconds)
            with multiprocessing.get_context("fork").Pool(clients) as pool:
                began = time.perf_counter()
                latencies = pool.starmap(
                    drive_process, [(load, f"bench-{i}") for i in range(clients)]
                )
                elapsed = time.perf_counter() - began
        finally:
            process.terminate()
            process.wait(60)
    flat = [value for values in latencies for value in values]
    return summary(flat, elapsed)


def in_process(clients: int, requests: int) -> dict[str, Any]:
    """The same calls without HTTP: Session.authorize, audit file with fsync=batch."""
    with tempfile.TemporaryDirectory(prefix="prunewarden-bench-") as tmp:
        audit = AuditLog(Path(tmp) / "audit.jsonl", fsync="batch")
        engine = Engine(load_policy(POLICY), audit=audit)
        latencies: list[list[float]] = [[] for _ in range(clients)]

        def run(index: int) -> None:
            session = engine.session(f"bench-{index}")
            for _ in range(requests // clients):
                began = time.perf_counter()
                session.authorize(SEGMENT, 0.1, 0.12)
                latencies[index].append(time.perf_counter() - began)

        run(0)  # warm up
        latencies[0].clear()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - began
        audit.close()
    return summary([value for values in latencies for value in values], elapsed)


def summary(latencies: list[float], elapsed: float) -> dict[str, Any]:
    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "throughput_per_s": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "mean_ms": sum(latencies) / len(latencies) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    args = parser.parse_args()
    served = over_http(args.clients, args.requests, args.seconds, args.fsync)
    local = in_process(args.clients, args.requests)
    ratio = served["p50_ms"] / local["p50_ms"]
    print(
        f"\nprunewarden serve, POST /v1/sessions/ID/evictions, {args.clients} clients, "
        f"audit fsync={args.fsync} (loopback)"
    )
    for name, result in (("over HTTP", served), ("in-process Session.authorize", local)):
        print(
            f"  {name:30s} p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:6.2f} ms  "
            f"{result['throughput_per_s']:8,.0f}/s  ({result['requests']:,} calls)"
        )
    print(f"  p50 ratio HTTP / in-process: x{ratio:.1f}")
    p50_met, p99_met = served["p50_ms"] <= TARGET_P50_MS, served["p99_ms"] <= TARGET_P99_MS
    print(
        f"  target p50 <= {TARGET_P50_MS:g} ms: {'met' if p50_met else 'MISSED'}; "
        f"p99 <= {TARGET_P99_MS:g} ms: {'met' if p99_met else 'MISSED'}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "clients": args.clients,
                "over_http": served,
                "in_process": local,
                "p50_ratio": ratio,
                "targets": {
                    "p50_ms": TARGET_P50_MS,
                    "p99_ms": TARGET_P99_MS,
                    "p50_met": p50_met,
                    "p99_met": p99_met,
                },
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
