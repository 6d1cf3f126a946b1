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
    is_tombstone,
    item_segments,
)
from prunewarden.scoring import RecencyScorer

PINNED = "Standing instruction: answer in metric units."
TURNS = 40


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


async def run_turns(session: PrunedSession, model: ScriptedModel, texts: Sequence[str]) -> None:
    agent = Agent(name="a", instructions="Be terse.", model=model, tools=[lookup])
    config = RunConfig(tracing_disabled=True)
    for text in texts:
        await Runner.run(agent, text, session=session, run_config=config)


def wrap(scorer: Any = None, budget: int = 1200) -> PrunedSession:
    return PrunedSession(
        SQLiteSession("agent-1", ":memory:"),
        Engine.default(),
        scorer or RecencyScorer(),
        budget_tokens=budget,
        pin=pinned_instruction,
    )


@pytest.fixture(scope="module")
def forty_turns() -> tuple[PrunedSession, ScriptedModel]:
    session, model = wrap(), ScriptedModel()
    texts = [PINNED] + [f"question {turn}: " + "please " * 20 for turn in range(1, TURNS)]
    asyncio.run(run_turns(session, model, texts))
    return session, model


class TestFortyTurns:
    def test_every_model_call_sees_a_valid_history(
        self, forty_turns: tuple[PrunedSession, ScriptedModel]
    ) -> None:
        """Each function call is answered right after it and no output is orphaned, at every
        model call."""
        _, model = forty_turns
        assert model.calls == 2 * TURNS
        assert [protocol_problems(roles(i)) for i in model.inputs] == [[]] * len(model.inputs)

    def test_the_history_is_trimmed_pins_kept_one_tombstone(
        self, forty_turns: tuple[PrunedSession, ScriptedModel]
    ) -> None:
        """The stored history is bounded, keeps the pinned instruction and one tombstone."""
        session, _ = forty_turns
        items = asyncio.run(session.inner.get_items())
        assert len(items) < 40
        assert any(pinned_instruction(i) for i in items)
        tombstones = [i for i in items if is_tombstone(i)]
        assert len(tombstones) == 1
        assert session.last_outcome is not None
        assert not session.last_outcome.frozen


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
