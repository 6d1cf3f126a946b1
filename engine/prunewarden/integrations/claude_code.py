"""Claude Code's compaction, judged: its transcript as a window, a compaction as a transition.

No extra needed (the standard library reads the files). Claude Code writes each session as a
JSON-lines transcript, one record a line (docs/compaction.md has what is confirmed and what is
our reading): records of ``type`` ``user``, ``assistant`` or ``system`` with a ``uuid`` (and
``parentUuid``), a ``message`` whose ``content`` is a string or a list of blocks (``text``,
``tool_use``, ``tool_result``); a ``system`` record of ``subtype: compact_boundary`` where a
compaction starts the window again, and the ``user`` record marked ``isCompactSummary`` holding
its summary. :func:`transcript_window` reads the window now in force (the records after the last
boundary) into segments: one per block, a ``tool_use`` and its ``tool_result`` one eviction group,
the first user message (the task) and the harness's own instructions (``isMeta`` user records,
where CLAUDE.md arrives) pinned, kinds from the policy's classifier (``spec.classify``).

:func:`compaction_transition` is the compaction as a transition: before, the window recorded at
``PreCompact``; after, the summary, deriving from every segment it replaced. The transcript keeps
every record (Claude Code appends to it), so what the summary replaced is recoverable: with
``spec.fidelity`` on, every segment is tombstoned and the summary is read against the pinned
parents; without it, the pinned segments are not, so their loss is refused and they come back.
:func:`restoration` is the repair a hook can make: the lost pinned segments' text, verbatim, with
a one-line notice naming the decision.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden.decision import Decision
from prunewarden.errors import InputError, Problem
from prunewarden.policy import Policy, classifier
from prunewarden.scoring import text_sha256

#: What a compaction's transition records as its editor (``:manual`` or ``:auto`` appended).
APPLIED_BY = "claude-code.compact"
#: The most of a transcript read, in bytes: a window is rebuilt from a file this size at most.
MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024
_ROLES = {"user": "user", "assistant": "assistant"}


@dataclass(frozen=True, slots=True)
class Transcript:
    """The records of the window in force (after the last compact boundary) and the summary
    that began it, if any; ``replaced``, the records of the window that compaction replaced
    (what a preview judges the summary against)."""

    records: list[dict[str, Any]]
    summary: str | None
    replaced: list[dict[str, Any]] = field(default_factory=list)


def read_transcript(path: str | Path) -> Transcript:
    """The window in force of the transcript at ``path``; a line that is no JSON object is an
    :class:`InputError` naming the file and line."""
    records: list[dict[str, Any]] = []
    replaced: list[dict[str, Any]] = []
    summary: str | None = None
    with Path(path).open(encoding="utf-8") as stream:
        text = stream.read(MAX_TRANSCRIPT_BYTES + 1)
    if len(text) > MAX_TRANSCRIPT_BYTES:
        raise InputError([Problem(str(path), 0, 0, "$", "transcript larger than its limit")])
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = Problem(str(path), number, exc.colno, "$", f"not JSON: {exc.msg}")
            raise InputError([problem]) from None
        if not isinstance(record, dict):
            raise InputError([Problem(str(path), number, 1, "$", "expected a JSON object")])
        if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
            replaced, records, summary = records, [], None  # the window starts again here
            continue
        if record.get("isCompactSummary"):
            summary = _text(record.get("message", {}).get("content", ""))
            continue
        if record.get("type") in _ROLES:
            records.append(record)
    return Transcript(records, summary, replaced)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(b) for b in content if isinstance(b, dict))
    return ""


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"{block.get('name')}({json.dumps(block.get('input', {}), sort_keys=True)})"
    if kind == "tool_result":
        return _text(block.get("content", ""))
    return ""


def transcript_window(transcript: Transcript, policy: Policy) -> list[dict[str, Any]]:
    """The segments of the window in force (see the module's docstring)."""
    rules = classifier(policy)
    names: dict[str, str] = {}
    task_seen = False
    segments: list[dict[str, Any]] = []
    for record in transcript.records:
        role = _ROLES[record["type"]]
        content = record.get("message", {}).get("content", "")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        uuid = str(record.get("uuid") or f"record-{len(segments)}")
        for i, block in enumerate(b for b in blocks if isinstance(b, dict)):
            kind, tool, group = role, None, None
            if block.get("type") == "tool_use":
                kind, tool = "tool_call", str(block.get("name"))
                group = f"tool_use:{block.get('id')}"
                names[str(block.get("id"))] = tool
            elif block.get("type") == "tool_result":
                kind, tool = "tool", names.get(str(block.get("tool_use_id")))
                group = f"tool_use:{block.get('tool_use_id')}"
            elif block.get("type") != "text":
                continue  # thinking and images: nothing a summary is read against
            text = _block_text(block)
            meta = bool(record.get("isMeta")) and role == "user"
            task = role == "user" and kind == "user" and not meta and not task_seen
            task_seen = task_seen or task
            reading = "system" if meta else {"tool_call": "assistant"}.get(kind, kind)
            given = rules.classify(reading, text, tool)
            segment: dict[str, Any] = {
                "id": uuid if len(blocks) == 1 else f"{uuid}#{i}",
                "kind": given.kind if given is not None else ("system" if meta else kind),
                "text": text,
                "tokens": len(text) // 4 + 4,
                "text_sha256": text_sha256(text),
                "non_recoverable": task or meta,
                "metadata": {"canary": task},
            }
            if group is not None:
                segment["group"] = group
            segments.append(segment)
    return segments


def pinned(segments: Iterable[Mapping[str, Any]], policy: Policy) -> set[str]:
    """The ids of ``segments`` the policy pins: a pinned kind, or ``non_recoverable``."""
    kinds = policy.spec.transition.pinned_kinds
    return {str(s["id"]) for s in segments if s.get("non_recoverable") or s["kind"] in kinds}


def recorded_window(segments: Sequence[Mapping[str, Any]], policy: Policy) -> list[dict[str, Any]]:
    """What ``PreCompact`` keeps of a window: every segment's id, kind, group, size and text
    hash, and the text of the pinned ones only (what a repair puts back, and what the summary
    is read against)."""
    keep = pinned(segments, policy)
    recorded = []
    for segment in segments:
        entry = {k: v for k, v in segment.items() if k != "text"}
        entry["text"] = segment["text"] if segment["id"] in keep else ""
        recorded.append(entry)
    return recorded


def compaction_transition(
    before: Sequence[Mapping[str, Any]], summary: str, policy: Policy
) -> tuple[list[dict[str, Any]], list[str]]:
    """The window after the compaction (its summary, deriving from every segment of
    ``before``) and the ids the transcript's records stand as tombstones for."""
    ids = [str(s["id"]) for s in before]
    after = [
        {
            "id": f"compact-summary-{text_sha256(summary)[:12]}",
            "kind": "summary",
            "text": summary,
            "tokens": len(summary) // 4 + 4,
            "text_sha256": text_sha256(summary),
            "derived_from": ids,
        }
    ]
    if policy.spec.fidelity.mode != "off":
        return after, ids
    keep = pinned(before, policy)
    return after, [i for i in ids if i not in keep]


def lost_ids(decision: Decision) -> list[str]:
    """The segments a refused compaction lost: its ``restore`` and the parents whose facts or
    negations the summary lost, in that order, once each."""
    found = list(decision.restore)
    for reason in decision.reasons:
        parent = reason.detail.get("parent")
        if isinstance(parent, str) and parent not in found:
            found.append(parent)
    return found


def restoration(decision: Decision, before: Sequence[Mapping[str, Any]]) -> str:
    """The context a hook adds after a refused compaction: one notice line naming the
    decision, then the lost pinned segments' text, verbatim, in window order."""
    lost = set(lost_ids(decision))
    texts = [str(s["text"]) for s in before if s["id"] in lost and s.get("text")]
    notice = (
        f"[prunewarden: the compaction lost what must stay ({', '.join(decision.codes)}); "
        f"decision {decision.decision_id}; restored verbatim below]"
    )
    return "\n\n".join([notice, *texts])


__all__ = [
    "APPLIED_BY",
    "MAX_TRANSCRIPT_BYTES",
    "Transcript",
    "compaction_transition",
    "lost_ids",
    "pinned",
    "read_transcript",
    "recorded_window",
    "restoration",
    "transcript_window",
]
