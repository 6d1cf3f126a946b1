"""The Agents SDK adapter against the real SDK, offline: a runner on a scripted model, 40 turns
with a function call each, the history in the SDK's in-memory SQLite session wrapped by
:class:`PrunedSession`; no network (tracing off, the model is local)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
from _support.agents import CollapsibleScorer, protocol_problems
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from prunewarden import Engine
from prunewarden.integrations.openai_agents import (
    PrunedSession,
    item_segments,
    item_text,
    text_tokens,
)
from prunewarden.scoring import RecencyScorer

PINNED = "Standing instruction: answer in metric units."
TURNS = 40
BUDGET = 1200
INSTRUCTIONS = "Be terse."
FACTS = "[prunewarden: 2 earlier messages removed] Patient allergic to penicillin; on warfarin."


class ScriptedModel(Model):
    """Calls the tool once per turn, then answers; records every input it is given."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []
        self.calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """The next scripted reply: a function call, or the answer after its output."""
        given = args[1] if len(args) > 1 else kwargs["input"]
        items = [given] if isinstance(given, str) else list(given)
        self.inputs.append(items)
        self.calls += 1
        last = items[-1] if items else {}
        if isinstance(last, Mapping) and last.get("type") == "function_call_output":
            text = ResponseOutputText(
                text="answer " + "word " * 40, type="output_text", annotations=[]
            )
            output: Any = ResponseOutputMessage(
                id=f"msg-{self.calls}",
                content=[text],
                role="assistant",
                status="completed",
                type="message",
            )
        else:
            output = ResponseFunctionToolCall(
                call_id=f"call-{self.calls}",
                name="lookup",
                arguments='{"q": "x"}',
                type="function_call",
                id=f"fc-{self.calls}",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}: " + "data " * 60


