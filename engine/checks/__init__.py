"""The three guards, one module each, behind one interface.

A guard takes its settings from the policy and a typed request and returns a :class:`Verdict`:
whether it refuses, the reasons (every one that applies, the primary first) and the remediations.
It never decides whether a refusal binds; the pipeline does that from the policy's mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prunewarden.checks import collapse, eviction, staleness
from prunewarden.decision import Outcome
from prunewarden.verdict import Verdict

__all__ = ["GUARDS", "Guard", "Verdict"]


@dataclass(frozen=True, slots=True)
class Guard:
    """A guard's entry point, and what its refusal is called."""

    evaluate: Callable[[Any, Any], Verdict]
    refusal: Outcome


GUARDS: dict[str, Guard] = {
    "collapse": Guard(collapse.evaluate, "halt"),
    "eviction": Guard(eviction.evaluate, "deny"),
    "staleness": Guard(staleness.evaluate, "deny"),
}
