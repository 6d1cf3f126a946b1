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

Each refusing code has its explainer here, beside the conditions it inverts (see
``_counterfactual``): putting the parent back (restored, or a rewrite kept verbatim) allows any
of them; ``fact_lost`` is also allowed at ``min_kept_share`` no more than the share kept, or with
the lost kinds not counted, ``negation_lost`` with negations not counted, ``meaning_drift`` at
an ``embedding_floor`` no more than the parent's least similar sentence's best cosine; no policy
value makes an error or a refusal a summary; ``summary_opaque`` (a summary whose text cannot be
read, kind ``opaque_summary``, judged by ``spec.fidelity.opaque``) is also allowed at ``opaque:
allow``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from prunewarden.decision import Reason
from prunewarden.fidelity import (
    OPAQUE_KIND,
    Embedder,
    FidelityResult,
    FidelitySettings,
    Judge,
    check_fidelity,
    is_error_text,
    sentence_similarities,
)
from prunewarden.guards._counterfactual import Change, change, explained, figure
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
# The refusing codes of this check, each explained by :func:`explain`.
CODES = ("fact_lost", "negation_lost", "meaning_drift", "summary_is_error", "summary_opaque")


def judge(
    settings: FidelitySettings,
    request: TransitionRequest,
    pinned: Callable[[TransitionSegment], bool],
    embedder: Embedder | None = None,
    entailment: Judge | None = None,
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
        if child.segment.kind == OPAQUE_KIND:
            if settings.opaque != "allow" and parents:
                checked.append(child.id)
                unread = parents if settings.opaque == "refuse" else protected
                results.append(_opaque(child.id, [p.id for p in unread]))
            continue
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
            judge=entailment,
        )
        results.append(result)
    return _findings(results, checked, before)


def _opaque(child: str, parents: list[str]) -> FidelityResult:
    """An opaque summary replacing ``parents``: nothing can tell what it kept of them."""
    reasons = tuple(
        Reason(
            "summary_opaque",
            f"summary {child} cannot be read, so nothing tells what it kept of {parent}",
            {"parent": parent, "child": child, "lost": []},
        )
        for parent in parents
    )
    return FidelityResult(child, (), reasons)


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


# --- what would have allowed each finding -----------------------------------------------------


def explain(
    settings: FidelitySettings,
    embedder: Embedder | None,
    request: TransitionRequest,
    reason: Reason,
) -> Reason:
    """``reason`` (a fidelity finding of ``request``) with what would have allowed it."""
    parent, child = str(reason.detail["parent"]), str(reason.detail["child"])
    back = change("after", "contains", [parent])  # restored, or a rewrite kept verbatim
    sentence = f"allowed once {parent} is {'kept verbatim' if parent == child else 'restored'}"
    if reason.code == "summary_is_error":
        return explained(
            reason,
            [back],
            f"summary {child} is empty, an error message or a refusal: no policy value allows "
            f"it; {sentence}",
        )
    if reason.code == "summary_opaque":
        return explained(
            reason,
            [back, change("spec.fidelity.opaque", "==", "allow")],
            f"summary {child} cannot be read: {sentence}, or at opaque allow",
        )
    if reason.code == "negation_lost":
        return explained(
            reason,
            [back, change("spec.fidelity.kinds", "excludes", "negation")],
            f"summary {child} no longer negates what {parent} negated: {sentence}, or with "
            "negations not counted",
        )
    parent_text = next(s.segment.text for s in request.before if s.id == parent)
    child_text = next(s.segment.text for s in request.after if s.id == child)
    if reason.code == "meaning_drift":
        if (
            embedder is None or reason.detail.get("method") == "judge"
        ):  # the finding needed one: unreachable without it
            return explained(reason, [back], sentence)
        [(_, best)] = sentence_similarities([(parent, parent_text)], child_text, embedder)
        lowest = min(best)
        return explained(
            reason,
            [back, change("spec.fidelity.embedding_floor", "<=", lowest)],
            f"a sentence of {parent} is at best {figure(lowest)} from summary {child}: "
            f"{sentence}, or at embedding_floor \u2264 {figure(lowest)}",
        )
    facts = replace(settings, mode="enforce", method="facts")
    (found,) = check_fidelity([(parent, parent_text)], (child, child_text), facts).parents
    lost = [kind for kind in found.lost if kind != "negation"]
    alternatives: list[Change] = [
        back,
        change("spec.fidelity.min_kept_share", "<=", found.kept_share),
        change("spec.fidelity.kinds", "excludes", lost),
    ]
    return explained(
        reason,
        alternatives,
        f"summary {child} keeps {found.kept} of {found.facts} fact(s) of {parent}: {sentence}, "
        f"at min_kept_share \u2264 {figure(found.kept_share)}, or with {', '.join(lost)} not "
        "counted",
    )
