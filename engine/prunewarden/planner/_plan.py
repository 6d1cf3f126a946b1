"""What a pruning pass may do: the value every planner caller (sessions, the engine, replay, the
command line) reads, kept apart so that none of them imports how a pass is decided or logged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prunewarden.decision import Decision


@dataclass(frozen=True, slots=True)
class Plan:
    """What a pruning pass may do: evict these (writing these tombstones first), and why.

    ``decisions``: a sequence of the pass's decisions in order; where the columns decided an
    eviction (:class:`~prunewarden.planner.PlanDecisions`) its decision is built when first read.
    """

    evict: tuple[str, ...]
    tombstones: tuple[str, ...]
    pinned: tuple[str, ...]
    unscoreable: tuple[str, ...]
    recompute: tuple[str, ...]
    frozen: bool
    target_met: bool
    freed_tokens: int
    decisions: Sequence[Decision] = field(default=())

    def summary(self) -> dict[str, Any]:
        """What a pass record says of the plan: what it may do, not the decisions (listed as
        the record's verdicts)."""
        return {
            "evict": list(self.evict),
            "tombstones": list(self.tombstones),
            "recompute": list(self.recompute),
            "frozen": self.frozen,
            "target_met": self.target_met,
            "freed_tokens": self.freed_tokens,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "evict": list(self.evict),
            "tombstones": list(self.tombstones),
            "pinned": list(self.pinned),
            "unscoreable": list(self.unscoreable),
            "recompute": list(self.recompute),
            "frozen": self.frozen,
            "target_met": self.target_met,
            "freed_tokens": self.freed_tokens,
            "decisions": [decision.to_dict() for decision in self.decisions],
        }
