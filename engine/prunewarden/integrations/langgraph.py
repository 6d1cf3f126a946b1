"""LangGraph: a ``pre_model_hook`` that prunes the agent's messages through a session's pass.

Needs ``prunewarden[langgraph]``. Messages map to window segments: the kind from the message
type (``system``, ``user``, ``assistant``, ``tool``) unless the caller's classifier names one;
a system message in the state, the task (the first human message), the messages the caller
pins and the newest message are pinned (``non_recoverable``), and the task and the caller's pins
are the collapse guard's canaries (``metadata.canary``); an assistant message with tool calls
and the tool messages that answer it form one eviction group, so a pass never splits them;
``text_sha256`` binds each score to the content scored.

The hook returns a ``RemoveMessage`` for every evicted id but one, which it overwrites in place
(same id) with the tombstone: one message counting what was removed, by kind, so the history
stays a valid provider conversation. The hook knows its tombstone by the id and text digest it
keeps in the graph's state, never by what a message says or is named: a message that only looks
like a tombstone is a message like any other. The budget covers what the model reads: the
messages, the tombstone and the prompt the agent adds (``system_prompt``). A frozen pass (a
collapse halt, stale scores) changes nothing and logs why on the ``prunewarden.integrations``
logger. The session's state and the tombstone's record travel in the graph's state
(``state_key``), so the graph's checkpointer persists them with the messages.

With a ``summarizer`` (as ``WindowPruner(summarizer=...)`` takes one), a pass that evicts also
writes a summary of what it evicts, judged first as a transition of the session, so the policy's
fidelity check (``spec.fidelity``) reads it against its protected parents. An allowed summary is
an assistant message (named ``prunewarden-summary``) in the place of the first evicted message,
after the tombstone; the hook then returns the whole history rewritten (LangGraph's
``REMOVE_ALL_MESSAGES`` first), since a new message can only be appended otherwise. A refused
summary changes nothing: the pass is frozen, the originals kept. The hook keeps each summary it
wrote in the graph's state (``summaries``: its id, the SHA-256 of its text, what it derives
from), so a later pass that folds it reads it as a summary (kind ``summary``, protected as
one) and checks the new summary against it.
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
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.chat_agent_executor import AgentState

from prunewarden.engine import Engine
from prunewarden.integrations._pass import (
    PassOutcome,
    Summarizer,
    WindowPruner,
    removed_counts,
    tombstone_text,
)
from prunewarden.policy import Policy, classifier
from prunewarden.scoring import Scorer, text_sha256

#: The ``name`` of the tombstone message, for people reading the history: a later pass knows
#: its tombstone by the record in the graph's state, not by this name.
TOMBSTONE_NAME = "prunewarden-tombstone"
#: The ``name`` of a summary message the hook writes (for people reading the history).
SUMMARY_NAME = "prunewarden-summary"
#: The graph-state key holding the session's state and the tombstone's record by default.
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
            "kind": kind,
            "text": text,
            "tokens": count_tokens_approximately([message]),
            "text_sha256": text_sha256(text),
            "non_recoverable": message.type == "system" or i >= last or canary,
            "metadata": {"canary": canary},
        }
        if group is not None:
            segment["group"] = group
        segments.append(segment)
    return segments


def policy_classifier(policy: Policy) -> Classifier:
    """The policy's ``spec.classify`` as a message classifier: a message's role (``system``,
    ``user``, ``assistant``, ``tool``), its text and its tool (a tool message's name, or the
    first call an assistant message makes)."""
    rules = classifier(policy)

    def classify(message: BaseMessage) -> str | None:
        role = _KINDS.get(message.type)
        if role is None:
            return None
        tool = message.name if isinstance(message, ToolMessage) else None
        if isinstance(message, AIMessage) and message.tool_calls:
            tool = str(message.tool_calls[0]["name"])
        given = rules.classify(role, message_text(message), tool)
        return None if given is None else given.kind

    return classify


def tombstone_message(removed: Mapping[str, int], message_id: str | None = None) -> AIMessage:
    """The tombstone counting ``removed`` (kind -> messages), as the hook writes it."""
    return AIMessage(content=tombstone_text(removed), id=message_id, name=TOMBSTONE_NAME)


class PruningHook:
    """A LangGraph ``pre_model_hook`` (and the body of the LangChain middleware).

    ``budget_tokens`` bounds what the model reads (approximate tokens, as LangChain's
    ``count_tokens_approximately`` counts them): the messages, the tombstone, and
    ``system_prompt``, the prompt the agent adds to every call outside its state
    (``create_agent(system_prompt=...)``, ``create_react_agent(prompt=...)``): give it here to
    have it counted. ``task`` is what the scorer judges relevance against (default: the first
    human message); ``classify`` names a message's kind (return None to keep the default),
    ``pin`` pins a message; ``observe_turns`` feeds the drift signal (see
    :class:`~prunewarden.integrations.WindowPruner`). ``summarizer`` writes a summary of what
    each pass evicts, judged for fidelity before it is written (see the module), and
    ``summary_tokens`` is the room a pass that evicts keeps for it.
    """

    def __init__(  # noqa: PLR0913 - every option has a default but the three that matter
        self,
        engine: Engine,
        scorer: Scorer,
        *,
        budget_tokens: int,
        session_id: str,
        system_prompt: str | None = None,
        task: str | None = None,
        classify: Classifier | None = None,
        pin: Pin | None = None,
        observe_turns: bool = False,
        state_key: str = STATE_KEY,
        labels: Mapping[str, str] | None = None,
        summarizer: Summarizer | None = None,
        summary_tokens: int = 0,
    ) -> None:
        self.engine = engine
        self.pruner = WindowPruner(
            scorer, budget_tokens=budget_tokens, observe_turns=observe_turns, summarizer=summarizer
        )
        self.summary_tokens = summary_tokens if summarizer is not None else 0
        self.session_id = session_id
        self.system_prompt = system_prompt
        self.task = task
        self.classify = classify
        self.pin = pin
        self.state_key = state_key
        self.labels = dict(labels or {})
        self.last_outcome: PassOutcome | None = None

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The state update: the removals and the tombstone, and the session's new state with
        the tombstone's record."""
        messages: list[AnyMessage] = list(state.get("messages", ()))
        saved = state.get(self.state_key) or {}
        session = self.engine.session(
            self.session_id, labels=self.labels, state=saved.get("session")
        )
        record = TombstoneRecord.from_state(saved.get("tombstone"))
        mine = record.find(messages)
        history = [m for n, m in enumerate(messages) if n != mine]
        segments = message_segments(history, classify=self.classify, pin=self.pin)
        summaries = _mark_summaries(segments, saved.get("summaries") or {})
        kinds = {str(s["id"]): str(s["kind"]) for s in segments}
        current = 0 if mine is None else count_tokens_approximately([messages[mine]])

        def tombstone_tokens(evicted: Sequence[str]) -> int:
            if not evicted:
                return current
            counts = removed_counts(record.removed, (kinds[i] for i in evicted))
            return count_tokens_approximately([tombstone_message(counts)]) + self.summary_tokens

        outcome = self.pruner.run(
            session,
            segments,
            self._task(history),
            fixed_tokens=self._prompt_tokens(),
            tombstone_tokens=tombstone_tokens,
            tombstones=sorted({p for entry in summaries.values() for p in entry["derived_from"]}),
        )
        self.last_outcome = outcome
        update: dict[str, Any] = {}
        if outcome.evict:
            at = str(messages[mine].id) if mine is not None else None
            update["messages"], record = removals(segments, outcome.evict, record, at)
            if outcome.summary is not None:
                written = update["messages"][0]  # the tombstone
                update["messages"] = _summarized(
                    messages,
                    mine,
                    segments,
                    evict=outcome.evict,
                    tombstone=written,
                    summary=outcome.summary,
                )
                summaries[str(outcome.summary["id"])] = {
                    "sha256": text_sha256(str(outcome.summary["text"])),
                    "derived_from": list(outcome.summary["derived_from"]),
                }
            summaries = {i: s for i, s in summaries.items() if i not in set(outcome.evict)}
        update[self.state_key] = {"session": session.state(), "tombstone": record.to_state()}
        if summaries:
            update[self.state_key]["summaries"] = summaries
        return update

    def _prompt_tokens(self) -> int:
        if self.system_prompt is None:
            return 0
        return count_tokens_approximately([SystemMessage(self.system_prompt)])

    def _task(self, messages: Sequence[BaseMessage]) -> str:
        if self.task is not None:
            return self.task
        first = next((m for m in messages if m.type == "human"), None)
        return message_text(first) if first is not None else ""


