"""The LangGraph and LangChain adapters against the real libraries, offline: an agent on a fake
chat model, 40 turns with a tool call each, its history pruned by a session's pass before every
model call (LangGraph's ``pre_model_hook``, LangChain 1.x's middleware)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from _support.agents import CollapsibleScorer, protocol_problems
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10
from prunewarden import Engine
from prunewarden.integrations.langchain import PruningMiddleware
from prunewarden.integrations.langgraph import (
    TOMBSTONE_NAME,
    PrunedAgentState,
    PruningHook,
    message_segments,
)
from prunewarden.scoring import RecencyScorer

SYSTEM = "You are terse. Never delete files without asking."
PINNED = "Standing instruction: answer in metric units."
TURNS = 40


class RecordingModel(GenericFakeChatModel):
    """The fake chat model, recording every message list it is called with."""

    calls: list[list[BaseMessage]]

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingModel:
        """Tools change nothing: the replies are scripted."""
        del tools, kwargs
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.calls.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def replies(turns: int) -> Iterator[AIMessage]:
    for turn in range(turns):
        call = {"name": "lookup", "args": {"q": f"q{turn}"}, "id": f"call-{turn}"}
        yield AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        yield AIMessage(content=f"answer {turn}: " + "word " * 40)


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}: " + "data " * 60


def roles(messages: Sequence[BaseMessage]) -> list[tuple[str, list[str], str | None]]:
    return [
        (
            m.type,
            [str(c["id"]) for c in m.tool_calls] if isinstance(m, AIMessage) else [],
            m.tool_call_id if isinstance(m, ToolMessage) else None,
        )
        for m in messages
    ]


class Agent:
    """An agent with the hook (LangGraph's prebuilt ReAct agent, or LangChain's with the
    middleware), a checkpointer, and one thread."""

    def __init__(self, hook: PruningHook, turns: int = TURNS, *, front: str = "langchain") -> None:
        self.hook = hook
        self.model = RecordingModel(messages=replies(turns), calls=[])
        if front == "langchain":
            self.graph: Any = create_agent(
                self.model,
                [lookup],
                system_prompt=SYSTEM,
                middleware=[PruningMiddleware(hook)],
                checkpointer=InMemorySaver(),
            )
        else:
            with warnings.catch_warnings():  # moved to langchain.agents; still shipped
                warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
                self.graph = create_react_agent(
                    self.model,
                    [lookup],
                    prompt=SystemMessage(SYSTEM),
                    pre_model_hook=hook,
                    state_schema=PrunedAgentState,
                    checkpointer=InMemorySaver(),
                )
        self.config: Any = {"configurable": {"thread_id": "thread-1"}}

    def turn(self, text: str) -> list[BaseMessage]:
        out = self.graph.invoke({"messages": [HumanMessage(text)]}, self.config)
        return list(out["messages"])

    def state(self) -> dict[str, Any]:
        return dict(self.graph.get_state(self.config).values)


def pinned_instruction(message: BaseMessage) -> bool:
    return message.type == "human" and PINNED in str(message.content)


def make_hook(scorer: Any = None, budget: int = 1500) -> PruningHook:
    return PruningHook(
        Engine.default(),
        scorer or RecencyScorer(),
        budget_tokens=budget,
        session_id="agent-1",
        pin=pinned_instruction,
    )


@pytest.fixture(scope="module", params=["langgraph", "langchain"])
def forty_turns(request: pytest.FixtureRequest) -> Agent:
    agent = Agent(make_hook(), front=request.param)
    agent.turn(PINNED + " " + "please " * 20)
    for turn in range(1, TURNS):
        agent.turn(f"question {turn}: " + "please " * 20)
    return agent


class TestFortyTurns:
    def test_every_model_call_sees_a_valid_conversation(self, forty_turns: Agent) -> None:
        """Every tool call is answered right after it and no tool message is orphaned, at
        every one of the 80 model calls."""
        calls = forty_turns.model.calls
        assert len(calls) == 2 * TURNS
        assert [protocol_problems(roles(call)) for call in calls] == [[]] * len(calls)

    def test_the_history_is_trimmed_to_the_budget(self, forty_turns: Agent) -> None:
        """Without pruning the history would hold 4 messages a turn; it stays bounded."""
        last = forty_turns.model.calls[-1]
        assert len(last) < 40
        assert forty_turns.hook.last_outcome is not None
        assert not forty_turns.hook.last_outcome.frozen

    def test_system_prompt_and_pinned_instruction_survive(self, forty_turns: Agent) -> None:
        """The system prompt and the pinned human instruction are in every model call."""
        for call in forty_turns.model.calls:
            assert call[0].content == SYSTEM
            assert any(PINNED in str(m.content) for m in call)

    def test_one_tombstone_names_what_was_removed(self, forty_turns: Agent) -> None:
        """The history holds one tombstone counting every removed message."""
        messages = forty_turns.state()["messages"]
        tombstones = [m for m in messages if m.name == TOMBSTONE_NAME]
        assert len(tombstones) == 1
        removed = tombstones[0].response_metadata["prunewarden_removed"]
        assert removed > 2 * TURNS
        assert f"{removed} earlier message(s) removed" in tombstones[0].content

    def test_the_session_state_is_checkpointed(self, forty_turns: Agent) -> None:
        """The session's state rides in the graph's state, saved by the checkpointer."""
        saved = forty_turns.state()["prunewarden"]
        assert saved["session_id"] == "agent-1"
        assert saved["halt"] is None


class TestCollapse:
    def test_a_collapse_stops_trimming_and_holds(self) -> None:
        """Once the scorer collapses, the guard halts: nothing more is removed, the history
        grows, the hook says why, and the halt is in the checkpointed state."""
        scorer = CollapsibleScorer()
        agent = Agent(make_hook(scorer), turns=20)
        agent.turn(PINNED)
        for turn in range(1, 10):
            agent.turn(f"question {turn}: " + "please " * 20)
        before = len(agent.state()["messages"])
        scorer.collapsed = True
        for turn in range(10, 20):
            agent.turn(f"question {turn}: " + "please " * 20)
        outcome = agent.hook.last_outcome
        assert outcome is not None
        assert outcome.frozen
        assert outcome.evict == ()
        assert set(outcome.reasons) <= {"collapse_detected", "pruning_halted"}
        assert len(agent.state()["messages"]) >= before + 4 * 9
        assert agent.state()["prunewarden"]["halt"] is not None
        assert [protocol_problems(roles(call)) for call in agent.model.calls[-4:]] == [[]] * 4

    def test_a_restarted_hook_keeps_the_halt(self) -> None:
        """A new hook reading the checkpointed state is still halted and removes nothing;
        one given the messages without the state would have trimmed."""
        scorer = CollapsibleScorer()
        scorer.collapsed = True
        agent = Agent(make_hook(scorer, budget=10), turns=6)
        for turn in range(3):
            agent.turn(f"question {turn}")
        saved = agent.state()
        update = make_hook(scorer, budget=10)(saved)
        assert "messages" not in update
        assert update["prunewarden"]["halt"] is not None
        forgetful = make_hook(scorer, budget=10)({"messages": saved["messages"]})
        assert forgetful["messages"]


class TestSegments:
    def test_tool_pairs_are_grouped_and_pins_marked(self) -> None:
        """A call and its answer share a group; the system prompt, the task (first human
        message) and the last are pinned."""
        messages = [
            SystemMessage("s", id="s"),
            HumanMessage("h", id="h"),
            AIMessage("", id="a", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
            ToolMessage("r", id="r", tool_call_id="c1"),
            AIMessage("done", id="d"),
        ]
        segments = message_segments(
            messages, classify=lambda m: "negation" if m.id == "h" else None
        )
        assert [(s["id"], s["kind"], s.get("group"), s["non_recoverable"]) for s in segments] == [
            ("s", "system", None, True),
            ("h", "negation", None, True),
            ("a", "assistant", "tool-calls:a", False),
            ("r", "tool", "tool-calls:a", False),
            ("d", "assistant", None, True),
        ]
