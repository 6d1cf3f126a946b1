"""LangChain's own trimming, judged: ``trim_messages`` under an EditGuard, offline.

A recorded conversation (``conversations.py``) becomes a chat history with tool calls; a plain
last-tokens trim drops the user's task and starts the window at a tool result whose call it
dropped (a provider would refuse it). Under the default policy the guard writes the tombstone the
trim lacks for the messages it may drop, refuses the trim for the two it may not (the task, and
the call whose result it kept), prints why, and hands back the trimmed history with those two
put back and its tombstone. Run it with ``make demo-agents`` (needs ``prunewarden[langgraph]``).
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
from prunewarden import Engine
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


def main() -> None:
    messages = history(CONVERSATIONS["household-budget"])
    session = Engine.default().session("guarded-trim")
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
    if outcome.tombstone is not None:
        print(f"  tombstone: {outcome.tombstone.content}")


if __name__ == "__main__":
    main()
