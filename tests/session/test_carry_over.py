"""A state restored under another policy: which parts are cut or dropped, and why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import structlog
from prunewarden import Engine, SessionStateError

EngineFactory = Callable[..., Engine]
RELATIVE = {
    "spread_floor_mode": "relative",
    "spread_floor": 0.5,
    "relative_to": {"first_cycles": 3},
}
SCALE = {"calibration": {"fixed": {"low": 0.0, "high": 0.5}}}


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def observed(engine: Engine, cycles: int, turns: int) -> dict[str, Any]:
    session = engine.session("s")
    for c in range(1, cycles + 1):
        session.observe_cycle(narrowing(c), ["task"])
    for _ in range(turns):
        session.observe_turn(0.5, 100)
    return session.state()


def rebound(engine: Engine, state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    logger = structlog.testing.CapturingLogger()
    session = Engine(engine.policy, logger=logger).session("s", state=state)
    (record,) = [c.kwargs for c in logger.calls if c.args == ("session_rebound",)]
    return session, record


class TestTurns:
    def test_turns_are_cut_to_the_new_window(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """Under a policy watching fewer turns, the last drift_consecutive_turns + 1 stay."""
        state = observed(engine, 1, 6)
        shorter = engine_with(staleness={"drift_consecutive_turns": 1})
        session, record = rebound(shorter, state)
        assert [t["turn"] for t in session.state()["turns"]] == [5, 6]
        assert "turns" in record["kept"]

    def test_turns_outside_the_new_range_are_refused(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """Turns whose relevance lies outside the new score range cannot be used: located at
        `$.turns`."""
        state = observed(engine, 0, 2)
        narrow = engine_with(scores={"min": 0.0, "max": 0.25})
        with pytest.raises(SessionStateError) as raised:
            narrow.session("s", state=state)
        assert [p.path for p in raised.value.problems] == ["$.turns"]
        assert "outside the policy's score range" in raised.value.problems[0].message


class TestEarlySpreads:
    def test_spreads_on_another_calibration_are_refused(self, engine_with: EngineFactory) -> None:
        """First spreads measured on another calibration cannot serve a relative floor."""
        state = observed(engine_with(collapse=RELATIVE), 3, 0)
        calibrated = engine_with(collapse=RELATIVE, scores=SCALE)
        with pytest.raises(SessionStateError) as raised:
            calibrated.session("s", state=state)
        (problem,) = raised.value.problems
        assert problem.path == "$.early_spreads"
        assert "measured on another calibration" in problem.message

    def test_too_few_spreads_are_counted_in_the_refusal(self, engine_with: EngineFactory) -> None:
        """A state without the first spreads a relative floor needs says how many it needs,
        under which setting, and how many were kept."""
        state = observed(engine_with(collapse=RELATIVE), 3, 0)
        state["early_spreads"]["values"] = state["early_spreads"]["values"][:1]
        with pytest.raises(SessionStateError) as raised:
            engine_with(collapse=RELATIVE).session("s", state=state)
        (problem,) = raised.value.problems
        assert "3 early spreads are needed (relative_to.first_cycles), 1 were kept" in (
            problem.message
        )

    def test_spreads_enough_for_the_new_floor_are_kept(self, engine_with: EngineFactory) -> None:
        """First spreads measured on the same scale, as many as needed, carry over."""
        state = observed(engine_with(collapse=RELATIVE), 4, 0)
        fewer = {**RELATIVE, "relative_to": {"first_cycles": 2}}
        session, record = rebound(engine_with(collapse=fewer), state)
        assert record["dropped"] == {}
        assert session.state()["early_spreads"]["values"] == state["early_spreads"]["values"][:2]


class TestRulePins:
    def test_pins_of_another_policy_are_dropped_not_refused(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """Rule pins belong to the policy whose rules made them: under another they are dropped
        (the record says how many), and the restore goes on."""
        session = engine.session("s")
        session.pin_by_rule({"seg-1": "pinned text"})
        state = session.state()
        other = engine_with(collapse={"consecutive_cycles": 3})
        restored, record = rebound(other, state)
        assert record["dropped"] == {
            "rule_pins": "1 segment(s) pinned by rules of another policy: "
            "this policy's rules decide them afresh"
        }
        assert restored.state()["rule_pins"] == {"policy": None, "segments": {}}


class TestWhereStateProblemsPoint:
    def test_order_problems_have_no_text_position(self, engine: Engine) -> None:
        """A state document passed as data has no lines: an order problem names its JSON path
        with line 0 and column 0, as the schema's problems do."""
        state = observed(engine, 2, 2)
        state["snapshots"][1]["cycle"] = 1
        state["turns"][1]["turn"] = 1
        state["cycles_seen"] = 1
        with pytest.raises(SessionStateError) as raised:
            engine.session("s", state=state)
        located = sorted((p.path, p.line, p.column) for p in raised.value.problems)
        assert located == [
            ("$.cycles_seen", 0, 0),
            ("$.snapshots[1].cycle", 0, 0),
            ("$.turns[1].turn", 0, 0),
        ]

    def test_schema_problems_have_no_text_position_either(self, engine: Engine) -> None:
        """The schema's problems of the same kind of document point the same way."""
        state = observed(engine, 1, 0)
        state["cycles_seen"] = -1
        with pytest.raises(SessionStateError) as raised:
            engine.session("s", state=state)
        assert [(p.line, p.column) for p in raised.value.problems] == [(0, 0)]


class TestCusumCarryOver:
    def test_an_empty_track_is_not_reported_dropped(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """A state with no cusum sum yet, restored under a policy with the cusum test, drops
        nothing: there was no sum to lose."""
        state = observed(engine, 0, 0)
        cusum = engine_with(
            collapse={
                "spread_floor_mode": "cusum",
                "consecutive_cycles": 2,
                "cusum": {"slack": 0.4, "reference": {"first_cycles": 2, "prior_weight": 0}},
            }
        )
        _, record = rebound(cusum, state)
        assert record["dropped"] == {}

    def test_cycles_too_small_to_judge_need_no_early_spread(
        self, engine_with: EngineFactory
    ) -> None:
        """The cusum reference keeps judgeable cycles only: a state whose cycles were all too
        small to judge carries no early spread, and restores under its own policy."""
        cusum = engine_with(
            collapse={
                "spread_floor_mode": "cusum",
                "consecutive_cycles": 2,
                "min_live_entries": 3,
                "cusum": {"slack": 0.4, "reference": {"first_cycles": 2, "prior_weight": 0}},
            }
        )
        session = cusum.session("s")
        session.observe_cycle({"c": 0.55, "x": 0.2})
        session.observe_cycle({"c": 0.55, "x": 0.3})
        state = session.state()
        assert (state["cycles_seen"], state["early_spreads"]["values"]) == (2, [])
        restored = cusum.session("s", state=state)
        assert restored.state()["early_spreads"] == {"scale": None, "values": []}


class TestWhereRefusalsPoint:
    def test_a_part_another_policy_cannot_use_has_no_text_position(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """A part refused under another policy is located by its JSON path only."""
        state = observed(engine, 0, 2)
        narrow = engine_with(scores={"min": 0.0, "max": 0.25})
        with pytest.raises(SessionStateError) as raised:
            narrow.session("s", state=state)
        assert [(p.path, p.line, p.column) for p in raised.value.problems] == [("$.turns", 0, 0)]
