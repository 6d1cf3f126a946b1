"""OpenTelemetry spans of the library's calls, and the trace ids that join audit records to the
agent's traces.

``CallSpans`` is a call hook (``Engine(on_call=...)``): the engine hands it each public call in
which it decided, once the call returns, with every decision and its audit record. It records one
span per call, a child of the caller's current span, from the call's start to its end, named
after the call (``prunewarden.evaluate``, ``prunewarden.plan``, ``prunewarden.observe_cycle``,
``prunewarden.authorize_evictions``, ...). A call that made one decision carries that decision's
id, check, outcome, primary reason, policy identity and session id; a call that made several (a
pass) carries every decision id, the count, and the first refusal's outcome and reason. One span
per call, not per decision, keeps a 200-segment pass at one span.

:func:`current_trace_context` is what the engine's ``trace_context`` option reads when it builds a
record, so that each record names the trace and span it was made in, as OPA's decision logs do.

Only opentelemetry-api is needed (the ``otel`` extra); the application's SDK, if any, exports.
Without an SDK the API's no-op tracer records nothing. ``import prunewarden`` never imports this
module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    from opentelemetry import trace
except ImportError as exc:  # pragma: no cover - the message says what to install
    msg = "prunewarden.tracing needs opentelemetry-api: pip install 'prunewarden[otel]'"
    raise ImportError(msg) from exc

from prunewarden.__about__ import __version__

if TYPE_CHECKING:
    from prunewarden._observation import Call
    from prunewarden.decision import Decision

Attributes = dict[str, str | bool | int | list[str]]


def current_trace_context() -> tuple[str, str] | None:
    """The current span's trace id and span id (lower-case hex, 32 and 16 digits), or None
    outside a recorded span."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class CallSpans:
    """A call hook recording one span per public call with ``tracer_provider`` (default: the
    global one the application's SDK set)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer("prunewarden", __version__, tracer_provider=tracer_provider)

    def __call__(self, call: Call) -> None:
        attributes = call_attributes(call.decisions, call.session_id)
        span = self.tracer.start_span(call.name, start_time=call.started_ns, attributes=attributes)
        span.end(end_time=call.ended_ns)


def call_attributes(decisions: list[Decision], session_id: str | None) -> Attributes:
    """What a call's span carries: its one decision, or the decisions of a pass (no None:
    OpenTelemetry attributes cannot hold one)."""
    shown = decisions[0]
    if len(decisions) > 1:
        # The first refusal (``Decision.refused``, spelled out: a property per decision is a
        # tenth of the span's cost on a 200-segment pass).
        shown = next((d for d in decisions if d.outcome != "allow"), shown)
    policy = shown.policy
    attributes: Attributes = {
        "prunewarden.decision_id": shown.decision_id,
        "prunewarden.check": shown.check,
        "prunewarden.outcome": shown.outcome,
        "prunewarden.reason": shown.reasons[0].code if shown.reasons else "",
        "prunewarden.enforced": shown.enforced,
        "prunewarden.policy.name": policy.name,
        "prunewarden.policy.version": policy.version,
        "prunewarden.policy.digest": policy.digest,
    }
    if len(decisions) > 1:
        attributes["prunewarden.decisions"] = len(decisions)
        attributes["prunewarden.decision_ids"] = [d.decision_id for d in decisions]
    if session_id is not None:
        attributes["prunewarden.session_id"] = session_id
    return attributes


__all__ = ["CallSpans", "current_trace_context"]
