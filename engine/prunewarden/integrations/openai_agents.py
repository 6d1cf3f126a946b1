"""The OpenAI Agents SDK: a ``Session`` that prunes the history it hands the runner.

Needs ``prunewarden[openai-agents]``. :class:`PrunedSession` wraps any other session (SQLite,
Redis, the SDK's own): items are added unchanged; reading the history runs one guarded pass
(as :mod:`prunewarden.integrations.langgraph` does), and when it evicts, the wrapped session is
rewritten without the evicted items and with one tombstone message (``role: assistant``)
counting what was removed, by kind. A function call and its output share an eviction group;
system and developer messages, the task (the first user message), the newest item and what
``pin`` pins are pinned; the task and the pins are the collapse guard's canaries. A frozen pass
(a collapse halt, stale scores) returns the history whole and logs why.

The wrapper knows its tombstone by what it keeps in memory (the item it wrote and where),
never by what an item says: an item that only looks like a tombstone is an item like any other,
and so is a tombstone written by an earlier process. The prunewarden session is opened once per
wrapper from the engine: give the engine a ``SessionStore`` for its halt to survive a restart
(docs/sessions.md).
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
from prunewarden.integrations._pass import (
    PassOutcome,
    WindowPruner,
    removed_counts,
    tombstone_text,
)
from prunewarden.policy import Policy, classifier
from prunewarden.scoring import Scorer, text_sha256

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


def text_tokens(text: str) -> int:
    """The tokens an item of this text counts for: about four characters a token, and four for
    the item's framing."""
    return len(text) // 4 + 4


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
        is_user = item.get("role") == "user"
        canary = (is_user and not task_seen) or bool(pin and pin(item))
        task_seen = task_seen or is_user
        segment: dict[str, Any] = {
            "id": own,
            "kind": (classify(item) if classify else None) or kind,
            "text": text,
            "tokens": text_tokens(text),
            "text_sha256": text_sha256(text),
            "non_recoverable": item.get("role") in {"system", "developer"}
            or i == len(items) - 1
            or canary,
            "metadata": {"canary": canary},
        }
        if item.get("type") in _CALL_TYPES and item.get("call_id"):
            segment["group"] = f"call:{item['call_id']}"
        segments.append(segment)
    return segments


def policy_classifier(policy: Policy, items: Sequence[Mapping[str, Any]] = ()) -> Classifier:
    """The policy's ``spec.classify`` as an item classifier: an item's role (``tool`` for a
    function's output, ``assistant`` for its call), its text and its function's name (an
    output's from the call in ``items`` it answers)."""
    rules = classifier(policy)
    names = {
        str(item.get("call_id")): str(item.get("name"))
        for item in items
        if item.get("type") == "function_call"
    }

    def classify(item: Mapping[str, Any]) -> str | None:
        kind = item.get("type")
        tool: str | None = None
        if kind == "function_call":
            role, tool = "assistant", str(item.get("name"))
        elif kind == "function_call_output":
            role, tool = "tool", names.get(str(item.get("call_id")))
        else:
            role = str(item.get("role", ""))
        given = rules.classify(role, item_text(item), tool)
        return None if given is None else given.kind

    return classify


def tombstone_item(removed: Mapping[str, int]) -> dict[str, Any]:
    """The tombstone counting ``removed`` (kind -> items), as the wrapper writes it."""
    return {"role": "assistant", "content": tombstone_text(removed)}


