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

from prunewarden._observation import public_call, stamp_record
from prunewarden.audit import columns_record, input_digest, log_decision
from prunewarden.decision import Decision, PassStamps, Reason, Stamp
from prunewarden.engine._recording import DecisionRecorder
from prunewarden.guards.eviction import CODE_ACTIONS, CODES, PassColumns
from prunewarden.inputs import (
    Check,
    Request,
    WellFormedPass,
    check_caller_fields,
    eviction_request,
    parse_evictions,
    pass_lists,
    well_formed_pass,
)
from prunewarden.pipeline import ColumnarEviction, PassResult
from prunewarden.planner._log import PassLog
from prunewarden.session import SessionRegistry

_PASS = "evictions"  # noqa: S105 - a pass kind, not a password


class PassCalls(DecisionRecorder):
    """The eviction-pass calls of an :class:`~prunewarden.engine.Engine`."""

    sessions: SessionRegistry
    _columnar: ColumnarEviction | None  # None: this policy's passes take the general path

    def _decide(  # noqa: PLR0913 - Engine._decide, as a pass calls it
        self,
        check: Check,
        request: Request,
        data: Any,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        in_pass: PassLog | None = None,
    ) -> Decision:
        raise NotImplementedError  # Engine decides

    @public_call("prunewarden.authorize_evictions")
    def authorize_evictions(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[Decision, ...]:
        """Eviction guard for a whole pruning pass: one decision per item
        ``{"segment", "score", "perturbed_score"}``, in order, and one audit record for the
        pass (its decisions are ``<pass_id>-<index>``). :meth:`authorize_pass`, every decision
        built.

        Every segment of the pass is an eviction candidate unless ``eviction_candidates`` says
        otherwise. The pass is validated first, as a whole: a malformed item raises
        :class:`InputError` (paths ``$.evictions[i]...``) before anything is decided or logged.
        The record digests the pass document ``{"evictions": [...], "eviction_candidates":
        [...]}``. When it cannot be written (and the audit log is required), every decision of
        the pass is a refusal.
        """
        return tuple(
            self.authorize_pass(
                evictions, eviction_candidates, session_id=session_id, labels=labels
            )
        )

    @public_call("prunewarden.authorize_pass")
    def authorize_pass(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PassResult:
        """:meth:`authorize_evictions`, answered as columns: a :class:`PassResult` with
        ``allowed``, ``evict_ids``, ``codes`` and ``pass_id``, whose ``result[i]`` is the
        decision on item ``i`` (built when first read, equal to the one
        :meth:`authorize_evictions` returns). Same validation, same refusals, one record."""
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
        notices = self._hooks.pass_notices() if self._hooks else None
        decisions = self._pass_sink(notices).record(
            _PASS, log, parsed.document, session_id=session_id, labels=labels or {}
        )
        result = PassResult.of_decisions(decisions, ids)
        if notices is not None and notices.record is not None:
            result.record = notices.record
            self._hooks.notify_columns(result, notices.record)
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
        audit = self.audit
        sink = audit.logger if audit is not None else self._logger
        if sink is None and not self._hooks:
            return result  # no sink chosen: no record to build
        try:
            record = self._columns_record(
                columnar, result, CODES, CODE_ACTIONS, columns.masks, columns.dependencies, fields
            )
            if sink is not None:
                log_decision(sink, record)
        except Exception as exc:  # noqa: BLE001 - a sink that fails refuses, or is reported
            if audit is not None and not audit.required:
                self._report_unwritten(result.pass_id, exc)
                return result
            return self._refuse_columns(columnar, result, exc, fields)
        result.record = record
        if self._hooks:
            self._hooks.notify_columns(result, record)
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
            if self._hooks:
                self._hooks.notify_columns(refused, record)
            sink = self.audit.logger if self.audit is not None else self._logger
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
            masks_of_input=self.audit.masks if self.audit is not None else None,
            document=fields.document,
        )
        stamp_record(record, fields.started, self._trace_context)
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
