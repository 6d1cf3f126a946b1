"""What would have allowed a collapse halt: the ``would_allow`` of each refusing reason of
:mod:`prunewarden.guards.collapse` (see ``_counterfactual``).

Every value offered is the guard's own edge: the policy value or canary score at which
:func:`~prunewarden.guards.collapse.evaluate` changes its answer, found by bisection over the
floats on the guard's decision (or, over a long history, its predicates: ``inversion`` and the
cusum arithmetic of ``prunewarden._cusum``) and checked against the guard itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from prunewarden._cusum import references, signal_at
from prunewarden._stats import pstdev
from prunewarden._values import replace_value
from prunewarden.decision import Reason, Verdict
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
from prunewarden.guards.collapse import cusum_cycles, cusum_parameters, evaluate, inversion
from prunewarden.inputs import CollapseRequest, ScoreRange
from prunewarden.policy import CollapseSettings


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
    if s.cusum.reference_mode == "tracking":  # the reference moves with the slack too
        return None, said
    cusum, parameters, judged = s.cusum, cusum_parameters(s), _judged_spreads(s, r)

    def allows(slack: float) -> bool:  # the track replayed at this slack, without signal A
        return not signal_at(parameters, judged, slack)

    start = min(step["log_ratio"] for step in recent)
    if not 0 <= start <= 20:
        return None, said
    above = nearest_passing(start, allows, math.inf)
    slack = None if above is None else edge(allows, cusum.slack, above)
    if slack is None or not 0 <= slack <= 20:
        return None, said
    if not _allows(replace(s, cusum=replace(cusum, slack=slack)), r):
        return None, said  # not reached: the guard itself is the last word
    return change("spec.collapse.cusum.slack", ">=", slack), said


def _judged_spreads(s: CollapseSettings, r: CollapseRequest) -> list[tuple[float | None, float]]:
    """Each cycle the cusum test judges over the history: its reference and its spread."""
    cycles = cusum_cycles(s, r.history)
    spreads = [spread for _, spread, _ in cycles[s.consecutive_cycles :]]
    return list(zip(references(cusum_parameters(s), cycles), spreads, strict=True))


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
    """Whether a score would leave this canary not inverted (``inversion`` finds nothing)."""

    def holds(score: float) -> bool:
        return inversion(canary["id"], score, canary["baseline"], median_live, margin) is None

    return holds


def _with_score(r: CollapseRequest, canary: str, score: float) -> CollapseRequest:
    """``r`` with the last cycle's score of ``canary`` changed."""
    last = r.history[-1]
    changed = replace_value(last, scores={**last.scores, canary: score})
    return replace_value(r, history=(*r.history[:-1], changed))


def _canary_raise(
    s: CollapseSettings, r: CollapseRequest, reason: Reason, scores: ScoreRange
) -> Callable[[dict[str, Any]], float | None]:
    """The smallest score of one canary alone at which the guard allows: the canary counts in
    its cycle's spread, so a score that ends signal A can come before one that ends its
    inversion. Either condition holds at every higher score, so the guard's answer changes
    once; its edge is found to the exact float (None when no score of the range allows)."""
    cusum = s.cusum is not None and r.cusum is None and s.cusum.reference_mode == "early"
    # Over a history the cusum test replays every cycle: only the last one's spread moves.
    judged = _judged_spreads(s, r) if cusum else []
    last, inverted = r.history[-1], reason.detail["canaries"]

    def raised(canary: dict[str, Any]) -> float | None:
        def allows(score: float) -> bool:
            return _allows(s, _with_score(r, canary["id"], score))

        def quickly(score: float) -> bool:
            spread = pstdev({**last.scores, canary["id"]: score}.values())
            moved = [*judged[:-1], (judged[-1][0], spread)]
            if not signal_at(cusum_parameters(s), moved, s.cusum.slack if s.cusum else 0.0):
                return True
            return all(
                inversion(
                    c["id"], score if c is canary else c["score"], c["baseline"],
                    reason.detail["median"], s.canary_margin,
                ) is None
                for c in inverted
            )  # fmt: skip

        found = edge(quickly, canary["score"], scores.max) if judged else None
        if found is not None and allows(found):  # the guard itself is the last word
            return found
        return edge(allows, canary["score"], scores.max)

    return raised


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
    raised = _canary_raise(s, r, reason, scores)
    alone = [(c, x) for c in canaries if (x := raised(c)) is not None]
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