class PrunedSession(AgentsSession):
    """A session that prunes the wrapped session's history whenever it is read.

    ``budget_tokens`` bounds the history handed to the runner, the tombstone included, with
    ``system_prompt`` (the agent's ``instructions``, sent with every call outside the history)
    when it is given; the runner then adds the run's new input and items. ``observe_turns``
    feeds the drift signal (see :class:`~prunewarden.integrations.WindowPruner`).
    """

    def __init__(  # noqa: PLR0913 - every option has a default but the three that matter
        self,
        inner: AgentsSession,
        engine: Engine,
        scorer: Scorer,
        *,
        budget_tokens: int,
        system_prompt: str | None = None,
        task: str | None = None,
        classify: Classifier | None = None,
        pin: Pin | None = None,
        observe_turns: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings: SessionSettings | None = getattr(inner, "session_settings", None)
        self.pruner = WindowPruner(scorer, budget_tokens=budget_tokens, observe_turns=observe_turns)
        self.guard = engine.session(self.session_id, labels=dict(labels or {}))
        self.system_prompt = system_prompt
        self.task = task
        self.classify = classify
        self.pin = pin
        self.last_outcome: PassOutcome | None = None
        self.removed: dict[str, int] = {}  # kind -> items this wrapper removed
        self._tombstone: tuple[int, dict[str, Any]] | None = None  # where, and the item written
        self._lock = asyncio.Lock()

    def tombstone_index(self, items: Sequence[Item]) -> int | None:
        """Where this wrapper's tombstone is in ``items`` (the wrapped session's history), or
        None when it is not there as written."""
        if self._tombstone is None:
            return None
        at, written = self._tombstone
        return at if at < len(items) and items[at] == written else None

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The history after one pass (the latest ``limit`` items of it)."""
        async with self._lock:
            items = list(await self.inner.get_items())
            outcome, items = await asyncio.to_thread(self._prune, items)
            self.last_outcome = outcome
            if outcome.evict:
                await self.inner.clear_session()
                await self.inner.add_items(items)
        return items if limit is None else items[-limit:] if limit > 0 else []

    def _prune(self, items: list[Item]) -> tuple[PassOutcome, list[Item]]:
        mine = self.tombstone_index(items)
        history = [item for n, item in enumerate(items) if n != mine]
        segments = item_segments(history, classify=self.classify, pin=self.pin)
        kinds = {str(s["id"]): str(s["kind"]) for s in segments}
        current = 0 if mine is None else text_tokens(item_text(items[mine]))

        def tombstone_tokens(evicted: Sequence[str]) -> int:
            if not evicted:
                return current
            counts = removed_counts(self.removed, (kinds[i] for i in evicted))
            return text_tokens(tombstone_text(counts))

        task = self.task if self.task is not None else _first_user_text(history)
        prompt = 0 if self.system_prompt is None else text_tokens(self.system_prompt)
        outcome = self.pruner.run(
            self.guard, segments, task, fixed_tokens=prompt, tombstone_tokens=tombstone_tokens
        )
        if not outcome.evict:
            return outcome, items
        self.removed = removed_counts(self.removed, (kinds[i] for i in outcome.evict))
        return outcome, self._rewritten(items, mine, segments, outcome.evict)

    def _rewritten(
        self,
        items: Sequence[Item],
        mine: int | None,
        segments: Sequence[Mapping[str, Any]],
        evict: Sequence[str],
    ) -> list[Item]:
        """The history without the evicted items, with the tombstone where the earlier one was
        (or the earliest evicted item)."""
        evicted = set(evict)
        ids = iter(str(s["id"]) for s in segments)
        tombstone = tombstone_item(self.removed)
        out: list[Item] = []
        at: int | None = None
        for n, item in enumerate(items):
            if n == mine:
                at = len(out)
                out.append(tombstone)
            elif next(ids) not in evicted:
                out.append(item)
            elif at is None and mine is None:
                at = len(out)
                out.append(tombstone)
        self._tombstone = (at or 0, tombstone)
        return out

    async def add_items(self, items: list[Item]) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> Item | None:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        async with self._lock:
            self._tombstone = None
            self.removed = {}
            await self.inner.clear_session()


def _first_user_text(items: Sequence[Mapping[str, Any]]) -> str:
    first = next((i for i in items if i.get("role") == "user"), None)
    return item_text(first) if first is not None else ""


__all__ = [
    "PrunedSession",
    "item_segments",
    "item_text",
    "policy_classifier",
    "text_tokens",
    "tombstone_item",
]
