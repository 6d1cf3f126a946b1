"""The budget the adapters promise, over random conversations: after every pass, what the model
reads (the history, the tombstone, the system prompt) is at or under the budget, unless what may
not be evicted is itself over it, and then the outcome says so. Run against the real
libraries: LangGraph's ``add_messages`` applies the hook's updates, the Agents SDK's SQLite
session holds the wrapped history. ``PRUNEWARDEN_FUZZ_SCALE`` multiplies the examples."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from _support.agents import CollapsibleScorer
from agents import SQLiteSession
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import add_messages
from prunewarden import Engine
from prunewarden.integrations import PassOutcome
from prunewarden.integrations.langgraph import PruningHook
from prunewarden.integrations.openai_agents import PrunedSession, item_text, text_tokens

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
ENGINE = Engine.default()
SESSION_IDS = itertools.count()


@dataclass(frozen=True)
class Turn:
    """One turn: the user's words, the tool calls made (each answer's length), the answer."""

    question: int
    pinned: bool
    calls: tuple[int, ...]
    answer: int


TURNS = st.lists(
    st.builds(
        Turn,
        question=st.integers(1, 400),
        pinned=st.booleans(),
        calls=st.lists(st.integers(1, 600), max_size=2).map(tuple),
        answer=st.integers(1, 400),
    ),
    min_size=1,
    max_size=12,
)
BUDGETS = st.integers(60, 1500)
PROMPTS = st.sampled_from(["", "Be terse.", "You plan trips. " * 12])


def words(count: int, word: str) -> str:
    return (f"{word} " * (count // (len(word) + 1) + 1))[:count]


def pinned(text: Any) -> bool:
    return "KEEP" in str(text)


class TestLangGraphBudget:
    @settings(max_examples=25 * SCALE)
    @given(turns=TURNS, budget=BUDGETS, prompt=PROMPTS)
    def test_every_model_input_is_within_the_budget_or_says_why(
        self, turns: list[Turn], budget: int, prompt: str
    ) -> None:
        """Before each model call of a random conversation, the hook's update applied by
        add_messages leaves a model input within the budget, or one holding only what may
        not be evicted, with over_budget set; the outcome counts what the model reads."""
        hook = PruningHook(
            ENGINE,
            CollapsibleScorer(),
            budget_tokens=budget,
            session_id=f"lg-{next(SESSION_IDS)}",
            system_prompt=prompt or None,
            pin=lambda m: pinned(m.content),
        )
        state: dict[str, Any] = {"messages": []}
        for n, turn in enumerate(turns):
            for new in turn_messages(n, turn):
                added: list[Any] = [new]
                state["messages"] = add_messages(state["messages"], added)
                update = hook(state)
                removals: list[Any] = update.get("messages", [])
                state["messages"] = add_messages(state["messages"], removals)
                state["prunewarden"] = update["prunewarden"]
                sent = [SystemMessage(prompt)] if prompt else []
                tokens = count_tokens_approximately([*sent, *state["messages"]])
                outcome = hook.last_outcome
                assert outcome is not None
                check(outcome, tokens, budget, evictable(state["messages"], state["prunewarden"]))


def turn_messages(n: int, turn: Turn) -> list[BaseMessage]:
    """The messages a turn adds, each before a model call would read the history."""
    keep = " KEEP" if turn.pinned else ""
    out: list[BaseMessage] = [HumanMessage(words(turn.question, f"q{n}") + keep, id=f"h{n}")]
    if turn.calls:
        calls = [{"name": "f", "args": {}, "id": f"c{n}-{i}"} for i in range(len(turn.calls))]
        out.append(AIMessage("", id=f"call{n}", tool_calls=calls))
        out += [
            ToolMessage(words(size, f"r{n}"), id=f"t{n}-{i}", tool_call_id=f"c{n}-{i}")
            for i, size in enumerate(turn.calls)
        ]
    out.append(AIMessage(words(turn.answer, f"a{n}"), id=f"a{n}"))
    return out


def evictable(messages: Sequence[BaseMessage], saved: Mapping[str, Any]) -> list[str]:
    """The ids a pass may still evict: neither the task, a pin, the newest message, a member
    of a tool-call group holding one of those, nor the hook's tombstone."""
    tombstone = saved["tombstone"]["id"]
    first_human = next((m.id for m in messages if m.type == "human"), None)
    kept = {first_human, messages[-1].id, tombstone}
    kept |= {m.id for m in messages if pinned(m.content)}
    groups: dict[str | None, str | None] = {}
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            groups.update((c["id"], m.id) for c in m.tool_calls)
    group_of = {m.id: groups.get(m.tool_call_id) for m in messages if isinstance(m, ToolMessage)}
    group_of |= {m.id: m.id for m in messages if isinstance(m, AIMessage) and m.tool_calls}
    held = {group_of[i] for i in kept if i in group_of}
    return [
        str(m.id)
        for m in messages
        if m.id not in kept and (m.id not in group_of or group_of[m.id] not in held)
    ]


