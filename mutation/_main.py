"""The command line of ``python -m mutation``: which modules, how many at a time, the report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from mutation._areas import AREAS, Stages
from mutation._changed import ChangedError, changed_modules
from mutation._equivalent import listed
from mutation._operators import Mutant, mutants
from mutation._runner import ENGINE, ROOT, Job, Result, preload, run_jobs, slots

TARGET = 95.0  # percent of a module's mutants its area's tests must kill
# A mutant's run may take this many times the area's clean run (plus a margin) before it is
# called a timeout: a mutant that turns a loop endless is killed, not waited for.
_TIMEOUT_FACTOR, _TIMEOUT_MARGIN = 3.0, 10.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__)
    parser.add_argument("--module", action="append", choices=sorted(AREAS), help="repeatable")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at a time (default 2)")
    parser.add_argument(
        "--changed",
        action="store_true",
        help="only the modules this branch changed since it left --base (its working tree too)",
    )
    parser.add_argument("--base", default="main", help="the branch --changed compares with")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--print-modules", action="store_true", help="print the modules chosen, run nothing"
    )
    parser.add_argument("--json", type=Path, help="write every result to this file")
    parser.add_argument("--keep", help="make the copies in this folder and keep them")
    parser.add_argument("--target", type=float, default=TARGET, help="percent killed per module")
    args = parser.parse_args(argv)
    modules = args.module or sorted(AREAS)
    if args.changed:
        try:
            modules = changed_modules(ROOT, args.base, modules)
        except ChangedError as exc:
            print(f"python -m mutation --changed: {exc}", file=sys.stderr)
            return 2
        if not modules:
            print(f"no module of the gate changed since {args.base}", file=sys.stderr)
            return 0
    if args.print_modules:
        print("\n".join(modules))
        return 0
    sources = {m: (ENGINE / m).read_text(encoding="utf-8") for m in modules}
    found = {m: mutants(m, sources[m]) for m in modules}
    lines = {m: sources[m].splitlines() for m in modules}
    equivalent = {
        mutant.key for m in modules for mutant in found[m] if listed(mutant, lines[m]) is not None
    }
    if args.list:
        for module in modules:
            for mutant in found[module]:
                mark = " [equivalent]" if mutant.key in equivalent else ""
                print(f"{mutant.describe()}{mark}")
        return 0
    preload()
    started = time.monotonic()
    with slots(max(1, args.jobs), args.keep) as slot_dirs:
        baselines = _baselines(modules, slot_dirs)
        broken = [tests for tests, result in baselines.items() if result.outcome != "survived"]
        if broken:
            print(f"the area tests fail on the unchanged tree: {broken}", file=sys.stderr)
            return 2
        jobs = [
            Job(mutant, AREAS[module], _timeout(baselines[AREAS[module]]))
            for module in modules
            for mutant in found[module]
        ]
        results = run_jobs(jobs, slot_dirs, _progress(len(jobs), equivalent))
    elapsed = time.monotonic() - started
    results = [_listed_outcome(r, equivalent) for r in results]
    scores = _report(modules, results, elapsed, args.jobs)
    _stale_listings(results, equivalent)
    if args.json is not None:
        _write_json(args.json, results, scores, elapsed, args.jobs)
    below = [m for m, score in scores.items() if score < args.target]
    return 1 if below else 0


def _baselines(modules: Sequence[str], slot_dirs: Sequence[Path]) -> dict[Stages, Result]:
    """Each distinct test set once on the unchanged tree: it must pass, and its time sets the
    timeout of its mutants."""
    sets = list(dict.fromkeys(AREAS[m] for m in modules))
    jobs = [Job(None, tests, 600.0) for tests in sets]
    return {r.tests: r for r in run_jobs(jobs, slot_dirs, lambda _: None)}


def _timeout(baseline: Result) -> float:
    return baseline.seconds * _TIMEOUT_FACTOR + _TIMEOUT_MARGIN


def _listed_outcome(result: Result, equivalent: set[str]) -> Result:
    """A survivor listed as equivalent (``mutation._equivalent``) is ``equivalent``."""
    if result.outcome == "survived" and result.mutant and result.mutant.key in equivalent:
        return replace(result, outcome="equivalent")
    return result


def _progress(total: int, equivalent: set[str]) -> Callable[[Result], None]:
    count = Counter[str]()

    def report(result: Result) -> None:
        count[result.outcome] += 1
        done = sum(count.values())
        listed = result.mutant is not None and result.mutant.key in equivalent
        if result.outcome == "survived" and result.mutant is not None and not listed:
            print(f"[{done}/{total}] survived: {result.mutant.describe()}", flush=True)
        elif done % 50 == 0:
            print(f"[{done}/{total}] {dict(count)}", flush=True)

    return report


def _report(
    modules: Sequence[str], results: list[Result], elapsed: float, jobs: int
) -> dict[str, float]:
    by_module: dict[str, list[Result]] = {m: [] for m in modules}
    for result in results:
        if result.mutant is not None:
            by_module[result.mutant.path].append(result)
    scores = {}
    print(
        f"\n{'module':40} {'mutants':>7} {'killed':>6} {'timeout':>7} {'equiv.':>6} "
        f"{'survived':>8} {'score':>7}"
    )
    for module, found in by_module.items():
        outcomes = Counter(r.outcome for r in found)
        killed = outcomes["killed"] + outcomes["timeout"]
        judged = len(found) - outcomes["equivalent"]
        score = 100.0 * killed / judged if judged else 100.0
        scores[module] = score
        print(
            f"{module:40} {len(found):7} {outcomes['killed']:6} {outcomes['timeout']:7} "
            f"{outcomes['equivalent']:6} {outcomes['survived'] + outcomes['error']:8} "
            f"{score:6.1f}%"
        )
    survivors = sorted(
        (r.mutant for r in results if r.mutant is not None and r.outcome in {"survived", "error"}),
        key=lambda m: (m.path, m.line, m.column),
    )
    print(f"\n{len(survivors)} survivor(s):")
    for mutant in survivors:
        print(f"  {mutant.describe()}")
    equivalent = [r.mutant for r in results if r.mutant and r.outcome == "equivalent"]
    print(f"{len(equivalent)} listed as equivalent survived (mutation/_equivalent.py)")
    cpu = sum(r.cpu_seconds for r in results)
    print(
        f"\n{len(results)} mutants in {elapsed / 60:.1f} min with {jobs} job(s), "
        f"{cpu / 60:.1f} CPU-minutes in the tests"
    )
    return scores


def _stale_listings(results: list[Result], equivalent: set[str]) -> None:
    """Name the mutants listed as equivalent that a test killed: their listing is wrong."""
    killed = [
        r.mutant
        for r in results
        if r.mutant and r.mutant.key in equivalent and r.outcome in {"killed", "timeout"}
    ]
    for mutant in killed:
        print(f"listed as equivalent, but killed (remove the listing): {mutant.describe()}")


def _write_json(
    path: Path, results: list[Result], scores: dict[str, float], elapsed: float, jobs: int
) -> None:
    rows = [_row(r.mutant, r.outcome, r.seconds) for r in results if r.mutant is not None]
    cpu = round(sum(r.cpu_seconds for r in results), 1)
    document = {
        "seconds": round(elapsed, 1),
        "cpu_seconds": cpu,
        "jobs": jobs,
        "scores": scores,
        "mutants": rows,
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _row(mutant: Mutant, outcome: str, seconds: float) -> dict[str, object]:
    return {
        "mutant": mutant.describe(),
        "key": mutant.key,
        "outcome": outcome,
        "seconds": round(seconds, 2),
    }
