"""What a session adds to a transition (``Session.verify``): its canaries, its rule pins and its
halt, and how its history follows the window the edit left.

Kept apart from :mod:`._model` so that the session's other calls read as they did; the halt is a
finding of the transition guard (listed with the others, and refusing only an edit that removes
or folds something), not a gate that stands in for the guard.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from prunewarden._values import replace_value
from prunewarden.decision import Decision, Verdict
from prunewarden.inputs import TransitionRequest
from prunewarden.session._state import Halt, History, RulePins


def halt_detail(halt: Halt) -> dict[str, Any]:
    """What a transition's ``pruning_halted`` reason says of the halt."""
    return {"collapse_decision": halt.decision_id, "cycle": halt.cycle}


def with_session(request: TransitionRequest, history: History) -> TransitionRequest:
    """``request`` with the session's canaries (every id it has seen pinned, in a cycle or in a
    transition) and rule pins (of the segments whose text is still the pinned text) pinned, and
    its halt."""
    canaries = set(history.baseline) | set(history.seen_pinned)
    if history.snapshots:
        canaries.update(history.snapshots[-1].pinned)
    pins = history.rule_pins
    pinned = {s.id for s in request.before if pins.holds(s.id, s.segment.text)}
    halt = None if history.halt is None else halt_detail(history.halt)
    return replace_value(request, pinned=request.pinned | canaries | pinned, halt=halt)


def without_halt(
    request: TransitionRequest, gate: Verdict | None
) -> tuple[TransitionRequest, Verdict | None]:
    """A gate for a transition: a halt becomes the request's (the guard lists it with the other
    findings); any other gate (a state that cannot be saved) still refuses."""
    if gate is None or not gate.reasons or gate.reasons[0].code != "pruning_halted":
        return request, gate
    detail = gate.reasons[0].detail
    halt = {"collapse_decision": detail.get("collapse_decision"), "cycle": detail.get("cycle")}
    return replace_value(request, halt=halt), None


def seen_pinned(
    history: History, request: TransitionRequest, pinned_kinds: Iterable[str]
) -> History:
    """The history having seen what ``request``'s before pins by its content (a pinned kind,
    ``non_recoverable``): remembered whatever the decision, as seeing is not applying."""
    kinds = frozenset(pinned_kinds)
    return history.with_seen_pinned(
        s.id for s in request.before if s.segment.kind in kinds or s.segment.non_recoverable
    )


def follow_after(history: History, request: TransitionRequest, decision: Decision) -> History:
    """The history once the edit is applied (a blocked edit is not): rule pins of segments no
    longer in the window are dropped; a segment put back later is decided afresh."""
    if decision.blocks:
        return history
    pins = history.rule_pins
    present = {segment.id for segment in request.after}
    kept = {k: v for k, v in pins.segments.items() if k in present}
    if len(kept) == len(pins.segments):
        return history
    return replace(history, rule_pins=RulePins(pins.policy, kept))
