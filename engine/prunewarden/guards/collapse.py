"""Collapse: halt pruning when the spread has collapsed *and* a pinned canary has inverted.

Signal A alone is often benign compression of a homogeneous buffer; signal B alone is often one bad
scoring call. Only together do they say the scorer has lost its reference frame.
"""

from __future__ import annotations

import math
from typing import Any

from prunewarden._cusum import CusumParameters, CusumTrack, replay
from prunewarden._stats import median, pstdev
from prunewarden.decision import HALT_ACTIONS, Reason, Verdict
from prunewarden.inputs import CollapseRequest, Snapshot
from prunewarden.policy import CollapseSettings


def evaluate(settings: CollapseSettings, request: CollapseRequest) -> Verdict:
    history = request.history
    unjudgeable = _unjudgeable(settings, history)
    if unjudgeable is not None:
        return unjudgeable

    recent = history[-settings.consecutive_cycles :]
    spreads = [{"cycle": s.cycle, "spread": pstdev(s.scores.values())} for s in recent]
    signal_detail, signal, quiet = _spread_signal(settings, request, spreads)
    if quiet is not None:
        return _verdict(False, quiet)

    last = history[-1]
    if not last.pinned:
        return _verdict(
            True,
            Reason(
                "no_canary",
                f"{signal} and cycle {last.cycle} has no pinned canary to audit the scorer against",
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
    detail_with = {**signal_detail, "median": median_live}
    inverted = [
        found
        for canary in last.pinned
        if (
            found := inversion(
                canary, last.scores[canary], baseline[canary], median_live, settings.canary_margin
            )
        )
    ]
    earlier = _earlier_inversions(settings, history, baseline, [c["id"] for c in inverted])
    held = _held(inverted, earlier)
    if not held:
        return _verdict(False, _canary_healthy(settings, signal, inverted, earlier, detail_with))
    inverted = held
    first = inverted[0]
    detail = {**detail_with, "canary": first, "canaries": inverted}
    if earlier is not None:
        detail["canary_cycles"] = earlier["cycles"]
    return _verdict(
        True,
        Reason(
            "collapse_detected",
            f"{signal} for {len(recent)} cycle(s) and canary {first['id']!r} "
            f"inverted ({', '.join(first['signals'])}): the scorer has lost its reference frame",
            detail,
        ),
    )


def _held(inverted: list[dict[str, Any]], earlier: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The inverted canaries that also were in each earlier cycle ``canary_cycles`` reads."""
    if earlier is None:
        return inverted
    return [c for c in inverted if all(c["id"] in cycle for cycle in earlier["inverted"])]


def _canary_healthy(
    settings: CollapseSettings,
    signal: str,
    inverted: list[dict[str, Any]],
    earlier: dict[str, Any] | None,
    detail: dict[str, Any],
) -> Reason:
    """Signal A without signal B: no canary inverted, or none in each cycle it must be."""
    if not inverted or earlier is None:
        return Reason(
            "canary_healthy",
            f"{signal} but every pinned canary holds its rank and baseline: treated as a "
            "homogeneous buffer",
            detail,
        )
    return Reason(
        "canary_healthy",
        f"{signal} and canary {inverted[0]['id']!r} inverted, but no pinned canary inverted in "
        f"each of the last {settings.canary_cycles} cycles: one cycle's low score is not a "
        "collapse",
        {**detail, "canary_cycles": earlier["cycles"]},
    )


def _earlier_inversions(
    settings: CollapseSettings,
    history: tuple[Snapshot, ...],
    baseline: dict[str, float],
    canaries: list[str],
) -> dict[str, Any] | None:
    """With ``canary_cycles`` above 1: which of ``canaries`` each of the cycles before the last
    one it reads had inverted (against that cycle's own median), and those cycles' numbers with
    the canaries inverted in each, for the detail. None with the default of 1."""
    needed = settings.canary_cycles
    if needed <= 1 or not canaries:
        return None
    before = history[-needed:-1]
    found: list[set[str]] = []
    cycles: list[dict[str, Any]] = []
    for snapshot in before:
        live = [v for k, v in snapshot.scores.items() if k not in snapshot.pinned]
        median_then = median(live) if live else None
        ids = {
            canary
            for canary in canaries
            if canary in snapshot.scores
            and canary in baseline
            and inversion(
                canary,
                snapshot.scores[canary],
                baseline[canary],
                median_then,
                settings.canary_margin,
            )
        }
        found.append(ids)
        cycles.append({"cycle": snapshot.cycle, "inverted": sorted(ids)})
    if len(before) < needed - 1:  # a history shorter than the cycles read: none inverted there
        found.append(set())
    return {"inverted": found, "cycles": cycles}


def _spread_signal(
    settings: CollapseSettings, request: CollapseRequest, spreads: list[dict[str, Any]]
) -> tuple[dict[str, Any], str, Reason | None]:
    """Signal A: the detail every later reason carries, the signal in words, and the
    ``spread_healthy`` reason when it does not hold (None when it does)."""
    if settings.cusum is not None:
        evidence, track = _cusum_detail(settings, request, spreads)
        if not track.signal(cusum_parameters(settings)):
            return evidence, "", _cusum_quiet(settings, track, evidence)
        threshold = settings.cusum.threshold
        return evidence, f"spread evidence {track.total:.4g} at or above {threshold}", None
    floor = settings.spread_floor
    detail: dict[str, Any] = {"spreads": spreads, "spread_floor": floor}
    if settings.spread_floor_mode == "relative":
        floor, relative = _relative_floor(settings, request)
        detail.update(relative, spread_floor=floor)
    if _collapsed(spreads, floor):
        return detail, f"spread below {floor}", None
    quiet = Reason(
        "spread_healthy",
        f"score spread stayed at or above {floor} in at least one of the last "
        f"{len(spreads)} cycle(s)",
        detail,
    )
    return detail, f"spread below {floor}", quiet


def _unjudgeable(settings: CollapseSettings, history: tuple[Snapshot, ...]) -> Verdict | None:
    """Too little to judge: too short a history, or too few entries in the last cycle (below
    ``min_live_entries`` a spread means nothing: two entries can spread 0)."""
    needed = settings.consecutive_cycles + 1
    if len(history) < needed:
        reason = Reason(
            "insufficient_history",
            f"{len(history)} cycle(s) of history; {needed} are needed to tell collapse from "
            "ordinary reweighting",
            {"cycles": len(history), "required": needed},
        )
        return _verdict(settings.on_insufficient_history == "halt", reason)
    last = history[-1]
    entries = len(last.scores)
    if entries >= settings.min_live_entries:
        return None
    reason = Reason(
        "too_few_entries",
        f"{entries} entr{'y' if entries == 1 else 'ies'} scored in cycle {last.cycle}; below "
        f"{settings.min_live_entries} a spread cannot tell collapse from a small buffer",
        {"entries": entries, "required": settings.min_live_entries},
    )
    return _verdict(settings.on_too_few_entries == "halt", reason)


def _relative_floor(
    settings: CollapseSettings, request: CollapseRequest
) -> tuple[float, dict[str, Any]]:
    """``spread_floor`` times the session's early spread: the mean spread of its first
    ``relative_to.first_cycles`` cycles (of the history when no session kept them)."""
    early = request.early_spreads
    if early is None:
        first = request.history[: settings.relative_first_cycles]
        early = tuple(pstdev(s.scores.values()) for s in first)
    early_spread = math.fsum(early) / len(early) if early else 0.0
    floor = settings.spread_floor * early_spread
    return floor, {
        "spread_floor_mode": "relative",
        "relative_floor": settings.spread_floor,
        "early_spread": early_spread,
        "early_cycles": len(early),
    }


def cusum_parameters(settings: CollapseSettings) -> CusumParameters:
    parameters = settings.cusum_parameters()
    if parameters is None:  # pragma: no cover - only called under the cusum mode
        msg = "the cusum spread test of a policy without one"
        raise ValueError(msg)
    return parameters


def _cusum_detail(
    settings: CollapseSettings, request: CollapseRequest, spreads: list[dict[str, Any]]
) -> tuple[dict[str, Any], CusumTrack]:
    """The track a session kept (``request.cusum``), or one recomputed over the document's
    history from its first cycle; and what the detail says of it."""
    parameters = cusum_parameters(settings)
    source: dict[str, Any]
    if request.cusum is not None:
        track, source = request.cusum, {"accumulated": "session"}
    else:
        track = replay(parameters, cusum_cycles(settings, request.history))
        source = {"accumulated": "history", "from_cycle": request.history[0].cycle}
    last = track.run[-1] if track.run else None
    detail = {
        "spreads": spreads,
        "spread_floor_mode": "cusum",
        **source,
        "reference": math.exp(last.log_reference) if last else None,
        "reference_cycles": last.reference_cycles if last else 0,
        "increments": [step.to_dict() for step in track.run],
        "cusum": track.total,
        "threshold": parameters.threshold,
        "slack": parameters.slack,
        "cap": parameters.cap,
    }
    if parameters.tracking:
        detail.update(
            reference_mode="tracking",
            reference_rate=parameters.rate,
            reference_updates=track.updates,
            reference_frozen=track.total > 0,
        )
    return detail, track


def cusum_cycles(
    settings: CollapseSettings, history: tuple[Snapshot, ...]
) -> list[tuple[int, float, bool]]:
    """What the cusum test reads of each cycle: its number, spread and whether it is judged."""
    return [
        (s.cycle, pstdev(s.scores.values()), len(s.scores) >= settings.min_live_entries)
        for s in history
    ]


def _cusum_quiet(settings: CollapseSettings, track: CusumTrack, detail: dict[str, Any]) -> Reason:
    n = settings.consecutive_cycles
    threshold = detail["threshold"]
    if track.total < threshold:
        why = f"spread evidence {track.total:.4g} is below the threshold {threshold}"
    else:
        why = (
            f"spread evidence {track.total:.4g} reached {threshold} but not each of the last "
            f"{n} cycle(s) added to it"
        )
    return Reason("spread_healthy", why, detail)


def inversion(
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


# Signal A's condition (its inverse, what would have allowed a halt, is in
# guards/_collapse_counterfactual.py, which asks evaluate itself).


def _collapsed(spreads: list[dict[str, Any]], floor: float) -> bool:
    return all(s["spread"] < floor for s in spreads)
