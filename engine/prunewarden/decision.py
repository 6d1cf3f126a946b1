"""What a guard decided, why, and under which policy: frozen values at the bottom of the package.

A guard returns a :class:`Verdict`; the pipeline turns it into a :class:`Decision` naming the
policy that made it. A shadow policy's verdict on the same request travels beside it as a
:class:`ShadowResult`.

One of each is built per decision, hundreds per pass: they are ``msgspec.Struct``s, built in C
(see :mod:`prunewarden._values`), except :class:`Reason`, a slots class whose message waits to
be read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

import msgspec

from prunewarden.__about__ import __version__
from prunewarden._identity import PolicyIdentity, PolicySource

# The core API's names (docs/api.md); the stamps, ids and clock below serve the package itself.
__all__ = [
    "HALT_ACTIONS",
    "Action",
    "Decision",
    "Outcome",
    "Reason",
    "ShadowResult",
    "Verdict",
    "disabled_reason",
]

Outcome = Literal["allow", "deny", "halt"]


class Reason:
    """One finding, with a stable code (documented in ``decision.v1``) and structured detail.

    Its message is formatted when first read, then kept: a pass's audit record names its
    reasons by code, so most messages of a pass are never read, and formatting one (floats to
    two places, ids quoted) costs more than building the reason. :meth:`deferred` builds a
    reason from a ``str.format`` template and its values; ``Reason(code, message, detail)``
    from the text. Either way the reason reads, compares, hashes, pickles and prints by its
    text, and is frozen.
    """

    __slots__ = ("_message", "_values", "code", "detail")
    __match_args__ = ("code", "message", "detail")

    code: str
    detail: dict[str, Any]
    _message: str  # the message, or its template while _values is not None
    _values: tuple[Any, ...] | None

    def __init__(self, code: str, message: str, detail: dict[str, Any] | None = None) -> None:
        _set_code(self, code)
        _set_message(self, message)
        _set_values(self, None)
        _set_detail(self, {} if detail is None else detail)

    @classmethod
    def deferred(
        cls,
        code: str,
        template: str,
        values: tuple[Any, ...],
        detail: dict[str, Any] | None = None,
    ) -> Reason:
        """A reason whose message is ``template.format(*values)``, formatted when first read.
        The values must be what the message shows (strings, numbers), not objects that change."""
        reason = _new_reason(cls)
        _set_code(reason, code)
        _set_message(reason, template)
        _set_values(reason, values)
        _set_detail(reason, {} if detail is None else detail)
        return reason

    @property
    def message(self) -> str:
        values = self._values
        if values is not None:
            try:
                text = self._message.format(*values)
            except Exception as exc:  # noqa: BLE001 - a message never keeps its decision unlogged
                text = f"{self._message} (not formatted: {type(exc).__name__})"
            # Two threads reading it first both format the same text: either write is right.
            _set_message(self, text)
            _set_values(self, None)
        return self._message

    def with_detail(self, detail: dict[str, Any]) -> Reason:
        """The same finding and message with ``detail`` in place of its own (a message not
        read yet stays unformatted)."""
        reason = _new_reason(Reason)
        _set_code(reason, self.code)
        _set_message(reason, self._message)
        _set_values(reason, self._values)
        _set_detail(reason, detail)
        return reason

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "detail": self.detail}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Reason)  # noqa: S101 - for the type checker: the class is ours
        return (self.code, self.message, self.detail) == (other.code, other.message, other.detail)

    def __hash__(self) -> int:
        # As a frozen dataclass's: by the fields, so a reason with detail (a dict) has none.
        return hash((self.code, self.message, self.detail))

    def __repr__(self) -> str:
        return f"Reason(code={self.code!r}, message={self.message!r}, detail={self.detail!r})"

    def __reduce__(self) -> tuple[type[Reason], tuple[str, str, dict[str, Any]]]:
        return (Reason, (self.code, self.message, self.detail))

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"cannot assign to field {name!r}: a Reason is frozen"
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"cannot delete field {name!r}: a Reason is frozen"
        raise AttributeError(msg)


# A reason's slots are set through their descriptors: its own __setattr__ refuses every write.
_new_reason = object.__new__
_set_code: Callable[[Reason, str], None] = vars(Reason)["code"].__set__
_set_message: Callable[[Reason, str], None] = vars(Reason)["_message"].__set__
_set_values: Callable[[Reason, tuple[Any, ...] | None], None] = vars(Reason)["_values"].__set__
_set_detail: Callable[[Reason, dict[str, Any]], None] = vars(Reason)["detail"].__set__


class Action(msgspec.Struct, frozen=True):
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


class Decision(msgspec.Struct, frozen=True):
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
    decision_id: str = msgspec.field(default_factory=new_decision_id)
    evaluated_at: str = msgspec.field(default_factory=utc_now)
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
    # Asked for with explain=True: how the decision was reached (the guard's mode, a trace of
    # each rule); the refusing reasons then carry detail.would_allow.
    explanation: dict[str, Any] | None = None

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
        if self.explanation is not None:
            out["explanation"] = self.explanation
        return out


class ShadowResult(msgspec.Struct, frozen=True):
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


class Verdict(msgspec.Struct):
    refused: bool
    reasons: list[Reason]
    actions: list[Action] = msgspec.field(default_factory=list)
    kept: tuple[str, ...] | None = None
    evicted: tuple[str, ...] | None = None
    # What the guard computed that rules may read beside the request's own variables (the
    # transition guard's ``fidelity``); never part of the decision.
    variables: dict[str, Any] | None = None
