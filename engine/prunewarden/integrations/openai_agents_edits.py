"""The OpenAI Agents SDK: a ``Session`` whose every edit of the history is judged as a transition.

Needs ``prunewarden[openai-agents]``. :class:`GuardedSession` wraps any other session: items are
added and read unchanged, and each edit — ``pop_item``, ``clear_session``, or a trim or
compaction written through :meth:`GuardedSession.replace_items` — is first judged by
``Session.verify`` on the history before and after it, its items mapped as the pruning adapter
maps them (:func:`~prunewarden.integrations.openai_agents.item_segments`: ids from content, a
function call and its output one eviction group, system and developer messages and the task
pinned). A refused edit is repaired by default (``pop_item`` and ``clear_session`` then change
nothing; ``replace_items`` writes the history with what it must not drop put back), or raises
:class:`~prunewarden.UnsafeTransitionError` (``on_refusal="raise"``). ``last_decision`` holds
the latest transition decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agents.memory import Session as AgentsSession
from agents.memory import SessionSettings

from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import UnsafeTransitionError
from prunewarden.integrations.openai_agents import Classifier, Item, Pin, item_segments

OnRefusal = Literal["restore", "raise"]


class GuardedSession(AgentsSession):
    """A session that judges every edit of the wrapped session's history."""

    def __init__(  # noqa: PLR0913 - every option has a default but the two that matter
        self,
        inner: AgentsSession,
        engine: Engine,
        *,
        on_refusal: OnRefusal = "restore",
        classify: Classifier | None = None,
        pin: Pin | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings: SessionSettings | None = getattr(inner, "session_settings", None)
        self.guard = engine.session(self.session_id, labels=dict(labels or {}))
        self.on_refusal = on_refusal
        self.classify = classify
        self.pin = pin
        self.last_decision: Decision | None = None
        self._lock = asyncio.Lock()

    async def get_items(self, limit: int | None = None) -> list[Item]:
        return list(await self.inner.get_items(limit))

    async def add_items(self, items: list[Item]) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> Item | None:
        """The newest item, removed when the edit is allowed; None when refused (restore)."""
        async with self._lock:
            items = list(await self.inner.get_items())
            if not items:
                return None
            kept = await self._judged(items, items[:-1], "agents.Session.pop_item")
            return await self.inner.pop_item() if kept is None else None

    async def clear_session(self) -> None:
        """Clears the history when the edit is allowed; a refused clear changes nothing."""
        async with self._lock:
            items = list(await self.inner.get_items())
            if await self._judged(items, [], "agents.Session.clear_session") is None:
                await self.inner.clear_session()

    async def replace_items(
        self, items: Sequence[Item], *, applied_by: str | None = None
    ) -> list[Item]:
        """Write ``items`` as the history (a trim, a compaction) if the edit is allowed, else
        the history repaired; returns what was written."""
        async with self._lock:
            before = list(await self.inner.get_items())
            repaired = await self._judged(before, list(items), applied_by or "replace_items")
            written = list(items) if repaired is None else repaired
            await self.inner.clear_session()
            await self.inner.add_items(written)
            return written

    async def _judged(
        self, before: list[Item], after: list[Item], applied_by: str
    ) -> list[Item] | None:
        """None when the edit from ``before`` to ``after`` may stand, else the repaired items
        (or :class:`UnsafeTransitionError`)."""
        old = self._segments(before)
        new = self._segments(after)
        decision = await asyncio.to_thread(self.guard.verify, old, new, applied_by=applied_by)
        self.last_decision = decision
        if not decision.blocks:
            return None
        if self.on_refusal == "raise":
            raise UnsafeTransitionError(decision)
        items = {s["id"]: item for item, s in zip(before, old, strict=True)}
        items.update((s["id"], item) for item, s in zip(after, new, strict=True))
        return [items[segment["id"]] for segment in decision.repair(old, new)]

    def _segments(self, items: list[Item]) -> list[dict[str, Any]]:
        segments = item_segments(items, classify=self.classify, pin=self.pin)
        # The newest item is pinned for a pruning pass (it is what the model answers); an edit
        # may drop it (an undo), so here only its kind, flags and pins count.
        if segments and not segments[-1]["metadata"]["canary"]:
            last, item = segments[-1], items[-1]
            last["non_recoverable"] = (
                item.get("role") in {"system", "developer"} or last["kind"] == "tombstone"
            )
        return segments


__all__ = ["GuardedSession", "OnRefusal"]
