"""@prunewarden/client against a plain ``node:http`` keep-alive client, on one server.

    python benchmarks/ts_client.py [--requests 2000] [--repeats 5] [--warmup 200]

Starts a real server (a subprocess, ``--audit-fsync batch``) on a loopback port, then one Node
process (benchmarks/ts_client.mjs) sends sequential ``POST /v1/sessions/{id}/evictions`` through
the package (clients/typescript, built: ``make typescript-example``), through a ``node:http``
client with one kept-alive socket, and through Node's global ``fetch``, in turns within each
repeat (the order rotating). Reports each client's p50 as the median of the repeats' p50s with
their range, and the package's p50 against ``node:http``'s, repeat by repeat.

Target (issue 28): the package's p50 within 1.3x of ``node:http`` keep-alive.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from benchmarks.bench_server import start_server

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "benchmarks" / "ts_client.mjs"
PACKAGE_ENTRY = ROOT / "clients" / "typescript" / "dist" / "index.js"
RESULTS = ROOT / "benchmarks" / "results" / "ts_client.json"
TARGET_RATIO = 1.3
LABELS = {
    "package": "@prunewarden/client",
    "node_http": "node:http keep-alive",
    "undici_fetch": "undici fetch + Agent",
    "fetch": "global fetch",
}


def await_ready(host: str, port: int) -> None:
    """Polls ``/readyz`` until 200, each probe on a connection it closes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        connection = http.client.HTTPConnection(host, port, timeout=5)
        with suppress(OSError):
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                connection.close()
                return
        connection.close()
        time.sleep(0.05)
    raise SystemExit("the server never became ready")


def measure(requests: int, repeats: int, warmup: int) -> dict[str, list[float]]:
    """Every client's p50 (ms) in every repeat, against one server."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not on PATH")
    if not PACKAGE_ENTRY.exists():
        raise SystemExit(f"{PACKAGE_ENTRY.relative_to(ROOT)} missing: run make typescript-example")
    with tempfile.TemporaryDirectory(prefix="prunewarden-bench-ts-") as tmp:
        process, host, port = start_server(Path(tmp), "batch")
        try:
            await_ready(host, port)
            done = subprocess.run(  # noqa: S603 - our own script, fixed arguments
                [
                    node,
                    str(DRIVER),
                    f"http://{host}:{port}",
                    str(requests),
                    str(repeats),
                    str(warmup),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            process.terminate()
            process.wait(30)
            if process.stdout is not None:
                process.stdout.close()
    if done.returncode != 0:
        raise SystemExit(f"benchmarks/ts_client.mjs failed:\n{done.stderr}")
    results: dict[str, list[float]] = json.loads(done.stdout)
    return results


def spread(values: list[float]) -> str:
    return f"{min(values):.3f} to {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=int, default=2000, help="timed calls per client and repeat"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls before each run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    p50s = measure(args.requests, args.repeats, args.warmup)
    ratios = [ours / plain for ours, plain in zip(p50s["package"], p50s["node_http"], strict=True)]
    ratio = statistics.median(ratios)
    met = ratio <= TARGET_RATIO
    print(
        f"\n@prunewarden/client, sequential POST /v1/sessions/ID/evictions, audit fsync=batch "
        f"(loopback; {args.repeats} repeats of {args.requests:,} calls per client)"
    )
    for name, label in LABELS.items():
        values = p50s[name]
        print(f"  {label:22s} p50 {statistics.median(values):.3f} ms (repeats {spread(values)} ms)")
    print(
        f"  p50 package / node:http: x{ratio:.2f} (repeats x{min(ratios):.2f} to "
        f"x{max(ratios):.2f}); target <= x{TARGET_RATIO:g}: {'met' if met else 'MISSED'}"
    )
    report: dict[str, Any] = {
        "requests": args.requests,
        "repeats": args.repeats,
        "p50_ms": p50s,
        "p50_ratio_package_node_http": ratios,
        "target": {"ratio": TARGET_RATIO, "met": met},
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