def check(outcome: PassOutcome, tokens: int, budget: int, evictable: Sequence[object]) -> None:
    """The outcome's count is the model's; over the budget only with nothing left to evict,
    and then said."""
    assert not outcome.frozen
    assert outcome.tokens == tokens
    assert outcome.over_budget == (tokens > budget)
    if tokens > budget:
        assert evictable == []


class TestAgentsSdkBudget:
    @settings(max_examples=25 * SCALE)
    @given(turns=TURNS, budget=BUDGETS, prompt=PROMPTS)
    def test_every_history_read_is_within_the_budget_or_says_why(
        self, turns: list[Turn], budget: int, prompt: str
    ) -> None:
        """Each history the wrapper hands the runner, with the instructions, is within the
        budget, or holds only what may not be evicted, with over_budget set."""
        session = PrunedSession(
            SQLiteSession(f"sdk-{next(SESSION_IDS)}", ":memory:"),
            ENGINE,
            CollapsibleScorer(),
            budget_tokens=budget,
            system_prompt=prompt or None,
            pin=lambda item: pinned(item.get("content")),
        )
        asyncio.run(read_turns(session, turns, budget, prompt))


async def read_turns(session: PrunedSession, turns: list[Turn], budget: int, prompt: str) -> None:
    for n, turn in enumerate(turns):
        for item in turn_items(n, turn):
            await session.add_items([item])
            items = await session.get_items()
            sent = text_tokens(prompt) if prompt else 0
            tokens = sent + sum(text_tokens(item_text(i)) for i in items)
            assert session.last_outcome is not None
            check(session.last_outcome, tokens, budget, evictable_items(session, items))


def turn_items(n: int, turn: Turn) -> list[dict[str, Any]]:
    keep = " KEEP" if turn.pinned else ""
    out: list[dict[str, Any]] = [{"role": "user", "content": words(turn.question, f"q{n}") + keep}]
    for i, size in enumerate(turn.calls):
        call = f"c{n}-{i}"
        out.append({"type": "function_call", "call_id": call, "name": "f", "arguments": "{}"})
        out.append({"type": "function_call_output", "call_id": call, "output": words(size, "r")})
    out.append({"role": "assistant", "content": words(turn.answer, f"a{n}")})
    return out


def evictable_items(session: PrunedSession, items: Sequence[Mapping[str, Any]]) -> list[int]:
    """The positions a pass may still evict (as :func:`evictable` for messages)."""
    first_user = next((n for n, i in enumerate(items) if i.get("role") == "user"), None)
    kept = {first_user, len(items) - 1, session.tombstone_index(items)}
    kept |= {n for n, i in enumerate(items) if pinned(i.get("content"))}
    held = {items[n].get("call_id") for n in kept if n is not None and items[n].get("call_id")}
    return [
        n
        for n, i in enumerate(items)
        if n not in kept and (not i.get("call_id") or i["call_id"] not in held)
    ]
