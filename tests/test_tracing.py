"""OpenTelemetry spans per public call, and trace ids in audit records (SDK, in memory)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from prunewarden import AuditLog, Engine
from prunewarden.tracing import CallSpans, current_trace_context

ROOT = Path(__file__).resolve().parent.parent
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
NARROWING = ROOT / "examples" / "traces" / "collapse-narrowing.jsonl"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def engine_on(provider: TracerProvider, stream: io.StringIO) -> Engine:
    return Engine.default(
        audit=AuditLog(stream),
        on_call=CallSpans(provider),
        trace_context=current_trace_context,
    )


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if line["kind"] == "decision"]


class TestSpans:
    def test_one_span_per_call_with_the_decision(
        self, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """evaluate: one span named after it, carrying the decision's attributes."""
        stream = io.StringIO()
        decision = engine_on(provider, stream).evaluate(EVICTION, session_id="agent-1")
        (span,) = exporter.get_finished_spans()
        assert span.name == "prunewarden.evaluate"
        attributes = dict(span.attributes or {})
        policy = decision.policy
        assert attributes == {
            "prunewarden.decision_id": decision.decision_id,
            "prunewarden.check": "eviction",
            "prunewarden.outcome": "allow",
            "prunewarden.reason": "authorized",
            "prunewarden.enforced": True,
            "prunewarden.policy.name": policy.name,
            "prunewarden.policy.version": policy.version,
            "prunewarden.policy.digest": policy.digest,
            "prunewarden.session_id": "agent-1",
        }
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= span.end_time

    def test_a_pass_is_one_span_with_every_decision_id(
        self, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """authorize_evictions over three segments: one span, the three decision ids."""
        segment = EVICTION["segment"]
        items = [
            {"segment": {**segment, "id": f"s{n}"}, "score": 0.1, "perturbed_score": 0.1}
            for n in range(3)
        ]
        decisions = engine_on(provider, io.StringIO()).authorize_evictions(items)
        (span,) = exporter.get_finished_spans()
        assert span.name == "prunewarden.authorize_evictions"
        attributes = dict(span.attributes or {})
        assert attributes["prunewarden.decisions"] == 3
        assert list(attributes["prunewarden.decision_ids"]) == [d.decision_id for d in decisions]  # type: ignore[arg-type]

    def test_spans_are_children_of_the_agents_span_and_records_name_it(
        self, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """Inside the agent's span: prunewarden's span is its child, and the audit records
        carry its trace id and span id; the spans carry the records' decision ids."""
        stream = io.StringIO()
        engine = engine_on(provider, stream)
        session = engine.session("seed-000")
        agent = provider.get_tracer("agent")
        events = [json.loads(line) for line in NARROWING.read_text().splitlines()[1:]]
        for event in [e for e in events if e["type"] == "cycle"][:5]:
            with agent.start_as_current_span("agent.step") as step:
                session.observe_cycle(event["scores"], event["pinned"], cycle=event["cycle"])
                context = step.get_span_context()
                ours = format(context.trace_id, "032x"), format(context.span_id, "016x")
                record = records(stream)[-1]
                assert (record["trace_id"], record["span_id"]) == ours
        finished = exporter.get_finished_spans()
        steps = {s.context.span_id: s for s in finished if s.name == "agent.step"}
        spans = [s for s in finished if s.name.startswith("prunewarden.")]
        assert [s.name for s in spans] == ["prunewarden.observe_cycle"] * 5
        for span in spans:
            assert span.parent is not None
            assert span.parent.span_id in steps
        in_spans = [dict(s.attributes or {})["prunewarden.decision_id"] for s in spans]
        assert in_spans == [r["decision_id"] for r in records(stream)]

    def test_outside_a_trace_records_have_no_ids(
        self, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """No current span: the records carry no trace ids; the span is a root."""
        stream = io.StringIO()
        engine_on(provider, stream).evaluate(EVICTION)
        (record,) = records(stream)
        assert "trace_id" not in record
        (span,) = exporter.get_finished_spans()
        assert span.parent is None

    def test_without_an_sdk_nothing_is_recorded(self) -> None:
        """The API's no-op provider: decisions as usual, no ids, no failure."""
        stream = io.StringIO()
        engine = engine_on(NoOpTracerProvider(), stream)  # type: ignore[arg-type]
        assert engine.evaluate(EVICTION).outcome == "allow"
        assert current_trace_context() is None
        assert "trace_id" not in records(stream)[0]


class TestTransitionSpans:
    def test_session_verify_is_one_span_with_the_transition_decision(
        self, provider: TracerProvider, exporter: InMemorySpanExporter
    ) -> None:
        """Session.verify inside the agent's span: one child span named prunewarden.verify,
        carrying the transition's decision, and the record names the agent's span."""
        document = json.loads((ROOT / "examples" / "inputs" / TRANSITION).read_text())
        stream = io.StringIO()
        session = engine_on(provider, stream).session("agent-7")
        with provider.get_tracer("agent").start_as_current_span("agent.trim") as step:
            decision = session.verify(
                document["before"], document["after"], tombstones=document.get("tombstones", ())
            )
            context = step.get_span_context()
        ours = [s for s in exporter.get_finished_spans() if s.name.startswith("prunewarden.")]
        (span,) = ours
        assert span.name == "prunewarden.verify"
        assert span.parent is not None
        assert span.parent.span_id == context.span_id
        attributes = dict(span.attributes or {})
        assert attributes["prunewarden.check"] == "transition"
        assert attributes["prunewarden.outcome"] == decision.outcome
        assert attributes["prunewarden.decision_id"] == decision.decision_id
        assert attributes["prunewarden.session_id"] == "agent-7"
        (record,) = records(stream)
        assert record["trace_id"] == format(context.trace_id, "032x")
        assert record["span_id"] == format(context.span_id, "016x")


TRANSITION = "transition-trim-dropped-task.json"
