"""Replay at scale: a 500-turn x 200-segment trace through ``prunewarden replay``, and peak memory
against a trace ten times longer.

    python benchmarks/replay_scale.py [--turns 500] [--segments 200] [--factor 10]

Each replay runs as its own process (the command a team runs), so its peak resident set size and
its CPU time are its own (``getrusage`` of the child). Memory must not grow with the trace's
length: the reader streams, a session keeps only what the policy needs, and the summary holds
counts. As in ``start_time.py``, the package is compiled first and the child runs without
``PYTHONDONTWRITEBYTECODE``: an installed package starts from bytecode, and a machine that sets
it would otherwise time the compiling of every module at every start.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import prunewarden

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 1.2


def make_trace(turns: int, segments: int, out: Path) -> None:
    subprocess.run(  # noqa: S603 - our own interpreter and script
        [
            sys.executable,
            str(ROOT / "examples" / "make_traces.py"),
            "--synthetic",
            "--turns",
            str(turns),
            "--segments",
            str(segments),
            "--out",
            str(out),
        ],
        check=True,
    )


class Replayed(NamedTuple):
    seconds: float  # wall
    cpu_seconds: float  # the child's user + system time
    decisions: int
    peak_kib: int  # the largest child's peak RSS so far


def replay_measured(trace: Path) -> Replayed:
    """One ``prunewarden replay`` of ``trace`` in a child process, from bytecode."""
    compileall.compile_dir(Path(prunewarden.__file__).parent, quiet=1)
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own console script
        [
            str(Path(sys.executable).parent / "prunewarden"),
            "replay",
            "--format",
            "json",
            "--policy",
            str(ROOT / "policies" / "default.yaml"),
            str(trace),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=environment,
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    decisions = sum(t["decisions"] for t in json.loads(done.stdout)["traces"])
    # ru_maxrss of children is the largest of them so far: replays run shortest first.
    return Replayed(seconds, cpu, decisions, max(after.ru_maxrss, before.ru_maxrss))


def replay(trace: Path) -> tuple[float, int, int]:
    """Seconds, decisions, and the child's peak RSS in KiB."""
    measured = replay_measured(trace)
    return measured.seconds, measured.decisions, measured.peak_kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--segments", type=int, default=200)
    parser.add_argument("--factor", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        short, long = Path(work, "short.jsonl"), Path(work, "long.jsonl")
        make_trace(args.turns, args.segments, short)
        make_trace(args.turns * args.factor, args.segments, long)
        seconds, cpu, decisions, short_rss = replay_measured(short)
        long_seconds, _, long_decisions, long_rss = replay_measured(long)
    met = "met" if seconds <= TARGET_SECONDS else "MISSED"
    print(f"replay {args.turns} turns x {args.segments} segments")
    print(
        f"  {seconds:.2f} s ({cpu:.2f} s CPU), {decisions / seconds:,.0f} decisions/s "
        f"(target <= {TARGET_SECONDS:g} s: {met})"
    )
    print(
        f"  peak RSS {short_rss / 1024:.1f} MiB; x{args.factor} longer trace "
        f"({long_decisions:,} decisions, {long_seconds:.1f} s): {long_rss / 1024:.1f} MiB "
        f"(ratio {long_rss / short_rss:.2f})"
    )


if __name__ == "__main__":
    main()
