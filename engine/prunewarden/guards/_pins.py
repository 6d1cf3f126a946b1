"""What a transition pins, and the pins an edit loses while the segment stays in the window.

A segment of ``before`` is pinned by its kind (``transition.pinned_kinds``), by
``non_recoverable``, as a canary or by a rule pin. Keeping its id is not keeping its pin: a
segment pinned by its content and relabelled (another kind, ``non_recoverable`` dropped) or a
pinned segment rewritten to nothing is a removal of a pinned segment, judged as one: a pin its
id also holds (a canary, a session's memory) does not make the relabel harmless, since the next
window, read by another session or none, would not know it.
"""

from __future__ import annotations

from collections.abc import Callable

from prunewarden.inputs import TransitionRequest, TransitionSegment
from prunewarden.policy import TransitionSettings


def pins_lost(
    settings: TransitionSettings, r: TransitionRequest, pinned: Callable[[TransitionSegment], bool]
) -> tuple[set[str], set[str]]:
    """The segments still in the window that are removals all the same: a segment pinned by its
    content (a pinned kind, ``non_recoverable``) kept or rewritten so that its content no longer
    pins it, whatever pins its id, and a pinned segment rewritten to nothing (empty or
    whitespace); and every segment rewritten to nothing."""
    now = {segment.id: segment for segment in r.after}
    emptied = {i for i in r.edit.rewritten if not now[i].segment.text.strip()}

    def by_content(segment: TransitionSegment) -> bool:
        return segment.segment.kind in settings.pinned_kinds or segment.segment.non_recoverable

    unpinned = {
        segment.id
        for segment in r.before
        if segment.id in now
        and (
            (by_content(segment) and not by_content(now[segment.id]))
            or (segment.id in emptied and pinned(segment))
        )
    }
    return unpinned, emptied


def pinned_test(
    settings: TransitionSettings, r: TransitionRequest
) -> Callable[[TransitionSegment], bool]:
    """Whether a segment of ``before`` is pinned: a pinned kind, ``non_recoverable``, a canary
    or a rule pin."""

    def pinned(segment: TransitionSegment) -> bool:
        return (
            segment.segment.kind in settings.pinned_kinds
            or segment.segment.non_recoverable
            or segment.id in r.canaries
            or segment.id in r.pinned
        )

    return pinned
