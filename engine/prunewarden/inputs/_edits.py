"""The edit a transition made, derived from the windows before and after it, by content.

Ids say which segment is which; the text says whether it changed. A segment whose id survives
is *kept* only when the SHA-256 of its text is unchanged, whatever the editor claims, so a
rewrite that kept its id and its old score is seen as a rewrite. A segment whose id is gone is
*folded* when a segment the edit made (a summary or a rewrite, not a tombstone) names it in
``derived_from`` (its content lives on in it), else *removed*: a kept segment's
``derived_from`` folds nothing, so the removal is judged as one (tombstones, fidelity). A new
id of ``after`` is a *summary* when it derives from something,
else *added* (a tombstone segment is added: it records, it does not summarize).

Linear in the size of both windows: one pass over each, set lookups only.
"""

from __future__ import annotations

from collections.abc import Iterable

from prunewarden.inputs._model import Edit, TransitionSegment

TOMBSTONE_KIND = "tombstone"
_ON_PATH, _DONE = 1, 2  # a segment's state in the search for a derivation cycle


def derive_edit(
    before: tuple[TransitionSegment, ...],
    after: tuple[TransitionSegment, ...],
    tombstones: Iterable[str] = (),
) -> Edit:
    """What the edit from ``before`` to ``after`` did to each segment of both windows."""
    now = {segment.id: segment for segment in after}
    was = {segment.id: segment for segment in before}
    before_ids = was.keys()
    # Only a segment the edit made (a summary, or a rewrite) can hold a parent: a derived_from
    # on a kept segment or on a tombstone is the editor's word, and folds nothing.
    named_parents = {
        parent
        for segment in after
        if segment.segment.kind != TOMBSTONE_KIND
        and (segment.id not in was or not _same_text(was[segment.id], segment))
        for parent in segment.derived_from
    }
    kept: list[str] = []
    rewritten: list[str] = []
    folded: list[str] = []
    removed: list[str] = []
    scored: list[str] = []
    for segment in before:
        current = now.get(segment.id)
        if current is None:
            (folded if segment.id in named_parents else removed).append(segment.id)
        elif _same_text(segment, current):
            kept.append(segment.id)
        else:
            rewritten.append(segment.id)
            if segment.score is not None:
                scored.append(segment.id)
    summaries: list[str] = []
    added: list[str] = []
    for segment in after:
        if segment.id in before_ids:
            continue
        own_parents = [parent for parent in segment.derived_from if parent != segment.id]
        is_summary = own_parents and segment.segment.kind != TOMBSTONE_KIND
        (summaries if is_summary else added).append(segment.id)
    recorded = set(tombstones)
    for segment in after:
        recorded.update(segment.tombstone_for)
    return Edit(
        kept=tuple(kept),
        rewritten=tuple(rewritten),
        folded=tuple(folded),
        removed=tuple(removed),
        summaries=tuple(summaries),
        added=tuple(added),
        tombstoned=frozenset(recorded & before_ids),
        scored_rewrites=tuple(scored),
    )


def _same_text(old: TransitionSegment, new: TransitionSegment) -> bool:
    """By SHA-256 of the UTF-8 text; a text with a lone surrogate has no digest (it has no
    UTF-8 bytes) and is compared as it is."""
    if old.text_digest and new.text_digest:
        return old.text_digest == new.text_digest
    return old.segment.text == new.segment.text


def derivation_cycle(edges: list[tuple[str, list[str]]]) -> tuple[int, list[str]] | None:
    """A ``derived_from`` cycle within one window, or None: the position of the segment where it
    was found and the ids around it (``a -> b -> a``). A segment naming itself is no cycle (a
    rewrite may record its own id). Iterative, so a long chain cannot exhaust the stack."""
    parents = {own: [p for p in named if p != own] for own, named in edges}
    position = {own: i for i, (own, _) in enumerate(edges)}
    state: dict[str, int] = {}
    for start, _ in edges:
        if start in state:
            continue
        path: list[str] = [start]
        pending = [iter(parents[start])]
        state[start] = _ON_PATH
        while pending:
            parent = next(pending[-1], None)
            if parent is None:
                state[path.pop()] = _DONE
                pending.pop()
            elif parent not in parents or state.get(parent) == _DONE:
                continue
            elif state.get(parent) == _ON_PATH:
                cycle = [*path[path.index(parent) :], parent]
                return position[cycle[0]], cycle
            else:
                state[parent] = _ON_PATH
                path.append(parent)
                pending.append(iter(parents[parent]))
    return None
