"""What one adapter pass returns, whatever the framework: an empty window, tokens left out, a
plan the staleness gate froze, and the tombstone written back (docs/integrations.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden import Engine
from prunewarden.integrations import PassOutcome, WindowPruner, tombstone_text
from prunewarden.scoring import RecencyScorer, Scores


def window(count: int, tokens: int | None = 100) -> list[dict[str, Any]]:
    segments = []
    for i in range(count):
        segment: dict[str, Any] = {"id": f"m{i}", "kind": "turn", "text": f"message {i}"}
        if tokens is not None:
            segment["tokens"] = tokens
        segments.append(segment)
    return segments


class LeavesOut:
    """Recency scores for every segment but one, which keeps the score it had."""

    def __init__(self, left_out: str) -> None:
        self.left_out = left_out

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        scored = RecencyScorer().score(segments, task)
        return Scores({k: v for k, v in scored.items() if k != self.left_out})


class TestOutcomes:
    def test_an_empty_window_is_a_quiet_pass(self, engine: Engine) -> None:
        """No segments: nothing evicted, not frozen, no reasons, no plan, nothing trimmed."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=10).run(engine.session("s"), [], "t")
        assert (outcome.evict, outcome.frozen, outcome.reasons, outcome.plan) == (
            (),
            False,
            (),
            None,
        )
        assert outcome.trimmed is False

    def test_an_evicting_pass_is_trimmed(self, engine: Engine) -> None:
        """A pass that evicts says it trimmed the window."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=300).run(
            engine.session("s"), window(6), "t"
        )
        assert outcome.evict
        assert outcome.trimmed is True

    def test_segments_without_tokens_count_none(self, engine: Engine) -> None:
        """A segment that does not say its tokens counts zero: a window of such segments is
        within any budget."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=0).run(
            engine.session("s"), window(6, tokens=None), "t"
        )
        assert (outcome.evict, outcome.frozen, outcome.plan) == ((), False, None)

    def test_a_plan_the_gate_freezes_freezes_the_pass(self, engine: Engine) -> None:
        """Over budget with a score bound to text the segment no longer holds: the plan is
        frozen, the pass evicts nothing, and says why, with the plan."""
        segments = window(6)
        stale = hashlib.sha256(b"what m3 said before").hexdigest()
        segments[3] = {**segments[3], "score": 0.5, "text_sha256": stale}
        outcome = WindowPruner(LeavesOut("m3"), budget_tokens=300).run(
            engine.session("s"), segments, "t"
        )
        assert outcome.frozen
        assert outcome.evict == ()
        assert "hash_mismatch" in outcome.reasons
        assert outcome.plan is not None
        assert outcome.plan.frozen


class TestTheBudget:
    def test_a_window_exactly_at_budget_is_within_it(self, engine: Engine) -> None:
        """A model input of exactly the budget's tokens is kept whole and is not over it."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=300).run(
            engine.session("s"), window(3), "t"
        )
        assert (outcome.evict, outcome.frozen, outcome.plan) == ((), False, None)
        assert (outcome.tokens, outcome.budget_tokens, outcome.over_budget) == (300, 300, False)

    def test_one_token_over_the_budget_is_over_it(self) -> None:
        """An outcome one token past its budget says it is over budget."""
        outcome = PassOutcome((), frozen=True, reasons=(), plan=None, tokens=301, budget_tokens=300)
        assert outcome.over_budget is True

    def test_an_outcome_built_without_token_counts_is_within_budget(self) -> None:
        """A PassOutcome built by hand counts zero tokens against a zero budget: not over it,
        with no summary."""
        outcome = PassOutcome((), frozen=False, reasons=(), plan=None)
        assert (outcome.tokens, outcome.budget_tokens) == (0, 0)
        assert (outcome.over_budget, outcome.trimmed, outcome.summary) == (False, False, None)


class TestTombstoneText:
    def test_it_counts_the_removals_by_kind(self) -> None:
        """The marker counts every removal and names the kinds, sorted, with no ids."""
        text = tombstone_text({"turn": 1, "tool_output": 2})
        assert text == "[prunewarden: 3 earlier messages removed: 2 tool_output, 1 turn]"

    def test_a_kind_with_no_removal_is_left_out(self) -> None:
        """A kind counted zero is not named."""
        assert tombstone_text({"turn": 0, "user": 4}) == (
            "[prunewarden: 4 earlier messages removed: 4 user]"
        )
