"""What a guard decided, why, and under which policy: frozen values at the bottom of the package.

A guard returns a :class:`Verdict`; the pipeline turns it into a :class:`Decision` naming the
policy that made it. A shadow policy's verdict on the same request travels beside it as a
:class:`ShadowResult`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from prunewarden.__about__ import __version__
from prunewarden._identity import PolicyIdentity, PolicySource

Outcome = Literal["allow", "deny", "halt"]


@dataclass(frozen=True, slots=True)
class Reason:
    """One finding, with a stable code (documented in ``decision.v1``) and structured detail."""

    code: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Action:
    """What the caller should do next, and to which ids."""

    action: str
    ids: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.ids is None:
            return {"action": self.action}
        return {"action": self.action, "ids": list(self.ids)}


# What a halted pruning loop must do: stop evicting, stop rewriting, tell a person.
HALT_ACTIONS = (Action("halt_pruning"), Action("freeze_buffer"), Action("escalate"))

# The version (4) and variant (RFC 4122) bits of a random UUID, as uuid.UUID sets them.
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def new_decision_id() -> str:
    """``uuid.uuid4().hex`` without building a UUID object: a third of the cost, and every
    decision pays it."""
    return f"{int.from_bytes(os.urandom(16)) & _UUID4_CLEAR | _UUID4_SET:032x}"


def utc_now() -> str:
    """RFC 3339 in UTC with a ``Z``, to the microsecond."""
    # isoformat() is faster than strftime(); in UTC it always ends in "+00:00".
    return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


class Stamp(NamedTuple):
    """Where a decision of a pruning pass sits: the pass's id and time, read once for the pass,
    and the decision's index in it. Its ``decision_id`` is ``<pass_id>-<index>``. A tuple: one
    is made per decision, and a frozen dataclass costs several times as much to build."""

    pass_id: str
    position: int  # the decision's index in the pass ("index" is a method of every tuple)
    evaluated_at: str

    @property
    def decision_id(self) -> str:
        return f"{self.pass_id}-{self.position}"


class PassStamps:
    """The stamps of one pass's decisions, in the order they are made: one random id and one
    clock read for the whole pass."""

    __slots__ = ("evaluated_at", "made", "pass_id")

    def __init__(self) -> None:
        self.pass_id = new_decision_id()
        self.evaluated_at = utc_now()
        self.made = 0

    def next(self) -> Stamp:
        stamp = Stamp(self.pass_id, self.made, self.evaluated_at)
        self.made += 1
        return stamp


@dataclass(frozen=True, slots=True)
class Decision:
    """A guard's verdict.

    ``outcome`` is the verdict whatever the mode; ``enforced`` says whether it binds. In ``audit``
    mode a refusal is recorded but ``enforced`` is false and callers proceed.

    A decision of a pruning pass (:meth:`Engine.authorize_evictions`, a plan) carries the pass's
    id and its ``index`` in the pass instead of an id and a clock read of its own: the pass is
    one audit record, listing every decision's verdict in order.
    """

    check: str
    outcome: Outcome
    enforced: bool
    reasons: tuple[Reason, ...]
    actions: tuple[Action, ...]
    policy: PolicyIdentity
    decision_id: str = field(default_factory=new_decision_id)
    evaluated_at: str = field(default_factory=utc_now)
    engine_version: str = __version__
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    # The policy's files, its own first (see prunewarden.policy).
    sources: tuple[PolicySource, ...] = ()
    # What a shadow policy decided on the same request (Engine(policy, shadow=...)); recorded
    # beside the decision, never part of what the caller is told to do.
    shadow: ShadowResult | None = None
    pass_id: str | None = None
    index: int | None = None

    @property
    def refused(self) -> bool:
        """The verdict is a refusal (deny or halt), binding or not."""
        return self.outcome != "allow"

    @property
    def blocks(self) -> bool:
        """The caller must not proceed: a refusal under an enforcing guard."""
        return self.refused and self.enforced

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(reason.code for reason in self.reasons)

    @property
    def restore(self) -> tuple[str, ...]:
        """A transition's ``restore`` ids: the segments of ``before`` to put back."""
        return next((a.ids or () for a in self.actions if a.action == "restore"), ())

    @property
    def keep_verbatim(self) -> tuple[str, ...]:
        """A transition's ``keep_verbatim`` ids: rewrites to undo, their text of ``before``
        kept (rewrite fidelity)."""
        return next((a.ids or () for a in self.actions if a.action == "keep_verbatim"), ())

    @property
    def rescore(self) -> tuple[str, ...]:
        """A transition's ``rescore`` ids: the scores to recompute."""
        return next((a.ids or () for a in self.actions if a.action == "rescore"), ())

    def repair(
        self, before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """``after`` with this decision's ``restore`` segments of ``before`` put back: each
        right after the nearest segment that precedes it in ``before`` and is in the window
        (at the start when none is), so the window keeps ``before``'s order; and each
        ``keep_verbatim`` segment as ``before`` had it. Copies; the arguments are not changed.
        Without either action, a copy of ``after``."""
        return repair_window(before, after, self.restore, self.keep_verbatim)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "decision_id": self.decision_id,
            "check": self.check,
            "outcome": self.outcome,
            "enforced": self.enforced,
            "reasons": [reason.to_dict() for reason in self.reasons],
            "actions": [action.to_dict() for action in self.actions],
            "policy": self.policy.to_dict(),
            "evaluated_at": self.evaluated_at,
            "engine_version": self.engine_version,
        }
        if self.kept is not None:
            out["kept"] = list(self.kept)
        if self.evicted is not None:
            out["evicted"] = list(self.evicted)
        if self.sources:
            out["policy"]["sources"] = [source.to_dict() for source in self.sources]
        if self.pass_id is not None:
            out["pass_id"], out["index"] = self.pass_id, self.index
        return out


