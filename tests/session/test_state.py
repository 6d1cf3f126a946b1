"""Session state snapshots: session-state.v4, restoring, carrying over, baselines for life."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import structlog
from jsonschema import Draft202012Validator
from prunewarden import Engine, SessionStateError
from prunewarden._schemas import validator
from prunewarden.cli._main import run

EngineFactory = Callable[..., Engine]
SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
WIDE = {"a": 0.1, "b": 0.5, "d": 0.9}  # a healthy spread
NARROW = {"a": 0.5, "b": 0.52, "d": 0.51}  # a collapsed spread


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def halted_session(engine: Engine, session_id: str = "s") -> Any:
    session = engine.session(session_id, {"team": "core"})
    for c in range(1, 6):
        session.observe_cycle(narrowing(c), ["task"])
    assert session.halted
    return session


def state_problems(state: dict[str, Any]) -> list[str]:
    return [error.message for error in validator("session-state").iter_errors(state)]


class TestSnapshot:
    def test_state_validates_and_is_plain_json(self, engine: Engine) -> None:
        """state() is JSON-serializable and valid session-state.v4, naming the policy."""
        session = halted_session(engine)
        session.observe_turn(0.5, 900)
        state = json.loads(json.dumps(session.state()))
        assert state_problems(state) == []
        assert state["policy"] == engine.policy.identity.to_dict()
        assert (state["session_id"], state["labels"]) == ("s", {"team": "core"})
        assert [s["cycle"] for s in state["snapshots"]] == [3, 4, 5]
        assert state["halt"]["code"] == "collapse_detected"
        assert state["halt"]["cycle"] == 5
        assert state["cycles_seen"] == 5

    def test_the_schema_is_bundled_and_printed(self) -> None:
        """prunewarden schema session-state prints the bundled schema."""
        out, err = io.StringIO(), io.StringIO()
        assert run(["schema", "session-state"], out, err) == 0
        printed = json.loads(out.getvalue())
        Draft202012Validator.check_schema(printed)
        assert printed["$id"].endswith("session-state.v4.schema.json")


class TestRestore:
    def test_a_restored_halt_holds(self, engine: Engine) -> None:
        """A session restored from a halted state refuses evictions with pruning_halted."""
        state = halted_session(engine).state()
        restored = Engine.default().session("s", state=state)
        assert restored.halted
        assert restored.authorize(SEGMENT, 0.1, 0.1).codes == ("pruning_halted",)
        assert restored.labels == {"team": "core"}

    def test_a_restored_session_decides_as_the_original(self, engine: Engine) -> None:
        """Snapshots, baselines and turns carry over: the next decisions are the same."""
        original = engine.session("s")
        for c in range(1, 4):
            original.observe_cycle(narrowing(c), ["task"])
        restored = engine.session("s", state=original.state())
        for c in range(4, 6):
            assert (
                restored.observe_cycle(narrowing(c), ["task"]).codes
                == original.observe_cycle(narrowing(c), ["task"]).codes
            )
        ours, theirs = restored.state(), original.state()
        assert ours["halt"]["code"] == theirs["halt"]["code"] == "collapse_detected"
        assert {**ours, "halt": None} == {**theirs, "halt": None}

    def test_a_malformed_state_is_located(self, engine: Engine) -> None:
        """A state that is not session-state.v4 raises SessionStateError naming the path."""
        state = halted_session(engine).state()
        state["snapshots"][0]["cycle"] = "three"
        with pytest.raises(SessionStateError) as raised:
            engine.session("s", state=state)
        assert raised.value.problems[0].path == "$.snapshots[0].cycle"

    def test_cycles_must_increase(self, engine: Engine) -> None:
        """Snapshots out of order are refused with their path."""
        state = halted_session(engine).state()
        state["snapshots"].reverse()
        with pytest.raises(SessionStateError) as raised:
            engine.session("s", state=state)
        assert raised.value.problems[0].path == "$.snapshots[1].cycle"

    def test_the_state_of_another_session_is_refused(self, engine: Engine) -> None:
        """A state restores only the session it was taken from."""
        state = halted_session(engine).state()
        with pytest.raises(SessionStateError) as raised:
            engine.session("other", state=state)
        assert raised.value.problems[0].path == "$.session_id"


class TestAnotherPolicy:
    def test_windows_are_cut_to_the_new_policy(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """Under a policy with a shorter window, the last snapshots are kept and one
        session_rebound record says so; the halt carries over."""
        state = halted_session(engine).state()
        shorter = engine_with(collapse={"consecutive_cycles": 1})
        logger = structlog.testing.CapturingLogger()
        restored = Engine(shorter.policy, logger=logger).session("s", state=state)
        records = [call.kwargs for call in logger.calls if call.args == ("session_rebound",)]
        assert [s["cycle"] for s in restored.state()["snapshots"]] == [4, 5]
        assert restored.halted
        (record,) = records
        assert record["previous_policy"] == engine.policy.identity.to_dict()
        assert record["policy"]["digest"] == shorter.policy.digest
        assert record["kept"] == ["snapshots", "baseline", "early_spreads", "turns", "halt"]
        assert record["dropped"] == {}

    def test_scores_outside_the_new_range_are_refused(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """A policy whose score range excludes the kept scores cannot use the state: a clear
        error, naming the parts and the policy."""
        state = halted_session(engine).state()
        narrow = engine_with(scores={"min": 0.0, "max": 0.5})
        with pytest.raises(SessionStateError) as raised:
            narrow.session("s", state=state)
        problems = raised.value.problems
        assert {p.path for p in problems} == {"$.snapshots", "$.baseline"}
        assert all("cannot be used under test@1.0.0" in p.message for p in problems)
        assert all("outside the policy's score range" in p.message for p in problems)

    def test_a_relative_floor_needs_the_first_spreads(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """A relative spread floor needs the spreads of the session's first cycles, which a
        state kept under an absolute floor has not measured: refused."""
        state = halted_session(engine).state()
        relative = engine_with(
            collapse={
                "spread_floor_mode": "relative",
                "spread_floor": 0.5,
                "relative_to": {"first_cycles": 3},
            },
        )
        with pytest.raises(SessionStateError) as raised:
            relative.session("s", state=state)
        assert raised.value.problems[0].path == "$.early_spreads"


class TestBaselineForLife:
    HISTORY: tuple[tuple[dict[str, float], list[str]], ...] = (
        ({"c": 0.9, **WIDE}, ["c"]),
        ({"c": 0.9, **WIDE}, []),  # unpinned for one cycle
        ({"c": 0.55, **NARROW}, ["c"]),
        ({"c": 0.55, **NARROW}, ["c"]),
    )

    def test_pinned_unpinned_pinned_keeps_the_first_baseline(self, engine: Engine) -> None:
        """c=0.9 pinned, unpinned, then 0.55 pinned twice under a collapsed spread: the
        baseline is still 0.9, so the session detects collapse as the document does."""
        session = engine.session("s")
        codes = [session.observe_cycle(s, p).codes[0] for s, p in self.HISTORY]
        document = [
            {"cycle": i + 1, "scores": s, "pinned": p} for i, (s, p) in enumerate(self.HISTORY)
        ]
        assert codes[-1] == "collapse_detected"
        assert engine.detect_collapse(document).codes[0] == "collapse_detected"
        assert session.state()["baseline"] == {"c": 0.9}

    def test_a_restored_session_keeps_the_first_baseline(self, engine: Engine) -> None:
        """Restored after the unpinned cycle, the session still judges c against 0.9."""
        session = engine.session("s")
        for scores, pinned in self.HISTORY[:2]:
            session.observe_cycle(scores, pinned)
        restored = Engine.default().session("s", state=json.loads(json.dumps(session.state())))
        codes = [restored.observe_cycle(s, p).codes[0] for s, p in self.HISTORY[2:]]
        assert codes[-1] == "collapse_detected"


class TestSeenPinned:
    """A session remembers what it has seen pinned in a transition, as it remembers canaries,
    so that two edits cannot do what one may not."""

    RULE: ClassVar = {"id": "c1", "kind": "constraint", "text": "Never emit local time."}
    TURN: ClassVar = {"id": "t1", "kind": "turn", "text": "Read export.py."}

    def test_a_pin_seen_survives_a_relabel_between_two_edits(self, engine: Engine) -> None:
        """The segment arrives relabelled in the next edit's before: still pinned by id."""
        session = engine.session("s")
        assert not session.verify([self.RULE, self.TURN], [self.RULE, self.TURN]).blocks
        relabelled = {**self.RULE, "kind": "turn"}
        decision = session.verify([relabelled, self.TURN], [self.TURN], tombstones=[])
        assert "pinned_removed" in decision.codes
        assert session.state()["seen_pinned"] == ["c1"]

    def test_a_fresh_session_would_have_allowed_it(self, engine: Engine) -> None:
        """What the memory adds: without it, the relabelled segment is an ordinary turn."""
        relabelled = {**self.RULE, "kind": "turn"}
        decision = engine.session("fresh").verify(
            [relabelled, self.TURN], [self.TURN], tombstones=["c1"]
        )
        assert not decision.blocks
        refused = engine.session("seen")
        refused.verify([self.RULE], [self.RULE])
        again = refused.verify([relabelled, self.TURN], [self.TURN])
        assert again.codes[0] == "pinned_removed"

    def test_the_memory_outlives_a_restore(self, engine: Engine) -> None:
        session = engine.session("s")
        session.verify([self.RULE], [self.RULE])
        state = session.state()
        assert state_problems(state) == []
        restored = engine.session("s", state=state)
        decision = restored.verify([{**self.RULE, "kind": "turn"}], [])
        assert decision.codes[0] == "pinned_removed"

    @pytest.mark.parametrize("version", [1, 2, 3])
    def test_a_state_written_before_the_first_release_is_refused(
        self, engine: Engine, version: int
    ) -> None:
        """A session-state of version 1 to 3 is refused with one problem naming its version
        and what to do, not read with parts missing."""
        state = engine.session("s").state()
        state["state_version"] = version
        with pytest.raises(SessionStateError) as raised:
            engine.session("s", state=state)
        (problem,) = raised.value.problems
        assert problem.path == "$.state_version"
        assert problem.message.startswith(f"session-state version {version} was written before")
        assert "delete the state" in problem.message
