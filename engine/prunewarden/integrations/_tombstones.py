"""What every edit guard shares: the guard writes the tombstone of what an edit removes.

A framework's own edit (``trim_messages``, a session's trim, a compaction) records nothing of
what it drops. The guard records it: the unpinned segments the edit removes are named by one
tombstone segment (kind ``tombstone``, ``tombstone_for`` their ids) put in their place, so such
an edit goes through. What a tombstone may not stand for is left unnamed, so the transition
guard still refuses its loss and its repair puts it back: a pinned segment (a pinned kind of the
policy, ``non_recoverable``, a canary of the segment or of the session, a rule pin) and, through
``group_split``, the other half of a tool call. :func:`warn_restored` says on the
``prunewarden.integrations`` logger what a repair put back and under which decision.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden.decision import Decision
from prunewarden.session import Session

_log = logging.getLogger("prunewarden.integrations")

Segment = Mapping[str, Any]


def pinned_ids(session: Session, segments: Sequence[Segment]) -> set[str]:
    """The ids of ``segments`` that the session's transition guard holds pinned."""
    kinds = session.policy.spec.transition.pinned_kinds
    state = session.state()
    canaries = set(state["baseline"])
    if state["snapshots"]:
        canaries.update(state["snapshots"][-1]["pinned"])
    pins = session.rule_pins
    return {
        str(s["id"])
        for s in segments
        if s.get("non_recoverable")
        or (s.get("metadata") or {}).get("canary")
        or s.get("kind") in kinds
        or s["id"] in canaries
        or pins.holds(str(s["id"]), str(s.get("text", "")))
    }


def removals_to_record(
    session: Session, before: Sequence[Segment], after: Sequence[Segment]
) -> list[Segment]:
    """The segments of ``before`` that leave the window with nothing recording them (no
    segment of ``after`` derives from or tombstones them) and may be recorded by a tombstone:
    the unpinned ones, in ``before``'s order."""
    present = {str(s["id"]) for s in after}
    for segment in after:
        present.update(str(i) for i in segment.get("derived_from") or ())
        present.update(str(i) for i in segment.get("tombstone_for") or ())
    gone = [s for s in before if str(s["id"]) not in present]
    pinned = pinned_ids(session, gone)
    return [s for s in gone if str(s["id"]) not in pinned]


def removed_kinds(segments: Sequence[Segment]) -> dict[str, int]:
    """How many of ``segments`` there are of each kind (what a tombstone's text counts)."""
    return dict(Counter(str(s.get("kind", "item")) for s in segments))


def tombstone_segment(
    segment_id: str, text: str, tokens: int, recorded: Sequence[Segment]
) -> dict[str, Any]:
    """The tombstone segment naming ``recorded`` (segments of ``before``)."""
    return {
        "id": segment_id,
        "kind": "tombstone",
        "text": text,
        "tokens": tokens,
        "tombstone_for": [str(s["id"]) for s in recorded],
    }


def tombstone_position(
    before: Sequence[Segment], after: Sequence[Segment], recorded: Sequence[Segment]
) -> int:
    """Where the tombstone goes in ``after``: the place of the first segment it records, i.e.
    before the first segment of ``after`` that came later than it in ``before``."""
    order = {str(s["id"]): i for i, s in enumerate(before)}
    first = order[str(recorded[0]["id"])]
    for position, segment in enumerate(after):
        if order.get(str(segment["id"]), -1) > first:
            return position
    return len(after)


def warn_restored(
    session: Session,
    what: str,
    decision: Decision,
    restored: Sequence[str],
    *,
    done: str = "put back",
) -> None:
    """The warning a guard logs when it put back what an edit must not drop (``done``: what
    became of it, when the guard cannot put it back itself)."""
    _log.warning(
        "session %s: %s refused (%s); %s %s (decision %s)",
        session.session_id,
        what,
        ", ".join(decision.codes),
        done,
        ", ".join(restored) if restored else "nothing",
        decision.decision_id,
    )
