"""Real ``langchain_core.messages.trim_messages`` and ``SummarizationMiddleware`` edits over the
recorded example conversations, as transition documents: what ``tests/cases/transition/trim-*``
and ``summarize-*`` hold.

Each conversation of ``examples/agents/conversations.py`` becomes a chat history: a system
prompt, the user's task (its first line), then the turns, every fourth one a tool call and the
tool message answering it. Messages map to window segments as the LangGraph adapter maps them:
the system prompt and the task are non-recoverable, and a tool call and its result share an
eviction group. ``trim_messages`` then runs for real; the window before and after it is the
case's input, and ``python -m _support.trim_corpus`` (from tests/) rewrites the inputs of the
case files, keeping their hand-written expectations. ``test_transition_corpus.py`` checks the
files still hold what ``trim_messages`` produces.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "cases" / "transition"
SYSTEM_PROMPT = "You are a careful assistant. Keep every figure the user gave you."
_KINDS = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def conversations() -> dict[str, list[str]]:
    """The recorded example conversations (examples/agents/conversations.py, a script's
    module, loaded from its file)."""
    path = ROOT / "examples" / "agents" / "conversations.py"
    spec = importlib.util.spec_from_file_location("example_conversations", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.CONVERSATIONS)


def history(lines: list[str]) -> list[BaseMessage]:
    """A chat history of one conversation, every message with a stable id."""
    messages: list[BaseMessage] = [
        SystemMessage(SYSTEM_PROMPT, id="m00"),
        HumanMessage(lines[0], id="m01"),
    ]
    for i, text in enumerate(lines[1:]):
        number = len(messages)
        if i % 4 == 1:
            call = f"call-{number:02d}"
            request = {"name": "lookup", "args": {"query": text[:24]}, "id": call}
            messages.append(AIMessage("", id=f"m{number:02d}", tool_calls=[request]))
            messages.append(ToolMessage(text, tool_call_id=call, id=f"m{number + 1:02d}"))
        elif i % 2 == 0:
            messages.append(AIMessage(text, id=f"m{number:02d}"))
        else:
            messages.append(HumanMessage(text, id=f"m{number:02d}"))
    return messages


def segments(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Window segments of ``messages``, as the LangGraph adapter maps them."""
    calls = {
        call["id"]: message.id
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }
    first_human = next((m.id for m in messages if isinstance(m, HumanMessage)), None)
    out = []
    for message in messages:
        segment: dict[str, Any] = {
            "id": message.id,
            "kind": _KINDS[message.type],
            "text": _text(message),
            "tokens": count_tokens_approximately([message]),
        }
        if isinstance(message, SystemMessage) or message.id == first_human:
            segment["non_recoverable"] = True
        if isinstance(message, AIMessage) and message.tool_calls:
            segment["group"] = message.id
        if isinstance(message, ToolMessage) and message.tool_call_id in calls:
            segment["group"] = calls[message.tool_call_id]
        out.append(segment)
    return out


def _text(message: BaseMessage) -> str:
    text = message.content if isinstance(message.content, str) else str(message.content)
    if isinstance(message, AIMessage):
        text += "".join(f"\n{c['name']}({c['args']})" for c in message.tool_calls)
    return text


@dataclass(frozen=True, slots=True)
class Trim:
    """One recorded trim: the conversation, ``trim_messages``' arguments, and what the harness
    adds to the document (the tombstones it wrote, a policy)."""

    conversation: str
    options: Mapping[str, Any]
    tombstone_removed: bool = False  # the harness recorded every removed id
    policy: Mapping[str, Any] | None = None
    description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    # SummarizationMiddleware instead of trim_messages (options: its trigger and keep), and
    # whether the harness records what the summary was made from (its derived_from).
    summarize: bool = False
    parents_recorded: bool = False


