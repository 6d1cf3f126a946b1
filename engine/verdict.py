"""A guard's raw verdict, before the pipeline turns it into a :class:`Decision`."""

from __future__ import annotations

from dataclasses import dataclass, field

from prunewarden.decision import Action, Reason


def disabled_reason(check: str) -> Reason:
    return Reason("check_disabled", f"the {check} guard is off in this policy")


@dataclass(slots=True)
class Verdict:
    refused: bool
    reasons: list[Reason]
    actions: list[Action] = field(default_factory=list)
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
