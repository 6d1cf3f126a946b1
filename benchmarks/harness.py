"""Timing, agreement and reporting shared by every workload.

A workload module builds a :class:`Case` (the engine's way and the reference's way of deciding the
same data, plus the engine's stages run one at a time) and registers it with :func:`register`.
The harness checks that both ways agree, times them interleaved (engine, reference, stages, then
again) so that drift in the machine's speed hits both alike, and reports medians and their ratio.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from prunewarden import Decision, __version__

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"

# What the engine and the reference must agree on for each decision: the outcome, every reason
# code in order and, for an allowed prune, the ids kept.
Verdict = tuple[str, tuple[str, ...], tuple[str, ...] | None]


def verdict_of(decision: Decision) -> Verdict:
    kept = decision.kept if decision.outcome == "allow" else None
    return (decision.outcome, decision.codes, kept)


def decision_verdicts(decisions: Sequence[Decision]) -> list[Verdict]:
    return [verdict_of(d) for d in decisions]


@dataclass(frozen=True)
class Case:
    """One prepared workload.

    ``engine`` and ``reference`` decide the same ``decisions`` inputs; ``verdicts`` turns what
    ``engine`` returns into verdicts comparable to what ``reference`` returns (passed through
    ``reference_verdicts``: a reference that is the engine set up otherwise returns decisions).
    ``stages`` run the engine's stages one at a time on prepared inputs, to explain where its
    time goes.
    """

    decisions: int
    engine: Callable[[], Any]
    reference: Callable[[], Any]
    verdicts: Callable[[Any], Sequence[Verdict]] = decision_verdicts
    reference_verdicts: Callable[[Any], Sequence[Verdict]] = list
    stages: Mapping[str, Callable[[], object]] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """A named benchmark: ``build`` prepares its data; ``target`` is the highest acceptable ratio
    of the engine's time to the reference's, when the project sets one."""

    name: str
    build: Callable[[], Case]
    target: float | None = None
    description: str = ""


REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    if workload.name in REGISTRY:
        msg = f"workload {workload.name!r} is registered twice"
        raise ValueError(msg)
    REGISTRY[workload.name] = workload
    return workload


class DisagreementError(AssertionError):
    """The engine and the reference reached different verdicts on the benchmark data."""


def check_agreement(name: str, case: Case) -> int:
    """Run both ways once and compare every verdict; return how many were compared."""
    ours = list(case.verdicts(case.engine()))
    theirs = list(case.reference_verdicts(case.reference()))
    if len(ours) != case.decisions or ours != theirs:
        diff = next(
            (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
            min(len(ours), len(theirs)),
        )
        got = ours[diff] if diff < len(ours) else None
        want = theirs[diff] if diff < len(theirs) else None
        msg = f"{name}: decision {diff}: engine {got!r}, reference {want!r}"
        raise DisagreementError(msg)
    return len(ours)


@dataclass(frozen=True)
class Result:
    name: str
    description: str
    decisions: int
    target: float | None
    samples: dict[str, list[float]]  # seconds per call, by "engine", "reference", "stage:..."

    def median(self, key: str) -> float:
        return statistics.median(self.samples[key])

    @property
    def ratio(self) -> float:
        return self.median("engine") / self.median("reference")

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio <= self.target

    @property
    def stages(self) -> dict[str, float]:
        return {
            key.removeprefix("stage:"): self.median(key)
            for key in self.samples
            if key.startswith("stage:")
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "decisions": self.decisions,
            "engine_s": self.median("engine"),
            "reference_s": self.median("reference"),
            "ratio": self.ratio,
            "target": self.target,
            "met": self.met,
            "engine_per_decision_s": self.median("engine") / self.decisions,
            "stages_s": self.stages,
            "samples_s": self.samples,
        }


def _sample(fn: Callable[[], object], number: int) -> float:
    """Seconds for ``number`` calls. The collector stays on, as in the application, but starts
    each sample empty: it collects what the last samples left, and only that, since
    :func:`run_workload` froze everything older (a full collection of a large heap would take
    longer than the sample)."""
    gc.collect()
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - start


def _calibrate(fn: Callable[[], object], min_time: float) -> int:
    """How many calls make one sample last at least ``min_time`` seconds."""
    number = 1
    while (elapsed := _sample(fn, number)) < min_time and number < 1_000_000:
        number = max(number * 2, int(number * min_time / max(elapsed, 1e-9) * 1.2))
    return number


def run_workload(workload: Workload, *, repeat: int, min_time: float) -> Result:
    case = workload.build()
    check_agreement(workload.name, case)
    # One full collection, then the heap as it stands (the interpreter, the caller's objects,
    # the prepared case) is moved out of the collector's view until the samples are taken.
    gc.collect()
    gc.freeze()
    try:
        return _timed(workload, case, repeat=repeat, min_time=min_time)
    finally:
        gc.unfreeze()


def _timed(workload: Workload, case: Case, *, repeat: int, min_time: float) -> Result:
    timed: dict[str, Callable[[], object]] = {
        "engine": case.engine,
        "reference": case.reference,
        **{f"stage:{name}": fn for name, fn in case.stages.items()},
    }
    numbers = {key: _calibrate(fn, min_time) for key, fn in timed.items()}
    samples: dict[str, list[float]] = {key: [] for key in timed}
    for _ in range(repeat):
        for key, fn in timed.items():
            samples[key].append(_sample(fn, numbers[key]) / numbers[key])
    return Result(workload.name, workload.description, case.decisions, workload.target, samples)


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "nproc": os.cpu_count(),
        # Other work on the machine slows both sides of a ratio alike, but widens the spread.
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cpu": model,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "prunewarden": __version__,
        "jsonschema": metadata.version("jsonschema"),
        "structlog": metadata.version("structlog"),
        "pyyaml": metadata.version("pyyaml"),
    }


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def _table(rows: list[list[str]], out: IO[str]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * width for width in widths) + "\n")


def render(results: Sequence[Result], out: IO[str]) -> None:
    """The results table, then the engine's time split by stage."""
    rows = [["workload", "decisions", "engine", "reference", "ratio", "target", "status"]]
    for r in results:
        status = {None: "-", True: "met", False: "MISSED"}[r.met]
        target = f"<= {r.target:g}x" if r.target is not None else "-"
        rows.append(
            [
                r.name,
                str(r.decisions),
                _duration(r.median("engine")),
                _duration(r.median("reference")),
                f"{r.ratio:.2f}x",
                target,
                status,
            ]
        )
    _table(rows, out)
    split = [r for r in results if r.stages]
    if not split:
        return
    names = list(dict.fromkeys(name for r in split for name in r.stages))
    out.write("\nengine time by stage (median per call; share of the stages' sum)\n")
    rows = [["workload", *names]]
    for r in split:
        total = sum(r.stages.values())
        rows.append(
            [
                r.name,
                *(
                    f"{_duration(r.stages[n])} {r.stages[n] / total:.0%}" if n in r.stages else "-"
                    for n in names
                ),
            ]
        )
    _table(rows, out)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time the engine against plain reference implementations of each check.",
    )
    parser.add_argument("--repeat", type=int, default=15, help="samples per timing (default 15)")
    parser.add_argument(
        "--min-time",
        type=float,
        default=0.05,
        help="seconds each sample lasts at least (default 0.05)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 short samples: proves it runs, measures little"
    )
    parser.add_argument(
        "--only", action="append", metavar="TEXT", help="only workloads whose name contains TEXT"
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS})"
    )
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.min_time = 3, 0.001
    return args


def main(
    argv: Sequence[str] | None = None, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr
) -> int:
    from benchmarks.workloads import load  # noqa: PLC0415 - registration imports every workload

    args = _arguments(argv)
    workloads = [
        w for name, w in load().items() if not args.only or any(t in name for t in args.only)
    ]
    if args.list:
        for w in workloads:
            out.write(f"{w.name}: {w.description}\n")
        return 0
    results = []
    for w in workloads:
        err.write(f"{w.name} ...\n")
        try:
            results.append(run_workload(w, repeat=args.repeat, min_time=args.min_time))
        except DisagreementError as exc:
            out.write(f"engine and reference disagree: {exc}\n")
            return 1
    render(results, out)
    report = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {"repeat": args.repeat, "min_time_s": args.min_time},
        "results": [r.to_dict() for r in results],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.write(f"\nwrote {args.out}\n")
    return 0
