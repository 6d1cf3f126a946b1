"""The pruning pass, as the source documents prescribe it, in one call.

Gates first: a halted collapse guard or stale scores freeze the pass (the context is carried
forward whole). Then classify every segment: pinned segments are never evicted on their score;
the rest are taken lowest score first until the target is met, skipping any segment whose score
was judged against a segment this pass already evicts (or that such a segment was judged
against): those are unscoreable now and wait for a re-score. Each pick is authorized by the
eviction guard; where the policy requires a tombstone the plan writes one, and the authorization
rests on it.

Each decision's candidates are the segments chosen before it and itself (a rule reading
``candidates`` sees the pass so far); its eviction document lists them in the order chosen, so
that a pass costs the same per segment at any size (:class:`PassCandidates`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from prunewarden._observation import TraceContext, stamp_record
from prunewarden.audit import input_digest, pass_record
from prunewarden.decision import Decision, PassStamps, Reason, Stamp
from prunewarden.inputs import (
    Check,
    CollapseRequest,
    EvictionRequest,
    PassCandidates,
    PlanRequest,
    Request,
    Segment,
    StalenessRequest,
    WindowSegment,
)
from prunewarden.pipeline import Pipeline
from prunewarden.policy import Policy

if TYPE_CHECKING:
    from prunewarden.session import Session


@dataclass(frozen=True, slots=True)
class Plan:
    """What a pruning pass may do: evict these (writing these tombstones first), and why."""

    evict: tuple[str, ...]
    tombstones: tuple[str, ...]
    pinned: tuple[str, ...]
    unscoreable: tuple[str, ...]
    recompute: tuple[str, ...]
    frozen: bool
    target_met: bool
    freed_tokens: int
    decisions: tuple[Decision, ...] = field(default=())

    def summary(self) -> dict[str, Any]:
        """What a pass record says of the plan: what it may do, not the decisions (listed as
        the record's verdicts)."""
        return {
            "evict": list(self.evict),
            "tombstones": list(self.tombstones),
            "recompute": list(self.recompute),
            "frozen": self.frozen,
            "target_met": self.target_met,
            "freed_tokens": self.freed_tokens,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "evict": list(self.evict),
            "tombstones": list(self.tombstones),
            "pinned": list(self.pinned),
            "unscoreable": list(self.unscoreable),
            "recompute": list(self.recompute),
            "frozen": self.frozen,
            "target_met": self.target_met,
            "freed_tokens": self.freed_tokens,
            "decisions": [decision.to_dict() for decision in self.decisions],
        }


class PassLog:
    """The decisions of one pruning pass and the requests they decided, in order: one stamp
    (id and time) for the pass, and one audit record when it ends."""

    __slots__ = ("decisions", "requests", "stamps", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter_ns()  # the record's duration_ns counts from here
        self.stamps = PassStamps()
        self.decisions: list[Decision] = []
        self.requests: list[Request] = []

    def next_stamp(self) -> Stamp:
        return self.stamps.next()

    def add(self, decision: Decision, request: Request) -> Decision:
        self.decisions.append(decision)
        self.requests.append(request)
        return decision

    def refused(self, pipelines: Mapping[Check, Pipeline], exc: Exception) -> PassLog:
        """The same pass with every decision refused: its record could not be written."""
        reason = Reason(
            "audit_unavailable",
            f"the pass could not be logged ({type(exc).__name__}: {exc}); refusing",
            {"error": type(exc).__name__, "refused_pass": self.stamps.pass_id},
        )
        refusals = PassLog()
        refusals.stamps, refusals.started = self.stamps, self.started
        for decision, request in zip(self.decisions, self.requests, strict=True):
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
        """The pass's one audit record: it digests ``document``, the pass's input."""
        return pass_record(
            pass_kind,
            self.decisions,
            self.requests,
            input_digest=input_digest(document),
            policy=policy,
            session_id=session_id,
            labels=labels,
            from_session=from_session,
            plan=plan.summary() if plan is not None else None,
            masks=masks,
            document=document,
            shadow_policy=shadow_policy,
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
    ) -> tuple[Decision, ...]:
        """Write the pass's one record and hand it to the hooks with each decision; the
        decisions, or every one refused when the record cannot be written."""
        decisions = tuple(log.decisions)
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
        if all(a is b for a, b in zip(decisions, plan.decisions, strict=False)):
            return replace(plan, decisions=decisions)
        return replace(
            plan, evict=(), tombstones=(), frozen=True, freed_tokens=0, decisions=decisions
        )

    def _refuse(
        self, pass_kind: str, log: PassLog, document: Any, exc: Exception, **fields: Any
    ) -> tuple[Decision, ...]:
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
        stamp_record(record, log.started, self.trace_context)
        return record

    def _notify(self, decisions: tuple[Decision, ...], record: Mapping[str, Any]) -> None:
        if self.notify is not None:
            for decision in decisions:
                self.notify(decision, record)


def plan_pass(
    session: Session, request: PlanRequest, document: Mapping[str, Any], log: PassLog
) -> Plan:
    """Decide one pass; every decision goes into ``log`` (the caller records the pass)."""
    decisions: list[Decision] = []
    pinned_kinds = session.policy.spec.eviction.pinned_kinds
    pinned = tuple(
        w.segment.id
        for w in request.segments
        if w.segment.kind in pinned_kinds or w.segment.non_recoverable
    )

    if request.history is not None:
        collapse = session.decide(
            "collapse", CollapseRequest(request.history, request.baseline), document, in_pass=log
        )
        decisions.append(collapse)
        if collapse.blocks:
            return _frozen(request, pinned, decisions, ())

    stale = session.decide(
        "staleness", _staleness_request(request), document, session.gate("staleness"), in_pass=log
    )
    decisions.append(stale)
    if stale.blocks:
        recompute = next((a.ids or () for a in stale.actions if a.action == "recompute"), ())
        return _frozen(request, pinned, decisions, recompute)

    return _select(session, request, pinned, decisions, log)


def _select(
    session: Session,
    request: PlanRequest,
    pinned: tuple[str, ...],
    decisions: list[Decision],
    log: PassLog,
) -> Plan:
    require_tombstone = session.policy.spec.eviction.require_tombstone
    total = len(request.segments)
    chosen: list[WindowSegment] = []
    chosen_ids: set[str] = set()
    candidates = PassCandidates()
    judged_against: set[str] = set()  # what the chosen segments' scores depend on
    tombstones: list[str] = []
    unscoreable: list[str] = []
    freed = 0
    never = set(pinned)
    # sorted() is stable: equal scores keep their window order.
    for window in sorted(request.segments, key=lambda w: w.score):
        if _met(request, total, len(chosen), freed):
            break
        seg = window.segment
        if seg.id in never:
            continue
        depends_on_chosen = any(d in chosen_ids for d in seg.score_dependencies if d != seg.id)
        if depends_on_chosen or seg.id in judged_against:
            unscoreable.append(seg.id)
            continue
        needs_tombstone = require_tombstone and not seg.tombstone_written
        if needs_tombstone:
            seg = replace(seg, tombstone_written=True)  # authorized on the tombstone it writes
        offered = candidates.offer(seg.id)
        eviction = EvictionRequest(seg, window.score, window.perturbed_score, offered)
        item = _eviction_item(seg, window)
        document = {"check": "eviction", **item, "eviction_candidates": candidates.ids}
        decision = session.decide("eviction", eviction, document, in_pass=log)
        decisions.append(decision)
        if decision.blocks:
            candidates.withdraw()
            continue
        candidates.keep()
        chosen.append(window)
        chosen_ids.add(seg.id)
        judged_against.update(seg.score_dependencies)
        freed += seg.tokens or 0
        if needs_tombstone:
            tombstones.append(seg.id)
    return Plan(
        evict=tuple(w.segment.id for w in chosen),
        tombstones=tuple(tombstones),
        pinned=pinned,
        unscoreable=tuple(unscoreable),
        recompute=(),
        frozen=False,
        target_met=_met(request, total, len(chosen), freed),
        freed_tokens=freed,
        decisions=tuple(decisions),
    )


def _met(request: PlanRequest, total: int, evicted: int, freed: int) -> bool:
    if request.free_tokens is not None:
        return freed >= request.free_tokens
    return total - evicted <= (request.keep_top_k or 0)


def _frozen(
    request: PlanRequest,
    pinned: tuple[str, ...],
    decisions: list[Decision],
    recompute: tuple[str, ...],
) -> Plan:
    return Plan(
        evict=(),
        tombstones=(),
        pinned=pinned,
        unscoreable=(),
        recompute=tuple(recompute),
        frozen=True,
        target_met=_met(request, len(request.segments), 0, 0),
        freed_tokens=0,
        decisions=tuple(decisions),
    )


def _staleness_request(request: PlanRequest) -> StalenessRequest:
    spans = tuple(window.span for window in request.segments)
    return StalenessRequest(
        spans=spans,
        keep_top_k=len(spans),
        turn=request.turn,
        turns=request.turns,
        tombstones=request.tombstones,
        recompute_budget=request.recompute_budget,
    )


def _eviction_item(seg: Segment, window: WindowSegment) -> dict[str, Any]:
    """The eviction document a decision stands for, without ``check`` and the candidates."""
    return {
        "segment": {
            "id": seg.id,
            "kind": seg.kind,
            "text": seg.text,
            "tokens": seg.tokens,
            "non_recoverable": seg.non_recoverable,
            "score_dependencies": list(seg.score_dependencies),
            "tombstone_written": seg.tombstone_written,
            "metadata": seg.metadata,
        },
        "score": window.score,
        "perturbed_score": window.perturbed_score,
    }
