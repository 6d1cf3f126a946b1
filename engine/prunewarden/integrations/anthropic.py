"""Anthropic Messages: the blocks of a request as segments, and server-side context editing judged.

Needs ``prunewarden[anthropic]``. :func:`message_segments` maps a request (dicts, the SDK's param
types or its response blocks) to segments, one per block, ids from content: a ``tool_use`` and
its ``tool_result`` one eviction group, a turn's thinking blocks one group, the system prompt and
the first user turn pinned. The server does not return the window it edited, so
:func:`judge_applied_edits` rebuilds it from the request and the response's ``applied_edits``
and judges the edit with ``Session.verify``; :func:`compile_context_management` writes the
``context_management`` parameter that cannot clear what the policy pins. A placeholder records
that a tool result was cleared, so it is the tombstone of an unpinned one; it does not say what
a pinned one held, so clearing a pinned result is ``pinned_removed`` (docs/transitions.md).
A compaction block (``compact_20260112``, the ``compaction`` parameter) is judged by
:func:`judge_compaction` against the messages it replaces, and the policy's pins are compiled
into its ``instructions`` (docs/compaction.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from anthropic.types.beta import (
    BetaClearThinking20251015EditParam,
    BetaClearThinking20251015EditResponse,
    BetaClearToolUses20250919EditParam,
    BetaClearToolUses20250919EditResponse,
    BetaCompact20260112EditParam,
    BetaContextManagementConfigParam,
)
from pydantic import TypeAdapter, ValidationError

from prunewarden.decision import Decision
from prunewarden.errors import InputError, Problem
from prunewarden.integrations._anthropic_blocks import (
    THINKING,
    Block,
    block_text,
    message_segments,
    plain,
    request_blocks,
    window_segments,
)
from prunewarden.integrations._anthropic_compaction import (
    APPLIED_BY_COMPACTION,
    COMPACT,
    SUMMARIZE_PROMPT,
    CompactionOutcome,
    compaction_block,
    compaction_instructions,
    compaction_window,
    compile_compact_edit,
    compile_compaction,
    judge_compaction,
)
from prunewarden.integrations._tombstones import warn_restored
from prunewarden.policy import Policy, classifier
from prunewarden.rules import SegmentClassifier
from prunewarden.session import Session

CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
CLEAR_THINKING: Final = "clear_thinking_20251015"
PLACEHOLDER = "[cleared by context editing]"
APPLIED_BY = "anthropic.context_management"
DEFAULT_KEEP_TOOL_USES = 3  # the server's default keep: {type: tool_uses, value: 3}
DEFAULT_KEEP_THINKING_TURNS = 1  # the server's default: the last assistant turn's thinking
_EDITS: dict[str, TypeAdapter[Any]] = {
    CLEAR_TOOL_USES: TypeAdapter(BetaClearToolUses20250919EditParam),
    CLEAR_THINKING: TypeAdapter(BetaClearThinking20251015EditParam),
}
_APPLIED: dict[str, TypeAdapter[Any]] = {
    CLEAR_TOOL_USES: TypeAdapter(BetaClearToolUses20250919EditResponse),
    CLEAR_THINKING: TypeAdapter(BetaClearThinking20251015EditResponse),
}


@dataclass(frozen=True, slots=True)
class EditedWindow:
    """A request's window before and after the server's edit: ``tombstones`` the cleared ids
    recorded outside the window, ``cleared`` every id the edit cleared, in order."""

    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    tombstones: tuple[str, ...]
    cleared: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ContextEditOutcome:
    """One server-side edit judged: the windows before and after it and the decision."""

    window: EditedWindow
    decision: Decision

    @property
    def refused(self) -> bool:
        """The edit removed what the policy forbids removing."""
        return self.decision.blocks


def applied_window(  # noqa: PLR0913 - the request, the response and what pins segments
    request: Mapping[str, Any],
    response: Any,
    *,
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    pinned_kinds: Iterable[str] = (),
    classify: SegmentClassifier | None = None,
) -> EditedWindow:
    """The request's window and the window the server edited it into, as ``response``
    reports the edit. ``request`` holds ``messages``, optionally ``system`` and
    ``context_management``; ``response`` is the message (or its ``context_management``, or a
    dict of either). A cleared segment is recorded (a placeholder naming it, or a tombstone id)
    unless it is pinned: non-recoverable, a canary, a pinned tool's, or of ``pinned_kinds``."""
    blocks = request_blocks(request.get("messages", ()), request.get("system"))
    before = window_segments(blocks, tool_kinds, pinned_tools, canaries, classify)
    kinds = set(pinned_kinds)
    pinned = {s["id"] for s in before if s["non_recoverable"] or s["kind"] in kinds}
    edits = _requested_edits(request.get("context_management") or {})
    after = [dict(segment) for segment in before]
    tombstones: list[str] = []
    cleared: list[str] = []
    for applied in _applied_edits(response):
        edit = edits.get(applied["type"])
        if edit is None:
            problem = Problem(
                path="$.context_management.applied_edits",
                message=(f"{applied['type']} was applied but the request did not ask for it"),
            )
            raise InputError([problem])
        if applied["type"] == CLEAR_TOOL_USES:
            count = int(applied["cleared_tool_uses"])
            gone = _clear_tool_uses(blocks, after, edit, count, pinned)
        else:  # CLEAR_THINKING: _applied_edits refuses any other kind
            gone = _clear_thinking(blocks, after, edit, int(applied["cleared_thinking_turns"]))
            # The server drops a thinking turn whole and says so; the client keeps the blocks.
            tombstones += [i for i in gone if i not in pinned]
        cleared += gone
    # The server never drops a tool block (a cleared one keeps its place with a placeholder),
    # so no tool pair is split by its edit: the pairs' groups are left out of this judgement.
    for segment in (*before, *after):
        if str(segment.get("group", "")).startswith("tool_use:"):
            del segment["group"]
    return EditedWindow(before, [s for s in after if s], tuple(tombstones), tuple(cleared))


