"""The pruning pass, as the source documents prescribe it, in one call.

Gates first: a halted collapse guard or stale scores freeze the pass (the context is carried
forward whole). Then classify every segment: pinned segments are never evicted on their score;
the rest are taken lowest score first until the target is met, skipping any segment whose score
was judged against a segment this pass already evicts (or that such a segment was judged
against): those are unscoreable now and wait for a re-score. Each pick is authorized by the
eviction guard; where the policy requires a tombstone the plan writes one, and the authorization
rests on it.

Eviction groups (a tool call and its result) are one unit: ranked by their most relevant member,
pinned when one member is, unscoreable when one member is, and authorized member by member; the
first refusal refuses the others with ``group_member_refused`` naming it, and nothing of the group
is evicted.

A segment a custom rule pins (a refusal with a ``pin`` action naming it) stays pinned for the
rest of the session while its text is unchanged, as a pinned kind is: it is refused and logged
once, not again on every pass.

Each decision's candidates are the segments chosen before it and itself (a rule reading
``candidates`` sees the pass so far); its eviction document lists them in the order chosen, so
that a pass costs the same per segment at any size (:class:`PassCandidates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from prunewarden._values import replace_value
from prunewarden.decision import Decision, Reason, Verdict
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
from prunewarden.pipeline import ColumnarEviction
from prunewarden.planner._decisions import DeferredDecision, Entry, PlanDecisions
from prunewarden.planner._inputs import PassInputs
from prunewarden.planner._log import PassLog
from prunewarden.planner._plan import Plan


def plan_pass(
    inputs: PassInputs, request: PlanRequest, document: Mapping[str, Any], log: PassLog
) -> Plan:
    """Decide one pass; every decision goes into ``log`` (the caller records the pass)."""
    decisions: list[Entry] = []
    units = _units(request.segments)
    pinned_kinds = inputs.eviction.pinned_kinds
    pinned_by_rule = inputs.pinned_by_rule
    pinned = tuple(
        w.segment.id
        for unit in units
        if any(
            m.segment.kind in pinned_kinds
            or m.segment.non_recoverable
            or pinned_by_rule(m.segment.id, m.segment.text)
            for m in unit
        )
        for w in unit
    )
    if len(units) < len(request.segments):  # window order, as without groups
        pinned_ids = set(pinned)
        pinned = tuple(w.segment.id for w in request.segments if w.segment.id in pinned_ids)

    if request.history is not None:
        history = CollapseRequest(request.history, request.baseline)
        collapse = _decide(inputs, "collapse", history, document, None, log)
        decisions.append(collapse)
        if collapse.blocks:
            return _frozen(request, pinned, decisions, ())

    gate = inputs.gate("staleness")
    stale = _decide(inputs, "staleness", _staleness_request(request), document, gate, log)
    decisions.append(stale)
    if stale.blocks:
        recompute = next((a.ids or () for a in stale.actions if a.action == "recompute"), ())
        return _frozen(request, pinned, decisions, recompute)

    return _Selection(inputs, request, decisions, log).run(units, pinned)


Unit = tuple[WindowSegment, ...]


def _decide(  # noqa: PLR0913, PLR0917 - the decide step's arguments, and its inputs
    inputs: PassInputs,
    check: Check,
    request: Request,
    document: Any,
    gate: Verdict | None,
    log: PassLog,
) -> Decision:
    """The caller's decide step, asked to explain only in an explained pass: a decide step
    written before ``explain`` existed still plans plain passes."""
    if inputs.explain:
        return inputs.decide(check, request, document, gate, in_pass=log, explain=True)
    return inputs.decide(check, request, document, gate, in_pass=log)


def _units(segments: tuple[WindowSegment, ...]) -> list[Unit]:
    """What a pass evicts as one: each ungrouped segment alone, each group's members together
    (in window order, placed where the group's first member is)."""
    members: dict[str, list[WindowSegment]] = {}
    order: list[WindowSegment | list[WindowSegment]] = []
    for window in segments:
        if window.group is None:
            order.append(window)
        elif window.group in members:
            members[window.group].append(window)
        else:
            members[window.group] = [window]
            order.append(members[window.group])
    return [tuple(u) if isinstance(u, list) else (u,) for u in order]


class _Selection:
    """The eviction phase of one pass: units lowest score first, each authorized whole."""

    def __init__(
        self, inputs: PassInputs, request: PlanRequest, decisions: list[Entry], log: PassLog
    ) -> None:
        self.inputs = inputs
        self.columnar = None if inputs.explain else inputs.columnar
        self.log = log
        self.request = request
        self.decisions = decisions
        self.require_tombstone = inputs.eviction.require_tombstone
        self.candidates = PassCandidates()
        self.chosen: list[WindowSegment] = []
        self.chosen_ids: set[str] = set()
        self.judged_against: set[str] = set()  # what the chosen segments' scores depend on
        self.tombstones: list[str] = []
        self.unscoreable: list[str] = []
        self.pinned_now: dict[str, str] = {}  # pinned by a rule in this pass: id -> text
        self.freed = 0

    def run(self, units: list[Unit], pinned: tuple[str, ...]) -> Plan:
        request, total = self.request, len(self.request.segments)
        never = set(pinned)
        # A group is as relevant as its most relevant member; sorted() is stable: equal scores
        # keep their window order.
        for unit in sorted(units, key=lambda u: max(w.score for w in u)):
            if _met(request, total, len(self.chosen), self.freed):
                break
            if unit[0].segment.id in never:
                continue
            if self._unscoreable(unit):
                self.unscoreable.extend(w.segment.id for w in unit)
                continue
            self._authorize(unit)
        if self.pinned_now:
            self.inputs.pin_by_rule(self.pinned_now)
            never |= self.pinned_now.keys()
            pinned = tuple(w.segment.id for w in request.segments if w.segment.id in never)
        return Plan(
            evict=tuple(w.segment.id for w in self.chosen),
            tombstones=tuple(self.tombstones),
            pinned=pinned,
            unscoreable=tuple(self.unscoreable),
            recompute=(),
            frozen=False,
            target_met=_met(request, total, len(self.chosen), self.freed),
            freed_tokens=self.freed,
            decisions=PlanDecisions(self.decisions),
        )

    def _unscoreable(self, unit: Unit) -> bool:
        """A member judged against a chosen segment, or that a chosen one was judged against."""
        return any(
            any(d in self.chosen_ids for d in w.segment.score_dependencies if d != w.segment.id)
            or w.segment.id in self.judged_against
            for w in unit
        )

    def _authorize(self, unit: Unit) -> None:
        """Decide each member in turn; the first refusal refuses the rest of the group."""
        mark = self.candidates.mark()
        kept: list[tuple[WindowSegment, bool]] = []
        for window in unit:
            decision = self._decide(window)
            if decision.blocks:
                self.candidates.withdraw()
                if _pins(decision, window.segment.id):
                    self.pinned_now[window.segment.id] = window.segment.text
                if len(unit) > 1:
                    self.candidates.rollback(mark)
                    self._refuse_group(unit, window, decision)
                return
            self.candidates.keep()
            kept.append((window, self._needs_tombstone(window)))
        for window, tombstone in kept:
            self.chosen.append(window)
            self.chosen_ids.add(window.segment.id)
            self.judged_against.update(window.segment.score_dependencies)
            self.freed += window.segment.tokens or 0
            if tombstone:
                self.tombstones.append(window.segment.id)

    def _needs_tombstone(self, window: WindowSegment) -> bool:
        return self.require_tombstone and not window.segment.tombstone_written

    def _decide(self, window: WindowSegment, gate: Verdict | None = None) -> Entry:
        """Offer ``window`` as a candidate and decide its eviction (the caller keeps or
        withdraws the offer): over columns where the policy allows, its decision built when
        read; else through the decide step."""
        seg = window.segment
        if self._needs_tombstone(window):
            # Authorized on the tombstone it writes.
            seg = replace_value(seg, tombstone_written=True)
        offered = self.candidates.offer(seg.id)
        if gate is None and self.columnar is not None:
            deferred = self._deferred(self.columnar, seg, window, offered)
            if deferred is not None:
                self.decisions.append(deferred)
                return deferred
        eviction = EvictionRequest(seg, window.score, window.perturbed_score, offered)
        item = _eviction_item(seg, window)
        document = {"check": "eviction", **item, "eviction_candidates": self.candidates.ids}
        decision = _decide(self.inputs, "eviction", eviction, document, gate, self.log)
        self.decisions.append(decision)
        return decision

    def _deferred(
        self,
        columnar: ColumnarEviction,
        seg: Segment,
        window: WindowSegment,
        offered: AbstractSet[str],
    ) -> DeferredDecision | None:
        """The eviction decided over columns (None: they cannot decide it, the decide step
        does); stamped next in the pass, as the decide step stamps it."""
        found = columnar.decide_segment(seg, window.score, window.perturbed_score, offered)
        if found is None:
            return None
        deferred = DeferredDecision(
            columnar, seg, window.score, window.perturbed_score, self.log.next_stamp(), found
        )
        return self.log.add_deferred(deferred)

    def _refuse_group(self, unit: Unit, refused: WindowSegment, decision: Entry) -> None:
        """One ``group_member_refused`` refusal for every other member of the group."""
        member = refused.segment.id
        reason = Reason(
            "group_member_refused",
            f"segment {member!r} of eviction group {refused.group!r} was refused "
            f"({', '.join(decision.codes)}); the group is evicted together or not at all",
            {"group": refused.group, "member": member, "codes": list(decision.codes)},
        )
        gate = Verdict(True, [reason])
        for window in unit:
            if window is not refused:
                self._decide(window, gate)
                self.candidates.withdraw()


def _pins(decision: Entry, segment_id: str) -> bool:
    """Whether a refusal pins the segment (a rule's ``pin`` action naming it)."""
    if isinstance(decision, DeferredDecision):
        return decision.pins
    return any(a.action == "pin" and segment_id in (a.ids or ()) for a in decision.actions)


def _met(request: PlanRequest, total: int, evicted: int, freed: int) -> bool:
    if request.free_tokens is not None:
        return freed >= request.free_tokens
    return total - evicted <= (request.keep_top_k or 0)


def _frozen(
    request: PlanRequest,
    pinned: tuple[str, ...],
    decisions: list[Entry],
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
        decisions=PlanDecisions(decisions),
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
