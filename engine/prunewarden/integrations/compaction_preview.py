"""What a compaction kept of each pinned parent, fact by fact: the preview people read.

No extra needed. :func:`parent_previews` lists, for each pinned segment of ``before`` that the
edit did not keep verbatim, the segments of ``after`` deriving from it and each of its facts
(:func:`prunewarden.fidelity.fact_ledger`): ``kept``, ``restated`` (kept in other words or
units) or ``lost``, by kind. :func:`render_previews` lays them out side by side for a terminal.
It is shown beside a decision, never in it: a decision and its record carry no text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden.fidelity import fact_ledger
from prunewarden.policy import Policy
from prunewarden.scoring import text_sha256

COLUMNS = ("kept", "restated", "lost")
#: The most characters of a parent's text, and of one cell, a terminal preview shows.
TEXT_CHARS, CELL_CHARS = 96, 40


def _pinned(segment: Mapping[str, Any], policy: Policy) -> bool:
    metadata = segment.get("metadata")
    canary = isinstance(metadata, Mapping) and bool(metadata.get("canary"))
    kinds = policy.spec.transition.pinned_kinds
    return bool(segment.get("non_recoverable")) or canary or segment.get("kind") in kinds


def _text(segment: Mapping[str, Any]) -> str:
    text = segment.get("text", "")
    return text if isinstance(text, str) else ""


def parent_previews(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], policy: Policy
) -> list[dict[str, Any]]:
    """One entry per pinned parent the edit replaced: ``parent``, ``kind``, ``text``,
    ``children`` (the ids deriving from it; none: it was removed) and ``facts`` (kind ->
    ``{kept, restated, lost}``), in window order."""
    kept = {
        str(s.get("id")): text_sha256(_text(s))
        for s in after
        if not s.get("derived_from") and isinstance(s.get("id"), str)
    }
    previews = []
    for segment in before:
        ident = str(segment.get("id"))
        text = _text(segment)
        if not _pinned(segment, policy) or kept.get(ident) == text_sha256(text):
            continue
        children = [s for s in after if ident in (s.get("derived_from") or ())]
        child_text = "\n".join(_text(s) for s in children)
        previews.append(
            {
                "parent": ident,
                "kind": str(segment.get("kind")),
                "text": text,
                "children": [str(s.get("id")) for s in children],
                "facts": fact_ledger(text, child_text),
            }
        )
    return previews


def _cell(values: list[str]) -> str:
    joined = ", ".join(values) if values else "-"
    return joined if len(joined) <= CELL_CHARS else joined[: CELL_CHARS - 1] + "…"


def render_previews(previews: Sequence[Mapping[str, Any]]) -> str:
    """The previews as lines: each parent, its text (shortened), then a row per fact kind
    with what was kept, restated and lost side by side."""
    if not previews:
        return "no pinned parent was replaced\n"
    lines = []
    for preview in previews:
        children = ", ".join(preview["children"]) or "nothing (removed)"
        lines.append(f"{preview['parent']} ({preview['kind']}) -> {children}")
        text = " ".join(str(preview["text"]).split())
        short = text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"
        lines.append(f"  {short!r}")
        facts: Mapping[str, Mapping[str, list[str]]] = preview["facts"]
        if not facts:
            lines.append("  no facts to keep")
            continue
        rows = [("fact", *COLUMNS)] + [
            (kind, *(_cell(row[column]) for column in COLUMNS)) for kind, row in facts.items()
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            lines.append(("  " + "  ".join([*cells, row[-1]])).rstrip())
    return "\n".join(lines) + "\n"


__all__ = ["parent_previews", "render_previews"]
