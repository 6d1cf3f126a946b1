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
from prunewarden.guards import collapse, eviction, staleness, transition
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
    """A guard's entry point, what its refusal is called, and what it answers when off."""

    evaluate: Callable[[Any, Any], Verdict]
    refusal: Outcome
    when_off: Callable[[Any, Any], Verdict]


GUARDS: dict[str, Guard] = {
    "collapse": Guard(collapse.evaluate, "halt", _disabled("collapse")),
    "eviction": Guard(eviction.evaluate, "deny", _disabled("eviction")),
    # Off still answers the caller's question "what do I keep?", without checking bindings.
    "staleness": Guard(staleness.evaluate, "deny", staleness.unguarded),
    "transition": Guard(transition.evaluate, "deny", _disabled("transition")),
}
