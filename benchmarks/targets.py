"""The hot-path targets of issue 14, each measured in one run, and their spread over repeated runs.

    python benchmarks/targets.py [--runs 5] [--out PATH]

One run measures, side by side on this machine:

- the eviction pass (200 segments over columns, one record to a chained audit file,
  ``fsync="batch"``) against the seeds' bare ``authorize_eviction`` loop, and against a loop
  stopping at each segment's first failed condition;
- collapse at 200 entries (with its record) against the seed code, and against the seed code
  with an fsum-based ``pstdev`` (a reference written as well as the engine's own code);
- staleness at 200 spans (with its record) against the seed code;
- the warm 3-rule pass (``benchmarks/rules_cache.py``), and its ratio to the same pass without
  rules;
- a replay of 500 turns x 200 segments (``benchmarks/replay_scale.py``): the wall time of the
  ``prunewarden replay`` command, start-up included;
- audit appends from 4 writer processes (``benchmarks/bench_auditlog.py``), records per second;
- the eviction pass with metrics, spans and trace ids on, against the same pass without them;
- the native CEL backend against cel-python (``benchmarks/rules_backends.py``): the rule time of
  the 3-rule pass (cache off), and the cold compile of the example policies' rules;
- the static cost estimate of rules against their measured times (``benchmarks/rules_cost.py``):
  underestimates (none), and the share of expressions estimated within 10x;
- the CPU time of ``import prunewarden`` and of ``prunewarden --version``, with bytecode
  (``benchmarks/start_time.py``, which also gives each one's ratio to ``python -c pass``);
- the CPU time of the fidelity check by facts alone on a 2,000-token parent and a 300-token
  summary, per pair, the parent's first check (``benchmarks/fidelity/measure.py``, which also
  times a parent checked again and measures recall and false refusals).

With ``--runs N`` the whole set runs N times and the table gives each target's median, lowest
and highest value: what ``docs/dev/benchmarks.md`` reports as the spread. ``--only TEXT`` keeps the
targets whose name contains TEXT.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from benchmarks import (
    bench_auditlog,
    replay_scale,
    rules_backends,
    rules_cache,
    rules_cost,
    start_time,
)
from benchmarks.fidelity import measure as fidelity
from benchmarks.harness import run_workload
from benchmarks.workloads import load

# One comparison of the CEL backends gives both of their targets; so does one comparison of the
# rules' estimated costs with their measured times.
_backends = cache(rules_backends.run)
_costs = cache(rules_cost.run)


def _ratio(name: str) -> float:
    workload = load()[name]
    return run_workload(workload, repeat=7, min_time=0.05).ratio


def _replay() -> float:
    with tempfile.TemporaryDirectory() as work:
        trace = Path(work, "trace.jsonl")
        replay_scale.make_trace(500, 200, trace)
        seconds, _, _ = replay_scale.replay(trace)
    return seconds


def _appends() -> float:
    with tempfile.TemporaryDirectory() as work:
        results = bench_auditlog.appending(Path(work), 4, 200_000, 100)
    total = 4 * 100 * max(200_000 // (4 * 100), 1)
    return total / results[1][1]


# name, unit, target (and whether lower is better), what measures it.
TARGETS: list[tuple[str, str, float, bool, Callable[[], float]]] = [
    ("eviction pass vs seeds' loop", "x", 4.0, True, lambda: _ratio("eviction/pass-200")),
    (
        "eviction pass vs first-failure loop",
        "x",
        5.0,
        True,
        lambda: _ratio("eviction/pass-200/first-failure"),
    ),
    ("collapse/200 vs seed code", "x", 0.5, True, lambda: _ratio("collapse/200")),
    (
        "collapse/200 vs fsum reference",
        "x",
        float("nan"),
        True,
        lambda: _ratio("collapse/200/fsum-reference"),
    ),
    ("staleness/200 vs seed code", "x", 2.0, True, lambda: _ratio("staleness/200")),
    (
        "warm 3-rule pass",
        "ms",
        12.0,
        True,
        lambda: rules_cache.run()["pass_seconds_cache_on"] * 1000,
    ),
    ("replay 500 x 200, wall", "s", 0.5, True, _replay),
    ("audit appends, 4 writers", "/s", 50_000.0, False, _appends),
    (
        "metrics and spans on vs off",
        "x",
        1.10,
        True,
        lambda: _ratio("eviction/pass-200/observed"),
    ),
    (
        "native rules vs cel-python",
        "x",
        rules_backends.TARGET_RULE_RATIO,
        True,
        lambda: _backends()["rule_ratio_native_vs_python"],
    ),
    (
        "native cold compile vs cel-python",
        "x",
        rules_backends.TARGET_COMPILE_RATIO,
        True,
        lambda: _backends()["compile_ratio_native_vs_python"],
    ),
    ("rule cost underestimates", "", 0.0, True, lambda: float(_costs()["underestimates"])),
    (
        "rule cost estimates within 10x",
        "%",
        rules_cost.SHARE_WITHIN * 100,
        False,
        lambda: _costs()["share_within"] * 100,
    ),
    (
        "import prunewarden, CPU",
        "s",
        start_time.IMPORT_TARGET_SECONDS,
        True,
        lambda: start_time.run()["import prunewarden"],
    ),
    (
        "prunewarden --version, CPU",
        "s",
        start_time.VERSION_TARGET_SECONDS,
        True,
        lambda: start_time.run()["prunewarden --version"],
    ),
    (
        "fidelity by facts, 2k/300 tokens, CPU",
        "ms",
        fidelity.FACTS_TARGET_MS,
        True,
        lambda: fidelity.time_facts()["seconds_per_pair"] * 1000,
    ),
]


def run_once(targets: list[tuple[str, str, float, bool, Callable[[], float]]]) -> dict[str, float]:
    _backends.cache_clear()  # each run measures the backends afresh
    _costs.cache_clear()
    return {name: measure() for name, _, _, _, measure in targets}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default="", help="only targets whose name contains TEXT")
    args = parser.parse_args(argv)
    targets = [target for target in TARGETS if args.only in target[0]]
    runs = []
    for n in range(args.runs):
        print(f"run {n + 1} of {args.runs} ...", file=sys.stderr)
        runs.append(run_once(targets))
    header = ["target", "median", "lowest", "highest", "goal"]
    print(f"{header[0]:34s}" + "".join(f" {h:>12s}" for h in header[1:]) + "  status")
    for name, unit, goal, lower, _ in targets:
        values = [run[name] for run in runs]
        median = statistics.median(values)
        if math.isnan(goal):
            status, goal_text = "-", "-"
        else:
            status = "met" if (median <= goal) == lower else "MISSED"
            goal_text = f"{'<=' if lower else '>='} {goal:g}{unit}"
        cells = [f"{v:,.2f}{unit}" for v in (median, min(values), max(values))]
        print(f"{name:34s}" + "".join(f" {c:>12s}" for c in [*cells, goal_text]) + f"  {status}")
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
