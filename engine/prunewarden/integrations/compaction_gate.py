"""A coding agent's compaction, gated: whether ``spec.compaction`` blocks it, and the one chained
record each hook run writes (docs/compaction.md#compaction-gates).

No extra needed (CEL loads only for a policy with ``block_when``). :func:`gate_variables` is what
``block_when`` reads about the compaction about to happen and the window it replaces;
:func:`blocking_reason` is the policy's answer at ``PreCompact`` (``block_manual`` while the
session's collapse guard halts, then ``block_when``). :func:`hook_record` builds the record of a
run that judged nothing itself — a window recorded, a compaction blocked, a repair put back, an
error — as a decision of check ``transition`` on the recorded window (``before`` and ``after``
alike: nothing changed yet, or nothing this run changed), so that ``audit verify``, ``audit
query`` and the chain read it like any other; a judged compaction is recorded by the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from prunewarden import rules
from prunewarden.audit import DecisionContext, decision_record, input_digest
from prunewarden.decision import Decision, Reason
from prunewarden.fidelity import extract_facts
from prunewarden.integrations.claude_code import pinned
from prunewarden.policy import Policy
from prunewarden.session import Halt

#: CPU seconds one evaluation of ``block_when`` may take (a rule's default timeout).
CONDITION_SECONDS = 0.1
#: The reason codes of the records a hook run writes itself (decision.v1).
RECORDED, BLOCKED, RESTORED = "compaction_recorded", "compaction_blocked", "compaction_restored"
HOOK_ERROR = "internal_error"
Outcome = Literal["allow", "deny"]


class ConditionError(Exception):
    """``block_when`` could not be evaluated (an error, a timeout, not a bool)."""


def gate_variables(
    segments: Sequence[Mapping[str, Any]],
    policy: Policy,
    hook_input: Mapping[str, Any],
    agent: str,
    *,
    window: bool = True,
) -> dict[str, Any]:
    """What ``block_when`` reads: ``compaction`` (the trigger and the window's counts) and
    ``window`` (each segment; ``facts`` only for the pinned ones, whose facts a summary must
    keep). ``window=False`` leaves the list empty (no condition reads it): the counts alone."""
    keep = pinned(segments, policy)
    listed: list[dict[str, Any]] = []
    for segment in segments if window else ():
        is_pinned = str(segment["id"]) in keep
        text = str(segment.get("text", ""))
        facts = extract_facts(text, whole_text=False).by_kind if is_pinned else {}
        listed.append(
            {
                "id": str(segment["id"]),
                "kind": str(segment["kind"]),
                "text": text,
                "tokens": int(segment.get("tokens", 0)),
                "pinned": is_pinned,
                "group": str(segment.get("group", "")),
                "facts": {kind: sorted(values) for kind, values in facts.items()},
            }
        )
    compaction = {
        "trigger": "manual" if hook_input.get("trigger") == "manual" else "auto",
        "agent": agent,
        "session_id": str(hook_input.get("session_id", "")),
        "custom_instructions": str(hook_input.get("custom_instructions") or ""),
        "segments": len(segments),
        "pinned": len(keep),
        "tokens": sum(int(segment.get("tokens", 0)) for segment in segments),
    }
    return {"compaction": compaction, "window": listed}


def blocking_reason(
    policy: Policy, variables: Mapping[str, Any], halt: Halt | None
) -> Reason | None:
    """Why the policy blocks this compaction (None: it does not). ``halt`` is the session's
    halt, when its store has one. Raises :class:`ConditionError` when ``block_when`` fails."""
    settings = policy.spec.compaction
    trigger = variables["compaction"]["trigger"]
    if settings.block_manual and trigger == "manual" and halt is not None:
        message = (
            f"a manual compaction is blocked while the session's collapse guard halts "
            f"pruning (decision {halt.decision_id}); compaction.block_manual"
        )
        detail = {"by": "block_manual", "collapse_decision": halt.decision_id, "trigger": trigger}
        return Reason(BLOCKED, message, detail)
    condition = settings.block_when
    if condition is None:
        return None
    try:
        matched = rules.evaluate_bool(
            condition,
            rules.to_cel(dict(variables)),
            deadline=rules.Deadline(CONDITION_SECONDS),
        )
    except rules.EvaluationError as exc:
        raise ConditionError(f"compaction.block_when failed: {exc}") from None
    if not matched:
        return None
    message = settings.block_message or f"compaction.block_when is true: {condition.source}"
    return Reason(BLOCKED, message, {"by": "block_when", "trigger": trigger})


def hook_record(  # noqa: PLR0913 - the record's parts, all keyword-only
    policy: Policy,
    hook_input: Mapping[str, Any],
    *,
    outcome: Outcome,
    enforced: bool,
    reason: Reason,
    segments: int,
    applied_by: str,
) -> tuple[Decision, dict[str, Any]]:
    """The decision of one hook run and its audit record (without the chain): the run's
    ``reason``, its subject the recorded window of ``segments`` segments, its input digest the
    hook's input."""
    decision = Decision(
        check="transition",
        outcome=outcome,
        enforced=enforced,
        reasons=(reason,),
        actions=(),
        policy=policy.identity,
        sources=policy.sources,
    )
    subject = {
        "transition": {
            "before": segments,
            "after": segments,
            "kept": segments,
            **{key: [] for key in ("rewritten", "folded", "removed", "summaries", "added")},
            "tombstoned": [],
            "applied_by": applied_by,
        }
    }
    context = DecisionContext(
        input_digest=input_digest(dict(hook_input)),
        subject=subject,
        session_id=str(hook_input.get("session_id") or "") or None,
    )
    return decision, decision_record(decision, context, policy)


__all__ = [
    "BLOCKED",
    "CONDITION_SECONDS",
    "HOOK_ERROR",
    "RECORDED",
    "RESTORED",
    "ConditionError",
    "blocking_reason",
    "gate_variables",
    "hook_record",
]
