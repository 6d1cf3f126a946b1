"""How a pruning pass is logged: all its decisions in one audit record, written when it ends.

Kept apart from the selection (:mod:`._selection`) because the engine writes a pass the same way
whether a plan or a batch of evictions made it; a record that cannot be written to a required sink
turns every decision of the pass into a refusal.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from prunewarden._observation import TraceContext, stamp_record
from prunewarden.audit import columns_record, input_digest, pass_record, verdict_entry
from prunewarden.decision import Decision, PassStamps, Reason, Stamp
from prunewarden.guards.eviction import AUTHORIZED, CODE_ACTIONS, CODES, UNSCOREABLE
from prunewarden.inputs import Check, Request
from prunewarden.pipeline import Pipeline
from prunewarden.planner._decisions import DeferredDecision, PlanDecisions
from prunewarden.planner._plan import Plan
from prunewarden.policy import Policy


class PassLog:
    """The decisions of one pruning pass and the requests they decided, in order: one stamp
    (id and time) for the pass, and one audit record when it ends."""

    __slots__ = ("decisions", "requests", "stamps", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter_ns()  # the record's duration_ns counts from here
        self.stamps = PassStamps()
        self.decisions = PlanDecisions()
        self.requests: list[Request | None] = []

    def next_stamp(self) -> Stamp:
        return self.stamps.next()

    def add(self, decision: Decision, request: Request | None) -> Decision:
        self.decisions.append(decision)
        self.requests.append(request)
        return decision

    def add_deferred(self, deferred: DeferredDecision) -> DeferredDecision:
        """An eviction the columns decided: its record entry is known, its decision is built
        when read."""
        self.decisions.append(deferred)
        self.requests.append(None)
        return deferred

    def refused(self, pipelines: Mapping[Check, Pipeline], exc: Exception) -> PassLog:
        """The same pass with every decision refused: its record could not be written."""
        reason = Reason(
            "audit_unavailable",
            f"the pass could not be logged ({type(exc).__name__}: {exc}); refusing",
            {"error": type(exc).__name__, "refused_pass": self.stamps.pass_id},
        )
        refusals = PassLog()
        refusals.stamps, refusals.started = self.stamps, self.started
        for entry, logged in zip(self.decisions.entries, self.requests, strict=True):
            # A deferred eviction's request is built for its entry (it names the segment).
            request = entry.request() if isinstance(entry, DeferredDecision) else logged
            decision = entry.get() if isinstance(entry, DeferredDecision) else entry
            stamp = Stamp(self.stamps.pass_id, len(refusals.decisions), self.stamps.evaluated_at)
            refused = pipelines[decision.check].refuse(reason, stamp=stamp)  # type: ignore[index]
            refusals.add(refused, request)
        return refusals

    def record(  # noqa: PLR0913 - everything a pass record is made of
        self,
        pass_kind: str,
        document: Any,
        *,
        policy: Policy,
        session_id: str | None,
        labels: Mapping[str, str],
        from_session: bool = False,
        plan: Plan | None = None,
        masks: tuple[str, ...] | None = None,
        shadow_policy: Policy | None = None,
    ) -> dict[str, Any]:
        """The pass's one audit record: it digests ``document``, the pass's input. A pass with
        evictions the columns decided is recorded as columns (``record_version`` 3) without
        building their decisions; one decided decision by decision as version 2."""
        entries = self.decisions.entries
        if shadow_policy is None and any(isinstance(e, DeferredDecision) for e in entries):
            return self._columns_record(
                pass_kind,
                document,
                policy=policy,
                session_id=session_id,
                labels=labels,
                from_session=from_session,
                plan=plan,
                masks=masks,
            )
        verdicts = [
            e.verdict if isinstance(e, DeferredDecision) else verdict_entry(e, r)
            for e, r in zip(entries, self.requests, strict=True)
        ]
        # The decisions built (a deferred first one is built: it names the pass's id and time).
        built = [e for e in entries if isinstance(e, Decision)]
        if entries and isinstance(entries[0], DeferredDecision):
            built.insert(0, self.decisions[0])
        return pass_record(
            pass_kind,
            built,
            [None] * len(built),
            input_digest=input_digest(document),
            policy=policy,
            session_id=session_id,
            labels=labels,
            from_session=from_session,
            plan=plan.summary() if plan is not None else None,
            masks=masks,
            document=document,
            shadow_policy=shadow_policy,
            verdicts=verdicts,
        )

    def _columns_record(  # noqa: PLR0913 - everything a pass record is made of
        self,
        pass_kind: str,
        document: Any,
        *,
        policy: Policy,
        session_id: str | None,
        labels: Mapping[str, str],
        from_session: bool,
        plan: Plan | None,
        masks: tuple[str, ...] | None,
    ) -> dict[str, Any]:
        """The evictions the columns decided as columns, every other decision as its version 2
        verdict entry with its place in the pass."""
        deferred: list[DeferredDecision] = []
        verdicts: list[tuple[int, dict[str, Any]]] = []
        for index, (entry, request) in enumerate(
            zip(self.decisions.entries, self.requests, strict=True)
        ):
            if isinstance(entry, DeferredDecision):
                deferred.append(entry)
            else:
                verdicts.append((index, verdict_entry(entry, request)))
        columnar = deferred[0].columnar
        return columns_record(
            pass_kind,
            pass_id=self.stamps.pass_id,
            ts=self.stamps.evaluated_at,
            check="eviction",
            refusal=columnar.refusal,
            enforced=columnar.enforced,
            segment_ids=[d.segment.id for d in deferred],
            codes=CODES,
            code_actions=CODE_ACTIONS,
            masks=[d.mask for d in deferred],
            allowed=[d.mask == AUTHORIZED for d in deferred],
            # As the verdict entry names them: the pending dependencies of an unscoreable one.
            dependencies={
                i: list(d.pending) for i, d in enumerate(deferred) if d.mask & UNSCOREABLE
            },
            input_digest=input_digest(document),
            policy=policy,
            session_id=session_id,
            labels=labels,
            from_session=from_session,
            masks_of_input=masks,
            document=document,
            verdicts=verdicts,
            plan=plan.summary() if plan is not None else None,
        )


class RecordPass(Protocol):
    """How a session ends a planned pass: the engine logs its one record and returns the plan
    (refused whole when the record cannot be written)."""

    def __call__(  # noqa: PLR0913 - everything a pass record is made of
        self,
        log: PassLog,
        plan: Plan,
        document: Any,
        *,
        session_id: str | None,
        labels: Mapping[str, str],
        from_session: bool,
    ) -> Plan: ...


@dataclass(frozen=True, slots=True)
class PassSink:
    """Where an engine's passes go: one record a pass through ``write`` (None: no sink was
    chosen), each decision handed to ``notify`` with it. A record that cannot be written refuses
    every decision of the pass when ``required``; otherwise ``report`` is told and the pass
    stands."""

    policy: Policy
    pipelines: Mapping[Check, Pipeline]
    write: Callable[[dict[str, Any]], None] | None
    notify: Callable[[Decision, Mapping[str, Any]], None] | None
    report: Callable[[str, Exception], None]
    required: bool
    masks: tuple[str, ...] | None = None
    shadow_policy: Policy | None = None
    trace_context: TraceContext | None = None
    cel: str | None = None  # the CEL backend of the rules, named by the records of their passes

    def record(  # noqa: PLR0913 - everything a pass record is made of
        self,
        pass_kind: str,
        log: PassLog,
        document: Any,
        *,
        session_id: str | None,
        labels: Mapping[str, str],
        from_session: bool = False,
        plan: Plan | None = None,
    ) -> Sequence[Decision]:
        """Write the pass's one record and hand it to the hooks with each decision; the
        decisions (``log.decisions`` itself), or every one refused when the record cannot be
        written."""
        decisions = log.decisions
        if not decisions or (self.write is None and self.notify is None):
            return decisions  # nothing decided, or no sink chosen: no record to build
        fields = {"session_id": session_id, "labels": labels, "from_session": from_session}
        try:
            record = self._record(pass_kind, log, document, plan=plan, **fields)
            if self.write is not None:
                self.write(record)
        except Exception as exc:  # noqa: BLE001 - a sink that fails refuses, or is reported
            if not self.required:
                self.report(log.stamps.pass_id, exc)
                return decisions
            return self._refuse(pass_kind, log, document, exc, **fields)
        self._notify(decisions, record)
        return decisions

    def record_plan(self, log: PassLog, plan: Plan, document: Any, **fields: Any) -> Plan:
        """Log a planned pass as one record; a plan whose record cannot be written evicts
        nothing, and every decision in it is a refusal."""
        decisions = self.record("plan", log, document, plan=plan, **fields)
        if decisions is log.decisions:
            return replace(plan, decisions=decisions)
        return replace(
            plan, evict=(), tombstones=(), frozen=True, freed_tokens=0, decisions=decisions
        )

    def _refuse(
        self, pass_kind: str, log: PassLog, document: Any, exc: Exception, **fields: Any
    ) -> Sequence[Decision]:
        refusals = log.refused(self.pipelines, exc)
        with contextlib.suppress(Exception):  # the refusals stand whether or not they log
            record = self._record(pass_kind, refusals, document, **fields)
            self._notify(tuple(refusals.decisions), record)
            if self.write is not None:
                self.write(record)
        return tuple(refusals.decisions)

    def _record(self, pass_kind: str, log: PassLog, document: Any, **fields: Any) -> dict[str, Any]:
        record = log.record(
            pass_kind,
            document,
            policy=self.policy,
            masks=self.masks,
            shadow_policy=self.shadow_policy,
            **fields,
        )
        rules = self.policy.rules or (self.shadow_policy and self.shadow_policy.rules)
        if self.cel is not None and rules:
            record["cel"] = self.cel
        stamp_record(record, log.started, self.trace_context)
        return record

    def _notify(self, decisions: Sequence[Decision], record: Mapping[str, Any]) -> None:
        if self.notify is not None:
            for decision in decisions:
                self.notify(decision, record)
