"""The OpenAI Agents SDK: a ``Session`` that prunes the history it hands the runner.

Needs ``prunewarden[openai-agents]``. :class:`PrunedSession` wraps any other session (SQLite,
Redis, the SDK's own): items are added unchanged; reading the history runs one guarded pass
(as :mod:`prunewarden.integrations.langgraph` does), and when it evicts, the wrapped session is
rewritten without the evicted items and with one tombstone message (``role: assistant``)
counting what was removed. A function call and its output share an eviction group; system and
developer messages, the task (the first user message), earlier tombstones, the newest item and
what ``pin`` pins are pinned; the task and the pins are the collapse guard's canaries. A
frozen pass (a collapse halt, stale scores) returns the history whole and logs why.

The prunewarden session is opened once per wrapper from the engine: give the engine a
``SessionStore`` for its halt to survive a restart (docs/sessions.md).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents.memory import Session as AgentsSession
from agents.memory import SessionSettings

from prunewarden.engine import Engine
from prunewarden.integrations._pass import PassOutcome, WindowPruner, tombstone_text
from prunewarden.scoring import Scorer, text_sha256

#: The start of a tombstone message's text: how a later pass knows one.
TOMBSTONE_PREFIX = "[prunewarden:"

Item = Any  # agents.TResponseInputItem: a typed dict
Classifier = Callable[[Mapping[str, Any]], str | None]
Pin = Callable[[Mapping[str, Any]], bool]

_CALL_TYPES = {"function_call": "tool_call", "function_call_output": "tool"}


def item_text(item: Mapping[str, Any]) -> str:
    """The text an item carries: a message's content (text parts joined), a call's name and
    arguments, a call output's output."""
    if item.get("type") == "function_call":
        return f"{item.get('name', '')}({item.get('arguments', '')})"
    if item.get("type") == "function_call_output":
        output = item.get("output", "")
        return output if isinstance(output, str) else json.dumps(output, sort_keys=True)
    content = item.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return json.dumps(item, sort_keys=True, default=str)


def is_tombstone(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "assistant" and str(item.get("content", "")).startswith(
        TOMBSTONE_PREFIX
    )


def item_segments(
    items: Sequence[Mapping[str, Any]],
    *,
    classify: Classifier | None = None,
    pin: Pin | None = None,
) -> list[dict[str, Any]]:
    """The window segments of a history: ids from each item's content (the SDK's items carry
    none of their own), stable across reads."""
    seen: Counter[str] = Counter()
    task_seen = False
    segments = []
    for i, item in enumerate(items):
        text = item_text(item)
        digest = text_sha256(json.dumps(item, sort_keys=True, default=str))[:16]
        seen[digest] += 1
        own = f"item-{digest}" if seen[digest] == 1 else f"item-{digest}-{seen[digest]}"
        kind = _CALL_TYPES.get(str(item.get("type")), str(item.get("role", "item")))
        tombstone = is_tombstone(item)
        is_user = item.get("role") == "user"
        canary = (is_user and not task_seen) or bool(pin and pin(item))
        task_seen = task_seen or is_user
        segment: dict[str, Any] = {
            "id": own,
            "kind": "tombstone" if tombstone else (classify(item) if classify else None) or kind,
            "text": text,
            "tokens": len(text) // 4 + 4,
            "text_sha256": text_sha256(text),
            "non_recoverable": item.get("role") in {"system", "developer"}
            or tombstone
            or i == len(items) - 1
            or canary,
            "metadata": {"canary": canary},
        }
        if item.get("type") in _CALL_TYPES and item.get("call_id"):
            segment["group"] = f"call:{item['call_id']}"
        segments.append(segment)
    return segments


class PrunedSession(AgentsSession):
    """A session that prunes the wrapped session's history whenever it is read."""

    def __init__(  # noqa: PLR0913 - every option has a default but the three that matter
        self,
        inner: AgentsSession,
        engine: Engine,
        scorer: Scorer,
        *,
        budget_tokens: int,
        task: str | None = None,
        classify: Classifier | None = None,
        pin: Pin | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings: SessionSettings | None = getattr(inner, "session_settings", None)
        self.pruner = WindowPruner(scorer, budget_tokens=budget_tokens)
        self.guard = engine.session(self.session_id, labels=dict(labels or {}))
        self.task = task
        self.classify = classify
        self.pin = pin
        self.last_outcome: PassOutcome | None = None
        self._lock = asyncio.Lock()

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The history after one pass (the latest ``limit`` items of it)."""
        async with self._lock:
            items = list(await self.inner.get_items())
            segments = item_segments(items, classify=self.classify, pin=self.pin)
            task = self.task if self.task is not None else _first_user_text(items)
            outcome = await asyncio.to_thread(self.pruner.run, self.guard, segments, task)
            self.last_outcome = outcome
            if outcome.evict:
                items = rewritten(items, segments, outcome.evict)
                await self.inner.clear_session()
                await self.inner.add_items(items)
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Item]) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> Item | None:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()


def rewritten(
    items: Sequence[Item], segments: Sequence[Mapping[str, Any]], evict: Sequence[str]
) -> list[Item]:
    """The history without the evicted items, with one tombstone: where the earlier one was (or
    the earliest evicted item), counting everything removed so far."""
    evicted = set(evict)
    ids = [str(s["id"]) for s in segments]
    kinds = {str(s["id"]): str(s["kind"]) for s in segments}
    removed_now = [i for i in ids if i in evicted]
    earlier = [n for n, item in enumerate(items) if is_tombstone(item)]
    total = len(removed_now) + sum(_tombstone_count(items[n]) for n in earlier)
    at = earlier[0] if earlier else ids.index(removed_now[0])
    tombstone = {"role": "assistant", "content": _tombstone(removed_now, kinds, total)}
    out: list[Item] = []
    for n, (item, own) in enumerate(zip(items, ids, strict=True)):
        if n == at:
            out.append(tombstone)
        elif own not in evicted and n not in earlier:
            out.append(item)
    return out


def _tombstone(removed: Sequence[str], kinds: Mapping[str, str], total: int) -> str:
    return tombstone_text(removed, kinds, total=total)


def _tombstone_count(item: Mapping[str, Any]) -> int:
    words = str(item.get("content", ""))[len(TOMBSTONE_PREFIX) :].split()
    return int(words[0]) if words and words[0].isdigit() else 0


def _first_user_text(items: Sequence[Mapping[str, Any]]) -> str:
    first = next((i for i in items if i.get("role") == "user"), None)
    return item_text(first) if first is not None else ""


__all__ = [
    "TOMBSTONE_PREFIX",
    "PrunedSession",
    "is_tombstone",
    "item_segments",
    "item_text",
    "rewritten",
]
