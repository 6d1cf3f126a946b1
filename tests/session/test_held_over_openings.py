"""A halt decided in this process whose save failed is held over every later opening of its
session id, even one that finds no stored state."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import structlog
from prunewarden import Engine, SessionStateError, SessionStoreError, SqliteSessionStore

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


class FlakyStore(SqliteSessionStore):
    """A SQLite store whose saves fail while ``failing`` is set (as a dropped connection)."""

    failing = False

    def save(self, session_id: str, state: Any) -> None:
        if self.failing:
            msg = "connection reset"
            raise ConnectionError(msg)
        super().save(session_id, state)


class TestHeldOverOpenings:
    def test_an_unsaved_halt_holds_when_the_store_has_no_state(self, tmp_path: Path) -> None:
        """The halting cycle's save failed and the stored state was then deleted: a session
        opened again finds nothing stored, and is still halted by the halt this process
        decided and could not save."""
        with FlakyStore(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            session = engine.session("s")
            for cycle in range(1, 5):
                session.observe_cycle(narrowing(cycle), ["task"])
            store.failing = True
            with pytest.raises(SessionStoreError):
                session.observe_cycle(narrowing(5), ["task"])
            store.failing = False
            store.delete("s")
            again = engine.session("s")
            assert again.halted
            assert again.halt == session.halt

    def test_a_failed_lift_of_an_unsaved_halt_keeps_it_held(self, tmp_path: Path) -> None:
        """A halt whose save failed, then a passing cycle whose save fails too: the lift is not
        made, and the engine's stateless calls for the id are still refused."""
        with FlakyStore(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            session = engine.session("s")
            for cycle in range(1, 5):
                session.observe_cycle(narrowing(cycle), ["task"])
            store.failing = True
            with pytest.raises(SessionStoreError):
                session.observe_cycle(narrowing(5), ["task"])
            with pytest.raises(SessionStoreError):
                session.observe_cycle(narrowing(1), ["task"])
            assert session.halted
            refused = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
            assert refused.codes == ("pruning_halted",)


class TestWithoutAStore:
    def test_opening_the_id_again_starts_a_new_history(self) -> None:
        """Without a store, `engine.session(id)` opened again starts a new history, not
        halted, though the engine still refuses stateless calls for that id."""
        engine = Engine.default()
        session = engine.session("s")
        for cycle in range(1, 6):
            session.observe_cycle(narrowing(cycle), ["task"])
        assert session.halted
        again = engine.session("s")
        assert not again.halted
        assert again.state()["cycles_seen"] == 0
        refused = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
        assert refused.codes == ("pruning_halted",)

    def test_a_restored_state_is_the_answer(self) -> None:
        """Without a store, a session restored from a state without a halt is not halted by
        the halt the engine remembers for its id."""
        engine = Engine.default()
        earlier = engine.session("s").state()
        session = engine.session("s")
        for cycle in range(1, 6):
            session.observe_cycle(narrowing(cycle), ["task"])
        assert session.halted
        assert not engine.session("s", state=earlier).halted


class TestRestoredHalts:
    def test_a_restored_halt_refuses_stateless_calls_at_once(self, tmp_path: Path) -> None:
        """A halted state restored into a session of an engine with a store refuses the
        engine's stateless calls for that id at once, before any save."""
        halted = Engine.default().session("s")
        for cycle in range(1, 6):
            halted.observe_cycle(narrowing(cycle), ["task"])
        with SqliteSessionStore(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            session = engine.session("s")
            session.restore(halted.state())
            assert session.halted
            refused = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
            assert refused.codes == ("pruning_halted",)

    def test_a_state_of_another_session_is_located_by_path(self) -> None:
        """Restoring another session's state is refused at `$.session_id`, with no text
        position."""
        engine = Engine.default()
        with pytest.raises(SessionStateError) as raised:
            engine.session("s").restore(engine.session("t").state())
        located = [(p.path, p.line, p.column) for p in raised.value.problems]
        assert located == [("$.session_id", 0, 0)]

    def test_rule_pins_are_the_sessions(self) -> None:
        """`Session.rule_pins` holds what `pin_by_rule` pinned, bound to the text."""
        session = Engine.default().session("s")
        session.pin_by_rule({"seg-1": "pinned text"})
        assert session.rule_pins.holds("seg-1", "pinned text")
        assert not session.rule_pins.holds("seg-1", "other text")


class TestWhichPathDecided:
    def test_a_sessions_own_pass_is_recorded_from_the_session(self) -> None:
        """A pass planned by a session is recorded with `from_session` true."""
        logger = structlog.testing.CapturingLogger()
        engine = Engine(Engine.default().policy, logger=logger)

        def scored(segment_id: str, score: float) -> dict[str, Any]:
            text = f"text {segment_id}"
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            return {
                "id": segment_id,
                "kind": "turn",
                "text": text,
                "tokens": 10,
                "score": score,
                "text_sha256": digest,
                "tombstone_written": True,
            }

        engine.session("s").plan([scored("a", 0.9), scored("b", 0.1)], keep_top_k=1)
        passes = [call.kwargs for call in logger.calls if call.args == ("pass",)]
        assert [record["from_session"] for record in passes] == [True]
