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
from collections.abc import Callable, Mapping
from typing import Any

from prunewarden.decision import Reason, Verdict

Change = dict[str, Any]

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


def figure(value: float) -> str:
    """A number as a sentence shows it."""
    return f"{value:.4g}"
