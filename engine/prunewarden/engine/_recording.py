"""Where an engine's decisions go, and what a sink that fails turns them into.

An :class:`~prunewarden.engine.Engine` holds one :class:`DecisionRecorder`, built for its
policy, pipelines and sinks: kept apart from the calls that decide (:mod:`._engine`) because it
is the one place that writes records: to the :class:`AuditLog` or the structlog logger the
caller chose, to its hooks, and, when the record cannot be written to a required sink, a refusal
in place of the decision. Diagnostics
(a hook that raised, an optional audit log that failed) go to the standard ``logging`` logger
``prunewarden``, which has only a ``NullHandler`` until the application configures logging.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from prunewarden._observation import TraceContext, stamp_record
from prunewarden.audit import AuditLog, DecisionContext, decision_record, log_decision
from prunewarden.decision import Decision, Reason
from prunewarden.engine._hooks import DecisionHooks, PassNotices
from prunewarden.inputs import Check
from prunewarden.pipeline import Pipeline
from prunewarden.planner import Plan
from prunewarden.planner._log import PassLog, PassSink
from prunewarden.policy import Policy

_diagnostics = logging.getLogger("prunewarden")

_Recorded = TypeVar("_Recorded")


class DecisionRecorder:
    """Where an engine's decisions go: one function writes a decision record, so no call can
    forget the policy, the masks or the hooks; a record that cannot be written to a required
    sink turns its decision into a refusal."""

    __slots__ = (
        "audit",
        "cel",
        "hooks",
        "logger",
        "pipelines",
        "policy",
        "shadow_policy",
        "trace_context",
    )

    def __init__(  # noqa: PLR0913 - each is one part of what a record is written with
        self,
        policy: Policy,
        pipelines: Mapping[Check, Pipeline],
        *,
        audit: AuditLog | None,
        logger: Any,
        hooks: DecisionHooks,
        trace_context: TraceContext | None,
        shadow_policy: Policy | None,
        cel: str,
    ) -> None:
        self.policy = policy
        self.pipelines = pipelines
        self.audit = audit
        self.logger = logger
        self.hooks = hooks
        self.trace_context = trace_context
        self.shadow_policy = shadow_policy
        self.cel = cel

    @property
    def sink(self) -> Any:
        """The logger records are written to: the audit log's, else the caller's, else None."""
        return self.audit.logger if self.audit is not None else self.logger

    @property
    def silent(self) -> bool:
        """No sink and no hook: nothing would read a record, so none is built."""
        return self.audit is None and self.logger is None and not self.hooks

    def log(
        self, pipeline: Pipeline, decision: Decision, context: DecisionContext, started: int | None
    ) -> Decision:
        """Write ``decision``'s record and hand it to the hooks; the decision back, or a
        refusal in its place when a required sink failed."""
        audit = self.audit
        try:
            masks = audit.masks if audit is not None else None
            record = decision_record(
                decision,
                context,
                self.policy,
                masks,
                shadow_policy=self.shadow_policy,
                cel=self.cel,
            )
            stamp_record(record, started, self.trace_context)
            sink = self.sink
            if sink is not None:
                log_decision(sink, record)
        except Exception as exc:  # noqa: BLE001 - a sink that fails refuses, or is reported
            if audit is not None and not audit.required:
                with contextlib.suppress(Exception):
                    _diagnostics.warning(
                        "audit_write_failed: sink %s, decision %s: %s: %s",
                        audit.name,
                        decision.decision_id,
                        type(exc).__name__,
                        exc,
                    )
                return decision
            return self.refuse_unlogged(pipeline, decision, exc, context)
        self.hooks.notify(decision, record)
        return decision

    def pass_sink(self, notices: PassNotices | None) -> PassSink:
        """Where this engine's passes go: its audit log or logger, and ``notices`` for its
        hooks (delivered once the pass's record is done: one batch per pass)."""
        audit = self.audit
        sink = self.sink
        return PassSink(
            self.policy,
            self.pipelines,
            write=None if sink is None else partial(log_decision, sink),
            notify=notices.add if notices is not None else None,
            report=self.report_unwritten,
            required=audit is None or audit.required,
            masks=audit.masks if audit is not None else None,
            shadow_policy=self.shadow_policy,
            trace_context=self.trace_context,
            cel=self.cel,
        )

    def record_plan(self, log: PassLog, plan: Plan, document: Any, **fields: Any) -> Plan:
        """A plan's pass recorded (what a session's binding calls)."""
        return self._through_pass_sink(lambda sink: sink.record_plan(log, plan, document, **fields))

    def _through_pass_sink(self, record: Callable[[PassSink], _Recorded]) -> _Recorded:
        """``record`` a pass through this engine's pass sink, then hand the pass's decisions to
        the hooks as one batch."""
        notices = self.hooks.pass_notices() if self.hooks else None
        recorded = record(self.pass_sink(notices))
        if notices is not None:
            notices.deliver()
        return recorded

    def report_unwritten(self, pass_id: str, exc: Exception) -> None:
        name = self.audit.name if self.audit is not None else "logger"
        with contextlib.suppress(Exception):
            _diagnostics.warning("audit_write_failed: sink %s, pass %s: %r", name, pass_id, exc)

    def write_record(self, record: dict[str, Any]) -> None:
        """Write a record that is not a decision (``session_rebound``) to the sink, if any."""
        sink = self.sink
        if sink is not None:
            log_decision(sink, record)

    def refuse_unlogged(
        self,
        pipeline: Pipeline,
        decision: Decision,
        exc: Exception,
        context: DecisionContext | None = None,
    ) -> Decision:
        """The refusal that stands for a decision whose record could not be written."""
        refusal = pipeline.refuse(
            Reason(
                "audit_unavailable",
                f"the decision could not be logged ({type(exc).__name__}: {exc}); refusing",
                {"error": type(exc).__name__, "refused_decision": decision.decision_id},
            )
        )
        if context is not None:
            with contextlib.suppress(Exception):  # the refusal stands whether or not it logs
                record = decision_record(
                    refusal,
                    context,
                    self.policy,
                    shadow_policy=self.shadow_policy,
                    cel=self.cel,
                )
                stamp_record(record, None, self.trace_context)
                self.hooks.notify(refusal, record)
                self.write_record(record)
        return refusal
