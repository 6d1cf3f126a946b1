"""Rewrite fidelity inside a transition: each summary and rewrite checked against the parents it
replaces (:mod:`prunewarden.fidelity`).

A child is a segment of ``after`` the edit made: a summary (a new id deriving from others) or a
rewrite (an id of ``before`` with other text). Its parents are the segments of ``before`` it
replaces: those of its ``derived_from`` that left the window, and, for a rewrite, its own text
before. A parent still in the window loses nothing. Under ``scope: protected`` only protected
parents are checked: pinned ones (a pinned kind, ``non_recoverable``, a canary, a rule pin) and
summaries (segments deriving from others: what they hold is nowhere else any more, so a summary
of a summary is checked against it); a child that is an error message or a refusal is refused
whatever it replaces.

Remediation: a lost parent that left the window is restored; a lost rewrite is kept verbatim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prunewarden.decision import Reason
from prunewarden.fidelity import (
    Embedder,
    FidelityResult,
    FidelitySettings,
    check_fidelity,
    is_error_text,
)
from prunewarden.inputs import TransitionRequest, TransitionSegment


@dataclass(frozen=True, slots=True)
class FidelityFindings:
    """What the check found in one transition, and what rules read of it (``fidelity``)."""

    reasons: tuple[Reason, ...] = ()
    restore: tuple[str, ...] = ()  # lost parents that left the window
    keep_verbatim: tuple[str, ...] = ()  # rewrites that lost their own facts
    checked: tuple[str, ...] = ()  # the children checked
    results: tuple[FidelityResult, ...] = field(default=(), repr=False)

    def variables(self) -> dict[str, Any]:
        """``fidelity`` as rules read it: the kinds lost, the share of facts kept (1.0 when
        nothing was counted), the children checked and refused."""
        facts = sum(p.facts for r in self.results for p in r.parents)
        kept = sum(p.kept for r in self.results for p in r.parents)
        lost = {kind for r in self.results for kind in r.lost}
        return {
            "lost": sorted(lost),
            "kept_share": kept / facts if facts else 1.0,
            "checked": list(self.checked),
            "refused": [r.child for r in self.results if r.refused],
        }


NOTHING = FidelityFindings()


def judge(
    settings: FidelitySettings,
    request: TransitionRequest,
    pinned: Callable[[TransitionSegment], bool],
    embedder: Embedder | None = None,
) -> FidelityFindings:
    """Check every child of the edit against the parents it replaces."""
    if settings.mode == "off":
        return NOTHING
    edit = request.edit
    before = {segment.id: segment for segment in request.before}
    made = set(edit.summaries) | set(edit.rewritten)
    present = {segment.id for segment in request.after}
    results: list[FidelityResult] = []
    checked: list[str] = []
    for child in request.after:
        if child.id not in made:
            continue
        parents = [before[child.id]] if child.id in before else []
        parents += [
            before[p]
            for p in child.derived_from
            if p != child.id and p in before and p not in present
        ]
        protected = [p for p in parents if settings.scope == "all" or pinned(p) or _summarizes(p)]
        if not protected and not (child.derived_from and parents):
            continue
        if not protected:  # unprotected parents: only an error as summary is refused
            if not is_error_text(child.segment.text, settings.error_patterns):
                continue
            protected = parents
        checked.append(child.id)
        result = check_fidelity(
            [(p.id, p.segment.text) for p in protected],
            (child.id, child.segment.text),
            settings,
            embedder=embedder,
        )
        results.append(result)
    return _findings(results, checked, before)


def _summarizes(segment: TransitionSegment) -> bool:
    """A segment deriving from others (not only from its own id: a rewrite may name itself)."""
    return any(parent != segment.id for parent in segment.derived_from)


def _findings(
    results: list[FidelityResult], checked: list[str], before: dict[str, TransitionSegment]
) -> FidelityFindings:
    reasons = tuple(reason for result in results for reason in result.reasons)
    restore: dict[str, None] = {}
    verbatim: dict[str, None] = {}
    for reason in reasons:
        parent, child = reason.detail["parent"], reason.detail["child"]
        if parent == child:
            verbatim[parent] = None
        elif parent in before:
            restore[parent] = None
    order = {segment_id: i for i, segment_id in enumerate(before)}
    return FidelityFindings(
        reasons,
        tuple(sorted(restore, key=order.__getitem__)),
        tuple(sorted(verbatim, key=order.__getitem__)),
        tuple(checked),
        tuple(results),
    )
