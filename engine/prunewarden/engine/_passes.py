"""An engine's eviction passes: over columns where the policy allows, else decision by decision.

Kept apart from the other calls (:mod:`._engine`) because a pass has two ways to be decided and
recorded, and the choice between them is this module's one concern. Over columns
(:mod:`prunewarden.pipeline._columns`), a pass of an enforcing eviction guard without rules,
calibration or a shadow policy is decided in one loop over its item dicts and logged as one
``record_version`` 3 record; its decisions are built when someone reads them. Any other pass,
and any pass the columns cannot decide exactly (a score out of range, a repeated id, metadata,
a halted session), takes the general path: a typed request and a decision per segment, logged
as a version 2 pass record. Both give the same decisions, field by field
(``tests/engine/test_columnar_passes.py``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prunewarden._observation import stamp_record
from prunewarden.audit import columns_record, input_digest, log_decision
from prunewarden.decision import PassStamps, Reason, Stamp
from prunewarden.engine._recording import DecisionRecorder
from prunewarden.guards.eviction import CODE_ACTIONS, CODES, PassColumns
from prunewarden.inputs import (
    WellFormedPass,
    check_caller_fields,
    eviction_request,
    parse_evictions,
    pass_lists,
    well_formed_pass,
)
from prunewarden.pipeline import ColumnarEviction, PassResult
from prunewarden.planner._log import PassLog
from prunewarden.policy import Policy
from prunewarden.session import SessionRegistry
from prunewarden.session._binding import DecideRequest

_PASS = "evictions"  # noqa: S105 - a pass kind, not a password


class PassRunner:
    """The eviction passes of an :class:`~prunewarden.engine.Engine`: decided over columns where
    its policy allows, else one decision at a time through the engine's ``decide`` step, and
    recorded through its :class:`DecisionRecorder`."""

    __slots__ = ("_columnar", "_decide", "policy", "recorder", "sessions")

    def __init__(
        self,
        policy: Policy,
        recorder: DecisionRecorder,
        sessions: SessionRegistry,
        decide: DecideRequest,
        columnar: ColumnarEviction | None,
    ) -> None:
        self.policy = policy
        self.recorder = recorder
        self.sessions = sessions
        self._decide = decide
        self._columnar = columnar  # None: this policy's passes take the general path

    @property
    def columnar(self) -> ColumnarEviction | None:
        """The policy's eviction settings bound for passes over columns; None: the general path."""
        return self._columnar

    @columnar.setter
    def columnar(self, columnar: ColumnarEviction | None) -> None:
        self._columnar = columnar

    def plan_columns(self, session_id: str | None, from_session: bool) -> ColumnarEviction | None:
        """The eviction a plan may decide over columns: this policy's, unless a stateless call
        naming a session is gated by that session's halt (its evictions are then refused by
        the gate, decision by decision, as the engine's decide step refuses them)."""
        columnar = self._columnar
        if columnar is None or from_session or session_id is None:
            return columnar
        return columnar if self.sessions.gate(session_id, "eviction", None) is None else None

    def authorize_pass(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None,
        session_id: str | None,
        labels: Mapping[str, str] | None,
    ) -> PassResult:
        """:meth:`Engine.authorize_pass`: the pass checked as a whole, then decided and
        recorded, over columns or decision by decision."""
        check_caller_fields(session_id, labels)
        items, candidates = pass_lists(evictions, eviction_candidates)
        columnar = self._columnar
        if columnar is not None:
            formed = well_formed_pass(items, candidates)
            if formed is not None and not self._gated(session_id, items[0], formed.candidates):
                started = time.perf_counter_ns()
                stamps = PassStamps()
                decided = columnar.decide(
                    items, formed.candidates, Stamp(stamps.pass_id, 0, stamps.evaluated_at)
                )
                if decided is not None:
                    fields = _Fields(session_id, labels or {}, formed, started)
                    return self._record_columns(columnar, *decided, fields)
        return self._decide_pass(items, candidates, session_id=session_id, labels=labels)

    def _gated(
        self, session_id: str | None, first: Mapping[str, Any], shared: Sequence[str]
    ) -> bool:
        """Whether a halt (or a store that cannot be read) gates the session named: its
        decisions are then the general path's, each refused by the gate."""
        if session_id is None:
            return False
        request = eviction_request(first, frozenset(shared))
        return self.sessions.gate(session_id, "eviction", request) is not None

    def _decide_pass(
        self,
        items: list[Any],
        candidates: list[Any] | None,
        *,
        session_id: str | None,
        labels: Mapping[str, str] | None,
    ) -> PassResult:
        """The general path: a typed request and a decision per segment, one version 2 record."""
        parsed = parse_evictions(items, candidates, self.policy.spec.scores)
        log = PassLog()
        for item in parsed.items:
            self._decide(
                "eviction",
                item.request,
                item.document,
                session_id=session_id,
                labels=labels,
                in_pass=log,
            )
        ids = [item.request.segment.id for item in parsed.items]
        hooks = self.recorder.hooks
        notices = hooks.pass_notices() if hooks else None
        decisions = self.recorder.pass_sink(notices).record(
            _PASS, log, parsed.document, session_id=session_id, labels=labels or {}
        )
        result = PassResult.of_decisions(decisions, ids)
        if notices is not None and notices.record is not None:
            result.record = notices.record
            hooks.notify_columns(result, notices.record)
        return result

    def _record_columns(
        self,
        columnar: ColumnarEviction,
        columns: PassColumns,
        result: PassResult,
        fields: _Fields,
    ) -> PassResult:
        """Write the pass's one record (version 3) and hand the pass to the hooks; every
        decision refused when the record cannot be written to a required sink."""
        recorder = self.recorder
        audit = recorder.audit
        sink = recorder.sink
        if sink is None and not recorder.hooks:
            return result  # no sink chosen: no record to build
        try:
            record = self._columns_record(
                columnar, result, CODES, CODE_ACTIONS, columns.masks, columns.dependencies, fields
            )
            if sink is not None:
                log_decision(sink, record)
        except Exception as exc:  # noqa: BLE001 - a sink that fails refuses, or is reported
            if audit is not None and not audit.required:
                recorder.report_unwritten(result.pass_id, exc)
                return result
            return self._refuse_columns(columnar, result, exc, fields)
        result.record = record
        if recorder.hooks:
            recorder.hooks.notify_columns(result, record)
        return result

    def _refuse_columns(
        self, columnar: ColumnarEviction, result: PassResult, exc: Exception, fields: _Fields
    ) -> PassResult:
        """Every decision of the pass refused: its record could not be written."""
        reason = Reason(
            "audit_unavailable",
            f"the pass could not be logged ({type(exc).__name__}: {exc}); refusing",
            {"error": type(exc).__name__, "refused_pass": result.pass_id},
        )
        refused = columnar.refused(result, reason)
        with contextlib.suppress(Exception):  # the refusals stand whether or not they log
            masks = [1] * len(refused)
            record = self._columns_record(
                columnar, refused, (reason.code,), (None,), masks, {}, fields
            )
            refused.record = record
            hooks = self.recorder.hooks
            if hooks:
                hooks.notify_columns(refused, record)
            sink = self.recorder.sink
            if sink is not None:
                log_decision(sink, record)
        return refused

    def _columns_record(  # noqa: PLR0913, PLR0917 - the record's columns, the pass's fields
        self,
        columnar: ColumnarEviction,
        result: PassResult,
        codes: Sequence[str],
        code_actions: Sequence[str | None],
        masks: Sequence[int],
        dependencies: Mapping[int, Sequence[str]],
        fields: _Fields,
    ) -> dict[str, Any]:
        record = columns_record(
            _PASS,
            pass_id=result.pass_id,
            ts=result.evaluated_at,
            check="eviction",
            refusal=columnar.refusal,
            enforced=columnar.enforced,
            segment_ids=result.segment_ids,
            codes=codes,
            code_actions=code_actions,
            masks=masks,
            allowed=result.allowed,
            dependencies=dependencies,
            input_digest=input_digest(fields.document, fields.encoded),
            policy=self.policy,
            session_id=fields.session_id,
            labels=fields.labels,
            masks_of_input=self.recorder.audit.masks if self.recorder.audit is not None else None,
            document=fields.document,
        )
        stamp_record(record, fields.started, self.recorder.trace_context)
        return record


class _Fields:
    """What a pass's record says beyond its columns: the caller's session and labels, the pass
    document it digests (and its bytes, serialized once by validation), and when deciding
    began."""

    __slots__ = ("document", "encoded", "labels", "session_id", "started")

    def __init__(
        self,
        session_id: str | None,
        labels: Mapping[str, str],
        formed: WellFormedPass,
        started: int,
    ) -> None:
        self.session_id = session_id
        self.labels = labels
        self.document = formed.document
        self.encoded = formed.encoded
        self.started = started
