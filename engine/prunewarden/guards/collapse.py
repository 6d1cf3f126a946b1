"""Collapse: halt pruning when the spread has collapsed *and* a pinned canary has inverted.

Signal A alone is often benign compression of a homogeneous buffer; signal B alone is often one bad
scoring call. Only together do they say the scorer has lost its reference frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from prunewarden._cusum import CusumParameters, CusumTrack, replay
from prunewarden._stats import median, pstdev
from prunewarden._values import replace_value
from prunewarden.decision import HALT_ACTIONS, Reason, Verdict
from prunewarden.guards._counterfactual import (
    UNIT_SCORES,
    Change,
    Explainer,
    change,
    edge,
    explain_verdict,
    explained,
    figure,
    nearest_passing,
    together,
)
from prunewarden.inputs import CollapseRequest, ScoreRange, Snapshot
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
                f"{signal} but every pinned canary holds its rank and baseline: treated as a "
                "homogeneous buffer",
                {**signal_detail, "median": median_live},
            ),
        )
    first = inverted[0]
    return _verdict(
        True,
        Reason(
            "collapse_detected",
            f"{signal} for {len(recent)} cycle(s) and canary {first['id']!r} "
            f"inverted ({', '.join(first['signals'])}): the scorer has lost its reference frame",
            {**signal_detail, "median": median_live, "canary": first, "canaries": inverted},
        ),
    )


def explain(
    settings: CollapseSettings,
    request: CollapseRequest,
    verdict: Verdict,
    scores: ScoreRange = UNIT_SCORES,
) -> Verdict:
    """The verdict with ``would_allow`` on each refusing reason (see ``_counterfactual``); a
    canary score offered lies within ``scores``, the range the guard judges on."""
    explainers: dict[str, Explainer] = {
        **_EXPLAINERS,
        "collapse_detected": partial(_explain_collapse, scores=scores),
    }
    return explain_verdict(explainers, settings, request, verdict)


def _spread_signal(
    settings: CollapseSettings, request: CollapseRequest, spreads: list[dict[str, Any]]
) -> tuple[dict[str, Any], str, Reason | None]:
    """Signal A: the detail every later reason carries, the signal in words, and the
    ``spread_healthy`` reason when it does not hold (None when it does)."""
    if settings.cusum is not None:
        evidence, track = _cusum_detail(settings, request, spreads)
        if not track.signal(_parameters(settings)):
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


def _parameters(settings: CollapseSettings) -> CusumParameters:
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
    parameters = _parameters(settings)
    source: dict[str, Any]
    if request.cusum is not None:
        track, source = request.cusum, {"accumulated": "session"}
    else:
        cycles = [
            (s.cycle, pstdev(s.scores.values()), len(s.scores) >= settings.min_live_entries)
            for s in request.history
        ]
        track = replay(parameters, cycles)
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
    return detail, track


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


# The inverse of each refusing condition above.


def _collapsed(spreads: list[dict[str, Any]], floor: float) -> bool:
    return all(s["spread"] < floor for s in spreads)


def _explain_short(s: CollapseSettings, r: CollapseRequest, reason: Reason) -> Reason:  # noqa: ARG001
    cycles = reason.detail["cycles"]
    alternatives = [change("spec.collapse.on_insufficient_history", "==", "allow")]
    if cycles >= 2:
        alternatives.append(change("spec.collapse.consecutive_cycles", "<=", cycles - 1))
    return explained(
        reason,
        alternatives,
        f"{cycles} cycle(s) < {reason.detail['required']} needed: allowed with "
        f"{reason.detail['required'] - cycles} more cycle(s) of history, or at "
        "on_insufficient_history allow"
        + (f", or consecutive_cycles \u2264 {cycles - 1}" if cycles >= 2 else ""),
    )


def _explain_few(s: CollapseSettings, r: CollapseRequest, reason: Reason) -> Reason:  # noqa: ARG001
    entries = reason.detail["entries"]
    return explained(
        reason,
        [
            change("spec.collapse.on_too_few_entries", "==", "allow"),
            change("spec.collapse.min_live_entries", "<=", entries),
        ],
        f"{entries} entr{'y' if entries == 1 else 'ies'} < {reason.detail['required']}: allowed "
        f"at on_too_few_entries allow, or min_live_entries \u2264 {entries}",
    )


def _spread_alternative(
    s: CollapseSettings, r: CollapseRequest, reason: Reason
) -> tuple[Change | None, str]:
    """The policy change that ends signal A, and the sentence's first half: the largest floor
    at which the guard itself allows (its edge found to the exact float)."""
    detail = reason.detail
    widest = max(entry["spread"] for entry in detail["spreads"])
    cycles = len(detail["spreads"])
    if detail.get("spread_floor_mode") == "cusum":
        return _cusum_alternative(s, r, detail)
    said = f"spread {figure(widest)} < floor {figure(detail['spread_floor'])} for {cycles} cycles"
    if detail.get("spread_floor_mode") == "relative" and detail["early_spread"] <= 0:
        return None, said  # not reached: a floor of 0 refuses no spread

    def allows(floor: float) -> bool:
        return _allows(replace(s, spread_floor=floor), r)

    floor = edge(allows, s.spread_floor, 0.0)
    if floor is None or floor < 0:
        return None, said  # not reached: no floor lets this history through
    return change("spec.collapse.spread_floor", "<=", floor), said


def _allows(s: CollapseSettings, r: CollapseRequest) -> bool:
    """Whether the guard itself lets this history through: every value offered is checked."""
    return not evaluate(s, r).refused


def _cusum_alternative(
    s: CollapseSettings, r: CollapseRequest, detail: dict[str, Any]
) -> tuple[Change | None, str]:
    """Signal A needs each of the last n increments ln(R/s) - k positive: a slack k at least the
    smallest of their log-ratios ends it (the threshold would not: it raises the cap with it),
    to the exact float the guard accepts. A track a session accumulated is not recomputed, so
    no policy value ends it now."""
    said = (
        f"spread evidence {figure(detail['cusum'])} \u2265 threshold {figure(detail['threshold'])}"
    )
    recent = detail["increments"][-s.consecutive_cycles :]
    if detail.get("accumulated") != "history" or not recent or s.cusum is None:
        return None, said
    cusum = s.cusum

    def allows(slack: float) -> bool:
        return _allows(replace(s, cusum=replace(cusum, slack=slack)), r)

    start = min(step["log_ratio"] for step in recent)
    if not 0 <= start <= 20:
        return None, said
    above = nearest_passing(start, allows, math.inf)
    slack = None if above is None else edge(allows, cusum.slack, above)
    if slack is None or not 0 <= slack <= 20:
        return None, said
    return change("spec.collapse.cusum.slack", ">=", slack), said


def _wording(spread: Change | None) -> list[str]:
    if spread is None:
        return []
    name = spread["field"].removeprefix("spec.collapse.")
    return [f"{name} {_SYMBOLS[spread['op']]} {figure(spread['value'])}"]


_SYMBOLS = {"<=": "\u2264", ">=": "\u2265"}


def _explain_signal(s: CollapseSettings, r: CollapseRequest, reason: Reason) -> Reason:
    """no_canary and canary_missing: only ending signal A allows without a new canary."""
    spread, said = _spread_alternative(s, r, reason)
    wording = (_wording(spread) or ["no policy value"])[0]
    fix = (
        "pin a canary that holds its rank"
        if reason.code == "no_canary"
        else "score every pinned canary in the last cycle and the baseline"
    )
    return explained(
        reason,
        [spread] if spread else [],
        f"{said} and {reason.code.replace('_', ' ')}: allowed at {wording}; or {fix} "
        "(then its rank is judged)",
    )


def _holds_rank(
    canary: dict[str, Any], median_live: float | None, margin: float
) -> Callable[[float], bool]:
    """Whether a score would leave this canary not inverted (``_inversion`` finds nothing)."""

    def holds(score: float) -> bool:
        return _inversion(canary["id"], score, canary["baseline"], median_live, margin) is None

    return holds


def _with_score(r: CollapseRequest, canary: str, score: float) -> CollapseRequest:
    """``r`` with the last cycle's score of ``canary`` changed."""
    last = r.history[-1]
    changed = replace_value(last, scores={**last.scores, canary: score})
    return replace_value(r, history=(*r.history[:-1], changed))