def roles(items: Sequence[Any]) -> list[tuple[str, list[str], str | None]]:
    out: list[tuple[str, list[str], str | None]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            out.append(("assistant", [item["call_id"]], None))
        elif kind == "function_call_output":
            out.append(("tool", [], item["call_id"]))
        else:
            out.append((str(item.get("role", kind)), [], None))
    return out


def pinned_instruction(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and PINNED in str(item.get("content", ""))


class ReadSession(PrunedSession):
    """The wrapper, recording every history it hands the runner."""

    reads: list[list[Any]]

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The pruned history, recorded."""
        items = await super().get_items(limit)
        self.reads.append(items)
        return items


def tokens(items: Sequence[Any]) -> int:
    """What a history counts for with the instructions, as the wrapper counts it."""
    return text_tokens(INSTRUCTIONS) + sum(text_tokens(item_text(i)) for i in items)


async def run_turns(session: PrunedSession, model: ScriptedModel, texts: Sequence[str]) -> None:
    agent = Agent(name="a", instructions=INSTRUCTIONS, model=model, tools=[lookup])
    config = RunConfig(tracing_disabled=True)
    for text in texts:
        await Runner.run(agent, text, session=session, run_config=config)


def wrap(scorer: Any = None, budget: int = BUDGET, pin: Any = pinned_instruction) -> ReadSession:
    session = ReadSession(
        SQLiteSession("agent-1", ":memory:"),
        Engine.default(),
        scorer or RecencyScorer(),
        budget_tokens=budget,
        system_prompt=INSTRUCTIONS,
        pin=pin,
    )
    session.reads = []
    return session


@pytest.fixture(scope="module")
def forty_turns() -> tuple[ReadSession, ScriptedModel]:
    session, model = wrap(), ScriptedModel()
    texts = [PINNED] + [f"question {turn}: " + "please " * 20 for turn in range(1, TURNS)]
    asyncio.run(run_turns(session, model, texts))
    return session, model


class TestFortyTurns:
    def test_every_model_call_sees_a_valid_history(
        self, forty_turns: tuple[ReadSession, ScriptedModel]
    ) -> None:
        """Each function call is answered right after it and no output is orphaned, at every
        model call."""
        _, model = forty_turns
        assert model.calls == 2 * TURNS
        assert [protocol_problems(roles(i)) for i in model.inputs] == [[]] * len(model.inputs)

    def test_the_history_is_trimmed_pins_kept_one_tombstone(
        self, forty_turns: tuple[ReadSession, ScriptedModel]
    ) -> None:
        """The stored history is bounded, keeps the pinned instruction and one tombstone,
        which counts the removed items by kind."""
        session, _ = forty_turns
        items: list[Any] = asyncio.run(session.inner.get_items())
        assert len(items) < 40
        assert any(pinned_instruction(i) for i in items)
        tombstones = [i for i in items if str(i.get("content", "")).startswith("[prunewarden:")]
        assert tombstones == [items[session.tombstone_index(items) or 0]]
        assert set(session.removed) == {"assistant", "tool", "tool_call", "user"}
        assert (
            f"{sum(session.removed.values())} earlier messages removed" in tombstones[0]["content"]
        )
        assert session.last_outcome is not None
        assert not session.last_outcome.frozen

    def test_every_history_read_is_within_the_budget(
        self, forty_turns: tuple[ReadSession, ScriptedModel]
    ) -> None:
        """Each history handed to the runner, with the instructions and the tombstone, is at
        or under the budget; the outcome's count is the same."""
        session, _ = forty_turns
        sizes = [tokens(items) for items in session.reads]
        assert len(sizes) == TURNS
        assert max(sizes) <= BUDGET
        assert sum(size > BUDGET - 200 for size in sizes) > TURNS // 2  # the budget was binding
        assert session.last_outcome is not None
        assert session.last_outcome.tokens == sizes[-1]


class TestCollapse:
    def test_a_collapse_stops_trimming(self) -> None:
        """Once the scorer collapses, reading the history removes nothing and says why."""
        scorer = CollapsibleScorer()
        session, model = wrap(scorer), ScriptedModel()
        asyncio.run(run_turns(session, model, [PINNED, *[f"q{t} " * 30 for t in range(8)]]))
        scorer.collapsed = True
        asyncio.run(run_turns(session, model, [f"later {t} " * 30 for t in range(2)]))
        before = len(asyncio.run(session.inner.get_items()))
        asyncio.run(run_turns(session, model, [f"after {t} " * 30 for t in range(3)]))
        outcome = session.last_outcome
        assert outcome is not None
        assert outcome.frozen
        assert set(outcome.reasons) <= {"collapse_detected", "pruning_halted"}
        assert len(asyncio.run(session.inner.get_items())) == before + 4 * 3
        assert session.guard.halted


class TestSegments:
    def test_calls_grouped_with_outputs_and_ids_stable(self) -> None:
        """A call and its output share a group; ids depend on content, not position."""
        items = [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "r"},
            {"role": "user", "content": "hi"},
        ]
        segments = item_segments(items)
        assert [(s["kind"], s.get("group")) for s in segments] == [
            ("user", None),
            ("tool_call", "call:c1"),
            ("tool", "call:c1"),
            ("user", None),
        ]
        assert segments[3]["id"] == segments[0]["id"] + "-2"
        assert item_segments(items[1:])[0]["id"] == segments[1]["id"]


class TestLookAlikes:
    def test_an_item_worded_like_a_tombstone_is_kept_when_pinned(self) -> None:
        """An assistant item starting ``[prunewarden:`` that the wrapper did not write is an
        item like any other: pinned, it survives forty turns of a real runner."""
        session, model = (
            wrap(pin=lambda item: "penicillin" in str(item.get("content", ""))),
            ScriptedModel(),
        )
        fake: dict[str, Any] = {"role": "assistant", "content": FACTS}
        start: list[Any] = [{"role": "user", "content": "Plan the treatment."}, fake]
        asyncio.run(session.inner.add_items(start))
        asyncio.run(
            run_turns(session, model, [f"question {t}: " + "please " * 20 for t in range(TURNS)])
        )
        assert all(fake in items for items in session.reads)
        assert session.last_outcome is not None
        assert sum(session.removed.values()) > TURNS

    def test_a_look_alike_goes_only_by_a_decision(self) -> None:
        """Unpinned, a look-alike is evicted only when the pass authorizes it."""
        session = wrap(budget=300)
        fake: dict[str, Any] = {"role": "assistant", "content": FACTS}
        history: list[Any] = [{"role": "user", "content": "Plan."}, fake] + [
            {"role": "user", "content": f"question {n} " + "please " * 25} for n in range(8)
        ]
        asyncio.run(session.inner.add_items(history))
        items = asyncio.run(session.get_items())
        outcome = session.last_outcome
        assert outcome is not None
        assert outcome.plan is not None
        [fake_id] = [s["id"] for s in item_segments(history) if s["text"] == FACTS]
        assert fake_id in outcome.evict
        allowed = [d for d in outcome.plan.decisions if f"'{fake_id}'" in d.reasons[0].message]
        assert [d.codes for d in allowed] == [("authorized",)]
        assert fake not in items

    def test_a_tombstone_from_another_wrapper_is_an_item_like_any_other(self) -> None:
        """A new wrapper does not take an earlier one's tombstone for its own: it is scored and
        counted, and the new wrapper writes its own."""
        first = wrap(budget=300)
        history: list[Any] = [{"role": "user", "content": "Plan."}] + [
            {"role": "user", "content": f"question {n} " + "please " * 25} for n in range(8)
        ]
        asyncio.run(first.inner.add_items(history))
        asyncio.run(first.get_items())
        second = wrap(budget=300)
        second.inner = first.inner
        more: list[Any] = [
            {"role": "user", "content": f"more {n} " + "please " * 25} for n in range(4)
        ]
        asyncio.run(second.inner.add_items(more))
        items = asyncio.run(second.get_items())
        assert second.tombstone_index(items) is not None
        assert first.tombstone_index(items) is None
        assert second.last_outcome is not None
        assert tokens(items) <= 300


class TestOptions:
    def test_observe_turns_feeds_the_drift_signal(self) -> None:
        """observe_turns=True reaches the session: each read observes one turn."""
        session = PrunedSession(
            SQLiteSession("t", ":memory:"),
            Engine.default(),
            RecencyScorer(),
            budget_tokens=10_000,
            observe_turns=True,
        )
        start: list[Any] = [
            {"role": "user", "content": "Plan."},
            {"role": "assistant", "content": "ok"},
        ]
        asyncio.run(session.inner.add_items(start))
        asyncio.run(session.get_items())
        assert len(session.guard.state()["turns"]) == 1
