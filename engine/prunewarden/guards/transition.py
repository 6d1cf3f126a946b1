"""Transition: judge an edit of the window made by any code, from the window before and after it.

The edit is derived by content (:func:`prunewarden.inputs.derive_edit`), so what an editor
claims it did is checked, not trusted. Every finding below is reported, in a fixed order, each
naming the ids it concerns in ``detail.ids``; the remediation says which ids of ``before`` to put
back (``restore``: in their order, eviction groups whole) and which scores to recompute
(``rescore``).

Every summary and rewrite is also checked for fidelity (``spec.fidelity``,
:mod:`prunewarden.guards._fidelity`): its findings follow the others, a lost parent that left
the window joins ``restore`` and a lossy rewrite is to be kept verbatim (``keep_verbatim``).
Rules read what it found as ``fidelity``.

Removals that must be score-authorized (``require_scores``) are asked of the eviction guard's
own decision, which the pipeline hands in (:class:`TransitionGuardSettings`): guards do not
import one another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prunewarden._values import replace_value
from prunewarden.decision import Action, Reason, Verdict
from prunewarden.fidelity import Embedder, FidelitySettings, Judge
from prunewarden.guards import _fidelity as fidelity
from prunewarden.guards._counterfactual import (
    Change,
    Explainer,
    change,
    explain_verdict,
    explained,
    together,
)
from prunewarden.guards._pins import pinned_test, pins_lost
from prunewarden.inputs import EvictionRequest, ScoreRange, TransitionRequest, TransitionSegment
from prunewarden.policy import EvictionSettings, TransitionSettings

# The eviction guard's entry point, as the pipeline binds it.
Authorize = Callable[[EvictionSettings, EvictionRequest], Verdict]

# Findings a restore of the listed ids fixes (the others need a rescore or a record).
RESTORABLE = ("pinned_removed", "group_split", "no_tombstone", "pruning_halted", "unscored_removal")


@dataclass(frozen=True, slots=True)
class TransitionGuardSettings:
    """``spec.transition``, with the eviction section and guard that ``require_scores`` asks,
    ``spec.fidelity`` and the embedder its meaning method needs (None: none)."""

    transition: TransitionSettings
    eviction: EvictionSettings
    authorize: Authorize
    fidelity: FidelitySettings = field(default_factory=lambda: FidelitySettings(mode="off"))
    embedder: Embedder | None = None
    judge: Judge | None = None  # the harness's entailment check, for method judge

    @property
    def mode(self) -> str:
        return self.transition.mode


def evaluate(settings: TransitionGuardSettings, request: TransitionRequest) -> Verdict:
    edit = request.edit
    findings = list(_findings(settings, request))
    found = fidelity.judge(
        settings.fidelity,
        request,
        pinned_test(settings.transition, request),
        settings.embedder,
        settings.judge,
    )
    variables = {"fidelity": found.variables()}
    binding = settings.fidelity.mode == "enforce"
    if binding:
        findings += found.reasons
    advisory = [] if binding else list(found.reasons)  # audit: listed, refusing nothing
    if not findings:
        reason = Reason(
            "transition_clean",
            f"the edit kept {len(edit.kept)}, rewrote {len(edit.rewritten)}, folded "
            f"{len(edit.folded)}, removed {len(edit.removed)} and added "
            f"{len(edit.summaries) + len(edit.added)} segment(s), each as the policy allows",
            _counts(request),
        )
        return Verdict(False, [reason, *advisory], variables=variables)
    restore: set[str] = set(found.restore if binding else ())
    rescore: dict[str, None] = {}  # ordered and unique: a window may rescore thousands
    for reason in findings:  # a fidelity reason names its parent and child instead of ids
        if reason.code in RESTORABLE:
            restore.update(reason.detail["ids"])
        elif reason.code in {"hash_mismatch", "unbound_score", "invalidation_gap"}:
            rescore.update(dict.fromkeys(reason.detail["ids"]))
    actions: list[Action] = []
    if restore:
        actions.append(Action("restore", _whole_groups(request, restore)))
    if rescore:
        actions.append(Action("rescore", tuple(rescore)))
    orphans = [r for r in findings if r.code == "orphaned_parent"]
    if orphans:
        parents = sorted({p for r in orphans for p in r.detail["parents"]})
        actions.append(Action("write_tombstone", tuple(parents)))
    present = {segment.id for segment in request.after}
    verbatim = dict.fromkeys(found.keep_verbatim if binding else ())
    verbatim.update(dict.fromkeys(i for i in _in_order(request, restore) if i in present))
    if verbatim:  # a pinned segment relabelled or emptied: its copy of before, in its place
        actions.append(Action("keep_verbatim", tuple(verbatim)))
    return Verdict(True, [*findings, *advisory], actions, variables=variables)


def explain(
    settings: TransitionGuardSettings,
    request: TransitionRequest,
    verdict: Verdict,
    scores: ScoreRange | None = None,  # noqa: ARG001 - no transition alternative is a score
) -> Verdict:
    """The verdict with ``would_allow`` on each refusing reason (see ``_counterfactual``)."""
    return explain_verdict(_EXPLAINERS, settings, request, verdict)


def _counts(request: TransitionRequest) -> dict[str, object]:
    edit = request.edit
    return {
        "before": len(request.before),
        "after": len(request.after),
        "kept": len(edit.kept),
        "rewritten": len(edit.rewritten),
        "folded": len(edit.folded),
        "removed": len(edit.removed),
        "summaries": len(edit.summaries),
        "added": len(edit.added),
        "applied_by": request.applied_by,
    }


def _findings(s: TransitionGuardSettings, r: TransitionRequest) -> Iterator[Reason]:
    edit = r.edit
    gone = set(edit.removed) | set(edit.folded)
    before = {segment.id: segment for segment in r.before}
    settings = s.transition
    pinned = pinned_test(settings, r)
    unpinned, emptied = pins_lost(settings, r, pinned)
    unrecorded = [
        seg.id
        for seg in r.before
        if seg.id not in edit.tombstoned
        and ((seg.id in gone and pinned(seg)) or seg.id in unpinned)
    ]
    if unrecorded:
        still = [i for i in unrecorded if i in unpinned]
        how = (
            f" ({len(still)} still in it, relabelled or emptied: {_names(still)})" if still else ""
        )
        yield Reason(
            "pinned_removed",
            f"{len(unrecorded)} pinned segment(s) left the window without a tombstone naming "
            f"them{how}: {_names(unrecorded)}",
            {"ids": unrecorded},
        )
    yield from _group_split(r, gone)
    if settings.require_tombstones:
        silent = [i for i in edit.removed if i not in edit.tombstoned]
        if silent:
            yield Reason(
                "no_tombstone",
                f"{len(silent)} segment(s) removed with no tombstone recording them; their loss "
                f"would be undetectable: {_names(silent)}",
                {"ids": silent},
            )
    yield from _orphans(r, before)
    yield from _bindings(r)
    yield from _invalidation(r)
    if r.halt is not None and (gone or unpinned or emptied):
        ids = [
            seg.id for seg in r.before if seg.id in gone or seg.id in unpinned or seg.id in emptied
        ]
        yield Reason(
            "pruning_halted",
            f"the collapse guard halted pruning at cycle {r.halt.get('cycle')}; the edit removed "
            f"or folded {len(ids)} segment(s): {_names(ids)}",
            {"ids": ids, **r.halt},
        )
    if settings.require_scores:
        yield from _unscored(s, r, before)


def _group_split(r: TransitionRequest, gone: set[str]) -> Iterator[Reason]:
    members: dict[str, list[str]] = {}
    for segment in r.before:
        if segment.group is not None:
            members.setdefault(segment.group, []).append(segment.id)
    split = {
        group: ids
        for group, ids in members.items()
        if any(i in gone for i in ids) and not all(i in gone for i in ids)
    }
    if split:
        missing = [i for ids in split.values() for i in ids if i in gone]
        yield Reason(
            "group_split",
            f"{len(split)} eviction group(s) partly left the window (a tool call without its "
            f"result, or the reverse): {_names(list(split))}",
            {"ids": missing, "groups": sorted(split)},
        )


def _orphans(r: TransitionRequest, before: dict[str, TransitionSegment]) -> Iterator[Reason]:
    edit = r.edit
    made = set(edit.summaries) | set(edit.rewritten)
    known = set(before) | {segment.id for segment in r.after} | r.tombstones
    orphans: dict[str, list[str]] = {}
    for segment in r.after:
        if segment.id not in made or not segment.derived_from:
            continue
        missing = [p for p in segment.derived_from if p != segment.id and p not in known]
        if missing:
            orphans[segment.id] = missing
    if orphans:
        yield Reason(
            "orphaned_parent",
            f"{len(orphans)} segment(s) made by the edit derive from parents that are in neither "
            f"window and that no tombstone records: {_names(list(orphans))}",
            {"ids": list(orphans), "parents": sorted({p for m in orphans.values() for p in m})},
        )


def _bindings(r: TransitionRequest) -> Iterator[Reason]:
    unbound, mismatched = [], []
    for segment in r.after:
        if segment.score is None:
            continue
        if not segment.text_sha256:
            unbound.append(segment.id)
        elif segment.text_sha256 != segment.text_digest:
            mismatched.append(segment.id)
    if mismatched:
        yield Reason(
            "hash_mismatch",
            f"{len(mismatched)} segment(s) carry a score computed against text they no longer "
            f"hold (a rewrite kept the old score): {_names(mismatched)}",
            {"ids": mismatched},
        )
    if unbound:
        yield Reason(
            "unbound_score",
            f"{len(unbound)} segment(s) carry a score bound to no text hash: {_names(unbound)}",
            {"ids": unbound},
        )


def _invalidation(r: TransitionRequest) -> Iterator[Reason]:
    reported, edit = r.reported, r.edit
    if reported is None:
        return
    modified = len(edit.rewritten) + len(edit.folded)
    invalidated = len(edit.scored_rewrites)
    if reported.spans_modified >= modified and reported.scores_invalidated >= invalidated:
        return
    yield Reason(
        "invalidation_gap",
        f"the editor reported {reported.spans_modified} span(s) modified and "
        f"{reported.scores_invalidated} score(s) invalidated; the windows show {modified} "
        f"modified and {invalidated} scored segment(s) rewritten",
        {
            "ids": list(edit.scored_rewrites),
            "reported": {
                "spans_modified": reported.spans_modified,
                "scores_invalidated": reported.scores_invalidated,
            },
            "derived": {"spans_modified": modified, "scores_invalidated": invalidated},
        },
    )


def _unscored(
    s: TransitionGuardSettings, r: TransitionRequest, before: dict[str, TransitionSegment]
) -> Iterator[Reason]:
    removed = r.edit.removed
    candidates = frozenset(removed)
    refused: list[str] = []
    reasons: dict[str, list[str]] = {}
    for segment_id in removed:
        segment = before[segment_id]
        if segment.score is None:
            refused.append(segment_id)
            reasons[segment_id] = ["unscored"]
            continue
        tombstoned = segment_id in r.edit.tombstoned
        request = EvictionRequest(
            replace_value(segment.segment, tombstone_written=tombstoned),
            segment.score,
            segment.perturbed_score,
            candidates,
        )
        verdict = s.authorize(s.eviction, request)
        if verdict.refused:
            refused.append(segment_id)
            reasons[segment_id] = [reason.code for reason in verdict.reasons]
    if refused:
        yield Reason(
            "unscored_removal",
            f"{len(refused)} removal(s) not authorized by a score the eviction guard accepts: "
            f"{_names(refused)}",
            {"ids": refused, "eviction": reasons},
        )


def _in_order(r: TransitionRequest, ids: set[str]) -> list[str]:
    return [segment.id for segment in r.before if segment.id in ids]


def _whole_groups(r: TransitionRequest, restore: set[str]) -> tuple[str, ...]:
    """``restore`` with every absent member of a restored segment's group, in before's order."""
    present = {segment.id for segment in r.after}
    groups = {segment.group for segment in r.before if segment.id in restore and segment.group}
    return tuple(
        segment.id
        for segment in r.before
        if segment.id not in present and (segment.id in restore or segment.group in groups)
    )


def _names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# The inverse of each refusing condition above. Putting segments of ``before`` back into
# ``after`` (``after contains``) is what the ``restore`` action does.


def _restore(reason: Reason) -> Change:
    return change("after", "contains", list(reason.detail["ids"]))


def _explain_pinned(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    ids = list(reason.detail["ids"])
    return explained(
        reason,
        [change("tombstones", "contains", ids), _restore(reason)],
        f"pinned {_names(ids)} left unrecorded: no score allows it; allowed once a tombstone "
        "names each (summarize them), or once they are restored",
    )


def _explain_split(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    return explained(
        reason,
        [_restore(reason)],
        f"group(s) {', '.join(reason.detail['groups'])} split: allowed once the members that "
        "left are restored, or once the whole group leaves",
    )


def _explain_silent(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    ids = list(reason.detail["ids"])
    return explained(
        reason,
        [
            change("tombstones", "contains", ids),
            change("spec.transition.require_tombstones", "==", False),
        ],
        f"{_names(ids)} removed unrecorded: allowed once tombstones name them, or at "
        "require_tombstones false",
    )


def _explain_orphans(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    parents = list(reason.detail["parents"])
    return explained(
        reason,
        [change("tombstones", "contains", parents)],
        f"parents {_names(parents)} are in neither window: allowed once tombstones name them",
    )


def _explain_bindings(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    wanted = set(reason.detail["ids"])
    changes = [
        change(f"after[{i}].text_sha256", "==", segment.text_digest)
        for i, segment in enumerate(r.after)
        if segment.id in wanted
    ]
    return explained(
        reason,
        [together(changes)],
        f"{_names(sorted(wanted))} carry scores not bound to their text: allowed once each is "
        "rescored against its text's SHA-256; no policy value allows it",
    )


def _explain_gap(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    derived = reason.detail["derived"]
    return explained(
        reason,
        [
            change(
                "reported.spans_modified",
                ">=",
                derived["spans_modified"],
                change("reported.scores_invalidated", ">=", derived["scores_invalidated"]),
            )
        ],
        f"the editor under-reported: allowed once it reports \u2265 {derived['spans_modified']} "
        f"span(s) modified and \u2265 {derived['scores_invalidated']} score(s) invalidated",
    )


def _explain_halted(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    return explained(
        reason,
        [_restore(reason)],
        "pruning is halted in this session: no score or policy value allows a removal; "
        "allowed once the removed and folded segments are restored (or the halt is resumed)",
    )


def _explain_unscored(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    return explained(
        reason,
        [_restore(reason), change("spec.transition.require_scores", "==", False)],
        f"{_names(list(reason.detail['ids']))} removed without a score the eviction guard "
        "accepts (see detail.eviction): allowed once restored, or at require_scores false",
    )


def _explain_fidelity(s: TransitionGuardSettings, r: TransitionRequest, reason: Reason) -> Reason:
    return fidelity.explain(s.fidelity, s.embedder, r, reason)


_EXPLAINERS: dict[str, Explainer] = {
    "pinned_removed": _explain_pinned,
    "group_split": _explain_split,
    "no_tombstone": _explain_silent,
    "orphaned_parent": _explain_orphans,
    "hash_mismatch": _explain_bindings,
    "unbound_score": _explain_bindings,
    "invalidation_gap": _explain_gap,
    "pruning_halted": _explain_halted,
    "unscored_removal": _explain_unscored,
    **dict.fromkeys(fidelity.CODES, _explain_fidelity),
}
