"""A scripted model for the memory tool: the SDK's own tool runner, offline.

``scripted_client(calls)`` is a real ``Anthropic`` client whose transport answers each request
with the next scripted reply: one ``memory`` tool use per call, then a closing text (the
reader's client in docs/memory.md). ``run_script(tool, calls)`` drives
``client.beta.messages.tool_runner`` with it: the runner calls the tool as it would against the
API, and the tool results it sends back (what the model would read) are kept in order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from anthropic import Anthropic, AsyncAnthropic
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool

MODEL = "claude-scripted"


@dataclass
class ScriptedModel:
    """Replies with one ``memory`` tool use per scripted call, then ends the turn."""

    calls: Sequence[dict[str, Any]]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        turn = len(self.requests) - 1
        if turn < len(self.calls):
            block = {"type": "tool_use", "id": f"toolu_{turn:02d}", "name": "memory"}
            content = [{**block, "input": dict(self.calls[turn])}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Done."}], "end_turn"
        reply = {
            "id": f"msg_{turn:02d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return httpx2.Response(200, json=reply)

    def tool_results(self) -> list[dict[str, Any]]:
        """Each tool result the runner sent back, in order, once each (by tool use id)."""
        results: dict[str, dict[str, Any]] = {}
        for request in self.requests:
            for message in request["messages"]:
                if message["role"] != "user" or not isinstance(message["content"], list):
                    continue
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        results.setdefault(block["tool_use_id"], block)
        return list(results.values())


def scripted_client(calls: Sequence[dict[str, Any]]) -> tuple[Anthropic, ScriptedModel]:
    """A real ``Anthropic`` client whose requests the scripted model answers, offline."""
    model = ScriptedModel(calls)
    client = Anthropic(
        api_key="offline",
        base_url="http://model.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(model)),
        max_retries=0,
    )
    return client, model


async def run_script_async(
    tool: BetaAsyncAbstractMemoryTool, calls: Sequence[dict[str, Any]]
) -> ScriptedModel:
    """:func:`run_script` with ``AsyncAnthropic`` and the SDK's async tool runner."""
    model = ScriptedModel(calls)
    client = AsyncAnthropic(
        api_key="offline",
        base_url="http://model.invalid",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model)),
        max_retries=0,
    )
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": "Keep my travel notes."}],
        tools=[tool],
    )
    await runner.until_done()
    await client.close()
    return model


def run_script(tool: BetaAbstractMemoryTool, calls: Sequence[dict[str, Any]]) -> ScriptedModel:
    """Run ``calls`` through the SDK's tool runner and ``tool``; the model keeps what was sent."""
    client, model = scripted_client(calls)
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": "Keep my travel notes."}],
        tools=[tool],
    )
    runner.until_done()
    return model
