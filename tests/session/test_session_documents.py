"""`Session.evaluate` decides a whole input document with the session's history: every
snapshot and turn is observed in order, and the session keeps its own baselines."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from prunewarden import Engine, InputError

EngineFactory = Callable[..., Engine]


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def span(span_id: str, score: float) -> dict[str, Any]:
    text = f"text of {span_id}"
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha}


class TestCollapseDocuments:
    def test_every_snapshot_is_observed_and_the_last_decision_returned(
        self, engine: Engine
    ) -> None:
        """A collapse document's snapshots are observed in order; the last decision returns."""
        session = engine.session("s")
        history = [{"cycle": c, "scores": narrowing(c), "pinned": ["task"]} for c in (1, 2, 3)]
        decision = session.evaluate({"check": "collapse", "history": history})
        assert decision.codes == ("spread_healthy",)
        state = session.state()
        assert state["cycles_seen"] == 3
        assert [s["cycle"] for s in state["snapshots"]] == [1, 2, 3]

    def test_a_baseline_in_the_document_is_refused(self, engine: Engine) -> None:
        """A session keeps its own baselines: a document bringing one is refused at
        `$.baseline`, and nothing is observed."""
        session = engine.session("s")
        document = {
            "check": "collapse",
            "history": [{"cycle": 1, "scores": narrowing(1), "pinned": ["task"]}],
            "baseline": {"task": 0.9},
        }
        with pytest.raises(InputError) as raised:
            session.evaluate(document)
        located = [(p.path, p.line, p.column) for p in raised.value.problems]
        assert located == [("$.baseline", 0, 0)]
        assert "keeps its own baselines" in raised.value.problems[0].message
        assert session.state()["cycles_seen"] == 0


class TestStalenessDocuments:
    def test_the_turns_are_observed_before_the_prune(self, engine: Engine) -> None:
        """A staleness document's turns join the session's turns, and the prune is decided."""
        session = engine.session("s")
        document = {
            "check": "staleness",
            "spans": [span("a", 0.9), span("b", 0.1)],
            "keep_top_k": 1,
            "turns": [
                {"turn": 1, "mean_relevance": 0.5, "tokens": 100},
                {"turn": 2, "mean_relevance": 0.5, "tokens": 110},
            ],
        }
        decision = session.evaluate(document)
        assert decision.check == "staleness"
        assert [t["turn"] for t in session.state()["turns"]] == [1, 2]


def segment(segment_id: str) -> dict[str, Any]:
    return {"id": segment_id, "kind": "turn", "text": f"text {segment_id}", "tokens": 10}


class TestTransitions:
    def test_verify_returns_the_transition_decision(self, engine: Engine) -> None:
        """`Session.verify` of an edit that changes nothing returns its clean decision."""
        session = engine.session("s")
        window = [segment("a"), segment("b")]
        decision = session.verify(window, window)
        assert (decision.check, decision.codes) == ("transition", ("transition_clean",))

    def test_a_transition_document_is_verified(self, engine: Engine) -> None:
        """A transition document given to `Session.evaluate` is decided by `verify`."""
        session = engine.session("s")
        document = {"check": "transition", "before": [segment("a")], "after": [segment("a")]}
        decision = session.evaluate(document)
        assert (decision.check, decision.codes) == ("transition", ("transition_clean",))

    def test_enforce_returns_a_decision_that_does_not_block(self, engine: Engine) -> None:
        """`Session.enforce` of a document its guard allows returns the decision."""
        session = engine.session("s")
        document = {"check": "transition", "before": [segment("a")], "after": [segment("a")]}
        decision = session.enforce(document)
        assert (decision.check, decision.codes) == ("transition", ("transition_clean",))


class TestNumbering:
    def test_cycles_and_turns_are_numbered_from_one(self, engine: Engine) -> None:
        """Without numbers, cycles and turns are numbered 1, 2, ... in the state."""
        session = engine.session("s")
        session.observe_cycle(narrowing(1), ["task"])
        session.observe_cycle(narrowing(2), ["task"])
        session.observe_turn(0.5, 100)
        session.observe_turn(0.5, 100)
        state = session.state()
        assert [s["cycle"] for s in state["snapshots"]] == [1, 2]
        assert [t["turn"] for t in state["turns"]] == [1, 2]
        assert state["cycles_seen"] == 2


