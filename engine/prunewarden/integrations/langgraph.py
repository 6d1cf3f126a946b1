"""LangGraph: a ``pre_model_hook`` that prunes the agent's messages through a session's pass.

Needs ``prunewarden[langgraph]``. Messages map to window segments: the kind from the message
type (``system``, ``user``, ``assistant``, ``tool``) unless the caller's classifier names one;
the system prompt, the task (the first human message), the messages the caller pins, earlier
tombstones and the newest message are pinned (``non_recoverable``), and the task and the
caller's pins are the collapse guard's canaries (``metadata.canary``); an assistant message
with tool calls and the tool messages that answer it form one eviction group, so a pass never
splits them; ``text_sha256`` binds each
score to the content scored.

The hook returns a ``RemoveMessage`` for every evicted id but the earliest, which it overwrites
in place (same id) with one tombstone message naming what was removed, so the history stays a
valid provider conversation. A frozen pass (a collapse halt, stale scores) changes nothing and
logs why on the ``prunewarden.integrations`` logger. The session's state travels in the graph's
state (``state_key``), so the graph's checkpointer persists it with the messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.prebuilt.chat_agent_executor import AgentState

from prunewarden.engine import Engine
from prunewarden.integrations._pass import PassOutcome, WindowPruner, tombstone_text
from prunewarden.scoring import Scorer, text_sha256

#: The ``name`` of a tombstone message: how a later pass knows one.
TOMBSTONE_NAME = "prunewarden-tombstone"
#: The graph-state key holding the session's state by default.
STATE_KEY = "prunewarden"

_KINDS = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}

Classifier = Callable[[BaseMessage], str | None]
Pin = Callable[[BaseMessage], bool]


class PrunedAgentState(AgentState):
    """``AgentState`` with the session's state: pass it as ``state_schema``."""

    prunewarden: NotRequired[dict[str, Any]]


def message_text(message: BaseMessage) -> str:
    """The text a message carries (text parts of a multi-part content, joined), and the calls
    an assistant message makes (``name(arguments)``, one a line)."""
    content = message.content
    if isinstance(content, str):
        parts = [content]
    else:
        parts = [p if isinstance(p, str) else str(p.get("text", "")) for p in content]
    if isinstance(message, AIMessage):
        calls = message.tool_calls
        parts += [f"{c['name']}({json.dumps(c['args'], sort_keys=True)})" for c in calls]
    return "\n".join(p for p in parts if p)


def message_segments(
    messages: Sequence[BaseMessage],
    *,
    classify: Classifier | None = None,
    pin: Pin | None = None,
    keep_last: int = 1,
) -> list[dict[str, Any]]:
    """The window segments of a message list, without scores (see the module's docstring)."""
    groups: dict[str, str] = {}  # tool_call_id -> the group of the message that made the call
    last = len(messages) - keep_last
    task_seen = False
    segments = []
    for i, message in enumerate(messages):
        message_id = f"message-{i}" if message.id is None else str(message.id)
        kind = (classify(message) if classify else None) or _KINDS.get(message.type, message.type)
        tombstone = message.name == TOMBSTONE_NAME
        group = None
        if isinstance(message, AIMessage) and message.tool_calls:
            group = f"tool-calls:{message_id}"
            groups.update((str(call["id"]), group) for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            group = groups.get(message.tool_call_id)
        text = message_text(message)
        canary = (message.type == "human" and not task_seen) or bool(pin and pin(message))
        task_seen = task_seen or message.type == "human"
        segment: dict[str, Any] = {
            "id": message_id,
            "kind": "tombstone" if tombstone else kind,
            "text": text,
            "tokens": count_tokens_approximately([message]),
            "text_sha256": text_sha256(text),
            "non_recoverable": message.type == "system" or tombstone or i >= last or canary,
            "metadata": {"canary": canary},
        }
        if group is not None:
            segment["group"] = group
        segments.append(segment)
    return segments


class PruningHook:
    """A LangGraph ``pre_model_hook`` (and the body of the LangChain middleware).

    ``task`` is what the scorer judges relevance against (default: the first human message);
    ``classify`` names a message's kind (return None to keep the default), ``pin`` pins a message.
    """

    def __init__(  # noqa: PLR0913 - every option has a default but the three that matter
        self,
        engine: Engine,
        scorer: Scorer,
        *,
        budget_tokens: int,
        session_id: str,
        task: str | None = None,
        classify: Classifier | None = None,
        pin: Pin | None = None,
        state_key: str = STATE_KEY,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.engine = engine
        self.pruner = WindowPruner(scorer, budget_tokens=budget_tokens)
        self.session_id = session_id
        self.task = task
        self.classify = classify
        self.pin = pin
        self.state_key = state_key
        self.labels = dict(labels or {})
        self.last_outcome: PassOutcome | None = None

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The state update: the removals and the tombstone, and the session's new state."""
        messages: list[AnyMessage] = list(state.get("messages", ()))
        saved = state.get(self.state_key)
        session = self.engine.session(self.session_id, labels=self.labels, state=saved)
        segments = message_segments(messages, classify=self.classify, pin=self.pin)
        outcome = self.pruner.run(session, segments, self._task(messages))
        self.last_outcome = outcome
        update: dict[str, Any] = {self.state_key: session.state()}
        if outcome.evict:
            update["messages"] = removals(messages, segments, outcome.evict)
        return update

    def _task(self, messages: Sequence[BaseMessage]) -> str:
        if self.task is not None:
            return self.task
        first = next((m for m in messages if m.type == "human"), None)
        return message_text(first) if first is not None else ""


def removals(
    messages: Sequence[BaseMessage], segments: Sequence[Mapping[str, Any]], evict: Sequence[str]
) -> list[BaseMessage]:
    """``RemoveMessage`` for every evicted id, and one tombstone for the whole history: it
    overwrites the earlier tombstone in place (or, on the first pass, the earliest evicted
    message), counting everything removed so far and naming what this pass removed."""
    evicted = set(evict)
    ordered = [str(s["id"]) for s in segments if str(s["id"]) in evicted]
    kinds = {str(s["id"]): str(s["kind"]) for s in segments}
    earlier = [m for m in messages if m.name == TOMBSTONE_NAME and m.id is not None]
    removed = len(ordered) + sum(
        int(m.response_metadata.get("prunewarden_removed", 0)) for m in earlier
    )
    at = str(earlier[0].id) if earlier else ordered[0]
    tombstone = AIMessage(
        content=tombstone_text(ordered, kinds, total=removed),
        id=at,
        name=TOMBSTONE_NAME,
        response_metadata={"prunewarden_removed": removed},
    )
    stale = [str(m.id) for m in earlier[1:]]
    return [tombstone, *(RemoveMessage(id=i) for i in [*ordered, *stale] if i != at)]


__all__ = [
    "STATE_KEY",
    "TOMBSTONE_NAME",
    "PrunedAgentState",
    "PruningHook",
    "message_segments",
    "message_text",
    "removals",
]
