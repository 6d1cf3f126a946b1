"""Edits made by the providers' SDKs, as transition documents: what
``tests/cases/transition/anthropic-*`` and ``agents-*`` hold.

- **Anthropic** server-side context editing: a recorded example conversation becomes a Messages
  request built from the SDK's own param types (the task, then turns of a ``thinking`` block and
  a ``tool_use``, each answered by a ``tool_result``); the response's ``applied_edits`` are the
  SDK's response models. ``prunewarden.integrations.anthropic.applied_window`` rebuilds the
  window the server edited: the case's input.
- **The OpenAI Agents SDK**: a real ``GuardedSession`` over a real in-memory ``SQLiteSession``
  pops, clears or trims; the windows it hands ``Session.verify`` are recorded as the case's
  input.

``python -m _support.sdk_corpus`` (from tests/) rewrites the inputs of the case files, keeping
their hand-written expectations, as ``_support.trim_corpus`` does for LangChain's trims;
``test_transition_corpus.py`` checks the files still hold what the SDKs produce.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from agents import SQLiteSession
from anthropic.types.beta import (
    BetaClearThinking20251015EditResponse,
    BetaClearToolUses20250919EditResponse,
    BetaContextManagementConfigParam,
    BetaContextManagementResponse,
    BetaMessageParam,
)
from prunewarden import Decision, Engine
from prunewarden.integrations.anthropic import APPLIED_BY, applied_window, message_segments
from prunewarden.integrations.openai_agents_edits import GuardedSession

from _support.trim_corpus import CASES, conversations

SYSTEM_PROMPT = "You are a careful assistant. Keep every figure the user gave you."
TOOLS = ("search", "read_notes", "calculator")
# The default policy's: what the cases without a policy of their own pin.
PINNED_KINDS = sorted(Engine.default().policy.spec.transition.pinned_kinds)


def anthropic_messages(lines: list[str]) -> list[BetaMessageParam]:
    """A Messages request's history for one conversation: the task, then for each later line
    an assistant turn (thinking, a tool use) and the user turn holding its result."""
    messages: list[BetaMessageParam] = [{"role": "user", "content": lines[0]}]
    for i, text in enumerate(lines[1:]):
        use = f"toolu_{i:02d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"Step {i}: look it up.", "signature": "s"},
                    {
                        "type": "tool_use",
                        "id": use,
                        "name": TOOLS[i % len(TOOLS)],
                        "input": {"query": text[:24]},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use, "content": text}],
            }
        )
    return messages


def applied(tool_uses: int = 0, thinking_turns: int = 0) -> BetaContextManagementResponse:
    """The response's ``context_management``: what the server reports it cleared."""
    edits: list[Any] = []
    if thinking_turns:
        edits.append(
            BetaClearThinking20251015EditResponse(
                type="clear_thinking_20251015",
                cleared_thinking_turns=thinking_turns,
                cleared_input_tokens=12 * thinking_turns,
            )
        )
    if tool_uses:
        edits.append(
            BetaClearToolUses20250919EditResponse(
                type="clear_tool_uses_20250919",
                cleared_tool_uses=tool_uses,
                cleared_input_tokens=40 * tool_uses,
            )
        )
    return BetaContextManagementResponse(applied_edits=edits)


@dataclass(frozen=True, slots=True)
class ContextEdit:
    """One recorded server-side edit: the conversation, the request's ``context_management``,
    what the response reported, the adapter's options and the case's policy."""

    conversation: str
    request: BetaContextManagementConfigParam
    tool_uses: int = 0
    thinking_turns: int = 0
    tool_kinds: Mapping[str, str] = field(default_factory=dict)
    pinned_tools: Sequence[str] = ()
    canary_result: int | None = None  # the index of a tool result that is a canary
    policy: Mapping[str, Any] | None = None
    description: str = ""


CLEAR_KEEP_3: BetaContextManagementConfigParam = {
    "edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}]
}

