"""What ``make realdata``'s policies catch and leave quiet on its real traces, by injection.

The traces of ``benchmarks/realdata.py`` are healthy: every collapse here is injected into a
copy of a held-out trace, as ``prunewarden calibrate --power`` injects into its held-out
copies, so that the truth on held-out conversations can be set beside the power the fit
reports. Per policy:

- false halts of the unmodified held-out traces, and of the long ones by cycles 10, 15 and 20;
- a one-cycle canary glitch (the canary just below the median for one cycle) and a one-cycle
  collapse glitch (that cycle also squeezed to 0.2): the sessions halted at or after it;
- a sudden squeeze by 0.2 / 0.35 / 0.5 / 0.7 from the onset on (recall, median delay), on the
  held-out traces and, with a later onset, on the long ones;
- a gradual drift reaching 0.35 after five cycles, canary below the median from the onset on.

Deterministic: no randomness, traces in order.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from prunewarden import Engine
from prunewarden.policy._model import Policy
from prunewarden.replay._power import FACTORS, Cycle, onset_of, squeezed
from prunewarden.replay._run import SilentLogger

DRIFT_TO = 0.35
DRIFT_CYCLES = 5
GLITCH_SQUEEZE = 0.2
LONG_ONSET = 16  # a collapse late in a long session, after its healthy drift
BY_CYCLES = (10, 15, 20)


def halts(policy: Policy, cycles: Sequence[Cycle]) -> list[tuple[int, dict[str, Any]]]:
    """Each 1-based cycle at which the collapse guard halts a session of ``cycles``, with the
    detail of the halting reason."""
    session = Engine(policy, logger=SilentLogger()).session("study")
    found = []
    for ordinal, (scores, pinned) in enumerate(cycles, start=1):
        decision = session.observe_cycle(scores, pinned)
        if decision.outcome == "halt":
            found.append((ordinal, dict(decision.reasons[0].detail)))
    return found


def first_halt(policy: Policy, cycles: Sequence[Cycle], start: int = 1) -> int | None:
    return next((c for c, _ in halts(policy, cycles) if c >= start), None)


def canary_glitch(cycles: Sequence[Cycle], at: int) -> list[Cycle]:
    """``cycles`` with each canary of the ``at``-th cycle just below the median of the others."""
    return [*cycles[: at - 1], *squeezed(cycles, at, 1.0)[at - 1 : at], *cycles[at:]]


def collapse_glitch(cycles: Sequence[Cycle], at: int) -> list[Cycle]:
    """One cycle collapsed (squeezed to 0.2, canary below the median), then as recorded."""
    return [*cycles[: at - 1], *squeezed(cycles, at, GLITCH_SQUEEZE)[at - 1 : at], *cycles[at:]]


def drift(cycles: Sequence[Cycle], onset: int) -> list[Cycle]:
    """A gradual squeeze from 1 at the onset to :data:`DRIFT_TO` five cycles later, held there."""
    out = list(cycles[: onset - 1])
    for ordinal in range(onset, len(cycles) + 1):
        step = min(1.0, (ordinal - onset + 1) / DRIFT_CYCLES)
        out.append(squeezed(cycles, ordinal, 1.0 - step * (1.0 - DRIFT_TO))[ordinal - 1])
    return out


def study(
    policy: Policy, held_out: Sequence[Sequence[Cycle]], long: Sequence[Sequence[Cycle]]
) -> dict[str, Any]:
    """What ``policy`` decides on every injection into ``held_out`` and ``long`` traces."""
    record: dict[str, Any] = {"held_out": len(held_out), "long": len(long)}
    record["false_halts"] = _share([first_halt(policy, c) for c in held_out])
    long_halts = [first_halt(policy, c) for c in long]
    record["long_false_halts_by"] = {
        str(by): sum(h is not None and h <= by for h in long_halts) for by in BY_CYCLES
    }
    record["long_first_halts"] = sorted(h for h in long_halts if h is not None)
    onsets = [onset_of(policy, c) for c in held_out]
    record["canary_glitch"] = _share(
        [
            first_halt(policy, canary_glitch(c, at), at)
            for c, at in zip(held_out, onsets, strict=True)
        ]
    )
    record["collapse_glitch"] = _share(
        [
            first_halt(policy, collapse_glitch(c, at), at)
            for c, at in zip(held_out, onsets, strict=True)
        ]
    )
    for label, traces, starts in (
        ("sudden", held_out, onsets),
        ("sudden_long", long, [LONG_ONSET] * len(long)),
    ):
        recall, delay = [], []
        for factor in FACTORS:
            found = [
                _delay(first_halt(policy, squeezed(c, at, factor), at), at)
                for c, at in zip(traces, starts, strict=True)
            ]
            recall.append(_share(found))
            delay.append(_median(found))
        record[label] = {"factors": list(FACTORS), "recall": recall, "median_delay": delay}
    found = [
        _delay(first_halt(policy, drift(c, at), at), at)
        for c, at in zip(held_out, onsets, strict=True)
    ]
    record["gradual_to_0.35"] = {"recall": _share(found), "median_delay": _median(found)}
    return record


def explain(policy: Policy, long: Sequence[tuple[str, Sequence[Cycle]]]) -> list[str]:
    """One line per long healthy trace ``policy`` halts, from the halting reason's detail."""
    lines = []
    for name, cycles in long:
        found = halts(policy, cycles)
        if not found:
            continue
        cycle, detail = found[0]
        if detail.get("spread_floor_mode") == "cusum":
            steps = ", ".join(
                f"c{s['cycle']} ln-ratio {s['log_ratio']:.2f}" for s in detail["increments"]
            )
            why = (
                f"reference {detail['reference']:.4f} ({detail['reference_cycles']} cycle(s)), "
                f"S {detail['cusum']:.2f} >= h {detail['threshold']}; {steps}"
            )
        else:
            spreads = ", ".join(f"{s['spread']:.4f}" for s in detail.get("spreads", []))
            why = f"spreads {spreads} under floor {detail.get('spread_floor')}"
        canary = detail.get("canary", {})
        lines.append(
            f"{name}: halt at cycle {cycle}; {why}; canary {canary.get('id')} "
            f"{'/'.join(canary.get('signals', []))}"
        )
    return lines


