"""Where an engine's decisions go, and what a sink that fails turns them into.

Kept apart from the calls that decide (:mod:`._engine`) because it is the one place that writes
records: to the :class:`AuditLog` or the structlog logger the caller chose, to its hooks, and, when
the record cannot be written to a required sink, a refusal in place of the decision. Diagnostics
(a hook that raised, an optional audit log that failed) go to the standard ``logging`` logger
``prunewarden``, which has only a ``NullHandler`` until the application configures logging.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from prunewarden._observation import TraceContext, stamp_record
from prunewarden.audit import AuditLog, DecisionContext, decision_record, log_decision
from prunewarden.audit._input_digest import HASHED_TEXT_DIGEST_VERSION
from prunewarden.decision import Decision, Reason
from prunewarden.engine._hooks import DecisionHooks, PassNotices
from prunewarden.inputs import Check
from prunewarden.inputs._columns import ReadStaleness
from prunewarden.pipeline import Pipeline, Shadow
from prunewarden.planner import Plan
from prunewarden.planner._log import PassLog, PassSink
from prunewarden.policy import Policy

_diagnostics = logging.getLogger("prunewarden")

_Recorded = TypeVar("_Recorded")


class DecisionRecorder:
    """The record-writing half of an :class:`~prunewarden.engine.Engine`: one function writes a
    decision record, so no call can forget the policy, the masks or the hooks."""

    policy: Policy
    cel: str
    audit: AuditLog | None
    shadow: Shadow | None
    _pipelines: dict[Check, Pipeline]
    _logger: Any
    _hooks: DecisionHooks
    _trace_context: TraceContext | None

    def _log(
        self, pipeline: Pipeline, decision: Decision, context: DecisionContext, started: int
    ) -> Decision:
        audit = self.audit
        try:
            masks = audit.masks if audit is not None else None
            record = decision_record(
                decision,
                context,
                self.policy,
                masks,
                shadow_policy=(self.shadow.policy if self.shadow else None),
                cel=self.cel,
            )
            stamp_record(record, started, self._trace_context)
            sink = audit.logger if audit is not None else self._logger
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
            return self._refuse_unlogged(pipeline, decision, exc, context)
        self._notify(decision, record)
        return decision

    def _decide_staleness(
        self, read: ReadStaleness, data: Any, labels: Mapping[str, str] | None
    ) -> Decision:
        """:meth:`_decide` of a staleness document read into columns (a plain pipeline, no
        shadow, no session): the same decision and record, no span typed one by one."""
        started = time.perf_counter_ns()
        pipeline = self._pipelines["staleness"]
        decision = pipeline.decide_staleness(read.columns)
        if self.audit is None and self._logger is None and not self._hooks:
            return decision
        spans = read.columns.spans
        try:
            context = DecisionContext(
                read.input_digest,
                {"spans": spans.subject()},
                None,
                labels or {},
                data,
                tuple(text for text in spans.texts if text),
                input_digest_version=HASHED_TEXT_DIGEST_VERSION,
            )
        except Exception as exc:  # noqa: BLE001 - a record that cannot be built cannot be logged
            return self._refuse_unlogged(pipeline, decision, exc)
        return self._log(pipeline, decision, context, started)

    def _pass_sink(self, notices: PassNotices | None) -> PassSink:
        """Where this engine's passes go: its audit log or logger, and ``notices`` for its
        hooks (delivered once the pass's record is done: one batch per pass)."""
        audit = self.audit
        sink = audit.logger if audit is not None else self._logger
        return PassSink(
            self.policy,
            self._pipelines,
            write=None if sink is None else partial(log_decision, sink),
            notify=notices.add if notices is not None else None,
            report=self._report_unwritten,
            required=audit is None or audit.required,
            masks=audit.masks if audit is not None else None,
            shadow_policy=self.shadow.policy if self.shadow else None,
            trace_context=self._trace_context,
            cel=self.cel,
        )

    def _record_pass(
        self, pass_kind: str, log: PassLog, document: Any, **fields: Any
    ) -> Sequence[Decision]:
        return self._through_pass_sink(lambda sink: sink.record(pass_kind, log, document, **fields))

    def _record_plan(self, log: PassLog, plan: Plan, document: Any, **fields: Any) -> Plan:
        return self._through_pass_sink(lambda sink: sink.record_plan(log, plan, document, **fields))

    def _through_pass_sink(self, record: Callable[[PassSink], _Recorded]) -> _Recorded:
        """``record`` a pass through this engine's pass sink, then hand the pass's decisions to
        the hooks as one batch."""
        notices = self._hooks.pass_notices() if self._hooks else None
        recorded = record(self._pass_sink(notices))
        if notices is not None:
            notices.deliver()
        return recorded

    def _report_unwritten(self, pass_id: str, exc: Exception) -> None:
        name = self.audit.name if self.audit is not None else "logger"
        with contextlib.suppress(Exception):
            _diagnostics.warning("audit_write_failed: sink %s, pass %s: %r", name, pass_id, exc)

    def _notify(self, decision: Decision, record: Mapping[str, Any]) -> None:
        """Hand a decision and its record to every hook; a hook that raises is reported and
        changes nothing."""
        self._hooks.notify(decision, record)

    def _write_record(self, record: dict[str, Any]) -> None:
        """Write a record that is not a decision (``session_rebound``) to the sink, if any."""
        sink = self.audit.logger if self.audit is not None else self._logger
        if sink is not None:
            log_decision(sink, record)

    def _refuse_unlogged(
        self,
        pipeline: Pipeline,
        decision: Decision,
        exc: Exception,
        context: DecisionContext | None = None,
    ) -> Decision:
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
                    shadow_policy=(self.shadow.policy if self.shadow else None),
                    cel=self.cel,
                )
                stamp_record(record, None, self._trace_context)
                self._notify(refusal, record)
                self._write_record(record)
        return refusal
