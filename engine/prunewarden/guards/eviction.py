"""Eviction: never let a self-scored number delete a segment the scorer cannot re-derive.

Every failed condition is reported, in a fixed order; the first is the primary reason. Each comes
with the remediation that would make the eviction admissible.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import partial
from typing import Any

from prunewarden.decision import Action, Reason, Verdict
from prunewarden.guards._counterfactual import (
    UNIT_SCORES,
    Change,
    Explainer,
    change,
    edge,
    explain_verdict,
    explained,
    figure,
    together,
    within,
)
from prunewarden.inputs import EvictionRequest, ScoreRange, Segment
from prunewarden.policy import EvictionSettings

# Every code the guard gives, in the order it reports them (the first is the primary), and the
# action each refusing one asks for: a pass's verdicts as one bit per code (``PassCheck``), and
# the code table an ``audit-record.v3`` pass record carries.
CODES = (
    "authorized",
    "pinned",
    "unscoreable",
    "perturbation_missing",
    "unstable_score",
    "no_tombstone",
)
CODE_ACTIONS = (None, "pin", "resolve_dependencies_first", "rescore", "rescore", "write_tombstone")
AUTHORIZED, PINNED, UNSCOREABLE, PERTURBATION_MISSING, UNSTABLE, NO_TOMBSTONE = (
    1 << bit for bit in range(len(CODES))
)
# The messages, formatted only when read (Reason.deferred): a pass's record names its reasons
# by code, so most are never read. Each takes the values the guard found, in order.
_AUTHORIZED = "segment {!r} is scoreable, stable and tombstoned"
_PINNED = (
    "segment {!r} is pinned ({}); score {:.2f} cannot authorize deleting a non-recoverable "
    "disambiguator"
)
_UNSCOREABLE = "segment {!r} was scored against segments also slated for eviction: {}"
_PERTURBATION_MISSING = "segment {!r} has no perturbed score, so its stability is unknown"
_UNSTABLE = "segment {!r} score moved {:.2f} -> {:.2f} under perturbation, more than {}"
_NO_TOMBSTONE = "segment {!r} has no tombstone; its eviction would be undetectable"


def evaluate(settings: EvictionSettings, request: EvictionRequest) -> Verdict:
    findings = list(_findings(settings, request))
    if not findings:
        detail = _margin(settings, request)
        reason = Reason.deferred("authorized", _AUTHORIZED, (request.segment.id,), detail)
        return Verdict(False, [reason])
    actions: list[Action] = []
    for _, action in findings:
        if action not in actions:
            actions.append(action)
    return Verdict(True, [reason for reason, _ in findings], actions)


@dataclass(frozen=True, slots=True)
class PassColumns:
    """What the guard found for each item of a pass, in input order: the segment ids, one
    bitmask of :data:`CODES` per segment, and the pending dependencies of each unscoreable
    segment (by index), which its ``resolve_dependencies_first`` action names."""

    segment_ids: list[str]
    masks: list[int]
    dependencies: dict[int, list[str]]


@dataclass(frozen=True, slots=True)
class PassCheck:
    """The eviction conditions of one policy, bound once (pinned kinds as a frozenset, the
    thresholds, the score range), checked over a pass's item dicts without typing them.

    :meth:`decide` is :func:`evaluate`'s verdict for every item, as codes, with the range and
    uniqueness checks of validation fused into the same loop; it returns None for anything it
    does not decide exactly as the typed path would (a score out of range, a repeated id,
    ``metadata``, which only rules read and validation bounds), so that its caller takes that
    path, which decides or reports the problem with its place.
    """

    pinned_kinds: frozenset[str]
    stability_delta: float
    require_perturbation: bool
    require_tombstone: bool
    low: float
    high: float

    @classmethod
    def bind(cls, settings: EvictionSettings, scores: ScoreRange) -> PassCheck:
        return cls(
            frozenset(settings.pinned_kinds),
            settings.stability_delta,
            settings.require_perturbation,
            settings.require_tombstone,
            scores.min,
            scores.max,
        )

    def decide(
        self, items: Sequence[Mapping[str, Any]], candidates: AbstractSet[str]
    ) -> PassColumns | None:
        """The columns of a pass whose items the schema accepted; None to take the typed path."""
        pinned_kinds, delta = self.pinned_kinds, self.stability_delta
        low, high = self.low, self.high
        missing = PERTURBATION_MISSING if self.require_perturbation else 0
        tombstone = self.require_tombstone
        ids: list[str] = []
        masks: list[int] = []
        dependencies: dict[int, list[str]] = {}
        for index, item in enumerate(items):
            segment = item["segment"]
            own = segment["id"]
            score = item["score"]
            if not low <= score <= high or segment.get("metadata"):
                return None
            mask = 0
            if segment["kind"] in pinned_kinds or segment.get("non_recoverable", False):
                mask = PINNED
            depends = segment.get("score_dependencies")
            # Most segments depend on none of the pass: isdisjoint answers that in C.
            if depends and not candidates.isdisjoint(depends):
                pending = {d for d in depends if d in candidates}
                pending.discard(own)
                if pending:
                    mask |= UNSCOREABLE
                    dependencies[index] = sorted(pending)
            perturbed = item.get("perturbed_score")
            if perturbed is None:
                mask |= missing
            elif not low <= perturbed <= high:
                return None
            elif abs(score - perturbed) > delta:
                mask |= UNSTABLE
            if tombstone and not segment.get("tombstone_written", False):
                mask |= NO_TOMBSTONE
            ids.append(own)
            masks.append(mask or AUTHORIZED)
        # A repeated id takes the typed path: one set built in C, not a lookup per item.
        return PassColumns(ids, masks, dependencies) if len(set(ids)) == len(ids) else None

    def decide_segment(
        self,
        segment: Segment,
        score: float,
        perturbed: float | None,
        candidates: AbstractSet[str],
    ) -> tuple[int, list[str]] | None:
        """One validated segment of a planned pass, offered among ``candidates``: its bitmask
        and its pending dependencies (sorted), as :meth:`decide` finds them for an item; None
        where :meth:`decide` would be None (``metadata``, a score out of range)."""
        low, high = self.low, self.high
        if segment.metadata or not low <= score <= high:
            return None
        mask = 0
        if segment.kind in self.pinned_kinds or segment.non_recoverable:
            mask = PINNED
        pending: list[str] = []
        depends = segment.score_dependencies
        if depends and not candidates.isdisjoint(depends):
            found = {d for d in depends if d in candidates}
            found.discard(segment.id)
            if found:
                mask |= UNSCOREABLE
                pending = sorted(found)
        if perturbed is None:
            if self.require_perturbation:
                mask |= PERTURBATION_MISSING
        elif not low <= perturbed <= high:
            return None
        elif abs(score - perturbed) > self.stability_delta:
            mask |= UNSTABLE
        if self.require_tombstone and not segment.tombstone_written:
            mask |= NO_TOMBSTONE
        return mask or AUTHORIZED, pending


def explain(
    settings: EvictionSettings,
    request: EvictionRequest,
    verdict: Verdict,
    scores: ScoreRange = UNIT_SCORES,
) -> Verdict:
    """The verdict with ``would_allow`` on each refusing reason (see ``_counterfactual``); a
    perturbed score offered lies within ``scores``, the range the guard judges on."""
    explainers: dict[str, Explainer] = {
        **_EXPLAINERS,
        "perturbation_missing": partial(_explain_perturbation_missing, scores=scores),
        "unstable_score": partial(_explain_unstable, scores=scores),
    }
    return explain_verdict(explainers, settings, request, verdict)


def _margin(s: EvictionSettings, r: EvictionRequest) -> dict[str, object]:
    """What an allowed eviction rested on, so the log alone can re-derive it."""
    detail: dict[str, object] = {
        "segment": r.segment.id,
        "score": r.score,
        "perturbed_score": r.perturbed_score,
        "stability_delta": s.stability_delta,
    }
    if r.perturbed_score is not None:
        detail["delta"] = abs(r.score - r.perturbed_score)
    return detail


def _findings(s: EvictionSettings, r: EvictionRequest) -> Iterator[tuple[Reason, Action]]:
    seg = r.segment
    own = (seg.id,)
    if seg.kind in s.pinned_kinds or seg.non_recoverable:
        why = f"kind {seg.kind!r}" if seg.kind in s.pinned_kinds else "non-recoverable"
        yield (
            Reason.deferred(
                "pinned",
                _PINNED,
                (seg.id, why, r.score),
                {"segment": seg.id, "kind": seg.kind, "non_recoverable": seg.non_recoverable},
            ),
            Action("pin", own),
        )

    pending = sorted({d for d in seg.score_dependencies if d in r.eviction_candidates} - {seg.id})
    if pending:
        yield (
            Reason.deferred(
                "unscoreable",
                _UNSCOREABLE,
                (seg.id, ", ".join(pending)),
                {"segment": seg.id, "dependencies": pending},
            ),
            Action("resolve_dependencies_first", tuple(pending)),
        )

    if r.perturbed_score is None:
        if s.require_perturbation:
            yield (
                Reason.deferred(
                    "perturbation_missing", _PERTURBATION_MISSING, own, {"segment": seg.id}
                ),
                Action("rescore", own),
            )
    elif _unstable(r.score, r.perturbed_score, s.stability_delta):
        yield (
            Reason.deferred(
                "unstable_score",
                _UNSTABLE,
                (seg.id, r.score, r.perturbed_score, s.stability_delta),
                {
                    "segment": seg.id,
                    "score": r.score,
                    "perturbed_score": r.perturbed_score,
                    "delta": abs(r.score - r.perturbed_score),
                    "stability_delta": s.stability_delta,
                },
            ),
            Action("rescore", own),
        )

    if s.require_tombstone and not seg.tombstone_written:
        yield (
            Reason.deferred("no_tombstone", _NO_TOMBSTONE, own, {"segment": seg.id}),
            Action("write_tombstone", own),
        )


# The conditions, each with the function that inverts it.


def _unstable(score: float, perturbed: float, delta: float) -> bool:
    return abs(score - perturbed) > delta


def _stable_interval(score: float, delta: float, scores: ScoreRange) -> list[float] | None:
    """The perturbed scores ``_unstable`` accepts, to the exact float at each end (about
    ``score ± delta``), clipped to the score range."""

    def stable(perturbed: float) -> bool:
        return not _unstable(score, perturbed, delta)

    lo = edge(stable, score - 2 * delta - 1, score)
    hi = edge(stable, score + 2 * delta + 1, score)
    return None if lo is None or hi is None else within(scores, [lo, hi])


def _explain_pinned(s: EvictionSettings, r: EvictionRequest, reason: Reason) -> Reason:
    seg = r.segment
    changes: list[Change] = []
    if seg.kind in s.pinned_kinds:
        changes.append(change("spec.eviction.pinned_kinds", "excludes", seg.kind))
    if seg.non_recoverable:
        changes.append(change("segment.non_recoverable", "==", False))
    why = f"kind {seg.kind!r} is pinned" if seg.kind in s.pinned_kinds else "it is non-recoverable"
    undo = " and ".join(
        ["unpin the kind"] * (seg.kind in s.pinned_kinds)
        + ["mark it recoverable"] * seg.non_recoverable
    )
    return explained(
        reason,
        [together(changes)],
        f"{why}: no score allows it; write a tombstone and summarize, or {undo}",
    )


def _explain_unscoreable(s: EvictionSettings, r: EvictionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    pending = list(reason.detail["dependencies"])
    return explained(
        reason,
        [
            change("eviction_candidates", "excludes", pending),
            change("segment.score_dependencies", "excludes", pending),
        ],
        f"scored against {', '.join(pending)}, also slated for eviction: allowed once they "
        "leave eviction_candidates (decide them first), or once the score no longer depends "
        "on them",
    )


def _explain_perturbation_missing(
    s: EvictionSettings, r: EvictionRequest, reason: Reason, scores: ScoreRange = UNIT_SCORES
) -> Reason:
    alternatives = [change("spec.eviction.require_perturbation", "==", False)]
    interval = _stable_interval(r.score, s.stability_delta, scores)
    if interval is not None:
        alternatives.insert(0, change("perturbed_score", "in", interval))
    shown = (
        f"a perturbed score in [{figure(interval[0])}, {figure(interval[1])}]" if interval else ""
    )
    return explained(
        reason,
        alternatives,
        f"no perturbed score: allowed with {shown} or at require_perturbation false"
        if interval
        else "no perturbed score: allowed at require_perturbation false",
    )


def _explain_unstable(
    s: EvictionSettings, r: EvictionRequest, reason: Reason, scores: ScoreRange = UNIT_SCORES
) -> Reason:
    moved = reason.detail["delta"]
    alternatives: list[Change] = []
    wording = []
    if moved <= 1:  # the schema's maximum for stability_delta
        alternatives.append(change("spec.eviction.stability_delta", ">=", moved))
        wording.append(f"stability_delta \u2265 {figure(moved)}")
    interval = _stable_interval(r.score, s.stability_delta, scores)
    if interval is not None:
        alternatives.append(change("perturbed_score", "in", interval))
        wording.append(f"a perturbed score in [{figure(interval[0])}, {figure(interval[1])}]")
    return explained(
        reason,
        alternatives,
        f"|\u0394| {figure(moved)} > {figure(s.stability_delta)}: allowed at "
        + (" or ".join(wording) if wording else "no value"),
    )


def _explain_no_tombstone(s: EvictionSettings, r: EvictionRequest, reason: Reason) -> Reason:  # noqa: ARG001
    return explained(
        reason,
        [
            change("segment.tombstone_written", "==", True),
            change("spec.eviction.require_tombstone", "==", False),
        ],
        "no tombstone: allowed once one is written (segment.tombstone_written true), or at "
        "require_tombstone false",
    )


_EXPLAINERS: dict[str, Explainer] = {
    "pinned": _explain_pinned,
    "unscoreable": _explain_unscoreable,
    "perturbation_missing": _explain_perturbation_missing,
    "unstable_score": _explain_unstable,
    "no_tombstone": _explain_no_tombstone,
}
