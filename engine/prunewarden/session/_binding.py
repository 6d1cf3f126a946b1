"""What a session decides through: the policy in force and the engine's decide step, handed over
by a binder so that the session holds no engine (and follows a ``ReloadingEngine``'s reloads).

Kept apart from :mod:`._session` so that the contract between engine and session reads on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prunewarden.decision import Decision, Verdict
from prunewarden.inputs import Check, Request
from prunewarden.pipeline import ColumnarEviction
from prunewarden.planner._log import PassLog, RecordPass
from prunewarden.policy import Policy


class DecideRequest(Protocol):
    """How a session decides: the engine's decide-and-log step, with the caller's identity and
    the gate that stands in for the guard while pruning is halted."""

    def __call__(  # noqa: PLR0913 - everything a logged decision is made of
        self,
        check: Check,
        request: Request,
        data: Any,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        gate: Verdict | None = None,
        from_session: bool = False,
        in_pass: PassLog | None = None,
        explain: bool = False,
    ) -> Decision: ...


PlanColumns = Callable[[str | None, bool], ColumnarEviction | None]


@dataclass(frozen=True, slots=True)
class SessionBinding:
    """What a session decides with: the policy in force, the engine's decide step, and where
    the session's own records (``session_rebound``) go."""

    policy: Policy
    decide: DecideRequest
    write_record: Callable[[dict[str, Any]], None]
    record_pass: RecordPass
    plan_columns: PlanColumns | None = None
    """The eviction a session's plan may decide over columns, given its id and whether the
    call is the session's own (None, or None returned: every eviction through ``decide``)."""


Binder = Callable[[], SessionBinding]