@dataclass(frozen=True, slots=True)
class ShadowResult:
    """What the candidate policy decided on one request (or why it could not)."""

    policy: PolicyIdentity
    sources: tuple[PolicySource, ...] = ()
    outcome: Outcome | None = None
    enforced: bool | None = None
    reasons: tuple[Reason, ...] = ()
    actions: tuple[Action, ...] = ()
    error: str | None = None

    @property
    def blocks(self) -> bool:
        """The candidate, had it been active, would have stopped the caller."""
        return self.outcome not in (None, "allow") and bool(self.enforced)

    def agrees_with(self, decision: Decision) -> bool:
        """Same outcome and same consequence for the caller as the active decision."""
        return self.outcome == decision.outcome and self.blocks == decision.blocks

    def summary(self, decision: Decision) -> str:
        """One line for people: ``shadow prod-eu@1.5.0: HALT (enforced) collapse_detected,
        differs``."""
        name = f"shadow {self.policy.name}@{self.policy.version}"
        if self.error is not None:
            return f"{name}: no verdict ({self.error})"
        binding = "enforced" if self.enforced else "not enforced"
        codes = ", ".join(reason.code for reason in self.reasons)
        verdict = "agrees" if self.agrees_with(decision) else "differs"
        return f"{name}: {str(self.outcome).upper()} ({binding}) {codes}; {verdict}"


def repair_window(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    restore: Iterable[str],
    verbatim: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """``after`` with the segments of ``before`` named by ``restore`` put back in ``before``'s
    order, and those named by ``verbatim`` replaced by their ``before`` copy (see
    :meth:`Decision.repair`); segments are matched by their ``id``. Linear: each restored
    segment is queued behind its anchor, then the window is walked once."""
    wanted = set(restore)
    undo = set(verbatim)
    originals: dict[str, Mapping[str, Any]] = {}
    present = {segment["id"] for segment in after}
    queued: dict[str | None, list[dict[str, Any]]] = {}
    anchor: str | None = None  # the last segment of before still in the window
    for segment in before:
        own = segment["id"]
        if own in undo:
            originals[own] = segment
        if own in present:
            anchor = own
        elif own in wanted:
            queued.setdefault(anchor, []).append(dict(segment))
    window = list(queued.get(None, ()))
    for segment in after:
        window.append(dict(originals.get(segment["id"], segment)))
        window += queued.get(segment["id"], ())
    return window


def disabled_reason(check: str) -> Reason:
    return Reason("check_disabled", f"the {check} guard is off in this policy")


@dataclass(slots=True)
class Verdict:
    refused: bool
    reasons: list[Reason]
    actions: list[Action] = field(default_factory=list)
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    # What the guard computed that rules may read beside the request's own variables (the
    # transition guard's ``fidelity``); never part of the decision.
    variables: dict[str, Any] | None = None
