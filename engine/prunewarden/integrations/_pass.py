"""The framework-free half of an adapter: one guarded pass over a message window for a budget.

Each call is one rewrite cycle: the window is scored, the cycle observed by the collapse guard
(its canaries are the segments whose ``metadata.canary`` is true: the task and what the caller
pins, whose relevance to the task a sound scorer keeps high), and, when the model input is over
its token budget, the session plans a pass freeing the excess. The model input is the window,
what the framework adds outside it (a system prompt) and the adapter's own tombstone: the pass
frees room for the tombstone it is about to write, so what it promises is what the model reads.
A frozen pass (a halt, stale scores) evicts nothing, and says why.

With a ``summarizer``, a pass that evicts also writes a summary of what it evicts, in its
place: the summary is judged first as a transition of the session (window before, window with
the summary instead of the evicted segments, each of them tombstoned), so that its fidelity is
checked (``spec.fidelity``, docs/fidelity.md). A refused summary is not written and the
originals are kept: the pass is frozen with the refusal's reason codes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from prunewarden.errors import PrunewardenError
from prunewarden.planner import Plan
from prunewarden.scoring import Scorer, bind_scores
from prunewarden.session import Session

_log = logging.getLogger("prunewarden.integrations")

#: ``tombstone_tokens(evicted_ids)``: the tokens of the adapter's tombstone once these ids are
#: evicted (with no ids: the tombstone already in the history, 0 when there is none).
TombstoneTokens = Callable[[Sequence[str]], int]

#: ``summarizer(segments) -> summary``: a summary of the segments a pass evicts (window order),
#: as a segment: ``text`` and ``tokens``, and optionally ``id`` (``summary:<first id>`` when
#: absent) and ``kind`` (``summary``). The pass sets its ``derived_from``.
Summarizer = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]

SUMMARIZER = "prunewarden.summarizer"  # the applied_by of a pass's summary transition


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one call decided: the ids to evict (window order), whether the pass was frozen and
    why (the refusing decisions' reason codes), the plan when one was made, and the model
    input's tokens once the call is applied (window, system prompt and tombstone) against the
    budget. ``over_budget`` is the signal that the budget could not be kept: what may not be
    evicted (pins, refused evictions, a frozen pass) is itself over it."""

    evict: tuple[str, ...]
    frozen: bool
    reasons: tuple[str, ...]
    plan: Plan | None
    tokens: int = 0
    budget_tokens: int = 0
    # The summary to write in the evicted segments' place (a summarizer's, allowed), if any.
    summary: Mapping[str, Any] | None = None

    @property
    def trimmed(self) -> bool:
        return bool(self.evict)

    @property
    def over_budget(self) -> bool:
        return self.tokens > self.budget_tokens


def _no_tombstone(evicted: Sequence[str]) -> int:
    del evicted
    return 0


