"""Shared by the framework tests: a scorer that can be made to collapse, the validator of an
OpenAI-style message list, and the stand-ins for the user's models and tools that the documented
snippets run with (docs/integrations.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from prunewarden.scoring import Perturbation, RecencyScorer, Scores


class CollapsibleScorer:
    """Recency scores with the canaries high; once ``collapsed``, every
    score bunches at 0.5 and the canaries sink just below it, as a scorer that lost its frame."""

    def __init__(self) -> None:
        self.collapsed = False
        self.recency = RecencyScorer(low=0.1, high=0.8)

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        """Scores by position, or collapsed."""
        scores = dict(self.recency.score(segments, task))
        for segment in segments:
            own = str(segment["id"])
            if self.collapsed:
                value = 0.45 if segment["metadata"]["canary"] else 0.5
                scores[own] = (value, value)
            elif segment["metadata"]["canary"]:
                scores[own] = (0.9, 0.9)
        return Scores(scores, dict.fromkeys(scores, Perturbation("none")))


def protocol_problems(roles: Sequence[tuple[str, Sequence[str], str | None]]) -> list[str]:
    """What an OpenAI-style provider would reject: each item is (role, tool call ids made,
    tool call id answered). Every call is answered right after it, and no tool message
    answers a call that is not pending."""
    problems = []
    pending: set[str] = set()
    for i, (role, calls, answers) in enumerate(roles):
        if role == "tool":
            if answers not in pending:
                problems.append(f"{i}: orphan tool message for {answers}")
            pending.discard(answers or "")
            continue
        if pending:
            problems.append(f"{i}: {role} before the calls {sorted(pending)} were answered")
            pending = set()
        pending = set(calls)
    if pending:
        problems.append(f"end: calls {sorted(pending)} unanswered")
    return problems


class ToolCallingChatModel(GenericFakeChatModel):
    """A stand-in for the user's chat model: scripted replies, tools bound as nothing."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingChatModel:
        """Tools change nothing: the replies are scripted."""
        del tools, kwargs
        return self


def chat_model(turns: int) -> ToolCallingChatModel:
    """Each turn a ``lookup`` tool call, then an answer of about 50 tokens."""

    def replies() -> Iterator[AIMessage]:
        for turn in range(turns):
            call = {"name": "lookup", "args": {"q": f"q{turn}"}, "id": f"call-{turn}"}
            yield AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
            yield AIMessage(content=f"answer {turn}: " + "word " * 40)

    return ToolCallingChatModel(messages=replies())


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}: " + "data " * 60


class AnsweringModel(Model):
    """A stand-in for an Agents SDK model: answers every input with the same short text."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """One assistant message."""
        del args, kwargs
        text = ResponseOutputText(text="Noted.", type="output_text", annotations=[])
        message = ResponseOutputMessage(
            id="msg-1", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Not scripted."""
        raise NotImplementedError


def roles(messages: Sequence[BaseMessage]) -> list[tuple[str, list[str], str | None]]:
    """Each message's type, the tool-call ids it makes and the call it answers."""
    return [
        (
            m.type,
            [str(c["id"]) for c in m.tool_calls] if isinstance(m, AIMessage) else [],
            m.tool_call_id if isinstance(m, ToolMessage) else None,
        )
        for m in messages
    ]
