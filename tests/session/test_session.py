"""Sessions: cycles and turns observed as they happen, bounded state, halts that hold."""

from __future__ import annotations

import gc
import hashlib
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from prunewarden import Engine, InputError
from structlog.testing import capture_logs

EngineFactory = Callable[..., Engine]


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span(span_id: str, score: float) -> dict[str, Any]:
    text = f"text of {span_id}"
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha(text)}


class TestCycles:
    def test_seed_narrowing_halts_at_the_right_cycle(self, engine: Engine) -> None:
        """The halt comes when two low-spread cycles meet the canary drop, not earlier."""
        session = engine.session("s-000")
        codes = [session.observe_cycle(narrowing(c), ["task"]).codes[0] for c in range(1, 6)]
        assert codes == [
            "insufficient_history",
            "insufficient_history",
            "spread_healthy",
            "spread_healthy",
            "collapse_detected",
        ]
        assert session.halted

    def test_same_verdicts_as_the_stateless_guard(self, engine: Engine) -> None:
        """A session decides exactly what detect_collapse decides on the full history."""
        session = engine.session("s")
        history: list[dict[str, Any]] = []
        for c in range(1, 6):
            history.append({"cycle": c, "scores": narrowing(c), "pinned": ["task"]})
            stateless = engine.detect_collapse(history)
            assert session.observe_cycle(narrowing(c), ["task"]).codes == stateless.codes

    def test_cycle_numbers_default_and_must_increase(self, engine: Engine) -> None:
        """Cycles count from 1 by default; an explicit cycle must follow the last."""
        session = engine.session("s")
        session.observe_cycle({"a": 0.5}, cycle=7)
        with pytest.raises(InputError) as raised:
            session.observe_cycle({"a": 0.5}, cycle=7)
        assert raised.value.problems[0].path == "$.cycle"
        assert "does not follow cycle 7" in raised.value.problems[0].message
        decision = session.observe_cycle({"a": 0.5})
        assert decision.codes == ("insufficient_history",)

    def test_a_rejected_cycle_changes_nothing(self, engine: Engine) -> None:
        """An out-of-range score is an input error and leaves the history as it was."""
        session = engine.session("s")
        session.observe_cycle(narrowing(1), ["task"])
        with pytest.raises(InputError):
            session.observe_cycle({"task": 1.5}, ["task"])
        assert session.observe_cycle(narrowing(2), ["task"]).codes == ("insufficient_history",)
        assert session.observe_cycle(narrowing(3), ["task"]).codes == ("spread_healthy",)

    def test_baseline_is_the_canary_score_when_first_pinned(
        self, engine_with: EngineFactory
    ) -> None:
        """A canary pinned late is measured against its score when first pinned."""
        engine = engine_with(collapse={"consecutive_cycles": 1})
        session = engine.session("s")
        flat = {"a": 0.5, "b": 0.5, "c": 0.5}
        session.observe_cycle(flat)
        session.observe_cycle({**flat, "late": 0.875}, ["late"])
        # 0.875 -> 0.5625: dropped by 0.3125 > 0.25 and the spread collapsed.
        decision = session.observe_cycle({**flat, "late": 0.5625}, ["late"])
        assert decision.codes == ("collapse_detected",)
        assert decision.reasons[0].detail["canary"]["baseline"] == 0.875

    def test_a_later_healthy_cycle_lifts_the_halt(self, engine: Engine) -> None:
        """Pruning resumes when a cycle passes the guard again."""
        session = engine.session("s")
        for c in range(1, 6):
            session.observe_cycle(narrowing(c), ["task"])
        assert session.halted
        wide = {"task": 0.95, **{f"t{i}": 0.05 + 0.09 * i for i in range(10)}}
        assert session.observe_cycle(wide, ["task"]).outcome == "allow"
        assert not session.halted


