"""Hooks with a batch method get a pass at once; plain callables still get each decision."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from prunewarden import AuditLog, Decision, Engine
from prunewarden.audit import decision_rows
from prunewarden.engine import BatchDecisionHook

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
EVICTION = {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.1}


def item(segment_id: str, score: float = 0.1) -> dict[str, Any]:
    return {
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": score,
        "perturbed_score": score,
    }


def window(count: int) -> list[dict[str, Any]]:
    """A pass whose segments alternate between authorized and refused (no tombstone)."""
    items = [item(f"s{i}") for i in range(count)]
    for odd in items[1::2]:
        odd["segment"]["tombstone_written"] = False
    return items


def plan_segment(segment_id: str, score: float) -> dict[str, Any]:
    """A bound, stable segment a plan can evict."""
    text = f"text of {segment_id}"
    return {
        "id": segment_id,
        "kind": "turn",
        "text": text,
        "tokens": 100,
        "score": score,
        "perturbed_score": score,
        "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }


class Recorder:
    """A batch hook that remembers how it was called."""

    def __init__(self) -> None:
        self.single: list[tuple[Decision, Mapping[str, Any]]] = []
        self.batches: list[tuple[tuple[Decision, ...], Mapping[str, Any]]] = []

    def __call__(self, decision: Decision, record: Mapping[str, Any]) -> None:
        self.single.append((decision, record))

    def observe_decisions(self, decisions: Sequence[Decision], record: Mapping[str, Any]) -> None:
        self.batches.append((tuple(decisions), record))


class BrokenBatch(Recorder):
    """A batch hook whose batch method fails."""

    def observe_decisions(self, decisions: Sequence[Decision], record: Mapping[str, Any]) -> None:
        super().observe_decisions(decisions, record)
        msg = "counter unavailable"
        raise RuntimeError(msg)


class TestBatchPath:
    def test_a_pass_is_one_call_of_the_batch_method(self) -> None:
        """authorize_evictions hands a batch hook every decision at once, in order, with the
        pass's record, and never calls it decision by decision."""
        hook = Recorder()
        decisions = Engine.default(on_decision=hook).authorize_evictions(window(6))
        assert hook.single == []
        ((batch, record),) = hook.batches
        assert batch == decisions
        assert record["kind"] == "pass"
        assert record["segments"] == [f"s{i}" for i in range(6)]

    def test_a_single_decision_uses_the_call(self) -> None:
        """evaluate hands a batch hook its one decision through __call__."""
        hook = Recorder()
        decision = Engine.default(on_decision=hook).evaluate(EVICTION)
        assert hook.batches == []
        assert [(d.decision_id, r["decision_id"]) for d, r in hook.single] == [
            (decision.decision_id, decision.decision_id)
        ]

    def test_a_session_plan_is_one_batch(self) -> None:
        """A session's planned pass reaches the batch method once, with every decision of the
        plan."""
        hook = Recorder()
        session = Engine.default(on_decision=hook).session("agent-1")
        plan = session.plan(
            [plan_segment(f"s{i}", 0.1 * (i + 1)) for i in range(4)], free_tokens=200
        )
        ((batch, record),) = hook.batches
        assert batch == plan.decisions
        assert [d.check for d in batch] == ["staleness", "eviction", "eviction"]
        assert plan.evict == ("s0", "s1")
        assert (record["kind"], record["session_id"]) == ("pass", "agent-1")

    def test_plain_callables_still_get_each_decision(self) -> None:
        """A hook without a batch method is called once per decision of the pass, after the
        batch hooks before it, with the same record."""
        hook, seen = Recorder(), []
        engine = Engine.default(on_decision=[hook, lambda d, r: seen.append((d, r))])
        decisions = engine.authorize_evictions(window(4))
        assert [d for d, _ in seen] == list(decisions)
        ((_, record),) = hook.batches
        assert all(r is record for _, r in seen)

    def test_the_protocol_names_batch_hooks(self) -> None:
        """BatchDecisionHook tells a batch hook from a plain callable."""
        assert isinstance(Recorder(), BatchDecisionHook)
        assert not isinstance(lambda _d, _r: None, BatchDecisionHook)

    def test_refusals_of_an_unwritable_log_reach_the_batch(self) -> None:
        """A pass refused because its record could not be written is handed to the batch
        method as refusals."""
        stream = io.StringIO()
        hook = Recorder()
        engine = Engine.default(audit=AuditLog(stream), on_decision=hook)
        stream.close()
        decisions = engine.authorize_evictions(window(3))
        ((batch, record),) = hook.batches
        assert batch == decisions
        assert {d.codes for d in batch} == {("audit_unavailable",)}
        assert record["kind"] == "pass"

    def test_the_record_of_a_refused_pass_names_its_reason(self) -> None:
        """The record handed with a pass refused for its log (over columns: version 3) gives
        each decision the refusal's reason: its readers find audit_unavailable, as the
        decisions say."""
        stream = io.StringIO()
        hook = Recorder()
        engine = Engine.default(audit=AuditLog(stream), on_decision=hook)
        stream.close()
        decisions = engine.authorize_evictions(window(3))
        ((_, record),) = hook.batches
        assert record["record_version"] == 3
        rows = decision_rows(record)
        assert [[r["code"] for r in row["reasons"]] for row in rows] == [["audit_unavailable"]] * 3
        assert [row["outcome"] for row in rows] == [d.outcome for d in decisions] == ["deny"] * 3

    def test_call_hooks_get_the_whole_pass_once(self) -> None:
        """The pass's call holds each of its decisions once, in order, beside a batch hook."""
        calls: list[Any] = []
        engine = Engine.default(on_decision=Recorder(), on_call=calls.append)
        decisions = engine.authorize_evictions(window(5))
        (call,) = calls
        assert (call.name, call.decisions) == ("prunewarden.authorize_evictions", list(decisions))


class TestBatchFailures:
    def test_a_raising_batch_method_changes_nothing(self, caplog: pytest.LogCaptureFixture) -> None:
        """A batch method that raises is reported once per pass to logging "prunewarden"; the
        decisions stand and the other hooks still get the pass."""
        broken, after = BrokenBatch(), Recorder()
        plain = Engine.default().authorize_evictions(window(4))
        with caplog.at_level("ERROR", logger="prunewarden"):
            decisions = Engine.default(on_decision=[broken, after]).authorize_evictions(window(4))
        assert [(d.outcome, d.codes) for d in decisions] == [(d.outcome, d.codes) for d in plain]
        assert [batch for batch, _ in after.batches] == [decisions]
        (report,) = caplog.records
        assert report.exc_info is not None
        assert report.exc_info[0] is RuntimeError
        assert "on_decision hook" in report.getMessage()

    def test_a_raising_plain_hook_is_reported_per_decision(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A plain hook that raises on every decision of a pass is reported for each, as
        before, and the pass stands."""

        def broken(decision: Decision, record: Any) -> None:
            msg = "counter unavailable"
            raise RuntimeError(msg)

        with caplog.at_level("ERROR", logger="prunewarden"):
            decisions = Engine.default(on_decision=broken).authorize_evictions(window(3))
        assert len(decisions) == len(caplog.records) == 3