class TestSpreadsOnTheJudgedScale:
    def test_early_spreads_are_measured_on_the_calibrated_scale(
        self, engine_with: EngineFactory
    ) -> None:
        """With a calibration, a session's first spreads are those of the calibrated scores
        (the scale the guard judges), and the state names that scale."""
        engine = engine_with(
            collapse={
                "spread_floor_mode": "relative",
                "spread_floor": 0.5,
                "relative_to": {"first_cycles": 2},
            },
            scores={"calibration": {"fixed": {"low": 0.0, "high": 0.5}}},
        )
        session = engine.session("s")
        session.observe_cycle({"a": 0.125, "b": 0.25, "c": 0.375})
        spreads = session.state()["early_spreads"]
        assert spreads["scale"] == {"scale": "fixed", "low": 0.0, "high": 0.5}
        (spread,) = spreads["values"]
        assert math.isclose(spread, statistics.pstdev([0.25, 0.5, 0.75]))

    def test_only_the_first_cycles_spreads_are_kept(self, engine_with: EngineFactory) -> None:
        """A session keeps the spreads of its first relative_to.first_cycles cycles, no more."""
        engine = engine_with(
            collapse={
                "spread_floor_mode": "relative",
                "spread_floor": 0.5,
                "relative_to": {"first_cycles": 2},
            },
        )
        session = engine.session("s")
        for half_width in (0.375, 0.25, 0.125, 0.0625):
            session.observe_cycle({"a": 0.5 - half_width, "b": 0.5 + half_width})
        assert session.state()["early_spreads"]["values"] == [0.375, 0.25]

    def test_under_cusum_a_cycle_too_small_to_judge_is_no_early_spread(
        self, engine_with: EngineFactory
    ) -> None:
        """Under the cusum test a cycle with fewer than min_live_entries scores stays out of
        the session's early spreads (its reference); one with exactly that many counts."""
        engine = engine_with(
            collapse={
                "spread_floor_mode": "cusum",
                "consecutive_cycles": 2,
                "min_live_entries": 3,
                "cusum": {"slack": 0.4, "reference": {"first_cycles": 2, "prior_weight": 0}},
            },
        )
        session = engine.session("s")
        session.observe_cycle({"c": 0.5, "x": 0.25}, ["c"])
        assert session.state()["early_spreads"]["values"] == []
        session.observe_cycle({"c": 0.5, "x": 0.25, "y": 0.75}, ["c"])
        (spread,) = session.state()["early_spreads"]["values"]
        assert math.isclose(spread, statistics.pstdev([0.5, 0.25, 0.75]))

    def test_a_relative_floor_keeps_the_spread_of_a_small_cycle(
        self, engine_with: EngineFactory
    ) -> None:
        """A relative floor's early spread counts every first cycle, min_live_entries or not."""
        engine = engine_with(
            collapse={
                "spread_floor_mode": "relative",
                "spread_floor": 0.5,
                "min_live_entries": 3,
                "relative_to": {"first_cycles": 2},
            },
        )
        session = engine.session("s")
        session.observe_cycle({"a": 0.25, "b": 0.75})
        assert session.state()["early_spreads"]["values"] == [0.25]


class TestOrder:
    def test_a_cycle_out_of_order_is_located_by_path(self, engine: Engine) -> None:
        """A cycle number that does not follow the last is refused at `$.cycle`, with no text
        position."""
        session = engine.session("s")
        session.observe_cycle(narrowing(1), ["task"], cycle=3)
        with pytest.raises(InputError) as raised:
            session.observe_cycle(narrowing(2), ["task"], cycle=3)
        located = [(p.path, p.line, p.column) for p in raised.value.problems]
        assert located == [("$.cycle", 0, 0)]
