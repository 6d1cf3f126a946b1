"""LangChain's own trimming, judged: ``trim_messages`` under an EditGuard, offline.

A recorded conversation (``conversations.py``) becomes a chat history with tool calls; a plain
last-tokens trim drops the user's task and starts the window at a tool result whose call it
dropped (a provider would refuse it). Under a policy that accepts untombstoned trims, the guard
refuses this one for what it dropped, prints why, and hands back the history with the task and
the tool call put back. Run it with ``make demo-agents`` (needs ``prunewarden[langgraph]``).
"""

from __future__ import annotations

from conversations import CONVERSATIONS
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately
from prunewarden import Engine, parse_policy
from prunewarden.integrations.edits import EditGuard


def history(lines: list[str]) -> list[BaseMessage]:
    """The system prompt, the task, then the turns; every fourth turn a tool call and result."""
    messages: list[BaseMessage] = [
        SystemMessage("You are a careful assistant.", id="m00"),
        HumanMessage(lines[0], id="m01"),
    ]
    for i, text in enumerate(lines[1:]):
        number = len(messages)
        if i % 4 == 1:
            call = {"name": "lookup", "args": {"query": text[:24]}, "id": f"call-{number}"}
            messages.append(AIMessage("", id=f"m{number:02d}", tool_calls=[call]))
            messages.append(ToolMessage(text, tool_call_id=call["id"], id=f"m{number + 1:02d}"))
        else:
            kind = AIMessage if i % 2 == 0 else HumanMessage
            messages.append(kind(text, id=f"m{number:02d}"))
    return messages


# Trimming writes no tombstones: this harness accepts that, and keeps what is pinned.
POLICY = """
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: guarded-trim, version: 1.0.0}
spec:
  transition: {require_tombstones: false}
"""


def main() -> None:
    messages = history(CONVERSATIONS["household-budget"])
    session = Engine(parse_policy(POLICY, "guarded-trim")).session("guarded-trim")
    guard = EditGuard(session, applied_by="langchain_core.messages.trim_messages")
    trimmed = trim_messages(
        messages,
        max_tokens=180,
        strategy="last",
        token_counter=count_tokens_approximately,
        include_system=True,
    )
    print(f"trim_messages kept {[m.id for m in trimmed]}")
    outcome = guard.judge(messages, trimmed)
    decision = outcome.decision
    print(f"transition: {decision.outcome} ({', '.join(decision.codes)})")
    for reason in decision.reasons:
        print(f"  {reason.code}: {reason.message}")
    print(f"  restore: {', '.join(decision.restore)}")
    print(f"repaired: {[m.id for m in outcome.messages]}")


if __name__ == "__main__":
    main()
