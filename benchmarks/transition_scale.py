"""Transitions: a 200 -> 150 edit against a 200-segment pass, and the cost from 1k to 100k.

    python -m benchmarks.transition_scale [--sizes 1000,10000,100000] [--repeat 3]

First the issue's comparison: ``Engine.evaluate`` on a transition that removes 50 of 200
segments with tombstones (so the guard checks every rule and allows) against ``Engine.plan`` on
the same 200 segments evicting 50 (a pass authorizes each eviction), both with decisions logged
to a sink that keeps nothing. The target is the same order of time: the transition within twice
the pass's time. Then the scale: a transition keeping three quarters of an n-segment window, with
a group split and a summary, from 1k to 100k segments; the per-segment cost at the largest size
must stay within twice that at the smallest (linear).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from prunewarden import Engine

from benchmarks.pass_scale import DiscardLogger, window

SIZES = (1_000, 10_000, 100_000)
LINEAR_FACTOR = 2.0
SAME_ORDER = 2.0  # the same order of time: the transition within twice the pass


def transition(size: int) -> dict[str, Any]:
    """A window of ``size`` and an edit removing every fourth segment, tombstoned, folding
    one into a summary and splitting one group (a refusal with every rule checked)."""
    before = window(size)
    for i in range(0, size - 1, 10):
        before[i]["group"] = before[i + 1]["group"] = f"g{i}"
    removed = [s["id"] for i, s in enumerate(before) if i % 4 == 3]
    gone = set(removed)
    after = [s for s in before if s["id"] not in gone]
    after.append({"id": "summary", "kind": "summary", "text": "s", "derived_from": removed[:1]})
    return {"check": "transition", "before": before, "after": after, "tombstones": removed}


def _best(repeat: int, call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def against_a_pass(engine: Engine, repeat: int) -> tuple[float, float]:
    """Seconds for a 200 -> 150 transition and for a 200-segment pass evicting 50."""
    before = window(200)
    gone = {s["id"] for i, s in enumerate(before) if i % 4 == 3}
    document = {
        "check": "transition",
        "before": before,
        "after": [s for s in before if s["id"] not in gone],
        "tombstones": sorted(gone),
    }
    decision = engine.evaluate(document)
    if decision.codes != ("transition_clean",):
        msg = f"the transition was not clean: {decision.codes}"
        raise AssertionError(msg)
    plan = {"segments": before, "keep_top_k": 150}
    return _best(repeat, partial(engine.evaluate, document)), _best(
        repeat, partial(engine.plan, plan)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    engine = Engine.default(logger=DiscardLogger())
    edit, planned = against_a_pass(engine, max(args.repeat, 5))
    ratio = edit / planned
    verdict = "met" if ratio <= SAME_ORDER else "MISSED"
    print(
        f"200 -> 150 transition {edit * 1e3:.2f} ms, 200-segment pass {planned * 1e3:.2f} ms: "
        f"{ratio:.2f}x (target <= {SAME_ORDER}x) {verdict}"
    )
    print(f"{'segments':>9}  {'transition':>10}  {'per segment':>11}")
    per_segment = []
    sizes = [int(s) for s in args.sizes.split(",")]
    for size in sizes:
        document = transition(size)
        seconds = _best(args.repeat, partial(engine.evaluate, document))
        per_segment.append(seconds / size)
        print(f"{size:>9,}  {seconds:>9.3f}s  {seconds / size * 1e6:>8.2f} us")
    growth = per_segment[-1] / per_segment[0]
    verdict = "met" if growth <= LINEAR_FACTOR else "MISSED"
    print(
        f"per-segment cost, {sizes[-1]:,} against {sizes[0]:,} segments: {growth:.2f}x "
        f"(linear: <= {LINEAR_FACTOR}x) {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
