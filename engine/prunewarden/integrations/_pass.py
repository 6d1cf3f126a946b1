"""The framework-free half of an adapter: one guarded pass over a message window for a budget.

Each call is one rewrite cycle: the window is scored, the cycle observed by the collapse guard
(its canaries are the segments whose ``metadata.canary`` is true: the task and what the caller
pins, whose relevance to the task a sound scorer keeps high), and, when the window is over its
token budget, the session plans a pass freeing the excess. A frozen pass
(a halt, stale scores) evicts nothing, and says why.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prunewarden.errors import PrunewardenError
from prunewarden.planner import Plan
from prunewarden.scoring import Scorer, bind_scores
from prunewarden.session import Session

_log = logging.getLogger("prunewarden.integrations")


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one call decided: the ids to evict (window order), whether the pass was frozen and
    why (the refusing decisions' reason codes), and the plan when one was made."""

    evict: tuple[str, ...]
    frozen: bool
    reasons: tuple[str, ...]
    plan: Plan | None

    @property
    def trimmed(self) -> bool:
        return bool(self.evict)


class WindowPruner:
    """Scores a window, observes it, and plans a pass when it is over ``budget_tokens``.

    Turns (the drift signal's mean relevance and tokens) are observed only with
    ``observe_turns``: evicting the lowest scores raises the mean while the tokens fall, which
    is the signal itself, so an adapter that only evicts would trip it. Turn it on where the
    agent also rewrites or compresses its messages.
    """

    def __init__(self, scorer: Scorer, *, budget_tokens: int, observe_turns: bool = False) -> None:
        self.scorer = scorer
        self.budget_tokens = budget_tokens
        self.observe_turns = observe_turns

    def run(
        self, session: Session, segments: Sequence[Mapping[str, Any]], task: str
    ) -> PassOutcome:
        """One cycle over ``segments`` (window segments without scores, in window order).

        Fails closed: a scorer that raises, or a window the engine refuses as input, freezes
        the pass (``scorer_failed``, ``invalid_window``) and is logged."""
        if not segments:
            return PassOutcome((), frozen=False, reasons=(), plan=None)
        try:
            scores = self.scorer.score(segments, task)
        except Exception:  # noqa: BLE001 - any scorer failure keeps the history whole
            _log.exception("the scorer failed for session %s", session.session_id)
            return self._frozen(session, None, ("scorer_failed",))
        try:
            return self._guarded(session, bind_scores(segments, scores))
        except PrunewardenError:
            _log.exception("the window of session %s was refused", session.session_id)
            return self._frozen(session, None, ("invalid_window",))

    def _guarded(self, session: Session, window: list[dict[str, Any]]) -> PassOutcome:
        canaries = [str(s["id"]) for s in window if (s.get("metadata") or {}).get("canary")]
        cycle_scores = {str(s["id"]): float(s["score"]) for s in window if "score" in s}
        collapse = session.observe_cycle(cycle_scores, pinned=canaries)
        total = sum(int(s.get("tokens", 0)) for s in window)
        if self.observe_turns and cycle_scores:
            mean = math.fsum(cycle_scores.values()) / len(cycle_scores)
            session.observe_turn(mean_relevance=_clip(session, mean), tokens=total)
        if collapse.blocks:
            return self._frozen(session, None, collapse.codes)
        if total <= self.budget_tokens:
            return PassOutcome((), frozen=False, reasons=(), plan=None)
        plan = session.plan(window, free_tokens=total - self.budget_tokens)
        if plan.frozen:
            codes = tuple(c for d in plan.decisions if d.blocks for c in d.codes)
            return self._frozen(session, plan, codes)
        order = {str(s["id"]): i for i, s in enumerate(window)}
        evict = tuple(sorted(plan.evict, key=order.__getitem__))
        return PassOutcome(evict, frozen=False, reasons=(), plan=plan)

    def _frozen(self, session: Session, plan: Plan | None, codes: tuple[str, ...]) -> PassOutcome:
        _log.warning(
            "pruning frozen for session %s: %s; the history is kept whole",
            session.session_id,
            ", ".join(codes) or "refused",
        )
        return PassOutcome((), frozen=True, reasons=codes, plan=plan)


def _clip(session: Session, value: float) -> float:
    scores = session.policy.spec.scores
    return min(max(value, scores.min), scores.max)


def tombstone_text(
    removed: Sequence[str], kinds: Mapping[str, str], *, total: int | None = None
) -> str:
    """The marker a framework writes where messages were evicted: how many are gone in all,
    and what this pass removed (each id with its kind)."""
    parts = ", ".join(f"{i} ({kinds[i]})" if i in kinds else i for i in removed)
    total = len(removed) if total is None else total
    return (
        f"[prunewarden: {total} earlier message(s) removed from this conversation; "
        f"last pass: {parts}]"
    )