def _applied_edits(response: Any) -> list[dict[str, Any]]:
    """The response's applied edits, each checked against the SDK's model of its kind; a kind
    this module cannot rebuild is refused, never skipped."""
    found = plain(response)
    if isinstance(found, Mapping) and "applied_edits" not in found:
        found = found.get("context_management") or {}
    edits = []
    for i, edit in enumerate(
        found.get("applied_edits") or [] if isinstance(found, Mapping) else []
    ):
        path = f"$.context_management.applied_edits[{i}]"
        model = _APPLIED.get(str(edit.get("type")))
        if model is None:
            message = f"{edit.get('type')!r} is no edit this adapter can rebuild"
            raise InputError([Problem(path=f"{path}.type", message=message)])
        edits.append(_validated(model, edit, path))
    return edits


def _requested_edits(config: Any) -> dict[str, dict[str, Any]]:
    """The request's edits this module rebuilds, by type, each checked against the SDK's type
    of its kind (an edit of another kind, such as compaction, is not rebuilt)."""
    found = {}
    for i, edit in enumerate(plain(config).get("edits", [])):
        adapter = _EDITS.get(str(edit.get("type")))
        if adapter is not None:
            found[edit["type"]] = _validated(adapter, edit, f"$.context_management.edits[{i}]")
    return found


def _validated(adapter: TypeAdapter[Any], value: Any, path: str) -> Any:
    """``value`` as plain data once the SDK's type accepts it, else a located InputError."""
    try:
        # Iterables the SDK's types accept are checked as they are read: read them here.
        return plain(adapter.validate_python(plain(value)))
    except ValidationError as error:
        problems = [
            Problem(path=path + "".join(_step(part) for part in e["loc"]), message=e["msg"])
            for e in error.errors()
        ]
        raise InputError(problems) from None


def _step(part: str | int) -> str:
    return f"[{part}]" if isinstance(part, int) else f".{part}"


def _clear_tool_uses(
    blocks: list[Block],
    after: list[dict[str, Any]],
    edit: Mapping[str, Any],
    count: int,
    pinned: set[str],
) -> list[str]:
    """Replace the results (and inputs, as ``clear_tool_inputs`` says) of the ``count`` oldest
    tool uses the edit may clear; returns the ids replaced."""
    uses = [b for b in blocks if b.block.get("type") == "tool_use" and b.tool_use_id]
    keep = (edit.get("keep") or {}).get("value", DEFAULT_KEEP_TOOL_USES)
    excluded = set(edit.get("exclude_tools") or ())
    clearable = [b for b in uses[: max(len(uses) - keep, 0)] if b.tool_name not in excluded]
    if count > len(clearable):
        _inconsistent("cleared_tool_uses", count, len(clearable))
    targets = {b.tool_use_id for b in clearable[:count]}
    inputs = edit.get("clear_tool_inputs") or False
    replaced = []
    for position, b in enumerate(blocks):
        if b.tool_use_id not in targets:
            continue
        is_use = b.block.get("type") == "tool_use"
        if is_use and not (inputs is True or (isinstance(inputs, list) and b.tool_name in inputs)):
            continue
        old = after[position]
        replaced.append(old["id"])
        after[position] = {
            "id": f"cleared-{old['id']}",
            "kind": "tombstone",
            "text": PLACEHOLDER,
            "tokens": len(PLACEHOLDER) // 4 + 4,
            "tombstone_for": [] if old["id"] in pinned else [old["id"]],
            "metadata": {"turn": old["metadata"]["turn"], "clears": old["id"]},
        }
    return replaced


def _clear_thinking(
    blocks: list[Block], after: list[dict[str, Any]], edit: Mapping[str, Any], count: int
) -> list[str]:
    """Drop the thinking blocks of the ``count`` oldest turns the edit may clear."""
    turns = sorted({b.turn for b in blocks if b.block.get("type") in THINKING})
    keep = edit.get("keep", {"value": DEFAULT_KEEP_THINKING_TURNS})
    kept = len(turns) if keep == "all" or keep.get("type") == "all" else int(keep["value"])
    clearable = turns[: max(len(turns) - kept, 0)]
    if count > len(clearable):
        _inconsistent("cleared_thinking_turns", count, len(clearable))
    gone = set(clearable[:count])
    removed = []
    for position, b in enumerate(blocks):
        if b.block.get("type") in THINKING and b.turn in gone:
            removed.append(after[position]["id"])
            after[position] = {}
    return removed