class WindowPruner:
    """Scores a window, observes it, and plans a pass when the model input is over
    ``budget_tokens``.

    Turns (the drift signal's mean relevance and tokens) are observed only with
    ``observe_turns``: evicting the lowest scores raises the mean while the tokens fall, which
    is the signal itself, so an adapter that only evicts would trip it. Turn it on where the
    agent also rewrites or compresses its messages.
    """

    def __init__(
        self,
        scorer: Scorer,
        *,
        budget_tokens: int,
        observe_turns: bool = False,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.scorer = scorer
        self.budget_tokens = budget_tokens
        self.observe_turns = observe_turns
        self.summarizer = summarizer

    def run(  # noqa: PLR0913 - the window and task, then what the adapter prices and records
        self,
        session: Session,
        segments: Sequence[Mapping[str, Any]],
        task: str,
        *,
        fixed_tokens: int = 0,
        tombstone_tokens: TombstoneTokens = _no_tombstone,
        tombstones: Iterable[str] = (),
    ) -> PassOutcome:
        """One cycle over ``segments`` (window segments without scores, in window order; the
        adapter's tombstone is not one of them). ``fixed_tokens`` is what the framework adds to
        every model call outside the window; ``tombstone_tokens`` prices the adapter's
        tombstone for a set of evictions; ``tombstones`` are ids earlier passes removed that a
        tombstone records (what the segments' ``derived_from`` may name).

        Fails closed: a scorer that raises, or a window the engine refuses as input, freezes
        the pass (``scorer_failed``, ``invalid_window``) and is logged."""
        budget = _Budget(self.budget_tokens, segments, fixed_tokens, tombstone_tokens)
        if not segments:
            return budget.outcome((), frozen=False, reasons=(), plan=None)
        try:
            scores = self.scorer.score(segments, task)
        except Exception:  # noqa: BLE001 - any scorer failure keeps the history whole
            _log.exception("the scorer failed for session %s", session.session_id)
            return self._frozen(session, budget, None, ("scorer_failed",))
        try:
            window = bind_scores(segments, scores)
            outcome = self._guarded(session, window, budget, tuple(tombstones))
        except PrunewardenError:
            _log.exception("the window of session %s was refused", session.session_id)
            return self._frozen(session, budget, None, ("invalid_window",))
        if outcome.over_budget and not outcome.frozen:
            _log.warning(
                "session %s: the model input stays at %d tokens, over its budget of %d: "
                "what may not be evicted is over it",
                session.session_id,
                outcome.tokens,
                outcome.budget_tokens,
            )
        return outcome

    def _guarded(
        self,
        session: Session,
        window: list[dict[str, Any]],
        budget: _Budget,
        tombstones: tuple[str, ...] = (),
    ) -> PassOutcome:
        canaries = [str(s["id"]) for s in window if (s.get("metadata") or {}).get("canary")]
        cycle_scores = {str(s["id"]): float(s["score"]) for s in window if "score" in s}
        collapse = session.observe_cycle(cycle_scores, pinned=canaries)
        if self.observe_turns and cycle_scores:
            mean = math.fsum(cycle_scores.values()) / len(cycle_scores)
            session.observe_turn(mean_relevance=_clip(session, mean), tokens=budget.window)
        if collapse.blocks:
            return self._frozen(session, budget, None, collapse.codes)
        if budget.tokens_after(()) <= self.budget_tokens:
            return budget.outcome((), frozen=False, reasons=(), plan=None)
        plan = session.plan(window, free_tokens=budget.to_free(), tombstones=tombstones)
        if plan.frozen:
            codes = tuple(c for d in plan.decisions if d.blocks for c in d.codes)
            return self._frozen(session, budget, plan, codes)
        order = {str(s["id"]): i for i, s in enumerate(window)}
        evict = tuple(sorted(plan.evict, key=order.__getitem__))
        if self.summarizer is not None and evict:
            return self._summarized(session, window, evict, budget, plan)
        return budget.outcome(evict, frozen=False, reasons=(), plan=plan)

    def _summarized(
        self,
        session: Session,
        window: list[dict[str, Any]],
        evict: tuple[str, ...],
        budget: _Budget,
        plan: Plan,
    ) -> PassOutcome:
        """The pass with its summary, once the session allows the summary as a transition;
        frozen (the originals kept) when it does not, or when the summarizer fails."""
        assert self.summarizer is not None  # noqa: S101 - only called with one
        gone = set(evict)
        try:
            written = self.summarizer([s for s in window if s["id"] in gone])
            tokens = int(written["tokens"])
            summary = {
                "id": str(written.get("id") or f"summary:{evict[0]}"),
                "kind": str(written.get("kind") or "summary"),
                "text": str(written["text"]),
                "tokens": tokens,
                "derived_from": list(evict),
            }
        except Exception:  # noqa: BLE001 - fail closed: no summary, nothing evicted
            _log.exception("the summarizer failed for session %s", session.session_id)
            return self._frozen(session, budget, plan, ("summarizer_failed",))
        after: list[dict[str, Any]] = []
        for segment in window:
            if segment["id"] == evict[0]:
                after.append(summary)
            if segment["id"] not in gone:
                after.append(segment)
        decision = session.verify(window, after, tombstones=evict, applied_by=SUMMARIZER)
        if decision.blocks:
            return self._frozen(session, budget, plan, decision.codes)
        outcome = budget.outcome(evict, frozen=False, reasons=(), plan=plan)
        return replace(outcome, tokens=outcome.tokens + tokens, summary=summary)

    def _frozen(
        self, session: Session, budget: _Budget, plan: Plan | None, codes: tuple[str, ...]
    ) -> PassOutcome:
        _log.warning(
            "pruning frozen for session %s: %s; the history is kept whole",
            session.session_id,
            ", ".join(codes) or "refused",
        )
        return budget.outcome((), frozen=True, reasons=codes, plan=plan)


class _Budget:
    """The model input's tokens for a set of evictions: the window less what is evicted, what
    the framework adds, and the tombstone those evictions make the adapter write."""

    def __init__(
        self,
        budget_tokens: int,
        segments: Sequence[Mapping[str, Any]],
        fixed_tokens: int,
        tombstone_tokens: TombstoneTokens,
    ) -> None:
        self.budget_tokens = budget_tokens
        self.tokens = {str(s["id"]): int(s.get("tokens", 0)) for s in segments}
        self.window = sum(self.tokens.values())
        self.fixed = fixed_tokens
        self.tombstone_tokens = tombstone_tokens
        self.evictable = [str(s["id"]) for s in segments if not s.get("non_recoverable")]

    def tokens_after(self, evict: Sequence[str]) -> int:
        freed = sum(self.tokens[i] for i in evict)
        return self.window - freed + self.fixed + self.tombstone_tokens(evict)

    def to_free(self) -> int:
        """What the pass must free so that the input, with the largest tombstone any of its
        choices could write (one naming every evictable segment), is within the budget."""
        largest = self.tombstone_tokens(self.evictable)
        return self.window + self.fixed + largest - self.budget_tokens

    def outcome(
        self, evict: tuple[str, ...], *, frozen: bool, reasons: tuple[str, ...], plan: Plan | None
    ) -> PassOutcome:
        return PassOutcome(
            evict, frozen, reasons, plan, self.tokens_after(evict), self.budget_tokens
        )


def _clip(session: Session, value: float) -> float:
    scores = session.policy.spec.scores
    return min(max(value, scores.min), scores.max)


def removed_counts(earlier: Mapping[str, int], kinds: Iterable[str]) -> dict[str, int]:
    """What a tombstone counts once messages of ``kinds`` (one entry per message) are removed
    on top of ``earlier`` (kind -> messages removed before)."""
    counts = dict(earlier)
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def tombstone_text(removed: Mapping[str, int]) -> str:
    """The marker a framework writes where messages were evicted: how many are gone in all,
    and of which kinds (kind names sorted). A few tokens, no ids: what was removed by id is in
    the pass's outcome and its audit record, not in what the model reads. Its length never
    shrinks as a count grows, so the tombstone naming every candidate bounds any other."""
    total = sum(removed.values())
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(removed.items()) if n)
    return f"[prunewarden: {total} earlier messages removed: {kinds}]"
