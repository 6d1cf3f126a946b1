"""The framework-free pass of the adapters: budgets, failing closed, staying quiet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from prunewarden import Engine
from prunewarden.integrations import WindowPruner
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