def _inconsistent(field: str, count: int, possible: int) -> None:
    message = f"{count} is more than the request lets the server clear ({possible})"
    raise InputError(
        [Problem(path=f"$.context_management.applied_edits[*].{field}", message=message)]
    )


def judge_applied_edits(  # noqa: PLR0913 - the request, the response and the adapter's options
    session: Session,
    request: Mapping[str, Any],
    response: Any,
    *,
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
) -> ContextEditOutcome:
    """The server's context editing of ``request`` (reported by ``response``) judged as a
    transition of ``session``, its blocks given kinds by the policy's classifier
    (``spec.classify``) where ``tool_kinds`` names none. A cleared block that may go is
    recorded (its placeholder is its tombstone); a refused edit's ``restore`` names what should
    not have been cleared, and a warning on the ``prunewarden.integrations`` logger names it
    and the decision id: send the next request with :func:`compile_context_management`'s
    parameters."""
    window = applied_window(
        request,
        response,
        tool_kinds=tool_kinds,
        pinned_tools=pinned_tools,
        canaries=canaries,
        pinned_kinds=session.policy.spec.transition.pinned_kinds,
        classify=classifier(session.policy),
    )
    decision = session.verify(
        window.before,
        window.after,
        tombstones=window.tombstones,
        applied_by=APPLIED_BY,
    )
    if decision.blocks:
        warn_restored(session, APPLIED_BY, decision, decision.restore, done="to restore")
    return ContextEditOutcome(window, decision)


def compile_context_management(  # noqa: PLR0913 - the policy and what it pins
    policy: Policy,
    *,
    messages: Iterable[Any] = (),
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    edit: BetaClearToolUses20250919EditParam | None = None,
    compact: BetaCompact20260112EditParam | bool = False,
) -> BetaContextManagementConfigParam:
    """The ``context_management`` parameter for a request of ``messages`` under ``policy``:
    ``edit`` (or the server's defaults) with every tool whose results the policy pins in
    ``exclude_tools``, and ``keep`` raised to cover the oldest use whose result is a canary;
    thinking kept whole (``keep: "all"``) when the policy pins the ``thinking`` kind or a canary
    is a thinking block. ``compact`` (True, or the edit to start from) adds the
    ``compact_20260112`` edit of :func:`compile_compact_edit`: the pinned blocks kept verbatim
    in its ``instructions``, ``pause_after_compaction`` on."""
    pinned_kinds, canary_ids = policy.spec.transition.pinned_kinds, set(canaries)
    excluded = set(pinned_tools) | {n for n, k in (tool_kinds or {}).items() if k in pinned_kinds}
    clear: dict[str, Any] = dict(edit or {"type": CLEAR_TOOL_USES})
    excluded |= set(clear.get("exclude_tools") or ())
    blocks = request_blocks(messages)
    uses = [b.tool_use_id for b in blocks if b.block.get("type") == "tool_use"]
    segments = window_segments(blocks, tool_kinds, (), canary_ids)
    pinned_uses = [
        uses.index(b.tool_use_id)
        for b, s in zip(blocks, segments, strict=True)
        if b.block.get("type") == "tool_result" and s["id"] in canary_ids and b.tool_use_id in uses
    ]
    keep = (clear.get("keep") or {}).get("value", DEFAULT_KEEP_TOOL_USES)
    if pinned_uses:
        keep = max(keep, len(uses) - min(pinned_uses))
    clear["keep"] = {"type": "tool_uses", "value": keep}
    if excluded:
        clear["exclude_tools"] = sorted(excluded)
    edits: list[Any] = [cast("BetaClearToolUses20250919EditParam", clear)]
    pinned_thinking = any(s["kind"] == "thinking" and s["id"] in canary_ids for s in segments)
    if "thinking" in pinned_kinds or pinned_thinking:
        thinking: BetaClearThinking20251015EditParam = {"type": CLEAR_THINKING, "keep": "all"}
        edits.insert(0, thinking)  # the API asks that clear_thinking come first
    if compact:
        edits.append(
            compile_compact_edit(
                policy,
                messages=messages,
                tool_kinds=tool_kinds,
                pinned_tools=pinned_tools,
                canaries=canaries,
                edit=None if compact is True else compact,
            )
        )
    return {"edits": edits}


__all__ = [
    "APPLIED_BY",
    "APPLIED_BY_COMPACTION",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "PLACEHOLDER",
    "SUMMARIZE_PROMPT",
    "CompactionOutcome",
    "ContextEditOutcome",
    "EditedWindow",
    "applied_window",
    "block_text",
    "compaction_block",
    "compaction_instructions",
    "compaction_window",
    "compile_compact_edit",
    "compile_compaction",
    "compile_context_management",
    "judge_applied_edits",
    "judge_compaction",
    "message_segments",
]
