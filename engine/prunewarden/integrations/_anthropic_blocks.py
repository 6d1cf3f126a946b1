"""The blocks of an Anthropic Messages request as window segments (see
:mod:`prunewarden.integrations.anthropic`), shared by its context-editing and compaction judges."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anthropic import BaseModel as SDKModel

from prunewarden.rules import SegmentClassifier
from prunewarden.scoring import text_sha256

THINKING = {"thinking", "redacted_thinking"}


def plain(value: Any) -> Any:
    """``value`` with every SDK model in it as the dict the API would receive."""
    if isinstance(value, SDKModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [plain(block) for block in content]


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))


_TEXTS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "text": lambda block: str(block.get("text", "")),
    "tool_use": lambda block: (
        f"{block.get('name', '')}({json.dumps(block.get('input', {}), sort_keys=True)})"
    ),
    "tool_result": _result_text,
    "thinking": lambda block: str(block.get("thinking", "")),
    "redacted_thinking": lambda block: str(block.get("data", "")),
    "compaction": lambda block: str(block.get("content") or ""),
}


def block_text(block: Mapping[str, Any]) -> str:
    """The text a block carries: a text's text, a call's name and input, a result's content,
    a thinking block's thinking (a redacted one's data), a compaction block's summary; any
    other block as JSON."""
    read = _TEXTS.get(str(block.get("type")))
    return read(block) if read else json.dumps(block, sort_keys=True, default=str)


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of a request: where it is, and what a tool block is about."""

    turn: int  # the message's index; -1 for the system prompt
    block: dict[str, Any]
    tool_use_id: str | None = None
    tool_name: str | None = None


def request_blocks(messages: Iterable[Any], system: Any = None) -> list[Block]:
    """The blocks of a request, in order, the system prompt first; a tool result knows the
    name of the tool whose use it answers."""
    blocks = [Block(-1, b) for b in (content_blocks(system) if system else [])]
    names: dict[str, str] = {}
    for turn, message in enumerate(plain(list(messages))):
        for block in content_blocks(message.get("content", "")):
            block["_role"] = message.get("role")
            use_id = block.get("id") if block.get("type") == "tool_use" else None
            use_id = use_id or (
                block.get("tool_use_id") if block.get("type") == "tool_result" else None
            )
            if block.get("type") == "tool_use" and use_id:
                names[use_id] = str(block.get("name", ""))
            name = names.get(use_id) if use_id else None
            blocks.append(Block(turn, block, use_id, name))
    return blocks


def message_segments(  # noqa: PLR0913 - the request, then what gives blocks their kinds and pins
    messages: Iterable[Any],
    *,
    system: Any = None,
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    classify: SegmentClassifier | None = None,
) -> list[dict[str, Any]]:
    """The window segments of a request (see the module's docstring). ``tool_kinds`` maps a
    tool's name to the kind its results take (a kind the policy may pin); ``classify`` (a
    policy's classifier, :func:`prunewarden.policy.classifier`) gives the other blocks theirs."""
    blocks = request_blocks(messages, system)
    return window_segments(blocks, tool_kinds, pinned_tools, canaries, classify)


def window_segments(
    blocks: list[Block],
    tool_kinds: Mapping[str, str] | None,
    pinned_tools: Iterable[str],
    canaries: Iterable[str],
    classify: SegmentClassifier | None = None,
) -> list[dict[str, Any]]:
    pinned_names, canary_ids = set(pinned_tools), set(canaries)
    first_user = next((b.turn for b in blocks if b.block.get("_role") == "user"), None)
    seen: Counter[str] = Counter()
    segments = []
    for b in blocks:
        kind = block_kind(b, tool_kinds or {})
        text = block_text(b.block)
        if classify is not None and kind in _ROLE_OF:
            given = classify.classify(_ROLE_OF[kind], text, b.tool_name)
            kind = given.kind if given is not None else kind
        digest = text_sha256(json.dumps(b.block, sort_keys=True, default=str))[:16]
        seen[digest] += 1
        own = f"block-{digest}" if seen[digest] == 1 else f"block-{digest}-{seen[digest]}"
        canary = own in canary_ids or (b.tool_name in pinned_names and kind != "tool_call")
        segment: dict[str, Any] = {
            "id": own,
            "kind": kind,
            "text": text,
            "tokens": len(text) // 4 + 4,
            "text_sha256": text_sha256(text),
            "non_recoverable": b.turn in {-1, first_user} or canary,
            "metadata": {"canary": canary, "turn": b.turn},
        }
        if b.tool_use_id:
            segment["group"] = f"tool_use:{b.tool_use_id}"
        elif b.block.get("type") in THINKING:
            segment["group"] = f"thinking:{b.turn}"
        segments.append(segment)
    return segments


# The kinds a block takes from its place, and the role a classifier reads for each; a kind a
# tool's results were given (tool_kinds) and thinking blocks are not classified.
_ROLE_OF = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool_call": "assistant",
    "tool": "tool",
}


def block_kind(b: Block, tool_kinds: Mapping[str, str]) -> str:
    kind = b.block.get("type")
    if b.turn == -1:
        return "system"
    if kind == "tool_use":
        return "tool_call"
    if kind == "tool_result":
        return tool_kinds.get(b.tool_name or "", "tool")
    if kind in THINKING:
        return "thinking"
    if kind == "compaction":
        return "summary"  # an earlier compaction's summary, sent back first in messages
    return str(b.block.get("_role") or "user")
