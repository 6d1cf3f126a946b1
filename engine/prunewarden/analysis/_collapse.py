"""The collapse check of a policy (absolute spread floor) over an abstract history.

The collapse guard (guards/collapse.py) reads a history through a few numbers: how many cycles,
how many entries the last one scored, the spread of each of the last cycles, and the pinned
canary's score, baseline and the live entries' median. Two policies are compared over those
numbers taken as free symbols within their ranges: every history has such numbers, so "no
numbers tell them apart" holds for every history. Numbers that do tell them apart are then
realized as a history: live entries placed symmetrically about their median, the canary at its
score, the spreads solved for exactly (pstdev is a square root: z3 solves the square); the
history is replayed through the engine like every witness. What the guard computes in doubles
(the canary's drop ``baseline - score``) is, among the abstract numbers, any value within
rounding of the real one, and a rule computing with doubles is not translated, so that "no
numbers tell them apart" holds on doubles too.

Policies with a relative floor, the cusum test or a score calibration are not modelled here.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import z3

from prunewarden.analysis._cel import Strings, Translator, Value
from prunewarden.analysis._eviction import SUBNORMAL_HALF, UNIT_ROUNDOFF
from prunewarden.analysis._symbols import Symbols
from prunewarden.policy import Policy
from prunewarden.rules._symbolic import NotTranslated, symbolic_term

CANARY = "canary"
MAX_CYCLES = 10_000  # input.v1: maxItems of a history
MARGIN = Fraction(1, 1000)  # how clearly a realized witness sits on one side of a threshold
ROUNDING = 2**20  # realized scores are multiples of 2**-20: exact as doubles


def modelled(policy: Policy) -> str | None:
    """Why the collapse check of ``policy`` is not modelled (None: it is)."""
    settings = policy.spec.collapse
    if settings.spread_floor_mode == "cusum":
        return "the cusum spread test"
    if settings.spread_floor_mode != "absolute":
        return f"a {settings.spread_floor_mode} spread floor"
    if policy.spec.calibration is not None:
        return "a score calibration"
    return None


def _real(value: float | Fraction) -> Any:
    return z3.RealVal(Fraction(value))


@dataclass
class Numbers:
    """What the guard reads of a history: the abstract request, or a realized one."""

    cycles: Any  # Int: the history's length
    entries: Any  # Int: entries the last cycle scored
    spreads: list[Any]  # Real: the spreads of the last cycles, the last cycle last
    canary: Any  # Bool: the last cycle pins a canary
    scored: Any  # Bool: the canary has a score in the last cycle
    based: Any  # Bool: the canary has a baseline
    live: Any  # Bool: some entry is not the canary
    score: Any  # Real: the canary's score
    baseline: Any  # Real: the canary's baseline
    median: Any  # Real: the live entries' median
    # Real: baseline - score as the guard computes it in doubles (within rounding of the real
    # difference for the abstract numbers; exact for a realized history's).
    drop: Any = None


def refuses(policy: Policy, numbers: Numbers, strings: Strings, tag: str) -> tuple[Any, list[str]]:
    """When ``policy`` halts (enforced) on ``numbers``; and the rules not analysed."""
    s = policy.spec.collapse
    n = s.consecutive_cycles
    floor = _real(s.spread_floor)
    collapsed = z3.And(*(spread < floor for spread in numbers.spreads[-n:]))
    inverted = z3.Or(
        z3.And(numbers.live, numbers.score < numbers.median),
        numbers.drop > _real(s.canary_margin),
    )
    guard = z3.If(
        numbers.cycles < n + 1,
        z3.BoolVal(s.on_insufficient_history == "halt"),
        z3.If(
            numbers.entries < s.min_live_entries,
            z3.BoolVal(s.on_too_few_entries == "halt"),
            z3.And(
                collapsed,
                z3.Or(
                    z3.Not(numbers.canary),
                    z3.Not(numbers.scored),
                    z3.Not(numbers.based),
                    inverted,
                ),
            ),
        ),
    )
    rules, unanalysed = _rules(policy, numbers, strings, tag)
    return z3.And(z3.BoolVal(s.mode == "enforce"), z3.Or(guard, *rules)), unanalysed


def _rules(
    policy: Policy, numbers: Numbers, strings: Strings, tag: str
) -> tuple[list[Any], list[str]]:
    """The enforced halting collapse rules, each as when it matches on ``numbers``."""
    has_history = numbers.cycles > 0
    no = z3.BoolVal(False)
    overrides = {
        ("cycles",): Value.of("double", z3.ToReal(numbers.cycles)),
        ("cycle",): Value.of("double", z3.ToReal(numbers.cycles), z3.Not(has_history)),
        ("spread",): Value.of("double", numbers.spreads[-1], z3.Not(has_history)),
        ("median",): Value.of("double", numbers.median, z3.Not(has_history)),
        ("canary", "score"): Value.of("double", numbers.score, z3.Not(numbers.scored)),
        ("canary", "baseline"): Value.of("double", numbers.baseline, z3.Not(numbers.based)),
        ("spreads",): Value("list", numbers.cycles, no, no),
        ("pinned",): Value("list", z3.If(numbers.canary, 1, 0), no, no),
    }
    scale = (policy.spec.scores.min, policy.spec.scores.max)
    symbols = Symbols("collapse", scale, strings, tag, overrides)
    params = policy.document["spec"].get("params", {})
    translator = Translator(symbols, params, strings, rounded=True)
    matches: list[Any] = []
    unanalysed: list[str] = []
    for rule in policy.rules:
        if rule.check != "collapse" or rule.mode != "enforce" or rule.effect == "warn":
            continue
        try:
            matched = translator.matched(symbolic_term(rule.when.tree))
        except NotTranslated:
            unanalysed.append(rule.name)
            continue
        # A rule reading the canary runs once per canary: with none, it matches nothing.
        matches.append(z3.And(numbers.canary, matched) if rule.per_item else matched)
    return matches, unanalysed


def abstract(scale: tuple[float, float], depth: int) -> tuple[Numbers, list[Any]]:
    """Free numbers within what any history allows, and those bounds."""
    low, high = _real(scale[0]), _real(scale[1])
    spreads = [z3.Real(f"spread[-{depth - i}]") for i in range(depth)]
    numbers = Numbers(
        z3.Int("cycles"),
        z3.Int("entries"),
        spreads,
        z3.Bool("canary"),
        z3.Bool("canary?scored"),
        z3.Bool("canary?based"),
        z3.Bool("live"),
        z3.Real("canary.score"),
        z3.Real("canary.baseline"),
        z3.Real("median"),
        z3.Real("canary.drop"),
    )
    exact = numbers.baseline - numbers.score
    slack = z3.If(exact >= 0, exact, -exact) * _real(UNIT_ROUNDOFF) + _real(SUBNORMAL_HALF)
    bounds = [
        numbers.drop >= exact - slack,
        numbers.drop <= exact + slack,
        numbers.cycles >= 0,
        numbers.cycles <= MAX_CYCLES,
        numbers.entries >= 1,
        *(z3.And(spread >= 0, spread <= (high - low) / 2) for spread in spreads),
        *(z3.And(value >= low, value <= high) for value in _scores(numbers)),
    ]
    return numbers, bounds


def _scores(numbers: Numbers) -> tuple[Any, ...]:
    return (numbers.score, numbers.baseline, numbers.median)


def realized(
    model: Any, numbers: Numbers, scale: tuple[float, float], more: int = 0
) -> tuple[Numbers, list[Any], dict[str, Any]]:
    """A history with the abstract model's counts and flags: the live entries of each recent
    cycle at its median plus or minus a half-width, the canary at its score; its numbers, the
    equations tying them to the entries, and the entries' symbols."""

    def value(expression: Any) -> Any:
        return model.eval(expression, model_completion=True)

    cycles = max(value(numbers.cycles).as_long(), 1)
    canary, scored = z3.is_true(value(numbers.canary)), z3.is_true(value(numbers.scored))
    in_scores = canary and scored
    # ``more`` entries than the model's: a spread needs two entries to be more than 0.
    entries = max(value(numbers.entries).as_long() + more, 2 if in_scores else 1)
    live = entries - (1 if in_scores else 0)
    low, high = _real(scale[0]), _real(scale[1])
    depth = len(numbers.spreads)
    centres = [z3.Real(f"centre[{i}]") for i in range(depth)]
    widths = [z3.Real(f"width[{i}]") for i in range(depth)]
    score, baseline = z3.Real("realized.score"), z3.Real("realized.baseline")
    # The canary's score in each recent cycle; the last one is the score the guard judges.
    canaries = [z3.Real(f"realized.canary[{i}]") for i in range(depth - 1)] + [score]
    spreads = [z3.Real(f"realized.spread[{i}]") for i in range(depth)]
    paired = 2 * (live // 2)  # entries at centre +- width; an odd one sits at the centre
    equations = [
        *(
            z3.And(c - w >= low, c + w <= high, w >= 0)
            for c, w in zip(centres, widths, strict=True)
        ),
        z3.And(baseline >= low, baseline <= high),
        *(z3.And(canary >= low, canary <= high) for canary in canaries),
    ]
    for i, (centre, width, spread) in enumerate(zip(centres, widths, spreads, strict=True)):
        canary_score = canaries[i]
        if in_scores:
            mean = (live * centre + canary_score) / entries
            variance = (
                paired * width * width
                + live * (centre - mean) * (centre - mean)
                + (canary_score - mean) * (canary_score - mean)
            ) / entries
        else:
            variance = paired * width * width / live
        equations += [spread >= 0, spread * spread == variance]
    result = Numbers(
        z3.IntVal(cycles),
        z3.IntVal(entries),
        spreads,
        z3.BoolVal(canary),
        z3.BoolVal(scored),
        numbers.based,
        z3.BoolVal(live > 0),
        score,
        baseline,
        centres[-1],
        baseline - score,  # multiples of 2**-20 in range: their difference is exact
    )
    layout = {
        "cycles": cycles,
        "live": live,
        "in_scores": in_scores,
        "centres": centres,
        "widths": widths,
        "canaries": canaries,
    }
    return result, equations, layout


def clear_of(numbers: Numbers, policies: tuple[Policy, ...]) -> list[Any]:
    """A realized witness sits at least :data:`MARGIN` from every threshold it is judged by,
    so rounding its scores to doubles cannot move it across one."""
    margin = _real(MARGIN)
    far = []
    for policy in policies:
        floor = _real(policy.spec.collapse.spread_floor)
        far += [z3.Or(s <= floor - margin, s >= floor + margin) for s in numbers.spreads]
        gap = numbers.baseline - numbers.score - _real(policy.spec.collapse.canary_margin)
        far.append(z3.Or(gap <= -margin, gap >= margin))
    distance = numbers.score - numbers.median
    far.append(z3.Or(distance <= -margin, distance >= margin))
    return far


def document(model: Any, numbers: Numbers, layout: dict[str, Any]) -> dict[str, Any]:
    """The collapse input document of a realized model."""

    def number(expression: Any) -> float:
        value = model.eval(expression, model_completion=True)
        if z3.is_algebraic_value(value):  # an irrational root: rounded below anyway
            value = value.approx(30)
        exact = Fraction(value.as_fraction())
        return float(round(exact * ROUNDING) / ROUNDING)

    depth = len(layout["centres"])
    history = []
    for cycle in range(1, layout["cycles"] + 1):
        recent = max(depth - 1 - (layout["cycles"] - cycle), 0)
        centre, width = number(layout["centres"][recent]), number(layout["widths"][recent])
        scores: dict[str, float] = {}
        for i in range(layout["live"]):
            paired = i < 2 * (layout["live"] // 2)
            sign = (1 if i % 2 == 0 else -1) if paired else 0
            scores[f"entry-{i}"] = centre + sign * width
        if layout["in_scores"]:
            scores[CANARY] = number(layout["canaries"][recent])
        snapshot: dict[str, Any] = {"cycle": cycle, "scores": scores}
        if z3.is_true(model.eval(numbers.canary, model_completion=True)):
            snapshot["pinned"] = [CANARY]
        history.append(snapshot)
    found: dict[str, Any] = {"check": "collapse", "history": history}
    based = z3.is_true(model.eval(numbers.based, model_completion=True))
    # Without a baseline for the canary, the baseline names only another entry.
    other = {"entry-0": number(layout["centres"][0])}
    found["baseline"] = {CANARY: number(numbers.baseline)} if based else other
    return found