CONTEXT_EDITS: dict[str, ContextEdit] = {
    "anthropic-clear-tool-uses-clean": ContextEdit(
        "ferry-trip",
        CLEAR_KEEP_3,
        tool_uses=8,
        description="clear_tool_uses keeps the last three tool uses and replaces the eight "
        "older results with its placeholder, which records each: allowed.",
    ),
    "anthropic-clear-pinned-tool-results": ContextEdit(
        "ferry-trip",
        CLEAR_KEEP_3,
        tool_uses=8,
        tool_kinds={"read_notes": "constraint"},
        description="The same clearing where read_notes results are constraints: the "
        "placeholder does not say what a pinned result held, so their clearing is refused.",
    ),
    "anthropic-clear-excluding-pinned-tools": ContextEdit(
        "ferry-trip",
        {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "keep": {"type": "tool_uses", "value": 3},
                    "exclude_tools": ["read_notes"],
                }
            ]
        },
        tool_uses=5,
        tool_kinds={"read_notes": "constraint"},
        description="With read_notes in exclude_tools (as the policy compiles it) only the "
        "other tools' results are cleared: allowed.",
    ),
    "anthropic-clear-canary-result": ContextEdit(
        "flaky-test",
        CLEAR_KEEP_3,
        tool_uses=8,
        canary_result=0,
        description="The first tool result is a canary the harness pinned; clearing it is "
        "refused and the restore names it.",
    ),
    "anthropic-clear-pinned-tool-by-name": ContextEdit(
        "household-budget",
        {"edits": [{"type": "clear_tool_uses_20250919", "clear_tool_inputs": True}]},
        tool_uses=4,
        pinned_tools=["calculator"],
        policy={"transition": {"require_tombstones": False}},
        description="clear_tool_inputs clears the calls' inputs too; the calculator's results "
        "are pinned by tool name, so clearing them is refused even without tombstones.",
    ),
    "anthropic-clear-thinking-clean": ContextEdit(
        "bread-recipe",
        {
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
            ]
        },
        thinking_turns=9,
        description="clear_thinking drops the thinking of all but the last two turns, whole "
        "turns at a time: allowed.",
    ),
    "anthropic-clear-thinking-pinned": ContextEdit(
        "bread-recipe",
        {
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
            ]
        },
        thinking_turns=9,
        policy={"transition": {"pinned_kinds": ["constraint", "thinking"]}},
        description="A policy that pins the thinking kind refuses the same clearing.",
    ),
}


def context_edit_document(edit: ContextEdit) -> dict[str, Any]:
    """The transition document of one recorded server-side edit, rebuilt now."""
    messages = anthropic_messages(conversations()[edit.conversation])
    canaries = []
    if edit.canary_result is not None:
        results = [
            s for s in message_segments(messages, system=SYSTEM_PROMPT) if s["kind"] == "tool"
        ]
        canaries.append(results[edit.canary_result]["id"])
    request = {"system": SYSTEM_PROMPT, "messages": messages, "context_management": edit.request}
    window = applied_window(
        request,
        applied(edit.tool_uses, edit.thinking_turns),
        tool_kinds=edit.tool_kinds,
        pinned_tools=edit.pinned_tools,
        canaries=canaries,
        pinned_kinds=(edit.policy or {}).get("transition", {}).get("pinned_kinds", PINNED_KINDS),
    )
    document: dict[str, Any] = {
        "check": "transition",
        "before": window.before,
        "after": window.after,
        "applied_by": APPLIED_BY,
    }
    if window.tombstones:
        document["tombstones"] = list(window.tombstones)
    return document


AGENTS_ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel planner."},
    {"role": "user", "content": "Plan a two-day ferry trip for two adults."},
    {"type": "function_call", "call_id": "c1", "name": "ferries", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "07:30 and 16:00"},
    {"role": "assistant", "content": "Take the 07:30 crossing."},
    {"role": "user", "content": "And the return?"},
    {"type": "function_call", "call_id": "c2", "name": "ferries", "arguments": '{"day": 2}'},
    {"type": "function_call_output", "call_id": "c2", "output": "16:00 and 19:15"},
]


