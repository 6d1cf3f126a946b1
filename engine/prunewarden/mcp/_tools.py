"""The tools: ``evaluate``, ``explain``, ``plan`` and ``verify_transition``, each one engine call.

Each tool's arguments are the input document the CLI reads (``input.v1``; a plan's
``$defs/plan``; a transition's ``$defs/transition``, its ``check`` implied), and its result is
the document the CLI prints, as structured content checked by the tool's output schema
(``decision.v1``, or the plan with its decisions), with the same JSON as text for hosts that
read only text. ``explain`` decides as ``evaluate`` does, and answers the explained decision
(``Engine.evaluate(explain=True)``: what would have allowed each refusal, and the rule traces).

Fail closed, as the server's routes do: a document the parser refuses is a tool error listing
each problem with its JSON path (never a decision, never a record); a decision the audit log
did not take (``audit_unavailable``) is a tool error naming it, never an answer a caller could
act on; anything else that goes wrong is a tool error without a traceback. A refusal by a guard
is not an error: it is the decision, and the caller reads its outcome.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp_types import CallToolResult, TextContent, Tool, ToolAnnotations

from prunewarden import _resources as bundled
from prunewarden._schemas import plan_schema
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import InputError, Problem, PrunewardenError
from prunewarden.planner import Plan
from prunewarden.reload import ReloadingEngine

AUDIT_UNAVAILABLE = "audit_unavailable"
# Where the problems of a tool's arguments are said to be: the arguments are the document.
ARGUMENTS = "<arguments>"

_diagnostics = logging.getLogger("prunewarden")

Deciding = Engine | ReloadingEngine


@dataclass(frozen=True, slots=True)
class Caller:
    """What every decision of this server records besides its document (``--session-id``,
    ``--label``); None and empty leave a document's own ``session_id`` and ``labels``."""

    session_id: str | None = None
    labels: Mapping[str, str] | None = None


class ToolCallError(Exception):
    """A call that ends as a tool error: the text the caller reads, and its structured form."""

    def __init__(self, text: str, document: dict[str, Any]) -> None:
        super().__init__(text)
        self.text = text
        self.document = document


def tools() -> list[Tool]:
    """The tools, their input schemas from ``input.v1`` and their output schemas."""
    # A decision changes nothing the caller sees (only the audit log grows), so hosts need not
    # ask before a call; each call is a new record, so none is idempotent.
    annotations = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
    return [
        Tool(
            name="evaluate",
            title="Evaluate an input document",
            description="Decide on one prunewarden input document (input.v1: check collapse, "
            "eviction, staleness or transition), as `prunewarden evaluate` does. Returns the "
            "decision (decision.v1); a refusal is a decision whose outcome is deny or halt, and "
            "its actions say what to do instead. Every decision is written to the audit log.",
            input_schema=_input_schema(None),
            output_schema=_decision_schema(),
            annotations=annotations,
        ),
        Tool(
            name="explain",
            title="Explain a decision",
            description="Decide on one input document as the evaluate tool does (and log the "
            "decision), then explain it, as `prunewarden explain` does: each refusing reason "
            "carries detail.would_allow, the changes to the input or the policy that would have "
            "allowed it (with detail.would_allow_text, one sentence), and the decision an "
            "explanation tracing every custom rule (docs/explain.md).",
            input_schema=_input_schema(None),
            output_schema=_decision_schema(),
            annotations=annotations,
        ),
        Tool(
            name="plan",
            title="Plan a pruning pass",
            description="Plan one pruning pass over a window, as `prunewarden plan` does: the "
            "collapse and staleness gates, then the lowest-scored segments the eviction guard "
            "authorizes until free_tokens or keep_top_k is met. Returns the plan with every "
            "decision it made (frozen: a gate refused the pass).",
            input_schema=_input_schema("plan"),
            output_schema=_plan_schema(),
            annotations=annotations,
        ),
        Tool(
            name="verify_transition",
            title="Verify an edit of the window",
            description="Judge an edit of the context window from the window before it and "
            "after it (a transition, docs/transitions.md): pinned segments removed without a "
            "tombstone, tool-call groups split, scores kept over rewritten text. Returns the "
            "decision; when refused, its restore and rescore actions name the repair.",
            input_schema=_input_schema("transition"),
            output_schema=_decision_schema(),
            annotations=annotations,
        ),
    ]


