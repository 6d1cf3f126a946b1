"""Collapse: halt pruning when the spread has collapsed *and* a pinned canary has inverted.

Signal A alone is often benign compression of a homogeneous buffer; signal B alone is often one bad
scoring call. Only together do they say the scorer has lost its reference frame.
"""

from __future__ import annotations

from typing import Any

from prunewarden.decision import Action, Reason
from prunewarden.inputs import CollapseRequest
from prunewarden.policy import CollapseSettings
from prunewarden.stats import median, pstdev
from prunewarden.verdict import Verdict

HALT_ACTIONS = (Action("halt_pruning"), Action("freeze_buffer"), Action("escalate"))


def evaluate(settings: CollapseSettings, request: CollapseRequest) -> Verdict:
    history = request.history
    needed = settings.consecutive_cycles + 1
    if len(history) < needed:
        halt = settings.on_insufficient_history == "halt"
        reason = Reason(
            "insufficient_history",
            f"{len(history)} cycle(s) of history; {needed} are needed to tell collapse from "
            "ordinary reweighting",
            {"cycles": len(history), "required": needed},
        )
        return _verdict(halt, reason)

    recent = history[-settings.consecutive_cycles :]
    spreads = [{"cycle": s.cycle, "spread": pstdev(s.scores.values())} for s in recent]
    floor = settings.spread_floor
    signal_detail: dict[str, Any] = {"spreads": spreads, "spread_floor": floor}
    if not all(s["spread"] < floor for s in spreads):
        return _verdict(
            False,
            Reason(
                "spread_healthy",
                f"score spread stayed at or above {floor} in at least one of the last "
                f"{len(recent)} cycle(s)",
                signal_detail,
            ),
        )

    last = history[-1]
    if not last.pinned:
        return _verdict(
            True,
            Reason(
                "no_canary",
                f"spread below {floor} and cycle {last.cycle} has no pinned canary to audit the "
                "scorer against",
                signal_detail,
            ),
        )

    baseline = request.baseline if request.baseline is not None else history[0].scores
    missing = [c for c in last.pinned if c not in last.scores or c not in baseline]
    if missing:
        return _verdict(
            True,
            Reason(
                "canary_missing",
                f"pinned canary {missing[0]!r} has no score in cycle {last.cycle} or no baseline; "
                "the scorer cannot be audited",
                {**signal_detail, "missing": missing},
            ),
        )

    live = dict(last.scores)  # a C-level copy, then drop the canaries
    for canary in last.pinned:
        live.pop(canary, None)
    median_live = median(live.values()) if live else None
    inverted = [
        found
        for canary in last.pinned
        if (
            found := _inversion(
                canary, last.scores[canary], baseline[canary], median_live, settings.canary_margin
            )
        )
    ]
    if not inverted:
        return _verdict(
            False,
            Reason(
                "canary_healthy",
                f"spread below {floor} but every pinned canary holds its rank and baseline: "
                "treated as a homogeneous buffer",
                {**signal_detail, "median": median_live},
            ),
        )
    first = inverted[0]
    return _verdict(
        True,
        Reason(
            "collapse_detected",
            f"spread below {floor} for {len(recent)} cycle(s) and canary {first['id']!r} "
            f"inverted ({', '.join(first['signals'])}): the scorer has lost its reference frame",
            {**signal_detail, "median": median_live, "canary": first, "canaries": inverted},
        ),
    )


def _inversion(
    canary: str, score: float, baseline: float, median_live: float | None, margin: float
) -> dict[str, Any] | None:
    signals = []
    if median_live is not None and score < median_live:
        signals.append("below_median")
    if baseline - score > margin:
        signals.append("dropped_by_margin")
    if not signals:
        return None
    return {"id": canary, "score": score, "baseline": baseline, "signals": signals}


def _verdict(halt: bool, reason: Reason) -> Verdict:
    return Verdict(halt, [reason], list(HALT_ACTIONS) if halt else [])