@dataclass(frozen=True, slots=True)
class SessionEdit:
    """One edit of an Agents SDK session through ``GuardedSession``: ``pop``, ``clear``, or a
    trim (``replace_items`` with the items at ``keep``)."""

    edit: str
    keep: Sequence[int] = ()
    policy: Mapping[str, Any] | None = None
    description: str = ""


SESSION_EDITS: dict[str, SessionEdit] = {
    "agents-pop-output-splits-a-call": SessionEdit(
        "pop",
        policy={"transition": {"require_tombstones": False}},
        description="pop_item removes the newest item, a function call's output, and leaves "
        "its call unanswered (a provider 400): refused, the output restored.",
    ),
    "agents-pop-whole-call-allowed": SessionEdit(
        "trim",
        keep=range(6),
        policy={"transition": {"require_tombstones": False}},
        description="A trim through replace_items that drops the newest call with its output "
        "keeps every pin: allowed where tombstones are not required.",
    ),
    "agents-clear-session-refused": SessionEdit(
        "clear",
        description="clear_session drops the system prompt and the task with nothing recording "
        "them: refused, the two restored (the decision records the rest).",
    ),
    "agents-trim-keeps-an-orphaned-output": SessionEdit(
        "trim",
        keep=(0, 3, 4, 5, 6, 7),
        policy={"transition": {"require_tombstones": False}},
        description="A trim keeping the first call's output without its call, and dropping the "
        "task: refused for both, the task and the call restored.",
    ),
}


class _Recorder:
    """Stands in for a GuardedSession's prunewarden session: records what it is asked to
    verify, and answers as the real one does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # what the guard reads of its session

    def verify(self, before: Any, after: Any, **options: Any) -> Decision:
        self.calls.append({"before": before, "after": after, **options})
        decision: Decision = self.inner.verify(before, after, **options)
        return decision


def session_edit_document(name: str, edit: SessionEdit) -> dict[str, Any]:
    """The transition document a real GuardedSession hands ``Session.verify`` for one edit."""

    async def run() -> dict[str, Any]:
        guarded = GuardedSession(SQLiteSession(name), Engine.default())
        recorder = _Recorder(guarded.guard)
        guarded.guard = recorder  # type: ignore[assignment]
        await guarded.add_items([dict(item) for item in AGENTS_ITEMS])
        if edit.edit == "pop":
            await guarded.pop_item()
        elif edit.edit == "clear":
            await guarded.clear_session()
        else:
            kept = [dict(AGENTS_ITEMS[i]) for i in edit.keep]
            await guarded.replace_items(kept, applied_by="replace_items")
        (call,) = recorder.calls
        return call

    call = asyncio.run(run())
    return {
        "check": "transition",
        "before": call["before"],
        "after": call["after"],
        "applied_by": call["applied_by"],
        **({"tombstones": list(call["tombstones"])} if call.get("tombstones") else {}),
    }


def document(name: str) -> dict[str, Any]:
    """The input of the SDK case ``name``, produced by the SDK now."""
    if name in CONTEXT_EDITS:
        return context_edit_document(CONTEXT_EDITS[name])
    return session_edit_document(name, SESSION_EDITS[name])


def documents() -> dict[str, dict[str, Any]]:
    """Every SDK case's input, by case name."""
    return {name: document(name) for name in [*CONTEXT_EDITS, *SESSION_EDITS]}


def _described() -> dict[str, tuple[str, Mapping[str, Any] | None]]:
    edits: dict[str, ContextEdit | SessionEdit] = {**CONTEXT_EDITS, **SESSION_EDITS}
    return {name: (edit.description, edit.policy) for name, edit in edits.items()}


def write_cases() -> None:
    """Rewrite every SDK case's input (and description, policy), keeping its expectations."""
    described = _described()
    for name, document in documents().items():
        path = CASES / f"{name}.yaml"
        old = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
        description, policy = described[name]
        case: dict[str, Any] = {"description": description}
        if policy is not None:
            case["policy"] = dict(policy)
        case["input"] = document
        case["expect"] = old.get("expect", {"outcome": "allow", "reasons": [], "actions": []})
        path.write_text(yaml.safe_dump(case, sort_keys=False, width=100), encoding="utf-8")


if __name__ == "__main__":
    write_cases()
