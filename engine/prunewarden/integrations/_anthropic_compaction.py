"""Anthropic's server-side compaction judged: a ``compaction`` block against the messages it
replaces (see :mod:`prunewarden.integrations.anthropic` and docs/compaction.md).

A compaction block (from the ``compact_20260112`` edit of ``context_management``, handed back
alone with ``pause_after_compaction``, or from the ``compaction`` parameter) stands in later
requests for every message before it; the system prompt is not compacted. So the compaction is
a transition: before, the request's window in force (from its last compaction block on, the
system prompt first); after, the system prompt and the block's summary, deriving from every
message block it replaced. The caller holds the request, so what the summary replaced is
recoverable: with ``spec.fidelity`` on, the summary is read against the pinned parents;
without it, nothing reads the summary and the pinned blocks come back after each compaction.
A block whose ``content`` is null is a failed compaction the server treats as a no-op: the
window is judged unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from anthropic.types.beta import (
    BetaCompact20260112EditParam,
    BetaCompactionBlock,
    BetaCompactionConfigParam,
)
from pydantic import TypeAdapter, ValidationError

from prunewarden.decision import Decision
from prunewarden.errors import InputError, Problem
from prunewarden.integrations._anthropic_blocks import plain, request_blocks, window_segments
from prunewarden.integrations._tombstones import warn_restored
from prunewarden.integrations.claude_code import compaction_transition, lost_ids, pinned
from prunewarden.policy import Policy, classifier
from prunewarden.rules import SegmentClassifier
from prunewarden.session import Session

COMPACT: Final = "compact_20260112"
#: What a judged compaction records as its editor.
APPLIED_BY_COMPACTION: Final = "anthropic.compaction"
#: The ``compaction`` parameter's ``instructions`` replace the server's own prompt, so a
#: compiled one says what to do before it names what to keep.
SUMMARIZE_PROMPT: Final = (
    "Summarize the conversation so far so that the work can continue from the summary alone: "
    "the task, the decisions made, the state of the work and what remains to do."
)
_KEEP_HEADING: Final = (
    "Keep each of the following verbatim in the summary, word for word, as it was given:"
)
_BLOCK: TypeAdapter[BetaCompactionBlock] = TypeAdapter(BetaCompactionBlock)


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """One compaction block judged: the windows before and after it, the decision, the block
    and the response's content (the block first) as the SDK returned them."""

    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    decision: Decision
    content: list[dict[str, Any]] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """The compaction lost what the policy says must stay."""
        return self.decision.blocks

    @property
    def lost(self) -> list[str]:
        """The ids of the blocks a refused compaction lost (its ``restore`` and the parents
        whose facts or negations the summary lost), in window order; empty when allowed."""
        if not self.decision.blocks:
            return []
        ids = set(lost_ids(self.decision))
        return [str(s["id"]) for s in self.before if s["id"] in ids]

    def repair(self) -> list[dict[str, Any]]:
        """The messages the next request starts with: the assistant turn holding the response's
        content (the compaction block first, sent back unchanged) and, when the compaction was
        refused, one user turn after it with a notice naming the decision and the lost pinned
        blocks' text, verbatim, one text block each."""
        turns: list[dict[str, Any]] = [{"role": "assistant", "content": self.content}]
        lost = set(self.lost)
        texts = [str(s["text"]) for s in self.before if s["id"] in lost and s.get("text")]
        if not texts:
            return turns
        notice = (
            f"[prunewarden: the compaction lost what must stay ({', '.join(self.decision.codes)});"
            f" decision {self.decision.decision_id}; restored verbatim below]"
        )
        blocks = [{"type": "text", "text": text} for text in (notice, *texts)]
        turns.append({"role": "user", "content": blocks})
        return turns


