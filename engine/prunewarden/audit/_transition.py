"""What a transition's decision record says of the edit: ids and counts, never text."""

from __future__ import annotations

from typing import Any

from prunewarden.inputs import TransitionRequest


def edit_fields(request: TransitionRequest) -> dict[str, Any]:
    """The record's ``subject.transition``: each window's size, how many segments were kept,
    and the ids of every other kind of change."""
    edit = request.edit
    fields: dict[str, Any] = {
        "before": len(request.before),
        "after": len(request.after),
        "kept": len(edit.kept),
        "rewritten": list(edit.rewritten),
        "folded": list(edit.folded),
        "removed": list(edit.removed),
        "summaries": list(edit.summaries),
        "added": list(edit.added),
        "tombstoned": sorted(edit.tombstoned),
    }
    if request.applied_by is not None:
        fields["applied_by"] = request.applied_by
    return fields


def edit_ids(subject: dict[str, Any]) -> list[str]:
    """The ids a transition record's subject names (``audit query``'s subject column)."""
    transition = subject.get("transition")
    ids: list[str] = []
    if isinstance(transition, dict):
        for key in ("rewritten", "folded", "removed", "summaries", "added"):
            changed = transition.get(key)
            if isinstance(changed, list):
                ids.extend(str(i) for i in changed)
    return ids
