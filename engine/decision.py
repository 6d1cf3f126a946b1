"""What a guard decided, why, and under which policy."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from prunewarden.__about__ import __version__
from prunewarden.policy import PolicyIdentity, PolicySource

if TYPE_CHECKING:
    from prunewarden.shadow import ShadowResult

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


@dataclass(frozen=True, slots=True)
class Decision:
    """A guard's verdict.

    ``outcome`` is the verdict whatever the mode; ``enforced`` says whether it binds. In ``audit``
    mode a refusal is recorded but ``enforced`` is false and callers proceed.
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
    # The policy's files, its own first (see prunewarden.overlay).
    sources: tuple[PolicySource, ...] = ()
    # What a shadow policy decided on the same request (Engine(policy, shadow=...)); recorded
    # beside the decision, never part of what the caller is told to do.
    shadow: ShadowResult | None = None

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
        return out
