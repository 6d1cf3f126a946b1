"""A pruning pass from 1k to 100k segments: the time per segment must not grow with the window.

    python benchmarks/pass_scale.py [--sizes 1000,2000,...,100000] [--repeat 1]

Each size plans one pass (``Engine.plan``, the default policy, every segment evictable, target
``keep_top_k: 0``: one authorization per segment) with decisions logged to a sink that keeps
nothing, so the planner is measured, not the log. The reference is the bare loop a pass cannot
do without: sort the window by score and visit each segment once. The target is linear: the
per-segment cost at the largest size within twice that at the smallest.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from typing import Any

from prunewarden import Engine

SIZES = (1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 100_000)
LINEAR_FACTOR = 2.0


class DiscardLogger:
    """A decision logger that keeps nothing."""

    def info(self, event: str, **fields: Any) -> None:
        """Drop the record."""


def window(size: int) -> list[dict[str, Any]]:
    """``size`` bound, stable segments with scores spread over [0, 1) out of window order."""
    text = "a segment of the window"
    digest = hashlib.sha256(text.encode()).hexdigest()
    segments = []
    for i in range(size):
        score = (i * 7919 % size) / size
        segments.append(
            {
                "id": f"seg-{i}",
                "kind": "turn",
                "text": text,
                "tokens": 10,
                "score": score,
                "perturbed_score": score,
                "text_sha256": digest,
                "tombstone_written": True,
            }
        )
    return segments


def reference(segments: list[dict[str, Any]]) -> int:
    """Sort by score and visit each segment once."""
    freed = 0
    for segment in sorted(segments, key=lambda s: s["score"]):
        freed += segment["tokens"]
    return freed


def measure(engine: Engine, size: int, repeat: int) -> tuple[float, float]:
    """The best of ``repeat`` seconds for the pass and for the reference."""
    segments = window(size)
    document = {"segments": segments, "keep_top_k": 0}
    best, best_reference = float("inf"), float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        plan = engine.plan(document)
        best = min(best, time.perf_counter() - started)
        if len(plan.evict) != size:
            msg = f"the pass evicted {len(plan.evict)} of {size} segments"
            raise AssertionError(msg)
        started = time.perf_counter()
        reference(segments)
        best_reference = min(best_reference, time.perf_counter() - started)
    return best, best_reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    engine = Engine.default(logger=DiscardLogger())
    print(f"{'segments':>9}  {'pass':>9}  {'per segment':>11}  {'reference':>9}  {'ratio':>7}")
    per_segment = []
    for size in sizes:
        seconds, reference_seconds = measure(engine, size, args.repeat)
        per_segment.append(seconds / size)
        print(
            f"{size:>9,}  {seconds:>8.2f}s  {seconds / size * 1e6:>8.1f} us  "
            f"{reference_seconds * 1e3:>7.1f}ms  {seconds / reference_seconds:>6.0f}x"
        )
    growth = per_segment[-1] / per_segment[0]
    verdict = "met" if growth <= LINEAR_FACTOR else "MISSED"
    print(
        f"per-segment cost, {sizes[-1]:,} against {sizes[0]:,} segments: {growth:.2f}x "
        f"(linear: <= {LINEAR_FACTOR}x) {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
