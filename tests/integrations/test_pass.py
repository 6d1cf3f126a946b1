"""The framework-free pass of the adapters: budgets, failing closed, staying quiet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from prunewarden import Engine
from prunewarden.integrations import WindowPruner, tombstone_text
from prunewarden.integrations._pass import removed_counts
from prunewarden.scoring import RecencyScorer, Scores


def window(count: int, tokens: int = 100) -> list[dict[str, Any]]:
    return [
        {
            "id": f"m{i}",
            "kind": "turn",
            "text": f"message {i}",
            "tokens": tokens,
            "non_recoverable": i == 0,
            "metadata": {"canary": i == 0},
        }
        for i in range(count)
    ]


class FailingScorer:
    """A scorer whose model is gone."""

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        """Raises, as a broken model would."""
        del segments, task
        message = "model file missing"
        raise RuntimeError(message)


class TestWindowPruner:
    def test_under_budget_nothing_is_planned(self, engine: Engine) -> None:
        """A window within its budget is observed, not pruned."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=1000).run(
            engine.session("s"), window(5), "task"
        )
        assert (outcome.evict, outcome.frozen, outcome.plan) == ((), False, None)

    def test_over_budget_evicts_oldest_first_in_window_order(self, engine: Engine) -> None:
        """The excess is freed, lowest scores first; the canary stays."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=300).run(
            engine.session("s"), window(6), "task"
        )
        assert outcome.evict == ("m1", "m2", "m3")
        assert not outcome.frozen

    def test_a_failing_scorer_freezes_the_pass(
        self, engine: Engine, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Fail closed: nothing is evicted, the reason is scorer_failed, and it is logged."""
        outcome = WindowPruner(FailingScorer(), budget_tokens=10).run(
            engine.session("s"), window(6), "task"
        )
        assert (outcome.evict, outcome.frozen, outcome.reasons) == ((), True, ("scorer_failed",))
        assert "the scorer failed" in caplog.text

    def test_a_refused_window_freezes_the_pass(self, engine: Engine) -> None:
        """Scores outside the policy's range are refused as input: the pass is frozen."""
        outcome = WindowPruner(RecencyScorer(low=-5.0, high=5.0), budget_tokens=10).run(
            engine.session("s"), window(6), "task"
        )
        assert (outcome.frozen, outcome.reasons) == (True, ("invalid_window",))

    def test_turns_are_observed_only_when_asked(self, engine: Engine) -> None:
        """By default the drift signal is not fed; observe_turns=True feeds it."""
        quiet, fed = engine.session("a"), engine.session("b")
        WindowPruner(RecencyScorer(), budget_tokens=300).run(quiet, window(6), "t")
        WindowPruner(RecencyScorer(), budget_tokens=300, observe_turns=True).run(
            fed, window(6), "t"
        )
        assert quiet.state()["turns"] == []
        assert len(fed.state()["turns"]) == 1


class TestBudget:
    def test_the_tombstone_is_priced_before_the_pass(self, engine: Engine) -> None:
        """The pass frees room for the tombstone it is about to write and for what the
        framework adds: the input after the pass is within the budget, and counted."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=300).run(
            engine.session("s"),
            window(6),
            "task",
            fixed_tokens=20,
            tombstone_tokens=lambda evicted: 10 + len(evicted),
        )
        assert outcome.evict == ("m1", "m2", "m3", "m4")
        assert (outcome.tokens, outcome.over_budget) == (2 * 100 + 20 + 14, False)

    def test_pins_over_the_budget_are_said(
        self, engine: Engine, caplog: pytest.LogCaptureFixture
    ) -> None:
        """When what may not be evicted is over the budget, everything else goes and the
        outcome says the input is still over it (a warning, too)."""
        pins = [{**s, "non_recoverable": True} if s["id"] in {"m0", "m5"} else s for s in window(6)]
        outcome = WindowPruner(RecencyScorer(), budget_tokens=150).run(
            engine.session("s"), pins, "task"
        )
        assert outcome.evict == ("m1", "m2", "m3", "m4")
        assert (outcome.frozen, outcome.tokens, outcome.over_budget) == (False, 200, True)
        assert "over its budget of 150" in caplog.text

    def test_a_pass_within_its_budget_warns_nothing(
        self, engine: Engine, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A pass whose input fits its budget logs no warning about the budget."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=300).run(
            engine.session("s"), window(3), "task"
        )
        assert (outcome.evict, outcome.over_budget) == ((), False)
        assert "over its budget" not in caplog.text

    def test_the_room_freed_prices_the_tombstone_of_every_evictable_segment(
        self, engine: Engine
    ) -> None:
        """The pass frees room for the largest tombstone its choices could write: one naming
        the five evictable segments (50 tokens), not the pinned one (10)."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=440).run(
            engine.session("s"), window(6), "task", tombstone_tokens=lambda e: 10 * len(e)
        )
        assert outcome.evict == ("m1", "m2", "m3")
        assert (outcome.tokens, outcome.over_budget) == (300 + 30, False)


class TestTombstoneText:
    def test_kinds_and_counts_no_ids(self) -> None:
        """The tombstone counts what is gone, by kind, sorted: no ids."""
        counts = removed_counts({"tool": 2}, ["assistant", "tool", "tool"])
        assert counts == {"tool": 4, "assistant": 1}
        assert tombstone_text(counts) == (
            "[prunewarden: 5 earlier messages removed: 1 assistant, 4 tool]"
        )
