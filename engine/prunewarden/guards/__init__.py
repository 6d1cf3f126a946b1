"""The guards, one module each, behind one interface.

A guard takes its settings from the policy and a typed request and returns a :class:`Verdict`:
whether it refuses, the reasons (every one that applies, the primary first) and the remediations.
It never decides whether a refusal binds; the pipeline does that from the policy's mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prunewarden.decision import Outcome, Verdict, disabled_reason
from prunewarden.guards import _collapse_counterfactual, collapse, eviction, staleness, transition
from prunewarden.guards.transition import TransitionGuardSettings

__all__ = [
    "GUARDS",
    "Guard",
    "TransitionGuardSettings",
    "Verdict",
    "disabled_reason",
]


def _disabled(check: str) -> Callable[[Any, Any], Verdict]:
    def allow(settings: Any, request: Any) -> Verdict:  # noqa: ARG001
        return Verdict(False, [disabled_reason(check)])

    return allow


@dataclass(frozen=True, slots=True)
class Guard:
    """A guard's entry point, what its refusal is called, what it answers when off, and what
    adds ``would_allow`` to its refusing reasons when a decision is explained."""

    evaluate: Callable[[Any, Any], Verdict]
    refusal: Outcome
    when_off: Callable[[Any, Any], Verdict]
    # settings, request, verdict and the score range the guard judges on (``spec.scores``).
    explain: Callable[..., Verdict] = lambda _s, _r, verdict, _scores: verdict


GUARDS: dict[str, Guard] = {
    "collapse": Guard(
        collapse.evaluate, "halt", _disabled("collapse"), _collapse_counterfactual.explain
    ),
    "eviction": Guard(eviction.evaluate, "deny", _disabled("eviction"), eviction.explain),
    # Off still answers the caller's question "what do I keep?", without checking bindings.
    "staleness": Guard(staleness.evaluate, "deny", staleness.unguarded, staleness.explain),
    "transition": Guard(transition.evaluate, "deny", _disabled("transition"), transition.explain),
}
