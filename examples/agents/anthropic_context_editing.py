"""Anthropic's server-side context editing, judged: a policy compiled into ``context_management``
and recorded ``applied_edits`` checked against it, offline.

A research agent's Messages history holds eleven tool uses; the results of ``read_notes`` are
the user's standing constraints (kind ``constraint``, pinned by the default policy). A request
that asked for ``clear_tool_uses_20250919`` with only ``keep`` got back ``applied_edits``
reporting eight cleared tool uses: rebuilt from the request, that edit cleared three constraints,
and the guard refuses it, naming them. The same request with the ``context_management``
compiled from the policy (``read_notes`` in ``exclude_tools``) and its recorded response is
allowed. No request is sent: the responses are the SDK's own models, as recorded. Run it with
``make demo-agents`` (needs ``prunewarden[anthropic]``).
"""

from __future__ import annotations

import json
from typing import Any

from anthropic.types.beta import (
    BetaClearToolUses20250919EditResponse,
    BetaContextManagementConfigParam,
    BetaContextManagementResponse,
    BetaMessageParam,
)
from conversations import CONVERSATIONS
from prunewarden import Engine
from prunewarden.integrations.anthropic import compile_context_management, judge_applied_edits

TOOLS = ("search", "read_notes", "calculator")
KINDS = {"read_notes": "constraint"}  # what read_notes returns: the user's standing constraints


def history(lines: list[str]) -> list[BetaMessageParam]:
    """The task, then per line a tool use and the user turn holding its result."""
    messages: list[BetaMessageParam] = [{"role": "user", "content": lines[0]}]
    for i, text in enumerate(lines[1:]):
        use = f"toolu_{i:02d}"
        name = TOOLS[i % len(TOOLS)]
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use, "name": name, "input": {"q": i}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use, "content": text}],
            }
        )
    return messages


def recorded(cleared: int) -> BetaContextManagementResponse:
    """A response's context_management, as the server reported it."""
    edit = BetaClearToolUses20250919EditResponse(
        type="clear_tool_uses_20250919",
        cleared_tool_uses=cleared,
        cleared_input_tokens=41 * cleared,
    )
    return BetaContextManagementResponse(applied_edits=[edit])


def judge(name: str, request: dict[str, Any], response: BetaContextManagementResponse) -> None:
    session = Engine.default().session(name)
    outcome = judge_applied_edits(session, request, response, tool_kinds=KINDS)
    decision = outcome.decision
    print(f"  cleared {len(outcome.window.cleared)} tool results")
    print(f"  transition: {decision.outcome} ({', '.join(decision.codes)})")
    for reason in decision.reasons:
        print(f"    {reason.code}: {reason.message}")
    if decision.restore:
        print(f"    restore: {', '.join(decision.restore)}")


def main() -> None:
    engine = Engine.default()
    messages = history(CONVERSATIONS["ferry-trip"])
    system = "You are a careful research assistant."

    naive: BetaContextManagementConfigParam = {
        "edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}]
    }
    print(f"requested: {json.dumps(naive)}")
    judge(
        "naive", {"system": system, "messages": messages, "context_management": naive}, recorded(8)
    )

    compiled = compile_context_management(engine.policy, messages=messages, tool_kinds=KINDS)
    print(f"compiled from the policy: {json.dumps(compiled)}")
    request = {"system": system, "messages": messages, "context_management": compiled}
    judge("compiled", request, recorded(5))


if __name__ == "__main__":
    main()