class TestHaltHolds:
    @pytest.fixture
    def halted(self, engine: Engine) -> Any:
        logged = Engine(engine.policy, logger=structlog.get_logger())
        session = logged.session("s-halted", {"team": "core"})
        for c in range(1, 6):
            session.observe_cycle(narrowing(c), ["task"])
        return session

    def test_authorize_is_refused_while_halted(self, halted: Any) -> None:
        """An otherwise authorized eviction is refused with pruning_halted."""
        segment = {"id": "t3", "kind": "turn", "tombstone_written": True}
        decision = halted.authorize(segment, 0.1, 0.1)
        assert (decision.outcome, decision.codes) == ("deny", ("pruning_halted",))
        assert [a.action for a in decision.actions] == ["halt_pruning"]
        assert decision.reasons[0].detail["cycle"] == 5

    def test_prune_keeps_everything_while_halted(self, halted: Any) -> None:
        """A prune while halted evicts nothing."""
        decision = halted.prune([span("a", 0.25), span("b", 0.75)], 1)
        assert decision.codes == ("pruning_halted",)
        assert (decision.kept, decision.evicted) == (("a", "b"), ())

    def test_audit_mode_collapse_does_not_halt(self, engine_with: EngineFactory) -> None:
        """A halt the policy only audits does not stop pruning."""
        session = engine_with(collapse={"mode": "audit"}).session("s")
        for c in range(1, 6):
            decision = session.observe_cycle(narrowing(c), ["task"])
        assert decision.outcome == "halt"
        assert not session.halted
        segment = {"id": "t3", "kind": "turn", "tombstone_written": True}
        assert session.authorize(segment, 0.1, 0.1).outcome == "allow"

    def test_session_id_and_labels_reach_the_log(self, halted: Any) -> None:
        """Every session decision is logged with the session's id and labels."""
        with capture_logs() as logs:
            halted.authorize({"id": "t3", "kind": "turn"}, 0.1, 0.1)
        (record,) = logs
        assert record["session_id"] == "s-halted"
        assert record["labels"] == {"team": "core"}


class TestTurns:
    def test_inflation_uses_the_observed_turns(self, engine: Engine) -> None:
        """Seed 002: relevance rising while tokens fall, observed turn by turn, denies a prune."""
        session = engine.session("s")
        for relevance, tokens in [(0.61, 9800), (0.68, 6100), (0.76, 3900)]:
            session.observe_turn(relevance, tokens)
        decision = session.prune([span("a", 0.5)], 1)
        assert decision.codes == ("relevance_inflation",)

    def test_flat_turns_allow(self, engine: Engine) -> None:
        """Healthy compression: tokens fall, relevance stays flat."""
        session = engine.session("s")
        for relevance, tokens in [(0.52, 9000), (0.53, 7000), (0.51, 5200)]:
            session.observe_turn(relevance, tokens)
        decision = session.prune([span("a", 0.25), span("b", 0.75)], 1)
        assert (decision.codes, decision.kept) == (("bound",), ("b",))

    def test_turns_must_increase(self, engine: Engine) -> None:
        """A turn number that does not follow the last is an input error."""
        session = engine.session("s")
        session.observe_turn(0.5, 100, turn=3)
        with pytest.raises(InputError, match="does not follow turn 3"):
            session.observe_turn(0.5, 90, turn=2)

    def test_invalid_turn_is_an_input_error(self, engine: Engine) -> None:
        """A relevance outside the score range is refused."""
        with pytest.raises(InputError):
            engine.session("s").observe_turn(1.5, 100)


class TestBoundedMemory:
    def test_state_is_bounded_by_the_policy(self, engine_with: EngineFactory) -> None:
        """Only consecutive_cycles + 1 snapshots and drift_consecutive_turns + 1 turns stay."""
        session = engine_with(
            collapse={"consecutive_cycles": 3}, staleness={"drift_consecutive_turns": 4}
        ).session("s")
        for c in range(1, 50):
            session.observe_cycle(narrowing(1 + c % 5), ["task"])
            session.observe_turn(0.5, 1000 - c)
        state = session.state()
        assert len(state["snapshots"]) == 4
        assert len(state["turns"]) == 5
        assert set(state["baseline"]) == {"task"}

    def test_memory_does_not_grow_with_session_length(self, engine: Engine) -> None:
        """Ten times more cycles does not take more memory."""

        class Quiet:
            def info(self, *args: Any, **kwargs: Any) -> None:
                pass

        quiet = Engine(engine.policy, logger=Quiet())

        def retained(cycles: int) -> int:
            session = quiet.session("s")
            session.observe_cycle(narrowing(1), ["task"])  # warm caches outside the count
            tracemalloc.start()
            for c in range(cycles):
                session.observe_cycle(narrowing(1 + c % 5), ["task"])
            gc.collect()
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return current

        # Keeping every snapshot would retain about 1 KiB per cycle: 0.9 MiB more here.
        short, long = retained(100), retained(1000)
        assert long < short + 64 * 1024


class TestThreads:
    def test_concurrent_observers_keep_a_consistent_history(self, engine: Engine) -> None:
        """Threads reporting cycles to one session never break the increasing order."""

        class Quiet:
            def info(self, *args: Any, **kwargs: Any) -> None:
                pass

        session = Engine(engine.policy, logger=Quiet()).session("s")
        errors: list[BaseException] = []

        def observe() -> None:
            try:
                for c in range(40):
                    session.observe_cycle(narrowing(1 + c % 5), ["task"])
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        threads = [threading.Thread(target=observe) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        cycles = [s["cycle"] for s in session.state()["snapshots"]]
        assert cycles == sorted(cycles)
        assert cycles[-1] == 160
