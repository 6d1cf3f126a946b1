"""What a pass needs of its caller, and nothing more: the eviction settings, which segments a
rule pinned, the gate that stands in for a guard, the decide step, and where new rule pins go.

A session hands these down (:meth:`Session.plan_request`), so that the planner never sees a
``Session`` and no import, not even one made for type checking, points up the layers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prunewarden.decision import Decision, Verdict
from prunewarden.inputs import Check, Request
from prunewarden.pipeline import ColumnarEviction
from prunewarden.planner._log import PassLog
from prunewarden.policy import EvictionSettings


class DecideStep(Protocol):
    """Decide and log one guard's call; a decision ``in_pass`` is logged with its pass;
    ``explain``: as ``Engine.evaluate``'s."""

    def __call__(  # noqa: PLR0913 - the session's decide step, as it is called
        self,
        check: Check,
        request: Request,
        document: Any,
        gate: Verdict | None = None,
        *,
        in_pass: PassLog | None = None,
        explain: bool = False,
    ) -> Decision: ...


@dataclass(frozen=True, slots=True)
class PassInputs:
    """What one pass decides with, given by its caller."""

    eviction: EvictionSettings
    """The policy's eviction settings: the pinned kinds, whether a tombstone is required."""
    pinned_by_rule: Callable[[str, str], bool]
    """Whether a custom rule pinned this segment id with this very text in an earlier pass."""
    gate: Callable[[Check], Verdict | None]
    """The refusal that stands in for a guard (a halt, a state that cannot be saved), or None."""
    decide: DecideStep
    """The caller's decide-and-log step."""
    pin_by_rule: Callable[[Mapping[str, str]], None]
    """Keep the segments a rule pinned in this pass (id -> text) for the later passes."""
    explain: bool = False
    """Explain every decision of the pass (``would_allow``, rule traces: docs/explain.md)."""
    columnar: ColumnarEviction | None = None
    """The policy's eviction bound for columns, where the caller's decide step would decide
    an eviction with nothing but its pipeline (no rule, calibration, shadow, gate or
    explanation): each eviction is then checked on its validated segment and its decision built when
    read. None: every eviction through ``decide``."""