TRIMS: dict[str, Trim] = {
    "trim-last-start-on-human-drops-task": Trim(
        "ferry-trip",
        {"strategy": "last", "max_tokens": 200, "include_system": True, "start_on": "human"},
        description="trim_messages keeps the system prompt and the last turns from a user "
        "message: the task is gone with no tombstone.",
    ),
    "trim-last-start-on-human-tombstoned": Trim(
        "ferry-trip",
        {"strategy": "last", "max_tokens": 200, "include_system": True, "start_on": "human"},
        tombstone_removed=True,
        description="The same trim with every removal recorded by the harness: allowed.",
    ),
    "trim-last-no-tombstones-required": Trim(
        "flaky-test",
        {"strategy": "last", "max_tokens": 180, "include_system": True, "start_on": "human"},
        policy={"transition": {"require_tombstones": False}},
        description="Tombstones not required: the dropped task is still a pinned removal.",
    ),
    "trim-last-without-system": Trim(
        "bread-recipe",
        {"strategy": "last", "max_tokens": 160, "start_on": "human"},
        tombstone_removed=True,
        policy={"transition": {"require_tombstones": False}},
        description="Without include_system the system prompt goes too; the harness tombstoned "
        "every removal, so only an untombstoned pin could refuse: allowed.",
    ),
    "trim-last-without-system-untombstoned": Trim(
        "bread-recipe",
        {"strategy": "last", "max_tokens": 160, "start_on": "human"},
        policy={"transition": {"require_tombstones": False}},
        description="Without include_system and without tombstones: system prompt and task "
        "are pinned removals.",
    ),
    "trim-last-cuts-a-tool-call": Trim(
        "household-budget",
        {"strategy": "last", "max_tokens": 180, "include_system": True},
        tombstone_removed=True,
        description="A plain last-tokens trim starts the window at a tool result whose call it "
        "dropped: the group is split (a provider 400), even with tombstones.",
    ),
    "trim-last-cuts-a-tool-call-untombstoned": Trim(
        "moving-house",
        {"strategy": "last", "max_tokens": 184, "include_system": True},
        description="The same kind of cut with nothing recorded: the task, the split group and "
        "every silent removal are all listed.",
    ),
    "trim-last-tight-budget-keeps-a-result": Trim(
        "cover-letter",
        {"strategy": "last", "max_tokens": 60, "include_system": True},
        tombstone_removed=True,
        description="A tight budget keeps only the system prompt and the last message, every "
        "removal recorded by the harness: allowed.",
    ),
    "trim-last-spanish-drops-task": Trim(
        "spanish-lessons",
        {"strategy": "last", "max_tokens": 220, "include_system": True, "start_on": "human"},
        policy={"transition": {"mode": "audit"}},
        description="Under transition mode audit the dropped task is recorded, not enforced.",
    ),
    "trim-first-drops-newest": Trim(
        "vegetable-garden",
        {"strategy": "first", "max_tokens": 200},
        description="strategy first keeps the opening and drops the newest turns, with no "
        "tombstone.",
    ),
    "trim-first-drops-newest-allowed": Trim(
        "vegetable-garden",
        {"strategy": "first", "max_tokens": 200},
        policy={"transition": {"require_tombstones": False}},
        description="The same trim where the policy does not require tombstones: allowed.",
    ),
    "summarize-drops-system-and-task": Trim(
        "household-budget",
        {"trigger": ("messages", 10), "keep": ("messages", 6)},
        summarize=True,
        description="SummarizationMiddleware replaces everything but the last six messages with "
        "one summary: the system prompt and the task go with no tombstone, and the summary names "
        "no parent.",
    ),
    "summarize-with-parents-recorded": Trim(
        "household-budget",
        {"trigger": ("messages", 10), "keep": ("messages", 6)},
        summarize=True,
        parents_recorded=True,
        description="The same summary with what it replaced recorded as its derived_from: the "
        "messages are folded, not removed, but the pinned system prompt and task still need a "
        "tombstone.",
    ),
    "summarize-with-parents-and-tombstones": Trim(
        "household-budget",
        {"trigger": ("messages", 10), "keep": ("messages", 6)},
        summarize=True,
        parents_recorded=True,
        tombstone_removed=True,
        description="Parents recorded and the pinned ones tombstoned: the summary may stand.",
    ),
    "summarize-below-trigger-is-clean": Trim(
        "bread-recipe",
        {"trigger": ("messages", 100), "keep": ("messages", 6)},
        summarize=True,
        description="Below its trigger the middleware changes nothing.",
    ),
    "trim-within-budget-is-clean": Trim(
        "flaky-test",
        {"strategy": "last", "max_tokens": 100000, "include_system": True},
        description="A budget the history fits in: trim_messages changes nothing.",
    ),
    "trim-last-scores-required": Trim(
        "ferry-trip",
        {"strategy": "last", "max_tokens": 260, "include_system": True, "start_on": "human"},
        tombstone_removed=True,
        policy={"transition": {"require_scores": True}},
        description="require_scores: a framework trim carries no scores, so each removal is "
        "unscored.",
    ),
}


