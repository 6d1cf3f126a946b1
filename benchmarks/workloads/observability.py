"""What metrics and spans cost: the eviction pass with both decision hooks on, against the same
engine without them.

Both sides run inside a span of the agent's own (an application that traces has one) and write
their records to the same sink (the command line's JSON logger), so the difference is what
prunewarden adds: the Prometheus hook counting the pass's decisions and observing their duration
(through its batch method, as the engine calls it), the OpenTelemetry hook recording one span for
the pass (SDK tracer provider, batched to an exporter that drops them), and the current trace and
span ids in the pass's audit record. The target: under 10% (a ratio of at most 1.10).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry
from prunewarden import Decision, Engine
from prunewarden._observation import Call
from prunewarden.metrics import DecisionMetrics
from prunewarden.tracing import CallSpans, current_trace_context

from benchmarks.common import json_logger
from benchmarks.harness import Case, Workload, decision_verdicts, register
from benchmarks.workloads.eviction import SEGMENTS, build_pass, evictions


class DroppingExporter(SpanExporter):
    """Takes every batch and keeps nothing: the SDK's whole path, no I/O."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:  # noqa: ARG002
        return SpanExportResult.SUCCESS


def build_observed_pass() -> Case:
    items, candidates = evictions()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
    agent = provider.get_tracer("agent")
    plain = Engine.default(logger=json_logger())
    metrics, spans = DecisionMetrics(CollectorRegistry()), CallSpans(provider)
    observed = Engine.default(
        logger=json_logger(),
        on_decision=metrics,
        on_call=spans,
        trace_context=current_trace_context,
    )
    calls: list[Call] = []
    Engine.default(on_call=calls.append).authorize_evictions(items, candidates)

    def run(engine: Engine) -> tuple[Decision, ...]:
        with agent.start_as_current_span("agent.pass"):
            return engine.authorize_evictions(items, candidates)

    # The metrics hook reads the pass's columns (on_pass): no decision is built for it.
    columns = Engine.default(logger=json_logger()).authorize_pass(items, candidates)

    def count_pass() -> None:
        metrics.on_pass(columns)

    def trace_pass() -> None:
        for call in calls:
            spans(call)

    return Case(
        decisions=len(items),
        engine=lambda: run(observed),
        reference=lambda: run(plain),
        reference_verdicts=decision_verdicts,
        stages={
            **build_pass().stages,
            "metrics hook": count_pass,
            "span hook": trace_pass,
        },
    )


register(
    Workload(
        f"eviction/pass-{SEGMENTS}/observed",
        build_observed_pass,
        target=1.10,
        description=f"{SEGMENTS} segments with metrics and spans on, against the same pass without",
    )
)
