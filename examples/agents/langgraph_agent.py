"""A LangChain 1.x agent whose history prunewarden trims before every model call, offline.

The chat model is scripted (no provider, no network): each turn it calls a tool, then answers.
Relevance comes from the MiniLM scorer, under the policy calibrated for it. Run it with
``make demo-agents`` (needs ``prunewarden[langgraph,embed]``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conversations import CONVERSATIONS
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from prunewarden import Engine
from prunewarden.integrations.langchain import PruningMiddleware
from prunewarden.integrations.langgraph import PruningHook
from prunewarden.scoring.embed import MiniLMScorer

POLICY = Path(__file__).resolve().parent / "minilm-calibrated.yaml"
PROMPT = "You plan trips. Never book anything without asking."
QUESTIONS = [
    "Plan a two-day ferry trip to the island for two adults.",
    "When does the morning ferry leave?",
    "How much is a double room at the harbour inn?",
    "Is the lighthouse walk long?",
    "Can we rent bikes near the pier?",
    "Where should we eat on Saturday evening?",
    "What is the weather forecast for Saturday?",
    "Which return ferry should we book on Sunday?",
    "How much do the tickets cost?",
    "What should we pack?",
]


class ToolCallingFake(GenericFakeChatModel):
    """The scripted model: tools change nothing."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        del tools, kwargs
        return self


NOTES = CONVERSATIONS["ferry-trip"][1:]


def replies() -> Iterator[AIMessage]:
    for turn, question in enumerate(QUESTIONS):
        call = {"name": "search", "args": {"q": question, "n": turn}, "id": f"call-{turn}"}
        yield AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        yield AIMessage(content=f"From the notes: {NOTES[turn % len(NOTES)]}")


@tool
def search(q: str, n: int) -> str:
    """Search the travel notes."""
    return f"{q} {NOTES[n % len(NOTES)]} {NOTES[(n + 1) % len(NOTES)]}"


def main() -> int:
    hook = PruningHook(
        Engine.from_file(str(POLICY)),
        MiniLMScorer(),
        budget_tokens=600,
        session_id="ferry-agent",
        system_prompt=PROMPT,  # the agent adds it to every call: counted in the budget
    )
    agent: Any = create_agent(
        ToolCallingFake(messages=replies()),
        [search],
        system_prompt=PROMPT,
        middleware=[PruningMiddleware(hook)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "demo"}}
    for question in QUESTIONS:
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)
        messages: list[BaseMessage] = state["messages"]
        outcome = hook.last_outcome
        status = "frozen " + ",".join(outcome.reasons) if outcome and outcome.frozen else "ok"
        tokens = f"{outcome.tokens:3d}/600 tokens" if outcome else ""
        sys.stdout.write(
            f"{len(messages):3d} messages kept  {tokens}  pass: {status}  {question}\n"
        )
    record = state["prunewarden"]["tombstone"]  # the hook knows its tombstone by this record
    tombstone = next((m for m in messages if m.id == record["id"]), None)
    if tombstone is not None:
        sys.stdout.write(f"tombstone: {tombstone.content}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
