"""An OpenAI Agents SDK runner whose session history prunewarden trims when it is read, offline.

The model is scripted (no provider, no network, tracing off): each turn it calls a tool, then
answers. The history lives in the SDK's in-memory SQLite session, wrapped by
:class:`~prunewarden.integrations.openai_agents.PrunedSession`; relevance comes from the MiniLM
scorer under the policy calibrated for it. Run it with ``make demo-agents`` (needs
``prunewarden[openai-agents,embed]``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from conversations import CONVERSATIONS
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from prunewarden import Engine
from prunewarden.integrations.openai_agents import PrunedSession
from prunewarden.scoring.embed import MiniLMScorer

POLICY = Path(__file__).resolve().parent / "minilm-calibrated.yaml"
NOTES = CONVERSATIONS["flaky-test"]
INSTRUCTIONS = "Be terse."


class ScriptedModel(Model):
    """Calls the tool once per turn, then answers with what it returned."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """A function call, or the answer after its output."""
        given = args[1] if len(args) > 1 else kwargs["input"]
        last = given[-1] if isinstance(given, list) and given else {}
        self.calls += 1
        output: Any
        if isinstance(last, Mapping) and last.get("type") == "function_call_output":
            text = ResponseOutputText(
                text=f"Noted: {last['output']}", type="output_text", annotations=[]
            )
            output = ResponseOutputMessage(
                id=f"msg-{self.calls}",
                content=[text],
                role="assistant",
                status="completed",
                type="message",
            )
        else:
            output = ResponseFunctionToolCall(
                call_id=f"call-{self.calls}",
                name="read_notes",
                arguments=f'{{"n": {self.calls // 2}}}',
                type="function_call",
                id=f"fc-{self.calls}",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def read_notes(n: int) -> str:
    """Read the investigation notes."""
    return NOTES[1 + n % (len(NOTES) - 1)]


async def main() -> int:
    session = PrunedSession(
        SQLiteSession("flaky-test", ":memory:"),
        Engine.from_file(str(POLICY)),
        MiniLMScorer(),
        budget_tokens=400,
        system_prompt=INSTRUCTIONS,  # sent with every call: counted in the budget
    )
    agent = Agent(
        name="debugger", instructions=INSTRUCTIONS, model=ScriptedModel(), tools=[read_notes]
    )
    config = RunConfig(tracing_disabled=True)
    for turn in range(10):
        question = NOTES[0] if turn == 0 else f"What did we learn next? ({turn})"
        await Runner.run(agent, question, session=session, run_config=config)
        items: list[Any] = await session.inner.get_items()
        outcome = session.last_outcome
        status = "frozen " + ",".join(outcome.reasons) if outcome and outcome.frozen else "ok"
        tokens = f"{outcome.tokens:3d}/400 tokens read" if outcome else ""
        sys.stdout.write(f"{len(items):3d} items kept  {tokens}  pass: {status}\n")
    at = session.tombstone_index(items)  # the wrapper knows its tombstone, by what it wrote
    if at is not None:
        sys.stdout.write(f"tombstone: {items[at]['content']}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
