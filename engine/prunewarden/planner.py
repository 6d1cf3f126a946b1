"""The pruning pass, as the source documents prescribe it, in one call.

Gates first: a halted collapse guard or stale scores freeze the pass (the context is carried
forward whole). Then classify every segment: pinned segments are never evicted on their score;
the rest are taken lowest score first until the target is met, skipping any segment whose score
was judged against a segment this pass already evicts (or that such a segment was judged
against): those are unscoreable now and wait for a re-score. Each pick is authorized by the
eviction guard; where the policy requires a tombstone the plan writes one, and the authorization
rests on it.

A segment a custom rule pins (a refusal with a ``pin`` action naming it) stays pinned for the
rest of the session while its text is unchanged, as a pinned kind is: it is refused and logged
once, not again on every pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from prunewarden.decision import Decision
from prunewarden.inputs import (
    CollapseRequest,
    EvictionRequest,
    PlanRequest,
    StalenessRequest,
    WindowSegment,
)

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


def plan_pass(session: Session, request: PlanRequest, document: Mapping[str, Any]) -> Plan:
    decisions: list[Decision] = []
    pinned_kinds = session.policy.spec.eviction.pinned_kinds
    rule_pins = session.rule_pins
    pinned = tuple(
        w.segment.id
        for w in request.segments
        if w.segment.kind in pinned_kinds
        or w.segment.non_recoverable
        or rule_pins.get(w.segment.id) == w.segment.text
    )

    if request.history is not None:
        collapse = session.decide(
            "collapse", CollapseRequest(request.history, request.baseline), document
        )
        decisions.append(collapse)
        if collapse.blocks:
            return _frozen(request, pinned, decisions, ())

    stale = session.decide(
        "staleness", _staleness_request(request), document, session.gate("staleness")
    )
    decisions.append(stale)
    if stale.blocks:
        recompute = next((a.ids or () for a in stale.actions if a.action == "recompute"), ())
        return _frozen(request, pinned, decisions, recompute)

    return _select(session, request, pinned, decisions)


def _select(
    session: Session,
    request: PlanRequest,
    pinned: tuple[str, ...],
    decisions: list[Decision],
) -> Plan:
    require_tombstone = session.policy.spec.eviction.require_tombstone
    total = len(request.segments)
    chosen: list[WindowSegment] = []
    chosen_ids: set[str] = set()
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
        candidates = frozenset((*chosen_ids, seg.id))
        eviction = EvictionRequest(seg, window.score, window.perturbed_score, candidates)
        decision = session.decide("eviction", eviction, _eviction_document(window, candidates))
        decisions.append(decision)
        if decision.blocks:
            if _pins(decision, seg.id):
                session.rule_pins[seg.id] = seg.text
                never.add(seg.id)
            continue
        chosen.append(window)
        chosen_ids.add(seg.id)
        judged_against.update(seg.score_dependencies)
        freed += seg.tokens or 0
        if needs_tombstone:
            tombstones.append(seg.id)
    return Plan(
        evict=tuple(w.segment.id for w in chosen),
        tombstones=tuple(tombstones),
        pinned=tuple(w.segment.id for w in request.segments if w.segment.id in never),
        unscoreable=tuple(unscoreable),
        recompute=(),
        frozen=False,
        target_met=_met(request, total, len(chosen), freed),
        freed_tokens=freed,
        decisions=tuple(decisions),
    )


def _pins(decision: Decision, segment_id: str) -> bool:
    """Whether a refusal pins the segment (a rule's ``pin`` action naming it)."""
    return any(a.action == "pin" and segment_id in (a.ids or ()) for a in decision.actions)


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


def _eviction_document(window: WindowSegment, candidates: frozenset[str]) -> dict[str, Any]:
    """The eviction document this decision stands for, as its audit record digests it."""
    seg = window.segment
    return {
        "check": "eviction",
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
        "eviction_candidates": sorted(candidates),
    }
