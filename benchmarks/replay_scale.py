"""Replay at scale: a 500-turn x 200-segment trace through ``prunewarden replay``, and peak memory
against a trace ten times longer.

    python benchmarks/replay_scale.py [--turns 500] [--segments 200] [--factor 10]

Each replay runs as its own process (the command a team runs), so its peak resident set size is
its own (``getrusage`` of the child). Memory must not grow with the trace's length: the reader
streams, a session keeps only what the policy needs, and the summary holds counts.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def replay(trace: Path) -> tuple[float, int, int]:
    """Seconds, decisions, and the child's peak RSS in KiB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
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
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    decisions = sum(t["decisions"] for t in json.loads(done.stdout)["traces"])
    # ru_maxrss of children is the largest of them so far: replays run shortest first.
    return seconds, decisions, max(peak, before)


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
        seconds, decisions, short_rss = replay(short)
        long_seconds, long_decisions, long_rss = replay(long)
    met = "met" if seconds <= TARGET_SECONDS else "MISSED"
    print(f"replay {args.turns} turns x {args.segments} segments")
    print(
        f"  {seconds:.2f} s, {decisions / seconds:,.0f} decisions/s "
        f"(target <= {TARGET_SECONDS:g} s: {met})"
    )
    print(
        f"  peak RSS {short_rss / 1024:.1f} MiB; x{args.factor} longer trace "
        f"({long_decisions:,} decisions, {long_seconds:.1f} s): {long_rss / 1024:.1f} MiB "
        f"(ratio {long_rss / short_rss:.2f})"
    )


if __name__ == "__main__":
    main()
