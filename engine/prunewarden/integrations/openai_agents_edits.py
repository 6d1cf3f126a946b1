"""The OpenAI Agents SDK: a ``Session`` whose every edit of the history is judged as a transition.

Needs ``prunewarden[openai-agents]``. :class:`GuardedSession` wraps any other session: items are
added and read unchanged, and each edit — ``pop_item``, ``clear_session``, or a trim or
compaction written through :meth:`GuardedSession.replace_items` — is first judged by
``Session.verify`` on the history before and after it, its items mapped as the pruning adapter
maps them (:func:`~prunewarden.integrations.openai_agents.item_segments`: ids from content, a
function call and its output one eviction group, system and developer messages and the task
pinned). The guard records what an edit removes that may go: ``replace_items`` writes its
tombstone item (``[prunewarden: N earlier messages removed: ...]``) in the place of the unpinned
items dropped; a ``pop_item`` or ``clear_session`` the caller asked for is recorded by its
decision. A refused edit is repaired by default (``pop_item`` and ``clear_session`` then change
nothing; ``replace_items`` writes the history with only what it must not drop put back, and the
tombstone recounted), with a warning on the ``prunewarden.integrations`` logger naming what was
put back and the decision id, or raises :class:`~prunewarden.UnsafeTransitionError`
(``on_refusal="raise"``). ``last_decision`` holds the latest transition decision.

A compaction item the edit writes (the Responses API's ``type: compaction``, its content
encrypted) is an opaque summary of every item it replaced, judged by ``spec.fidelity.opaque``;
what must stay is re-appended after it, verbatim. ``OpenAIResponsesCompactionSession`` wrapping
a guarded session writes its compactions through :meth:`GuardedSession.replace_items`.
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
from prunewarden.fidelity import OPAQUE_KIND
from prunewarden.integrations._tombstones import (
    Segment,
    removals_to_record,
    removed_kinds,
    tombstone_position,
    tombstone_segment,
    warn_restored,
)
from prunewarden.integrations.openai_agents import (
    Classifier,
    Item,
    Pin,
    item_segments,
    policy_classifier,
    tombstone_item,
)

OnRefusal = Literal["restore", "raise"]
#: What a compaction written by the SDK's ``OpenAIResponsesCompactionSession`` is recorded as.
COMPACTION_SESSION = "agents.OpenAIResponsesCompactionSession"


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
            allowed, _ = await self._judged(items, items[:-1], "agents.Session.pop_item")
            return await self.inner.pop_item() if allowed else None

    async def clear_session(self) -> None:
        """Clears the history when the edit is allowed; a refused clear changes nothing."""
        async with self._lock:
            items = list(await self.inner.get_items())
            allowed, _ = await self._judged(items, [], "agents.Session.clear_session")
            if allowed:
                await self.inner.clear_session()

    async def replace_items(
        self, items: Sequence[Item], *, applied_by: str | None = None
    ) -> list[Item]:
        """Write ``items`` as the history (a trim, a compaction) with the guard's tombstone for
        the unpinned items it drops if the edit is allowed, else the history repaired; returns
        what was written."""
        async with self._lock:
            before = list(await self.inner.get_items())
            _, written = await self._judged(
                before, list(items), applied_by or "replace_items", write_tombstone=True
            )
            await self.inner.clear_session()
            await self.inner.add_items(written)
            return written

    async def _atomic_replace_items(self, items: list[Item]) -> bool:
        """What the SDK's ``OpenAIResponsesCompactionSession`` calls to write its compacted
        history on the session it wraps (looked up on the type): judged as ``replace_items``."""
        await self.replace_items(items, applied_by=COMPACTION_SESSION)
        return True

    async def _judged(
        self,
        before: list[Item],
        after: list[Item],
        applied_by: str,
        *,
        write_tombstone: bool = False,
    ) -> tuple[bool, list[Item]]:
        """Whether the edit from ``before`` to ``after`` may stand, and the items to write: the
        edit's, with the guard's tombstone (``write_tombstone``), or repaired (or
        :class:`UnsafeTransitionError`). A pop or a clear is recorded by its decision instead:
        what the caller deletes is no silent loss."""
        old = self._segments(before)
        new = self._segments(after)
        compaction = _mark_compaction(old, new, after)
        recorded = removals_to_record(self.guard, old, new)
        tombstone: Item | None = None
        written = None
        if recorded and write_tombstone:
            tombstone = tombstone_item(removed_kinds(recorded))
            segment = _tombstone_segment(tombstone, recorded, taken={s["id"] for s in old + new})
            position = tombstone_position(old, new, recorded)
            after.insert(position, tombstone)
            new.insert(position, segment)
            written = segment["id"]
        decision = await asyncio.to_thread(
            self.guard.verify,
            old,
            new,
            tombstones=[
                *([] if write_tombstone else [s["id"] for s in recorded]),
                *self._folded_into(compaction, new),
            ],
            applied_by=applied_by,
        )
        self.last_decision = decision
        if not decision.blocks:
            return True, after
        if self.on_refusal == "raise":
            raise UnsafeTransitionError(decision)
        items = {s["id"]: item for item, s in zip(before, old, strict=True)}
        items.update((s["id"], item) for item, s in zip(after, new, strict=True))
        window = [s for s in decision.repair(old, new) if s["id"] != written]
        if compaction is not None:  # what must stay goes after the compaction item, verbatim
            made = {s["id"] for s in new}
            restored = [s for s in window if s["id"] not in made]
            window = [s for s in window if s["id"] in made]
            at = next(i for i, s in enumerate(window) if s["id"] == compaction) + 1
            window[at:at] = restored
        repaired = [items[segment["id"]] for segment in window]
        if tombstone is not None:
            # Recounted for what stays removed, and placed again (never inside a call's group).
            back = {segment["id"] for segment in window}
            still = [s for s in recorded if s["id"] not in back]
            if still:
                fresh = tombstone_item(removed_kinds(still))
                repaired.insert(tombstone_position(old, window, still), fresh)
        warn_restored(self.guard, applied_by, decision, decision.restore)
        return False, repaired

    def _folded_into(self, compaction: str | None, new: list[dict[str, Any]]) -> list[str]:
        """What the compaction item replaced, recorded by it when ``spec.fidelity`` judges it
        (``opaque``); without fidelity nothing does, and the pinned items come back."""
        if compaction is None or self.guard.policy.spec.fidelity.mode == "off":
            return []
        return [i for s in new if s["id"] == compaction for i in s["derived_from"]]

    def _segments(self, items: list[Item]) -> list[dict[str, Any]]:
        classify = self.classify or policy_classifier(self.guard.policy, items)
        segments = item_segments(items, classify=classify, pin=self.pin)
        # The newest item is pinned for a pruning pass (it is what the model answers); an edit
        # may drop it (an undo), so here only its kind, flags and pins count.
        if segments and not segments[-1]["metadata"]["canary"]:
            last, item = segments[-1], items[-1]
            last["non_recoverable"] = (
                item.get("role") in {"system", "developer"} or last["kind"] == "tombstone"
            )
        return segments


def _mark_compaction(
    old: list[dict[str, Any]], new: list[dict[str, Any]], after: Sequence[Item]
) -> str | None:
    """A compaction item the edit wrote (``type: compaction``, encrypted: nothing can read it)
    becomes an opaque summary deriving from every item it replaced; returns its id."""
    kept = {s["id"] for s in old}
    for segment, item in zip(new, after, strict=True):
        if item.get("type") == "compaction" and segment["id"] not in kept:
            present = {s["id"] for s in new}
            segment["kind"] = OPAQUE_KIND
            segment["derived_from"] = [s["id"] for s in old if s["id"] not in present]
            return str(segment["id"])
    return None


def _tombstone_segment(
    tombstone: Item, recorded: Sequence[Segment], *, taken: set[str]
) -> dict[str, Any]:
    """The tombstone item's segment: its id from its content, as a later read names it, unless
    an item of the same content already holds that id."""
    (read,) = item_segments([tombstone])
    segment_id, n = read["id"], 1
    while segment_id in taken:
        n += 1
        segment_id = f"{read['id']}-tombstone-{n}"
    return tombstone_segment(segment_id, read["text"], read["tokens"], recorded)


__all__ = ["COMPACTION_SESSION", "GuardedSession", "OnRefusal"]
