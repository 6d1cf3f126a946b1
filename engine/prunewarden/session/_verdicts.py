"""The refusals that stand in for a guard: while a session is halted, or while its state cannot
be saved or read. Shared by a session's own calls and by the engine's stateless calls naming it.
"""

from __future__ import annotations

from prunewarden.decision import HALT_ACTIONS, Reason, Verdict
from prunewarden.inputs import Check, Request, StalenessRequest
from prunewarden.session._state import Halt


def halt_verdict(halt: Halt, check: Check, request: Request | None = None) -> Verdict:
    """The ``pruning_halted`` refusal that stands in for the guard while ``halt`` holds."""
    reason = Reason(
        "pruning_halted",
        f"the collapse guard halted pruning at cycle {halt.cycle} ({halt.code}); "
        f"no {check} is authorized until a later cycle passes it",
        {"collapse_decision": halt.decision_id, "cycle": halt.cycle},
    )
    return _refusal(reason, request)


def unavailable_verdict(check: Check, request: Request | None, error: str) -> Verdict:
    """The refusal while a session's state cannot be saved (or read): a halt it reported
    might otherwise be lost."""
    reason = Reason(
        "session_state_unavailable",
        f"the session state could not be saved or read ({error}); no {check} is authorized "
        "until it can",
        {"error": error.split(":", 1)[0]},
    )
    return _refusal(reason, request)


def _refusal(reason: Reason, request: Request | None) -> Verdict:
    kept = None
    if isinstance(request, StalenessRequest):
        kept = tuple(span.span_id for span in request.spans)
    return Verdict(
        True, [reason], [HALT_ACTIONS[0]], kept=kept, evicted=() if kept is not None else None
    )