SUMMARY = "Budget so far: income 5200, rent 1450, groceries 780, savings 10 percent."


def summarized(messages: list[BaseMessage], options: Mapping[str, Any]) -> list[BaseMessage]:
    """What ``SummarizationMiddleware.before_model`` leaves of ``messages`` (its fake model
    answers one fixed summary): the messages after its remove-all marker."""
    model = GenericFakeChatModel(messages=itertools.repeat(AIMessage(SUMMARY)))
    middleware = SummarizationMiddleware(model, **options)
    state: Any = {"messages": messages}  # the AgentState the middleware reads
    update = middleware.before_model(state, None)  # type: ignore[arg-type]
    if update is None:
        return messages
    return [m for m in update["messages"] if not isinstance(m, RemoveMessage)]


def trimmed_document(trim: Trim) -> dict[str, Any]:
    """The transition document of one recorded edit, ``trim_messages`` (or the
    summarization middleware) run now."""
    messages = history(conversations()[trim.conversation])
    if trim.summarize:
        kept = summarized(messages, trim.options)
    else:
        kept = trim_messages(messages, token_counter=count_tokens_approximately, **trim.options)
    before = segments(messages)
    # A kept message is the same segment after the cut (the task stays non-recoverable).
    facts = {segment["id"]: segment for segment in before}
    after = [facts[m.id] if m.id in facts else _summary(m, before, trim) for m in kept]
    document: dict[str, Any] = {
        "check": "transition",
        "before": before,
        "after": after,
        "applied_by": "langchain_core.messages.trim_messages",
    }
    if trim.tombstone_removed:
        present = {segment["id"] for segment in after}
        document["tombstones"] = [s["id"] for s in before if s["id"] not in present]
    return document


def _summary(message: BaseMessage, before: list[dict[str, Any]], trim: Trim) -> dict[str, Any]:
    """The segment of the summary message (it has no id of its own): derived from the messages
    it replaced when the harness records them."""
    segment: dict[str, Any] = {"id": "summary-1", "kind": "summary", "text": _text(message)}
    if trim.parents_recorded:
        segment["derived_from"] = [s["id"] for s in before[: _cut(trim)]]
    return segment


def _cut(trim: Trim) -> int:
    """How many messages the summary replaced: those before the ones the middleware kept."""
    messages = history(conversations()[trim.conversation])
    return len(messages) - len([m for m in summarized(messages, trim.options) if m.id])


def write_cases() -> None:
    """Rewrite every trim case's input (and description, policy), keeping its expectations."""
    for name, trim in TRIMS.items():
        path = CASES / f"{name}.yaml"
        old = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
        case: dict[str, Any] = {"description": trim.description}
        if trim.policy is not None:
            case["policy"] = dict(trim.policy)
        case["input"] = trimmed_document(trim)
        case["expect"] = old.get("expect", {"outcome": "allow", "reasons": [], "actions": []})
        path.write_text(yaml.safe_dump(case, sort_keys=False, width=100), encoding="utf-8")


if __name__ == "__main__":
    write_cases()
