"""The transition guard through the engine and a session: halts, pins, repair, the record, rules.

The golden cases (tests/cases/transition/) pin each reason code; these tests pin what the cases
cannot: a session's halt and pins, the audit record, rules on the derived edit, fail-closed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, Engine, UnsafeTransitionError
from prunewarden.audit._verify import verify_files
from prunewarden.guards import GUARDS, Guard

EngineFactory = Callable[..., Engine]
SYSTEM = {"id": "sys", "kind": "system", "text": "You are a coding agent."}
TASK = {"id": "task", "kind": "turn", "text": "Port the exporter to UTC timestamps."}
SECRET = "the deploy key is hunter2"  # noqa: S105 - a text the record must never hold


def _turns(count: int) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "kind": "turn", "text": f"turn {i}"} for i in range(1, count + 1)]


def _transition(before: list[Any], after: list[Any], **fields: Any) -> dict[str, Any]:
    return {"check": "transition", "before": before, "after": after, **fields}


def _halted_session(engine: Engine, session_id: str = "agent-1") -> Any:
    """A session whose collapse guard halted: spread collapsed and the canary inverted."""
    session = engine.session(session_id)
    for cycle, canary in enumerate((0.9, 0.5, 0.5), start=1):
        scores = {"task": canary, "a": 0.55, "b": 0.56, "c": 0.54}
        session.observe_cycle(scores, ["task"], cycle=cycle)
    assert session.halted
    return session


class TestHalt:
    def test_a_halted_session_refuses_an_edit_that_removes(self, engine: Engine) -> None:
        """pruning_halted, listed with the other findings, restoring what left."""
        session = _halted_session(engine)
        before, after = [SYSTEM, TASK, *_turns(3)], [SYSTEM, TASK]
        decision = session.verify(before, after, tombstones=["t1", "t2", "t3"])
        assert decision.codes == ("pruning_halted",)
        assert decision.restore == ("t1", "t2", "t3")
        assert decision.reasons[0].detail["cycle"] == 3

    def test_a_halted_session_allows_an_edit_that_only_adds(self, engine: Engine) -> None:
        """A halt freezes removals, not appends or rewrites."""
        session = _halted_session(engine)
        before = [SYSTEM, TASK]
        decision = session.verify(before, [*before, *_turns(1)])
        assert decision.codes == ("transition_clean",)

    def test_a_stateless_call_naming_a_halted_session_is_refused(self, engine: Engine) -> None:
        """Engine.evaluate with the document's session_id sees the session's halt (no bypass)."""
        _halted_session(engine, "agent-2")
        document = _transition([SYSTEM, *_turns(2)], [SYSTEM], tombstones=["t1", "t2"])
        decision = engine.evaluate({**document, "session_id": "agent-2"})
        assert decision.codes == ("pruning_halted",)
        assert engine.evaluate(document).codes == ("transition_clean",)


class TestSessionPins:
    def test_the_sessions_canaries_are_pinned(self, engine: Engine) -> None:
        """A canary the session has seen pinned may leave only with a tombstone."""
        session = engine.session("agent-3")
        session.observe_cycle({"task": 0.9, "t1": 0.4}, ["task"])
        decision = session.verify([SYSTEM, TASK, *_turns(1)], [SYSTEM, *_turns(1)])
        assert decision.codes == ("pinned_removed", "no_tombstone")
        assert decision.restore == ("task",)

    def test_a_rule_pin_holds_while_the_text_is_unchanged(self, engine_with: EngineFactory) -> None:
        """A segment a rule pinned in a pass is pinned for the session's transitions too."""
        engine = engine_with(
            rules=[
                {
                    "name": "pin-utc",
                    "check": "eviction",
                    "when": 'segment.text.contains("UTC")',
                    "effect": "pin",
                    "message": "states the time zone",
                }
            ]
        )
        session = engine.session("agent-4")
        window = [
            {**TASK, "score": 0.1, "perturbed_score": 0.1, "tokens": 10},
            {"id": "t1", "kind": "turn", "text": "turn 1", "score": 0.9, "tokens": 10},
        ]
        for segment, text in zip(window, (TASK["text"], "turn 1"), strict=True):
            segment["text_sha256"] = _sha(text)
        session.plan(window, keep_top_k=1)
        assert "task" in session.rule_pins.segments
        decision = session.verify(window, window[1:], tombstones=[])
        assert decision.codes == ("pinned_removed", "no_tombstone")

    def test_the_history_follows_the_after_window(self, engine: Engine) -> None:
        """An allowed edit that removed a rule-pinned segment (with a tombstone) drops its pin."""
        session = engine.session("agent-5")
        session.pin_by_rule({"t1": "turn 1"})
        before = _turns(2)
        refused = session.verify(before, before[1:], reported=None)
        assert refused.codes == ("pinned_removed", "no_tombstone")
        assert "t1" in session.rule_pins.segments  # a blocked edit is not applied
        tomb = {"id": "tomb", "kind": "tombstone", "text": "t1", "tombstone_for": ["t1"]}
        allowed = session.verify(before, [*before[1:], tomb])
        assert allowed.codes == ("transition_clean",)
        assert "t1" not in session.rule_pins.segments


