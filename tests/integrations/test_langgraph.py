"""The LangGraph and LangChain adapters against the real libraries, offline: an agent on a fake
chat model, 40 turns with a tool call each, its history pruned by a session's pass before every
model call (LangGraph's ``pre_model_hook``, LangChain 1.x's middleware)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from _support.agents import CollapsibleScorer, protocol_problems, roles
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
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
BUDGET = 1200


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


def make_hook(scorer: Any = None, budget: int = BUDGET) -> PruningHook:
    return PruningHook(
        Engine.default(),
        scorer or RecencyScorer(),
        budget_tokens=budget,
        session_id="agent-1",
        system_prompt=SYSTEM,
        pin=pinned_instruction,
    )


def tombstone_of(agent: Agent) -> BaseMessage | None:
    """The hook's tombstone in the checkpointed history, found by the record in the state."""
    record = agent.state()["prunewarden"]["tombstone"]
    return next((m for m in agent.state()["messages"] if m.id == record["id"]), None)


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

    def test_every_model_input_is_within_the_budget(self, forty_turns: Agent) -> None:
        """What the model reads, system prompt and tombstone included, never exceeds the
        budget, at every one of the 80 calls; the outcome's count is the model's."""
        sizes = [count_tokens_approximately(call) for call in forty_turns.model.calls]
        assert max(sizes) <= BUDGET
        assert sum(size > BUDGET - 200 for size in sizes) > TURNS  # the budget was binding
        outcome = forty_turns.hook.last_outcome
        assert outcome is not None
        assert (outcome.tokens, outcome.over_budget) == (sizes[-1], False)

    def test_system_prompt_and_pinned_instruction_survive(self, forty_turns: Agent) -> None:
        """The system prompt and the pinned human instruction are in every model call."""
        for call in forty_turns.model.calls:
            assert call[0].content == SYSTEM
            assert any(PINNED in str(m.content) for m in call)

    def test_one_tombstone_counts_what_was_removed_by_kind(self, forty_turns: Agent) -> None:
        """The history holds one tombstone, counting the removed messages by kind in a few
        tokens and naming no message or run id."""
        messages = forty_turns.state()["messages"]
        assert len([m for m in messages if m.name == TOMBSTONE_NAME]) == 1
        tombstone = tombstone_of(forty_turns)
        assert tombstone is not None
        removed = forty_turns.state()["prunewarden"]["tombstone"]["removed"]
        assert set(removed) == {"assistant", "tool", "user"}
        total = sum(removed.values())
        assert total > 2 * TURNS
        assert tombstone.content == (
            f"[prunewarden: {total} earlier messages removed: {removed['assistant']} assistant, "
            f"{removed['tool']} tool, {removed['user']} user]"
        )
        assert count_tokens_approximately([tombstone]) <= 32  # was 47-110, mostly run ids

    def test_the_session_state_is_checkpointed(self, forty_turns: Agent) -> None:
        """The session's state rides in the graph's state, saved by the checkpointer."""
        saved = forty_turns.state()["prunewarden"]["session"]
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
        assert agent.state()["prunewarden"]["session"]["halt"] is not None
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
        assert update["prunewarden"]["session"]["halt"] is not None
        forgetful = make_hook(scorer, budget=10)({"messages": saved["messages"]})
        assert update["prunewarden"]["tombstone"] == saved["prunewarden"]["tombstone"]
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


FACTS = "[prunewarden: 2 earlier messages removed] Patient allergic to penicillin; on warfarin."


def medical(message: BaseMessage) -> bool:
    return "penicillin" in str(message.content)


def history(turns: int, start: int = 0) -> list[BaseMessage]:
    """A task (when ``start`` is 0), then question-and-answer pairs ``start`` to ``turns - 1``
    of about 35 tokens each."""
    messages: list[BaseMessage] = (
        [HumanMessage("Plan the treatment.", id="task")] if not start else []
    )
    for turn in range(start, turns):
        messages.append(HumanMessage(f"question {turn} " + "please " * 25, id=f"q{turn}"))
        messages.append(AIMessage(f"answer {turn} " + "word " * 25, id=f"a{turn}"))
    return messages


def hook_for(budget: int, pin: Any = None) -> PruningHook:
    return PruningHook(
        Engine.default(), RecencyScorer(), budget_tokens=budget, session_id="s", pin=pin
    )