async def call_tool(
    engine: Deciding, caller: Caller, name: str, arguments: Mapping[str, Any]
) -> CallToolResult:
    """Run the tool ``name`` on ``arguments`` in a worker thread (the engine writes and may
    fsync the audit log), and answer with its document or a tool error."""
    call = _CALLS.get(name)
    if call is None:
        return _error(f"no tool named {name!r}", {"type": "unknown-tool", "tool": name})
    try:
        document = await anyio.to_thread.run_sync(call, engine, caller, dict(arguments))
    except ToolCallError as exc:
        return _error(exc.text, exc.document)
    except InputError as exc:
        return _invalid(exc.problems)
    except PrunewardenError as exc:
        # Refused on purpose (a session store that cannot save, ...): its message says why.
        error = {"type": "error", "error": type(exc).__name__, "detail": str(exc)}
        return _error(str(exc), error)
    except Exception as exc:  # noqa: BLE001 - fail closed: any failure is an error, never an allow
        _diagnostics.error("mcp: tool %s failed: %s", name, type(exc).__name__)
        detail = f"internal error ({type(exc).__name__}): no decision is answered"
        return _error(detail, {"type": "internal-error", "detail": detail})
    text = json.dumps(document, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=document
    )


def _evaluate(
    engine: Deciding, caller: Caller, document: dict[str, Any], *, explain: bool = False
) -> dict[str, Any]:
    decision = engine.evaluate(
        document,
        filename=ARGUMENTS,
        session_id=caller.session_id,
        labels=caller.labels,
        explain=explain,
    )
    _refuse_unlogged((decision,))
    return decision.to_dict()


def _explain(engine: Deciding, caller: Caller, document: dict[str, Any]) -> dict[str, Any]:
    return _evaluate(engine, caller, document, explain=True)


def _plan(engine: Deciding, caller: Caller, document: dict[str, Any]) -> dict[str, Any]:
    plan: Plan = engine.plan(
        document, filename=ARGUMENTS, session_id=caller.session_id, labels=caller.labels
    )
    _refuse_unlogged(plan.decisions)
    return plan.to_dict()


def _verify_transition(
    engine: Deciding, caller: Caller, document: dict[str, Any]
) -> dict[str, Any]:
    # The tool names the check; a document naming another one is a mistake, not a request.
    check = document.setdefault("check", "transition")
    if check != "transition":
        message = f"{check!r}: verify_transition judges transitions; leave check out"
        raise InputError([Problem(ARGUMENTS, 0, 0, "$.check", message)])
    return _evaluate(engine, caller, document)


_CALLS: dict[str, Callable[[Deciding, Caller, dict[str, Any]], dict[str, Any]]] = {
    "evaluate": _evaluate,
    "explain": _explain,
    "plan": _plan,
    "verify_transition": _verify_transition,
}


def _refuse_unlogged(decisions: Sequence[Decision]) -> None:
    """Fail closed: a decision the audit log did not take is not an answer."""
    for decision in decisions:
        if AUDIT_UNAVAILABLE in decision.codes:
            reason = decision.reasons[decision.codes.index(AUDIT_UNAVAILABLE)]
            withheld = decision.decision_id
            text = f"audit log unavailable: decision {withheld} withheld ({reason.message})"
            raise ToolCallError(
                text,
                {
                    "type": "audit-unavailable",
                    "detail": reason.message,
                    "decision_id": decision.decision_id,
                    "policy": decision.policy.to_dict(),
                },
            )


def _invalid(problems: tuple[Problem, ...]) -> CallToolResult:
    """A refused document: one line per problem (``<arguments>: $.path: message``)."""
    return _error(
        "\n".join(str(problem) for problem in problems),
        {
            "type": "invalid-input",
            "problems": [
                {"path": p.path, "message": p.message, "line": p.line, "column": p.column}
                for p in problems
            ],
        },
    )


def _error(text: str, document: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=document, is_error=True
    )


# --- schemas --------------------------------------------------------------------------------


def _input_schema(definition: str | None) -> dict[str, Any]:
    """``input.v1`` (``definition`` None) or one of its definitions, with every definition
    beside it so that its references resolve within the one document a tool carries."""
    schema = bundled.schema("input")
    definitions = schema["$defs"]
    if definition is None:
        return {key: value for key, value in schema.items() if key not in ("$id", "title")}
    chosen = dict(definitions[definition])
    if definition == "transition":
        # The tool implies the check.
        chosen["required"] = [name for name in chosen["required"] if name != "check"]
    return {"$schema": schema["$schema"], **chosen, "$defs": definitions}


def _decision_schema() -> dict[str, Any]:
    schema = bundled.schema("decision")
    return {key: value for key, value in schema.items() if key not in ("$id", "title")}


def _plan_schema() -> dict[str, Any]:
    """The plan as ``prunewarden plan`` prints it, its decisions ``decision.v1`` (inlined: a
    tool's schema is one document, with nothing to fetch)."""
    decision = bundled.schema("decision")
    return {
        "$schema": decision["$schema"],
        **plan_schema({"$ref": "#/$defs/decision"}),
        "$defs": {
            **decision["$defs"],
            "decision": {
                key: value
                for key, value in decision.items()
                if key not in ("$schema", "$id", "$defs", "title")
            },
        },
    }