def _mark_summaries(
    segments: Sequence[dict[str, Any]], saved: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """The summaries the hook wrote (``saved``: id -> the SHA-256 of its text and what it
    derives from) still in the window as written: their segments become kind ``summary`` with
    their ``derived_from``, so that a pass folding one checks its summary against it. A message
    that only looks like a summary, or one whose text changed, is a message like any other."""
    known = {}
    for segment in segments:
        entry = saved.get(str(segment["id"]))
        if entry is not None and entry.get("sha256") == segment["text_sha256"]:
            segment["kind"] = "summary"
            segment["derived_from"] = [str(p) for p in entry.get("derived_from") or ()]
            known[str(segment["id"])] = dict(entry)
    return known


class TombstoneRecord:
    """What the hook keeps of its tombstone in the graph's state: the message's id, the SHA-256
    of its text, and how many messages of each kind were removed so far. Only the message with
    that id and that text is the tombstone; nothing a message says or is named makes it one."""

    def __init__(
        self,
        message_id: str | None = None,
        sha256: str | None = None,
        removed: Mapping[str, int] | None = None,
    ) -> None:
        self.message_id = message_id
        self.sha256 = sha256
        self.removed = dict(removed or {})

    @classmethod
    def from_state(cls, saved: Mapping[str, Any] | None) -> TombstoneRecord:
        if not saved:
            return cls()
        removed = saved.get("removed") or {}
        return cls(
            saved.get("id"), saved.get("sha256"), {str(k): int(v) for k, v in removed.items()}
        )

    def to_state(self) -> dict[str, Any]:
        return {"id": self.message_id, "sha256": self.sha256, "removed": dict(self.removed)}

    def find(self, messages: Sequence[BaseMessage]) -> int | None:
        """The index of the tombstone in ``messages``, or None when it is not there as written."""
        if self.message_id is None:
            return None
        for n, message in enumerate(messages):
            if message.id == self.message_id:
                text = message.content if isinstance(message.content, str) else None
                return n if text is not None and text_sha256(text) == self.sha256 else None
        return None


def removals(
    segments: Sequence[Mapping[str, Any]],
    evict: Sequence[str],
    record: TombstoneRecord,
    at: str | None = None,
) -> tuple[list[BaseMessage], TombstoneRecord]:
    """``RemoveMessage`` for every evicted id, and the tombstone counting everything removed so
    far: it overwrites the earlier tombstone in place (id ``at``), or on the first pass the
    earliest evicted message; and the record of the new tombstone."""
    evicted = set(evict)
    ordered = [str(s["id"]) for s in segments if str(s["id"]) in evicted]
    kinds = {str(s["id"]): str(s["kind"]) for s in segments}
    counts = removed_counts(record.removed, (kinds[i] for i in ordered))
    place = at if at is not None else ordered[0]
    tombstone = tombstone_message(counts, place)
    new = TombstoneRecord(place, text_sha256(str(tombstone.content)), counts)
    return [tombstone, *(RemoveMessage(id=i) for i in ordered if i != place)], new


def _summarized(  # noqa: PLR0913 - the history, its tombstone, and what the pass did
    messages: Sequence[BaseMessage],
    mine: int | None,
    segments: Sequence[Mapping[str, Any]],
    *,
    evict: Sequence[str],
    tombstone: BaseMessage,
    summary: Mapping[str, Any],
) -> list[BaseMessage]:
    """The whole history once a pass evicts ``evict`` and writes ``summary``: ``messages`` (with
    the hook's tombstone at index ``mine``, None when there is none yet; ``segments`` the
    segments of the others, in order) without the evicted ones, the tombstone where it was
    (else in the first evicted message's place) and the summary in the first evicted message's
    place, after the tombstone; ``REMOVE_ALL_MESSAGES`` first, so that LangGraph replaces the
    history with it."""
    gone = set(evict)
    first = next(str(s["id"]) for s in segments if str(s["id"]) in gone)
    ids = iter(str(s["id"]) for s in segments)
    note = AIMessage(content=str(summary["text"]), id=str(summary["id"]), name=SUMMARY_NAME)
    rewritten: list[BaseMessage] = [RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    for n, message in enumerate(messages):
        if n == mine:
            rewritten.append(tombstone)
            continue
        segment_id = next(ids)
        if segment_id == first:
            rewritten += [tombstone, note] if mine is None else [note]
        if segment_id not in gone:
            rewritten.append(message)
    return rewritten


__all__ = [
    "STATE_KEY",
    "SUMMARY_NAME",
    "TOMBSTONE_NAME",
    "PrunedAgentState",
    "PruningHook",
    "TombstoneRecord",
    "message_segments",
    "message_text",
    "policy_classifier",
    "removals",
    "tombstone_message",
]