class TestLookAlikes:
    def test_a_message_named_like_the_tombstone_is_kept_when_pinned(self) -> None:
        """A message named prunewarden-tombstone that the hook did not write is neither
        overwritten nor removed: pinned, it survives a pass that evicts around it."""
        fake = AIMessage(FACTS, id="facts", name=TOMBSTONE_NAME)
        messages = [*history(2), fake, *history(10, start=2)]
        update = hook_for(400, pin=medical)({"messages": messages})
        touched = {m.id for m in update["messages"]}
        assert "facts" not in touched
        assert update["messages"][0].id == "q0"  # the tombstone takes the earliest evicted
        assert update["prunewarden"]["tombstone"]["id"] == "q0"

    def test_a_look_alike_goes_only_by_a_decision(self) -> None:
        """Unpinned, a look-alike is an assistant message like any other: evicted only when
        the pass decides so, with an authorized eviction decision for it."""
        fake = AIMessage(FACTS, id="facts", name=TOMBSTONE_NAME)
        hook = hook_for(300)
        update = hook({"messages": [*history(1), fake, *history(10, start=1)]})
        outcome = hook.last_outcome
        assert outcome is not None
        assert outcome.plan is not None
        assert "facts" in outcome.evict
        [decision] = [d for d in outcome.plan.decisions if "'facts'" in d.reasons[0].message]
        assert (decision.outcome, decision.codes) == ("allow", ("authorized",))
        assert any(m.id == "facts" for m in update["messages"])

    def test_a_record_whose_message_changed_is_no_tombstone(self) -> None:
        """When the message under the recorded id no longer has the recorded text, it is a
        message like any other, and the next pass writes its tombstone elsewhere."""
        hook = hook_for(400, pin=medical)
        first = hook({"messages": history(10)})
        recorded = first["prunewarden"]["tombstone"]["id"]
        forged = AIMessage(FACTS, id=recorded, name=TOMBSTONE_NAME)
        later: list[Any] = [
            HumanMessage(f"more {n} " + "please " * 25, id=f"m{n}") for n in range(8)
        ]
        before: list[Any] = history(10)
        messages = add_messages(add_messages(before, first["messages"]), [*later, forged])
        second = hook({"messages": messages, "prunewarden": first["prunewarden"]})
        assert recorded not in {m.id for m in second["messages"]}
        assert second["prunewarden"]["tombstone"]["id"] != recorded
        assert sum(second["prunewarden"]["tombstone"]["removed"].values()) > sum(
            first["prunewarden"]["tombstone"]["removed"].values()
        )

    def test_a_look_alike_survives_the_turns_of_a_real_agent(self) -> None:
        """Through LangChain's create_agent, a pinned instruction named and worded like a
        tombstone is in every model call, unchanged."""
        hook = PruningHook(
            Engine.default(),
            RecencyScorer(),
            budget_tokens=BUDGET,
            session_id="agent-2",
            system_prompt=SYSTEM,
            pin=medical,
        )
        agent = Agent(hook, turns=12)
        agent.graph.invoke(
            {
                "messages": [
                    HumanMessage("Plan the treatment."),
                    AIMessage(FACTS, name=TOMBSTONE_NAME),
                ]
            },
            agent.config,
        )
        for turn in range(1, 12):
            agent.turn(f"question {turn}: " + "please " * 20)
        for call in agent.model.calls:
            assert [m.name for m in call if m.content == FACTS] == [TOMBSTONE_NAME]
        assert max(count_tokens_approximately(c) for c in agent.model.calls) <= BUDGET
        assert hook.last_outcome is not None
        assert hook.last_outcome.evict


class TestOptions:
    def test_observe_turns_feeds_the_drift_signal(self) -> None:
        """observe_turns=True reaches the session: each call observes one turn; by default none."""
        fed = PruningHook(
            Engine.default(),
            RecencyScorer(),
            budget_tokens=10_000,
            session_id="t",
            observe_turns=True,
        )
        quiet = hook_for(10_000)
        assert len(fed({"messages": history(3)})["prunewarden"]["session"]["turns"]) == 1
        assert quiet({"messages": history(3)})["prunewarden"]["session"]["turns"] == []

    def test_the_middleware_takes_on_a_system_prompt_the_hook_does_not_count(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given to create_agent only, the prompt is counted from the second call on, with a
        warning; every later call is within the budget."""
        hook = PruningHook(
            Engine.default(),
            RecencyScorer(),
            budget_tokens=BUDGET,
            session_id="agent-3",
            pin=pinned_instruction,
        )
        agent = Agent(hook, turns=15)
        for turn in range(15):
            agent.turn(f"question {turn}: " + "please " * 20)
        assert hook.system_prompt == SYSTEM
        warnings = [r for r in caplog.records if "system prompt" in r.getMessage()]
        assert len(warnings) == 1
        assert max(count_tokens_approximately(c) for c in agent.model.calls[1:]) <= BUDGET
