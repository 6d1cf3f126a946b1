"""LangChain message lists: any edit of the history judged as a transition, and repaired.

Needs ``prunewarden[langgraph]`` (``langchain_core``). :class:`EditGuard` judges what a
function did to a message list — ``trim_messages``, a summarization step, an agent's own
compaction — with ``Session.verify``: the messages before and after map to window segments as
the LangGraph adapter maps them (:func:`~prunewarden.integrations.langgraph.message_segments`:
the system prompt, the task and the newest message pinned, a tool call and its results one
eviction group). The guard is the tombstone writer the edit lacks: the unpinned messages it
removes are named by one tombstone message (``prunewarden-tombstone``, counting them by kind) in
their place, so a trim goes through. A refused edit (a pinned message dropped, a tool call cut
from its result, whatever else the policy refuses) is repaired by default — the messages the
decision restores are put back in their place, the tombstone recounted, and a warning on the
``prunewarden.integrations`` logger names them and the decision — or raises
:class:`~prunewarden.UnsafeTransitionError` (``on_refusal="raise"``).
``guard.wrap(trim_messages)`` guards every call of a function.

A message is the same message after the edit when it is the same object, or carries the same
``id``; anything else in the result is new (a summary, a tombstone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from prunewarden.decision import Decision
from prunewarden.errors import UnsafeTransitionError
from prunewarden.integrations._tombstones import (
    Segment,
    removals_to_record,
    removed_kinds,
    tombstone_position,
    tombstone_segment,
    warn_restored,
)
from prunewarden.integrations.langgraph import (
    Classifier,
    Pin,
    message_segments,
    message_text,
    policy_classifier,
    tombstone_message,
)
from prunewarden.scoring import text_sha256
from prunewarden.session import Session

OnRefusal = Literal["restore", "raise"]
MessageFunction = Callable[..., Sequence[BaseMessage]]


@dataclass(frozen=True, slots=True)
class EditOutcome:
    """What became of one edit: the messages to use and the transition decision."""

    messages: list[BaseMessage]
    decision: Decision
    #: The tombstone the guard wrote for the unpinned messages the edit removed (in
    #: ``messages``), or None when it removed none (or the repair put them all back).
    tombstone: BaseMessage | None = None
    #: The ids of ``before`` the repair put back (``decision.restore``), or empty.
    restored: tuple[str, ...] = ()

    @property
    def repaired(self) -> bool:
        """The edit was refused and the messages it must not drop were put back."""
        return self.decision.blocks


class EditGuard:
    """Judges edits of one session's message history; see the module's docstring."""

    def __init__(
        self,
        session: Session,
        *,
        applied_by: str | None = None,
        on_refusal: OnRefusal = "restore",
        classify: Classifier | None = None,
        pin: Pin | None = None,
    ) -> None:
        self.session = session
        self.applied_by = applied_by
        self.on_refusal = on_refusal
        self._classify = classify
        self._pin = pin

    def judge(
        self,
        before: Sequence[BaseMessage],
        after: Sequence[BaseMessage],
        *,
        applied_by: str | None = None,
    ) -> EditOutcome:
        """The messages to use after ``before`` became ``after``: ``after`` with the guard's
        tombstone when the edit is allowed, else repaired (or :class:`UnsafeTransitionError`)."""
        classify = self._classify or policy_classifier(self.session.policy)
        old = message_segments(before, classify=classify, pin=self._pin)
        edited, new = list(after), self._matched(before, old, after, classify)
        recorded = removals_to_record(self.session, old, new)
        tombstone = None
        if recorded:
            tombstone = _tombstone(recorded)
            position = tombstone_position(old, new, recorded)
            segment = tombstone_segment(
                str(tombstone.id), message_text(tombstone), _tokens(tombstone), recorded
            )
            edited.insert(position, tombstone)
            new.insert(position, segment)
        decision = self.session.verify(old, new, applied_by=applied_by or self.applied_by)
        if not decision.blocks:
            return EditOutcome(edited, decision, tombstone)
        if self.on_refusal == "raise":
            raise UnsafeTransitionError(decision)
        messages = {segment["id"]: m for m, segment in zip(before, old, strict=True)}
        messages.update((segment["id"], m) for m, segment in zip(edited, new, strict=True))
        written = None if tombstone is None else tombstone.id
        window = [s for s in decision.repair(old, new) if s["id"] != written]
        repaired = [messages[segment["id"]] for segment in window]
        if tombstone is not None:
            # Recounted for what stays removed once the repair put messages back, and placed
            # again: never between a restored tool call and its result.
            back = {segment["id"] for segment in window}
            still = [s for s in recorded if s["id"] not in back]
            tombstone = _tombstone(still, str(tombstone.id)) if still else None
            if tombstone is not None:
                repaired.insert(tombstone_position(old, window, still), tombstone)
        what = (
            f"edit by {applied_by or self.applied_by}" if applied_by or self.applied_by else "edit"
        )
        warn_restored(self.session, what, decision, decision.restore)
        return EditOutcome(repaired, decision, tombstone, decision.restore)

    def _matched(
        self,
        before: Sequence[BaseMessage],
        old: list[dict[str, Any]],
        after: Sequence[BaseMessage],
        classify: Classifier,
    ) -> list[dict[str, Any]]:
        """The segments of ``after``: a message of ``before`` (the same object, or the same
        ``id`` and text) is its segment of before; anything else is new."""
        by_object = {id(message): segment for message, segment in zip(before, old, strict=True)}
        by_id = {segment["id"]: segment for segment in old}
        fresh = message_segments(after, classify=classify, pin=self._pin, keep_last=0)
        new = []
        for position, (message, segment) in enumerate(zip(after, fresh, strict=True)):
            same = by_object.get(id(message)) or (
                by_id.get(str(message.id)) if message.id is not None else None
            )
            if same is not None and same["text"] == segment["text"]:
                new.append(same)  # the same message: the same facts as before the edit
            elif message.id is None:
                # A new message without an id: its place in the list names nothing before.
                new.append({**segment, "id": f"edited-{position}"})
            else:
                new.append(segment)
        return new

    def wrap(self, function: MessageFunction) -> Callable[..., list[BaseMessage]]:
        """``function(messages, ...)`` guarded: each call's result judged against its input,
        ``applied_by`` the function's qualified name unless the guard names one."""
        name = self.applied_by or f"{function.__module__}.{function.__qualname__}"

        def guarded(messages: Sequence[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            before = list(messages)
            after = list(function(before, *args, **kwargs))
            return self.judge(before, after, applied_by=name).messages

        return guarded


def _tombstone(recorded: Sequence[Segment], message_id: str | None = None) -> AIMessage:
    """The guard's tombstone message counting ``recorded``; its id from their ids, so that the
    same edit always writes the same tombstone."""
    if message_id is None:
        names = "\n".join(str(s["id"]) for s in recorded)
        message_id = f"prunewarden-tombstone-{text_sha256(names)[:12]}"
    return tombstone_message(removed_kinds(recorded), message_id)


def _tokens(message: BaseMessage) -> int:
    return count_tokens_approximately([message])


__all__ = ["EditGuard", "EditOutcome", "MessageFunction", "OnRefusal"]
