"""What the engine offers observers: call hooks, trace ids and timing in every record."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Engine
from prunewarden._observation import Call
from prunewarden._resources import schema

ROOT = Path(__file__).resolve().parent.parent
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
RECORD = Draft202012Validator(schema("audit-record"))
TRACE = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


def items(count: int) -> list[dict[str, Any]]:
    segment = EVICTION["segment"]
    return [
        {
            "segment": {**segment, "id": f"seg-{n}"},
            "score": EVICTION["score"],
            "perturbed_score": EVICTION["perturbed_score"],
        }
        for n in range(count)
    ]


def written(stream: io.StringIO) -> list[dict[str, Any]]:
    """The decision and pass records (a pass is one record for all its decisions)."""
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [r for r in records if r["kind"] in ("decision", "pass")]


class TestCallHooks:
    def test_one_call_per_public_call(self) -> None:
        """A pass of several decisions is one call holding them all, in order, named after it."""
        calls: list[Call] = []
        engine = Engine.default(on_call=calls.append)
        decisions = engine.authorize_evictions(items(3))
        (call,) = calls
        assert call.name == "prunewarden.authorize_evictions"
        assert [d.decision_id for d in call.decisions] == [d.decision_id for d in decisions]
        assert 0 < call.started_ns <= call.ended_ns

    def test_nested_calls_belong_to_the_outermost(self) -> None:
        """enforce calls evaluate: one call, named enforce."""
        calls: list[Call] = []
        Engine.default(on_call=calls.append).enforce(EVICTION)
        assert [c.name for c in calls] == ["prunewarden.enforce"]

    def test_session_calls_are_named_after_them(self) -> None:
        """A session's observe_cycle and plan are calls of their own names."""
        calls: list[Call] = []
        session = Engine.default(on_call=calls.append).session("s-1")
        session.observe_cycle({"a": 0.9, "b": 0.1, "task": 0.8}, ["task"])
        session.observe_turn(0.5, 100)
        session.plan([{**EVICTION["segment"], "score": 0.1}], keep_top_k=0)
        assert [c.name for c in calls] == ["prunewarden.observe_cycle", "prunewarden.plan"]

    def test_a_call_hook_that_raises_changes_nothing(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The decision stands and the failure is reported to the prunewarden logger."""

        def broken(call: Call) -> None:
            raise RuntimeError(call.name)

        engine = Engine.default(on_call=broken)
        with caplog.at_level(logging.ERROR, logger="prunewarden"):
            decision = engine.evaluate(EVICTION)
        assert decision.outcome == "allow"
        assert "on_call hook" in caplog.text

    def test_on_call_refuses_what_cannot_be_called(self) -> None:
        """A hook list with something not callable is a TypeError at construction."""
        with pytest.raises(TypeError, match="on_call"):
            Engine.default(on_call=[print, 3])


class TestRecords:
    def test_duration_in_every_record(self) -> None:
        """Each decision record, and a pass's one record, keeps how long deciding took; the
        records still validate."""
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream))
        engine.evaluate(EVICTION)
        engine.authorize_evictions(items(2))
        records = written(stream)
        assert [r["kind"] for r in records] == ["decision", "pass"]
        for record in records:
            assert isinstance(record["duration_ns"], int)
            assert record["duration_ns"] > 0
            RECORD.validate(record)

    def test_trace_ids_from_the_trace_context(self) -> None:
        """Records (a pass's one record too) name the caller's trace and span; the context is
        asked once per call."""
        asked: list[int] = []

        def context() -> tuple[str, str]:
            asked.append(1)
            return TRACE

        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream), trace_context=context)
        engine.authorize_evictions(items(3))
        engine.evaluate(EVICTION)
        records = written(stream)
        assert [(r["trace_id"], r["span_id"]) for r in records] == [TRACE] * 2
        assert len(asked) == 2
        for record in records:
            RECORD.validate(record)

    def test_no_trace_no_ids(self) -> None:
        """Outside a trace (the context says None), and without a context, no ids."""
        stream = io.StringIO()
        Engine.default(audit=AuditLog(stream), trace_context=lambda: None).evaluate(EVICTION)
        Engine.default(audit=AuditLog(stream)).evaluate(EVICTION)
        assert all("trace_id" not in r and "span_id" not in r for r in written(stream))

    @pytest.mark.parametrize("broken", [lambda: 1 / 0, lambda: ("only one",), lambda: (1, 2)])
    def test_a_failing_trace_context_leaves_the_ids_out(
        self, broken: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A trace context that raises or returns garbage: the decision and its record stand,
        without ids, and the failure is reported."""
        stream = io.StringIO()
        with caplog.at_level(logging.ERROR, logger="prunewarden"):
            decision = Engine.default(audit=AuditLog(stream), trace_context=broken).evaluate(
                EVICTION
            )
        assert decision.outcome == "allow"
        (record,) = written(stream)
        assert "trace_id" not in record
        assert "trace_context" in caplog.text

    def test_hooks_see_the_record_as_written(self) -> None:
        """The decision hook's record carries the same duration and ids as the log's."""
        seen: list[dict[str, Any]] = []
        stream = io.StringIO()
        engine = Engine.default(
            audit=AuditLog(stream),
            on_decision=lambda _d, r: seen.append(dict(r)),
            trace_context=lambda: TRACE,
        )
        engine.evaluate(EVICTION)
        (record,) = written(stream)
        assert seen[0]["duration_ns"] == record["duration_ns"]
        assert (seen[0]["trace_id"], seen[0]["decision_id"]) == (TRACE[0], record["decision_id"])
