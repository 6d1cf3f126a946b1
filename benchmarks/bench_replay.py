"""Replay speed, as ratios against plain references.

    python benchmarks/bench_replay.py [--turns 200] [--segments 200] [--repeat 3] [--traces 4]
                                      [--jobs 2]

Writes a synthetic trace with examples/make_traces.py (per turn: a cycle over the window's
scores, a turn, and a pass over the whole window) and times, on it:

- reading it: every line through ``json.loads`` (the floor of any reader), and through the trace
  reader, which also checks each line's fields and numbering;
- deciding on it: the session calls made from events already in memory (the engine's own cost),
  against ``replay_trace`` writing every decision record (what the reader and the records add);
- ``--traces`` copies replayed one after another, by ``--jobs`` worker processes, and by
  ``prunewarden replay`` commands started ``--jobs`` at a time (the machine's own parallelism:
  on a shared machine, it is the fairer reference for ``--jobs``).

Reading and deciding take the best of ``--repeat`` runs; the parallel comparison runs once.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prunewarden import Engine, load_builtin_policy
from prunewarden.replay._run import (
    ReplayJob,
    SilentLogger,
    apply_event,
    replay_in_worker,
    replay_trace,
    run_jobs,
    run_replay_job,
)
from prunewarden.replay._trace import TraceReader

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_traces", ROOT / "examples" / "make_traces.py"
    )
    assert spec is not None  # noqa: S101 - the file is part of the repository
    assert spec.loader is not None  # noqa: S101
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(run: Callable[[], Any], repeat: int = 1) -> float:
    """The best of ``repeat`` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def parse_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if json.loads(line))


def read_events(path: Path) -> int:
    with TraceReader(path, check_bodies=False) as reader:
        return sum(1 for _ in reader)


def decide_in_memory(engine: Engine, path: Path) -> Callable[[], None]:
    """The session calls of the trace, from events read beforehand."""
    with TraceReader(path, check_bodies=False) as reader:
        header, events = reader.header, list(reader)

    def run() -> None:
        session = engine.session(header.session_id, header.labels)
        for event in events:
            apply_event(session, event)

    return run


def replay_to_null(engine: Engine, path: Path) -> None:
    with Path(os.devnull).open("w") as out:
        replay_trace(engine, str(path), out=out)


def separate_commands(copies: list[str], at_once: int) -> None:
    """``prunewarden replay TRACE`` per copy, ``at_once`` commands at a time."""
    command = [sys.executable, "-c", "from prunewarden.cli import main; main()"]
    for start in range(0, len(copies), at_once):
        batch = [
            subprocess.Popen([*command, "replay", trace], stdout=subprocess.DEVNULL)  # noqa: S603
            for trace in copies[start : start + at_once]
        ]
        for process in batch:
            process.wait()


def report(rows: list[tuple[str, float]], reference: float) -> None:
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"  {name.ljust(width)}  {seconds:8.3f} s  {seconds / reference:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--segments", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each serial timing")
    parser.add_argument("--traces", type=int, default=4, help="copies for the parallel run")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "synthetic.jsonl"
        lines = _generator().write(trace, _generator().synthetic(args.turns, args.segments))
        size = trace.stat().st_size / 1e6
        print(
            f"trace: {lines} lines, {size:.1f} MB ({args.turns} turns x {args.segments} segments)"
        )
        engine = Engine.default(logger=SilentLogger())

        print("\nreading (ratio to json.loads of every line)")
        parsed = timed(lambda: parse_lines(trace), args.repeat)
        report(
            [
                ("reference: json.loads every line", parsed),
                ("trace reader (as replay reads)", timed(lambda: read_events(trace), args.repeat)),
            ],
            parsed,
        )

        print("\ndeciding (ratio to the session calls on events already in memory)")
        direct = timed(decide_in_memory(engine, trace), args.repeat)
        replayed = timed(lambda: replay_to_null(engine, trace), args.repeat)
        report(
            [
                ("reference: session calls from memory", direct),
                ("replay_trace, records written", replayed),
            ],
            direct,
        )

        copies = [str(trace)] * args.traces
        policy = load_builtin_policy()
        jobs = [ReplayJob(i, path, policy) for i, path in enumerate(copies)]
        print(f"\n{args.traces} traces (ratio to one after another)")
        serial = timed(lambda: [run_replay_job(job) for job in jobs])
        parallel = timed(lambda: run_jobs(replay_in_worker, jobs, args.jobs))
        commands = timed(lambda: separate_commands(copies, args.jobs))
        report(
            [
                ("reference: one after another", serial),
                (f"--jobs {args.jobs} (spawned workers)", parallel),
                (f"{args.jobs} replay commands at a time", commands),
            ],
            serial,
        )
        print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
