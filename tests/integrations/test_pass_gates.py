"""The adapters' pass stops where the docs say: on its own cycle's collapse halt, and not before
the window is over its budget (docs/integrations.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden import Engine
from prunewarden.integrations import WindowPruner
from prunewarden.scoring import RecencyScorer, Scores


def window(count: int, tokens: int = 100) -> list[dict[str, Any]]:
    return [
        {"id": f"m{i}", "kind": "turn", "text": f"message {i}", "tokens": tokens}
        for i in range(count)
    ]


class FlatScorer:
    """Every segment the same score: a spread of 0, with no canary to audit the scorer."""

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        del task
        return Scores({str(s["id"]): (0.5, 0.5) for s in segments})


class TestOwnCycleHalt:
    def test_the_cycle_that_halts_freezes_its_own_pass(self, engine: Engine) -> None:
        """When this call's cycle makes the collapse guard halt, the pass is frozen at once,
        with the guard's reason, and no plan is made."""
        session = engine.session("s")
        pruner = WindowPruner(FlatScorer(), budget_tokens=100)
        outcomes = [pruner.run(session, window(6), "task") for _ in range(3)]
        assert [o.frozen for o in outcomes] == [False, False, True]
        last = outcomes[-1]
        assert (last.evict, last.reasons, last.plan) == ((), ("no_canary",), None)

    def test_a_halt_under_budget_freezes_too(self, engine: Engine) -> None:
        """A window within its budget is frozen too when its cycle halts (a halt is news the
        caller must hear, pruning or not)."""
        session = engine.session("s")
        pruner = WindowPruner(FlatScorer(), budget_tokens=10_000)
        outcomes = [pruner.run(session, window(6), "task") for _ in range(3)]
        assert (outcomes[-1].frozen, outcomes[-1].reasons) == (True, ("no_canary",))


class TestBudgetBoundary:
    def test_a_window_exactly_at_budget_is_not_pruned(self, engine: Engine) -> None:
        """At its budget a window is within it: nothing planned, nothing evicted."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=600).run(
            engine.session("s"), window(6), "task"
        )
        assert (outcome.evict, outcome.frozen, outcome.plan) == ((), False, None)

    def test_one_token_over_is_pruned(self, engine: Engine) -> None:
        """One token over the budget, a pass frees the excess (the control)."""
        outcome = WindowPruner(RecencyScorer(), budget_tokens=599).run(
            engine.session("s"), window(6), "task"
        )
        assert outcome.plan is not None
        assert outcome.evict == ("m0",)
