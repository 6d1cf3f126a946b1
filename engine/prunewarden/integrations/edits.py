"""LangChain message lists: any edit of the history judged as a transition, and repaired.

Needs ``prunewarden[langgraph]`` (``langchain_core``). :class:`EditGuard` judges what a
function did to a message list — ``trim_messages``, a summarization step, an agent's own
compaction — with ``Session.verify``: the messages before and after map to window segments as
the LangGraph adapter maps them (:func:`~prunewarden.integrations.langgraph.message_segments`:
the system prompt, the task and the newest message pinned, a tool call and its results one
eviction group). A refused edit is repaired by default — the messages the decision restores are
put back in their place — or raises :class:`~prunewarden.UnsafeTransitionError`
(``on_refusal="raise"``). ``guard.wrap(trim_messages)`` guards every call of a function.

A message is the same message after the edit when it is the same object, or carries the same
``id``; anything else in the result is new (a summary, a tombstone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from prunewarden.decision import Decision
from prunewarden.errors import UnsafeTransitionError
from prunewarden.integrations.langgraph import Classifier, Pin, message_segments
from prunewarden.session import Session

OnRefusal = Literal["restore", "raise"]
MessageFunction = Callable[..., Sequence[BaseMessage]]


@dataclass(frozen=True, slots=True)
class EditOutcome:
    """What became of one edit: the messages to use and the transition decision."""

    messages: list[BaseMessage]
    decision: Decision

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
        """The messages to use after ``before`` became ``after``: ``after`` when the edit is
        allowed, else repaired (or :class:`UnsafeTransitionError`)."""
        old = message_segments(before, classify=self._classify, pin=self._pin)
        by_object = {id(message): segment for message, segment in zip(before, old, strict=True)}
        by_id = {segment["id"]: segment for segment in old}
        fresh = message_segments(after, classify=self._classify, pin=self._pin, keep_last=0)
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
        decision = self.session.verify(old, new, applied_by=applied_by or self.applied_by)
        if not decision.blocks:
            return EditOutcome(list(after), decision)
        if self.on_refusal == "raise":
            raise UnsafeTransitionError(decision)
        messages = {segment["id"]: m for m, segment in zip(before, old, strict=True)}
        messages.update((segment["id"], m) for m, segment in zip(after, new, strict=True))
        repaired = decision.repair(old, new)
        return EditOutcome([messages[segment["id"]] for segment in repaired], decision)

    def wrap(self, function: MessageFunction) -> Callable[..., list[BaseMessage]]:
        """``function(messages, ...)`` guarded: each call's result judged against its input,
        ``applied_by`` the function's qualified name unless the guard names one."""
        name = self.applied_by or f"{function.__module__}.{function.__qualname__}"

        def guarded(messages: Sequence[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            before = list(messages)
            after = list(function(before, *args, **kwargs))
            return self.judge(before, after, applied_by=name).messages

        return guarded


__all__ = ["EditGuard", "EditOutcome", "MessageFunction", "OnRefusal"]