def _delay(halt: int | None, onset: int) -> int | None:
    return None if halt is None else halt - onset


def _share(found: Sequence[int | None]) -> float:
    return round(sum(f is not None for f in found) / len(found), 3) if found else 0.0


def _median(found: Sequence[int | None]) -> float | None:
    values = [f for f in found if f is not None]
    return float(statistics.median(values)) if values else None


def render_study(records: dict[str, dict[str, Any]]) -> str:
    """One row per policy: false halts, glitches, recall per squeeze, the gradual drift."""
    any_record = next(iter(records.values()))
    factors = any_record["sudden"]["factors"]
    head = (
        f"{'policy':18}{'false':>7}{'long by ' + '/'.join(map(str, BY_CYCLES)):>17}"
        f"{'canary':>8}{'glitch':>8}"
        + "".join(f"{f:>7}" for f in factors)
        + f"{'long .35':>9}{'drift':>7}"
    )
    lines = [
        (
            f"\ninjected into {any_record['held_out']} held-out traces and "
            f"{any_record['long']} long ones (recall: halted at or after the onset; "
            "canary/glitch: one-cycle glitches halted)"
        ),
        head,
    ]
    for label, record in records.items():
        by = "/".join(str(v) for v in record["long_false_halts_by"].values())
        sudden = "".join(f"{r:>7.0%}" for r in record["sudden"]["recall"])
        at_035 = record["sudden_long"]["recall"][factors.index(0.35)]
        lines.append(
            f"{label:18}{record['false_halts']:>7.0%}{by:>17}{record['canary_glitch']:>8.0%}"
            f"{record['collapse_glitch']:>8.0%}{sudden}{at_035:>9.0%}"
            f"{record['gradual_to_0.35']['recall']:>7.0%}"
        )
    return "\n".join(lines)