def _canary_raise(
    s: CollapseSettings, r: CollapseRequest, canary: dict[str, Any], scores: ScoreRange
) -> float | None:
    """The smallest score of this canary alone at which the guard allows: the canary counts in
    its cycle's spread, so a score that ends signal A can come before one that ends its
    inversion. Either condition holds at every higher score, so the guard's answer changes
    once; its edge is found to the exact float. None when no score of the range allows."""

    def allows(score: float) -> bool:
        return _allows(s, _with_score(r, canary["id"], score))

    return edge(allows, canary["score"], scores.max)


def _rank_raises(
    s: CollapseSettings, reason: Reason, scores: ScoreRange
) -> list[tuple[dict[str, Any], float]]:
    """Each inverted canary's smallest score that holds its rank and baseline (all of them
    together allow whatever the spread); empty when one needs a score past the range."""
    median_live = reason.detail["median"]
    raises: list[tuple[dict[str, Any], float]] = []
    for canary in reason.detail["canaries"]:
        holds = _holds_rank(canary, median_live, s.canary_margin)
        floor = canary["baseline"] - s.canary_margin
        start = max(floor, median_live) if median_live is not None else floor
        above = nearest_passing(start, holds, math.inf)
        score = None if above is None else edge(holds, canary["score"], above)
        if score is None or score > scores.max:
            return []
        raises.append((canary, score))
    return raises


def _explain_collapse(
    s: CollapseSettings, r: CollapseRequest, reason: Reason, scores: ScoreRange = UNIT_SCORES
) -> Reason:
    spread, said = _spread_alternative(s, r, reason)
    alternatives = [spread] if spread else []
    wording = _wording(spread)
    median_live = reason.detail["median"]
    last = len(r.history) - 1
    canaries = reason.detail["canaries"]
    alone = [(c, x) for c in canaries if (x := _canary_raise(s, r, c, scores)) is not None]
    for canary, score in alone:
        alternatives.append(change(f"history[{last}].scores.{canary['id']}", ">=", score))
        wording.append(f"{canary['id']} \u2265 {figure(score)}")
    raises = _rank_raises(s, reason, scores) if len(canaries) > 1 else []
    if raises:
        alternatives.append(
            together([change(f"history[{last}].scores.{c['id']}", ">=", x) for c, x in raises])
        )
        wording.append(" and ".join(f"{c['id']} \u2265 {figure(x)}" for c, x in raises))
    first = reason.detail["canary"]
    against = (
        f"< median {figure(median_live)}"
        if "below_median" in first["signals"] and median_live is not None
        else f"fell from {figure(first['baseline'])} by > {figure(s.canary_margin)}"
    )
    return explained(
        reason,
        alternatives,
        f"{said} and canary {figure(first['score'])} {against}: allowed at "
        + (", or ".join(wording) if wording else "no value"),
    )


_EXPLAINERS: dict[str, Explainer] = {
    "insufficient_history": _explain_short,
    "too_few_entries": _explain_few,
    "no_canary": _explain_signal,
    "canary_missing": _explain_signal,
    "collapse_detected": _explain_collapse,
}
