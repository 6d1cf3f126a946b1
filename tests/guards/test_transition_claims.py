"""Claims inside the data: a derived_from the edit did not write, a pin dropped by relabelling,
a pinned segment rewritten to nothing. Each is judged by content, as a removal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prunewarden import Engine

EngineFactory = Callable[..., Engine]
RULE = {
    "id": "c1",
    "kind": "constraint",
    "text": "All timestamps must be UTC; never emit local time.",
}
TURN = {"id": "t1", "kind": "turn", "text": "Read export.py."}
OLD = {"id": "s0", "kind": "turn", "text": "Earlier: ran the tests."}


def _verify(engine: Engine, before: list[Any], after: list[Any], **fields: Any) -> Any:
    return engine.evaluate({"check": "transition", "before": before, "after": after, **fields})


def _halted(engine: Engine) -> Any:
    session = engine.session("agent-1")
    for cycle, canary in enumerate((0.9, 0.5, 0.5), start=1):
        session.observe_cycle({"k": canary, "a": 0.55, "b": 0.56, "c": 0.54}, ["k"], cycle=cycle)
    assert session.halted
    return session


class TestDerivedFromTheEditDidNotWrite:
    def test_a_kept_segment_folds_nothing(self, engine: Engine) -> None:
        """A kept segment that claims to hold a removed pinned one: the removal is judged."""
        claimed = {**OLD, "derived_from": ["c1", "t1"]}
        decision = _verify(engine, [OLD, RULE, TURN], [claimed])
        assert decision.codes == ("pinned_removed", "no_tombstone")
        assert decision.restore == ("c1", "t1")
        assert decision.to_dict()["actions"][0]["ids"] == ["c1", "t1"]

    def test_a_tombstone_folds_nothing(self, engine: Engine) -> None:
        """A tombstone names what it records with tombstone_for; its derived_from is no fold."""
        stone = {"id": "x1", "kind": "tombstone", "text": "[removed]", "derived_from": ["t1"]}
        decision = _verify(engine, [RULE, TURN], [RULE, stone])
        assert decision.codes == ("no_tombstone",)
        assert decision.restore == ("t1",)

    def test_a_kept_segment_hides_no_loss_from_fidelity(self, engine_with: EngineFactory) -> None:
        """With a tombstone, a pinned parent claimed by a kept segment is removed, not folded:
        no summary of it was written, so nothing is checked and nothing is folded."""
        claimed = {**OLD, "derived_from": ["c1"]}
        decision = _verify(engine_with(fidelity={}), [OLD, RULE], [claimed], tombstones=["c1"])
        assert decision.codes == ("transition_clean",)
        assert decision.reasons[0].detail["folded"] == 0
        assert decision.reasons[0].detail["removed"] == 1

    def test_a_summary_still_folds(self, engine: Engine) -> None:
        summary = {"id": "s1", "kind": "turn", "text": "Read export.py.", "derived_from": ["t1"]}
        decision = _verify(engine, [RULE, TURN], [RULE, summary])
        assert decision.codes == ("transition_clean",)
        assert decision.reasons[0].detail["folded"] == 1


class TestRelabelled:
    def test_a_pinned_kind_relabelled_is_a_pinned_removal(self, engine: Engine) -> None:
        relabelled = {**RULE, "kind": "turn"}
        decision = _verify(engine, [RULE, TURN], [relabelled, TURN])
        assert decision.codes == ("pinned_removed",)
        assert decision.reasons[0].detail["ids"] == ["c1"]
        assert decision.keep_verbatim == ("c1",)
        assert decision.repair([RULE, TURN], [relabelled, TURN]) == [RULE, TURN]

    def test_non_recoverable_dropped_is_a_pinned_removal(self, engine: Engine) -> None:
        task = {"id": "task", "kind": "turn", "text": "Port the exporter.", "non_recoverable": True}
        decision = _verify(engine, [task, TURN], [{**task, "non_recoverable": False}, TURN])
        assert decision.codes == ("pinned_removed",)

    def test_a_tombstone_records_the_pin_let_go(self, engine: Engine) -> None:
        """As for a removal: a tombstone naming the segment lets its pin go."""
        decision = _verify(
            engine, [RULE, TURN], [{**RULE, "kind": "turn"}, TURN], tombstones=["c1"]
        )
        assert decision.codes == ("transition_clean",)

    def test_a_pin_its_id_holds_does_not_excuse_a_relabel(self, engine: Engine) -> None:
        """A canary is pinned by id here, but the next window, read elsewhere, would not be."""
        decision = _verify(engine, [RULE], [{**RULE, "kind": "turn"}], canaries=["c1"])
        assert decision.codes == ("pinned_removed",)

    def test_a_session_that_saw_the_pin_still_refuses_the_relabel(self, engine: Engine) -> None:
        session = engine.session("s")
        assert not session.verify([RULE, TURN], [RULE, TURN]).blocks
        decision = session.verify([RULE, TURN], [{**RULE, "kind": "turn"}, TURN])
        assert decision.codes == ("pinned_removed",)

    def test_a_halted_session_refuses_a_relabel(self, engine: Engine) -> None:
        decision = _halted(engine).verify([RULE, TURN], [{**RULE, "kind": "turn"}, TURN])
        assert decision.codes == ("pinned_removed", "pruning_halted")


class TestRewrittenToNothing:
    def test_a_pinned_segment_emptied_is_a_pinned_removal(self, engine: Engine) -> None:
        """Whatever the fidelity setting: off here."""
        for text in ("", "   \n\t"):
            decision = _verify(engine, [RULE, TURN], [{**RULE, "text": text}, TURN])
            assert decision.codes == ("pinned_removed",)
            assert decision.keep_verbatim == ("c1",)

    def test_with_fidelity_it_is_refused_twice_over(self, engine_with: EngineFactory) -> None:
        decision = _verify(engine_with(fidelity={}), [RULE, TURN], [{**RULE, "text": " "}, TURN])
        assert decision.codes == ("pinned_removed", "summary_is_error")

    def test_a_halted_session_refuses_any_rewrite_to_nothing(self, engine: Engine) -> None:
        session = _halted(engine)
        decision = session.verify([RULE, TURN], [RULE, {**TURN, "text": " "}])
        assert decision.codes == ("pruning_halted",)
        assert decision.keep_verbatim == ("t1",)
        pinned = session.verify([RULE, TURN], [{**RULE, "text": ""}, TURN])
        assert pinned.codes == ("pinned_removed", "pruning_halted")

    def test_a_halted_session_still_allows_a_rewrite(self, engine: Engine) -> None:
        decision = _halted(engine).verify([RULE, TURN], [RULE, {**TURN, "text": "Read it."}])
        assert decision.codes == ("transition_clean",)
