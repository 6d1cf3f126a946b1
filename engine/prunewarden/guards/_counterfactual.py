"""What would have allowed a refusal: the alternatives an explained refusing reason carries.

Each guard module keeps, beside every condition it refuses on, the function that inverts that
condition (so the two cannot drift apart); this module holds the shape they share. An explained
refusing reason gains two detail fields:

- ``would_allow``: a list of alternatives, each one change ``{"field", "op", "value"}`` to an
  input path (``perturbed_score``, ``spans[2].text_sha256``) or a policy path
  (``spec.eviction.stability_delta``), with ``and``: further changes that must come with it.
  Applying any one alternative flips that reason. Empty when no value of any field allows it.
- ``would_allow_text``: the same in one sentence.

Operators: ``<=``, ``>=``, ``<``, ``>``, ``==``, ``!=`` compare the field with ``value``; ``in``:
the field lies in the closed interval ``value``; ``contains`` / ``excludes``: the list field holds
/ does not hold each of ``value`` (a list, or one item).

Explaining costs a little per refusing reason, so the pipeline asks for it only when a caller
explains a decision (``explain=True``); the default path never calls these functions.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from typing import Any

from prunewarden.decision import Reason, Verdict
from prunewarden.inputs import ScoreRange

Change = dict[str, Any]

# The score range a guard judges on when its caller names none: the default ``spec.scores``
# (a calibrated policy judges on it too).
UNIT_SCORES = ScoreRange(0.0, 1.0)

# One refusing reason code's inverse: the settings, the request and the reason in, the reason
# with ``would_allow`` out.
Explainer = Callable[[Any, Any, Reason], Reason]


def change(field: str, op: str, value: Any, *also: Change) -> Change:
    """One alternative: ``field op value``, and every change in ``also`` with it."""
    out: Change = {"field": field, "op": op, "value": value}
    if also:
        out["and"] = list(also)
    return out


def together(changes: list[Change]) -> Change:
    """The changes as one alternative: the first, with the others under ``and``."""
    return change(changes[0]["field"], changes[0]["op"], changes[0]["value"], *changes[1:])


def explained(reason: Reason, alternatives: list[Change], sentence: str) -> Reason:
    return reason.with_detail(
        {**reason.detail, "would_allow": alternatives, "would_allow_text": sentence}
    )


def explain_verdict(
    explainers: Mapping[str, Explainer], settings: Any, request: Any, verdict: Verdict
) -> Verdict:
    """The verdict with each refusing reason explained; an allowing verdict as it is. An
    explainer that fails leaves its reason with no alternative and says why: the refusal
    stands whatever the explanation."""
    if not verdict.refused:
        return verdict
    reasons = []
    for reason in verdict.reasons:
        explain = explainers.get(reason.code)
        if explain is None:
            reasons.append(reason)
            continue
        try:
            reasons.append(explain(settings, request, reason))
        except Exception as exc:  # noqa: BLE001 - an explanation never changes a decision
            why = f"no counterfactual could be computed ({type(exc).__name__})"
            reasons.append(explained(reason, [], why))
    verdict.reasons = reasons
    return verdict


def nearest_passing(start: float, holds: Callable[[float], bool], toward: float) -> float | None:
    """``start``, moved one float at a time toward ``toward`` until ``holds`` (the guard's own
    predicate) is true: an arithmetic bound can miss the condition by a rounding error. None
    when it does not hold within 64 steps (no alternative is then offered)."""
    value = start
    for _ in range(64):
        if holds(value):
            return value
        value = math.nextafter(value, toward)
    return None


def edge(holds: Callable[[float], bool], refused: float, allowed: float) -> float | None:
    """The value nearest ``refused`` at which ``holds`` (the guard's own predicate) is true,
    between ``refused`` (where it is false) and ``allowed`` (where it is true): a bisection over
    the doubles in between, to the exact float, for a predicate that changes once between them.
    None when ``holds(allowed)`` is false or ``holds(refused)`` true (no edge to find)."""
    if not holds(allowed) or holds(refused):
        return None
    out, ok = _ordinal(refused), _ordinal(allowed)
    while abs(ok - out) > 1:
        middle = (out + ok) // 2
        if holds(_from_ordinal(middle)):
            ok = middle
        else:
            out = middle
    return _from_ordinal(ok)


def _ordinal(value: float) -> int:
    """A double's place among the doubles (consecutive doubles differ by 1; 0.0 == -0.0)."""
    bits = int(struct.unpack("<q", struct.pack("<d", value))[0])
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def _from_ordinal(place: int) -> float:
    bits = place if place >= 0 else -place | -0x8000_0000_0000_0000
    (value,) = struct.unpack("<d", struct.pack("<q", bits))
    return float(value)


def within(scores: ScoreRange, interval: list[float] | None) -> list[float] | None:
    """``interval`` clipped to the score range; None when no score of the range lies in it."""
    if interval is None:
        return None
    low, high = max(interval[0], scores.min), min(interval[1], scores.max)
    return [low, high] if low <= high else None


def figure(value: float) -> str:
    """A number as a sentence shows it."""
    return f"{value:.4g}"