def _content(response: Any) -> list[dict[str, Any]]:
    """The response's content blocks as plain data (a message, its dict, or its content)."""
    found = plain(response)
    content = found.get("content") if isinstance(found, Mapping) else found
    return [dict(b) for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def compaction_block(response: Any) -> dict[str, Any]:
    """The response's compaction block, checked against the SDK's model; a response without
    one is a located InputError."""
    for i, block in enumerate(_content(response)):
        if block.get("type") == "compaction":
            try:
                return plain(_BLOCK.validate_python(block))  # type: ignore[no-any-return]
            except ValidationError as error:
                problems = [
                    Problem(
                        path=f"$.content[{i}]." + ".".join(map(str, e["loc"])), message=e["msg"]
                    )
                    for e in error.errors()
                ]
                raise InputError(problems) from None
    raise InputError([Problem(path="$.content", message="the response holds no compaction block")])


def compaction_window(  # noqa: PLR0913 - the request, the block and what pins segments
    request: Mapping[str, Any],
    block: Mapping[str, Any],
    policy: Policy,
    *,
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    classify: SegmentClassifier | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The request's window in force, the window after ``block`` replaced its messages, and
    the ids recorded outside the window (the caller holds the request they came from)."""
    blocks = request_blocks(request.get("messages", ()), request.get("system"))
    starts = [i for i, b in enumerate(blocks) if b.block.get("type") == "compaction"]
    if starts:  # the server reads nothing before the last compaction block
        blocks = [b for b in blocks if b.turn == -1] + blocks[starts[-1] :]
    window = window_segments(blocks, tool_kinds, pinned_tools, canaries, classify)
    system = [s for s in window if s["metadata"]["turn"] == -1]
    replaced = [s for s in window if s["metadata"]["turn"] != -1]
    summary = block.get("content")
    if not summary:  # a failed compaction: the server treats the block as a no-op
        return window, [dict(s) for s in window], []
    after, tombstones = compaction_transition(replaced, str(summary), policy)
    return window, [*system, *after], tombstones


def judge_compaction(  # noqa: PLR0913 - the request, the response and the adapter's options
    session: Session,
    request: Mapping[str, Any],
    response: Any,
    *,
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
) -> CompactionOutcome:
    """The compaction block of ``response`` (a ``BetaMessage`` or its dict) judged as a
    transition of ``session`` against the messages of ``request`` it replaces, before the
    harness continues. A refusal logs a warning on the ``prunewarden.integrations`` logger
    naming what :meth:`CompactionOutcome.repair` puts back and the decision id."""
    block = compaction_block(response)
    before, after, tombstones = compaction_window(
        request,
        block,
        session.policy,
        tool_kinds=tool_kinds,
        pinned_tools=pinned_tools,
        canaries=canaries,
        classify=classifier(session.policy),
    )
    decision = session.verify(
        before, after, tombstones=tombstones, applied_by=APPLIED_BY_COMPACTION
    )
    outcome = CompactionOutcome(before, after, decision, _content(response))
    if decision.blocks:
        warn_restored(session, "compaction", decision, outcome.lost, done="put back after it")
    return outcome


def compaction_instructions(  # noqa: PLR0913 - the policy and what it pins
    policy: Policy,
    *,
    messages: Iterable[Any] = (),
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    base: str | None = None,
) -> str | None:
    """``base`` followed by the text of every block of ``messages`` the policy pins (a pinned
    kind, the task, a canary, a pinned tool's result), one a line, to keep verbatim; ``base``
    alone when nothing is pinned (None when there is neither)."""
    blocks = request_blocks(messages)
    segments = window_segments(blocks, tool_kinds, pinned_tools, canaries, classifier(policy))
    keep = pinned(segments, policy)
    texts = [str(s["text"]) for s in segments if s["id"] in keep and s["text"].strip()]
    if not texts:
        return base
    listed = "\n".join(f"- {text}" for text in dict.fromkeys(texts))
    return "\n\n".join(part for part in (base, f"{_KEEP_HEADING}\n{listed}") if part)


def compile_compact_edit(  # noqa: PLR0913 - the policy, what it pins, and the edit
    policy: Policy,
    *,
    messages: Iterable[Any] = (),
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    edit: BetaCompact20260112EditParam | None = None,
) -> BetaCompact20260112EditParam:
    """The ``compact_20260112`` edit (``edit``, or the server's defaults) with the policy's
    pinned blocks after its ``instructions`` and ``pause_after_compaction`` on unless ``edit``
    turns it off, so that :func:`judge_compaction` sees the block before the harness goes on."""
    compact: dict[str, Any] = dict(edit or {"type": COMPACT})
    compact.setdefault("pause_after_compaction", True)
    instructions = compaction_instructions(
        policy,
        messages=messages,
        tool_kinds=tool_kinds,
        pinned_tools=pinned_tools,
        canaries=canaries,
        base=compact.get("instructions") or None,
    )
    if instructions:
        compact["instructions"] = instructions
    return compact  # type: ignore[return-value]


def compile_compaction(  # noqa: PLR0913 - the policy, what it pins, and the prompt
    policy: Policy,
    *,
    messages: Iterable[Any] = (),
    tool_kinds: Mapping[str, str] | None = None,
    pinned_tools: Iterable[str] = (),
    canaries: Iterable[str] = (),
    prompt: str = SUMMARIZE_PROMPT,
) -> BetaCompactionConfigParam:
    """The ``compaction`` parameter for a compaction request of ``messages``: its
    ``instructions`` replace the server's prompt, so they are ``prompt`` and the policy's
    pinned blocks; without a pinned block, the server's own prompt (no ``instructions``)."""
    config: BetaCompactionConfigParam = {"type": "summarize"}
    pins = compaction_instructions(
        policy,
        messages=messages,
        tool_kinds=tool_kinds,
        pinned_tools=pinned_tools,
        canaries=canaries,
    )
    if pins:
        config["instructions"] = f"{prompt}\n\n{pins}"
    return config
