"""A fleet's traces: 2,000 generated sessions (about 50k decisions) replayed serially, with
``--jobs 2``, and on a 2-worker Dask ``LocalCluster`` (``--executor dask --jobs 2``).

    python benchmarks/fleet_scale.py [--traces 2000] [--workers 2] [--repeat 3]

Each run is the command a team runs, timed whole (a pool or a cluster started and stopped
included). The three are run in turn ``--repeat`` times and each keeps its fastest time, so that
load from elsewhere on the machine weighs on all three alike; the load average is reported.
Target: the Dask run within 1.3x of the process pool's wall time, and every run's decisions
the serial run's, line for line (decision ids and times aside). The per-decision cost of the
serial run is the number docs/scale.md works from.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.3
_ID = re.compile(rb'"[0-9a-f]{32}(-[0-9]+)?"')
_TIME = re.compile(rb'"evaluated_at":"[^"]*"')


def _make_traces() -> Any:
    spec = importlib.util.spec_from_file_location("make_traces", ROOT / "examples/make_traces.py")
    if spec is None or spec.loader is None:
        raise ImportError("examples/make_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(folder: Path, count: int) -> list[str]:
    """``count`` healthy sessions of 5 to 7 turns over 6 to 10 segments (26 decisions each on
    average)."""
    make_traces = _make_traces()
    paths = []
    for seed in range(count):
        path = folder / f"agent-{seed:05}.jsonl"
        make_traces.write(path, make_traces.synthetic(5 + seed % 3, 6 + seed % 5, seed))
        paths.append(str(path))
    return paths


def replay(traces: list[str], out: Path, *options: str) -> tuple[float, int]:
    """Wall seconds of one ``prunewarden replay`` over ``traces``, and its decisions."""
    command = [
        str(Path(sys.executable).parent / "prunewarden"),
        "replay",
        "--format",
        "json",
        "--decisions",
        str(out),
        *options,
        *traces,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)  # noqa: S603
    seconds = time.perf_counter() - started
    return seconds, json.loads(done.stdout)["totals"]["decisions"]


def normalized(path: Path) -> bytes:
    return _TIME.sub(b'"evaluated_at":""', _ID.sub(b'""', path.read_bytes()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    jobs = str(args.workers)
    runs = {
        "serial": (),
        f"--jobs {jobs} (process pool)": ("--jobs", jobs),
        f"--executor dask --jobs {jobs} (LocalCluster)": ("--executor", "dask", "--jobs", jobs),
    }
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="prunewarden-fleet-") as work:
        traces = generate(Path(work), args.traces)
        outputs: dict[str, bytes] = {}
        for _ in range(args.repeat):
            for number, (name, options) in enumerate(runs.items()):
                out = Path(work) / f"decisions-{number}.jsonl"
                seconds, decisions = replay(traces, out, *options)
                outputs[name] = normalized(out)
                best = results.get(name, {}).get("seconds", float("inf"))
                results[name] = {"seconds": min(seconds, best), "decisions": decisions}
        first = outputs["serial"]
        identical = all(output == first for output in outputs.values())
    serial, pool, dask = (results[name]["seconds"] for name in runs)
    decisions = int(results["serial"]["decisions"])
    ratio = dask / pool
    load = os.getloadavg()[0]
    print(
        f"fleet replay: {args.traces:,} traces, {decisions:,} decisions "
        f"(fastest of {args.repeat}; load average {load:.1f} on {os.cpu_count()} cores)"
    )
    for name, result in results.items():
        rate = result["decisions"] / result["seconds"]
        print(f"  {name:<40} {result['seconds']:7.2f} s  {rate:9,.0f} decisions/s")
    print(f"  serial cost per decision: {serial / decisions * 1e6:,.0f} us")
    met = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(f"  dask / process pool: {ratio:.2f}x (target <= {TARGET_RATIO}x: {met})")
    print(f"  decisions identical to the serial run: {'yes' if identical else 'NO'}")
    record = {
        "traces": args.traces,
        "decisions": decisions,
        "runs": results,
        "serial_us_per_decision": serial / decisions * 1e6,
        "dask_over_pool": ratio,
        "identical": identical,
        "load_average": load,
    }
    results_dir = ROOT / "benchmarks" / "results"
    results_dir.mkdir(exist_ok=True)
    (results_dir / "fleet_scale.json").write_text(json.dumps(record, indent=2) + "\n")
    if not identical:
        sys.exit("the runs decided differently")


if __name__ == "__main__":
    main()