class TestRepair:
    def test_repair_puts_the_restored_segments_back_in_order(self, engine: Engine) -> None:
        """The repaired window is allowed by the same policy, in before's order."""
        group = [
            {"id": "call", "kind": "assistant", "text": "lookup()", "group": "g"},
            {"id": "result", "kind": "tool", "text": "AF12", "group": "g"},
        ]
        before = [SYSTEM, {**TASK, "kind": "constraint"}, *group, *_turns(2)]
        after = [SYSTEM, group[1], *_turns(2)[1:]]
        decision = engine.evaluate(_transition(before, after, tombstones=["t1"]))
        assert decision.restore == ("task", "call")
        repaired = decision.repair(before, after)
        assert [s["id"] for s in repaired] == ["sys", "task", "call", "result", "t2"]
        again = engine.evaluate(_transition(before, repaired, tombstones=["t1"]))
        assert again.codes == ("transition_clean",)

    def test_enforce_raises_the_transition_refusal(self, engine: Engine) -> None:
        """Engine.enforce raises UnsafeTransitionError carrying the decision."""
        with pytest.raises(UnsafeTransitionError) as raised:
            engine.enforce(_transition([SYSTEM, *_turns(1)], [SYSTEM]))
        assert raised.value.decision.codes == ("no_tombstone",)


class TestOrphans:
    def test_a_rewrite_deriving_from_a_parent_in_neither_window_is_an_orphan(
        self, engine: Engine
    ) -> None:
        """A kept id whose text changed (a rewrite) naming a parent that is in neither window
        and that no tombstone records is orphaned_parent, as a summary would be: the parent
        is to be recorded (write_tombstone)."""
        before = [SYSTEM, TASK]
        rewritten = {**TASK, "text": "Port the exporter to UTC.", "derived_from": ["ghost"]}
        decision = engine.evaluate(_transition(before, [SYSTEM, rewritten]))
        assert "orphaned_parent" in decision.codes
        (orphan,) = [r for r in decision.reasons if r.code == "orphaned_parent"]
        assert orphan.detail == {"ids": ["task"], "parents": ["ghost"]}
        assert ("write_tombstone", ("ghost",)) in [(a.action, a.ids) for a in decision.actions]
        recorded = engine.evaluate(_transition(before, [SYSTEM, rewritten], tombstones=["ghost"]))
        assert "orphaned_parent" not in recorded.codes


class TestRecord:
    def test_one_chained_record_naming_ids_never_text(self, tmp_path: Path) -> None:
        """One decision record per transition, in the chain; the subject holds ids and counts."""
        log_path = tmp_path / "audit.jsonl"
        secret = {"id": "s", "kind": "turn", "text": SECRET}
        with AuditLog(log_path) as audit:
            engine = Engine.default(audit=audit)
            engine.evaluate(
                _transition(
                    [SYSTEM, secret, *_turns(1)],
                    [SYSTEM, {**secret, "text": SECRET + "!"}],
                    applied_by="langchain.trim_messages",
                    labels={"team": "search"},
                )
            )
        text = log_path.read_text(encoding="utf-8")
        records = [json.loads(line) for line in text.splitlines()]
        decisions = [r for r in records if r["kind"] == "decision"]
        assert len(decisions) == 1
        assert decisions[0]["subject"]["transition"] == {
            "before": 3,
            "after": 2,
            "kept": 1,
            "rewritten": ["s"],
            "folded": [],
            "removed": ["t1"],
            "summaries": [],
            "added": [],
            "tombstoned": [],
            "applied_by": "langchain.trim_messages",
        }
        assert decisions[0]["labels"] == {"team": "search"}
        assert SECRET not in text
        assert verify_files([log_path]).ok


class TestRulesAndFailure:
    def test_a_rule_reads_the_derived_edit(self, engine_with: EngineFactory) -> None:
        """CEL sees transition.removed and applied_by: a team writes its own condition."""
        engine = engine_with(
            rules=[
                {
                    "name": "no-bulk-trim",
                    "check": "transition",
                    "when": 'size(transition.removed) > 2 && applied_by == "trim"',
                    "effect": "deny",
                    "message": "a trim removed more than two segments",
                }
            ],
            transition={"require_tombstones": False},
        )
        before = [SYSTEM, *_turns(3)]
        refused = engine.evaluate(_transition(before, [SYSTEM], applied_by="trim"))
        assert refused.codes == ("rule:no-bulk-trim",)
        assert engine.evaluate(_transition(before, [SYSTEM], applied_by="agent")).codes == (
            "transition_clean",
        )

    def test_a_guard_that_fails_refuses(
        self, engine: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An error inside the transition guard is internal_error, never an allow."""

        def broken(settings: Any, request: Any) -> Any:
            raise RuntimeError(settings, request)

        original = GUARDS["transition"]
        monkeypatch.setitem(GUARDS, "transition", Guard(broken, "deny", original.when_off))
        engine = Engine(engine.policy)
        decision = engine.evaluate(_transition([], []))
        assert (decision.outcome, decision.codes) == ("deny", ("internal_error",))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TestCalibration:
    def test_require_scores_judges_removals_on_the_calibrated_scale(
        self, engine_with: EngineFactory
    ) -> None:
        """Under a fixed calibration, a removal's raw scores reach the eviction guard
        calibrated: 0.30 and 0.40 on [0.2, 0.6] move 0.25 apart, more than stability_delta."""
        engine = engine_with(
            scores={"calibration": {"fixed": {"low": 0.2, "high": 0.6}}},
            eviction={"stability_delta": 0.2},
            transition={"require_scores": True},
        )
        before = [{"id": "t1", "kind": "turn", "text": "x", "score": 0.3, "perturbed_score": 0.4}]
        decision = engine.evaluate(_transition(before, [], tombstones=["t1"]))
        assert decision.codes == ("unscored_removal",)
        assert decision.reasons[0].detail["eviction"] == {"t1": ["unstable_score"]}
