"""Staleness: a score bound to text that a rewrite changed is stale; recompute it or freeze.

A score is a function of the text it was computed against. Each finding below names spans whose
score can no longer be trusted; the remediation recomputes them and their neighbourhood, drops
poisoned spans, or freezes pruning when the recompute would exceed the caller's budget.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from prunewarden.decision import Action, Reason, Verdict, disabled_reason
from prunewarden.guards._counterfactual import (
    Change,
    Explainer,
    change,
    edge,
    explain_verdict,
    explained,
    figure,
    nearest_passing,
    together,
)
from prunewarden.inputs import ScoreRange, StalenessRequest, Turn
from prunewarden.inputs._columns import SpanColumns, StalenessColumns
from prunewarden.inputs._model import TurnStats
from prunewarden.policy import StalenessSettings


def text_sha256(text: str) -> str:
    """The binding hash of a span's text: lower-case hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(slots=True)
class _Findings:
    reasons: list[Reason] = field(default_factory=list)
    stale: set[int] = field(default_factory=set)  # positions whose score must be recomputed
    poisoned: list[str] = field(default_factory=list)
    recompute_all: bool = False


def evaluate(settings: StalenessSettings, request: StalenessRequest) -> Verdict:
    return evaluate_columns(settings, StalenessColumns.of(request))


def evaluate_columns(settings: StalenessSettings, request: StalenessColumns) -> Verdict:
    """The guard over a request's columns (:mod:`prunewarden.inputs._columns`): the one
    implementation, which :func:`evaluate` reaches through the columns of a typed request."""
    spans = request.spans
    found = _Findings()
    _check_bindings(spans, settings, found)
    _check_orphans(spans, request.tombstones, found)
    _check_invalidation(request.turn, found)
    _check_inflation(request.turns, settings, found)
    if not found.reasons:
        kept, evicted = _top_k(spans, request.keep_top_k)
        reason = Reason(
            "bound",
            f"every score is bound to its span's current text; kept {len(kept)} of "
            f"{len(spans.ids)}",
            {"kept": len(kept), "evicted": len(evicted)},
        )
        return Verdict(False, [reason], kept=kept, evicted=evicted)
    all_ids = tuple(spans.ids)
    return Verdict(
        True, found.reasons, _remedies(spans, request, settings, found), kept=all_ids, evicted=()
    )


def explain(
    settings: StalenessSettings,
    request: StalenessRequest,
    verdict: Verdict,
    scores: ScoreRange | None = None,  # noqa: ARG001 - no staleness alternative is a score
) -> Verdict:
    """The verdict with ``would_allow`` on each refusing reason (see ``_counterfactual``)."""
    return explain_verdict(_EXPLAINERS, settings, request, verdict)


def unguarded(settings: StalenessSettings, request: StalenessRequest) -> Verdict:
    """The guard is off: the plain top-k cut, spans without a score ranked last."""
    return unguarded_columns(settings, StalenessColumns.of(request))


def unguarded_columns(settings: StalenessSettings, request: StalenessColumns) -> Verdict:  # noqa: ARG001
    kept, evicted = _top_k(request.spans, request.keep_top_k)
    return Verdict(False, [disabled_reason("staleness")], kept=kept, evicted=evicted)


def _check_bindings(spans: SpanColumns, s: StalenessSettings, found: _Findings) -> None:
    unbound, mismatched, poisoned = [], [], []
    limit = s.max_rewrites_without_recompute
    rows = zip(spans.ids, spans.scores, spans.declared, spans.rewrites, spans.digests, strict=True)
    for i, (span_id, score, declared, rewrites, digest) in enumerate(rows):
        if rewrites > limit:
            poisoned.append(span_id)
            continue
        if score is None or not declared:
            unbound.append(span_id)
            found.stale.add(i)
        if declared and declared != (digest or text_sha256(spans.texts[i])):
            mismatched.append(span_id)
            found.stale.add(i)
    if unbound:
        found.reasons.append(
            Reason(
                "unbound_score",
                f"{len(unbound)} span(s) carry no score bound to a text hash: {_names(unbound)}",
                {"spans": unbound},
            )
        )
    if mismatched:
        found.reasons.append(
            Reason(
                "hash_mismatch",
                f"{len(mismatched)} span(s) were scored against text they no longer hold: "
                f"{_names(mismatched)}",
                {"spans": mismatched},
            )
        )
    if poisoned:
        found.poisoned = poisoned
        found.reasons.append(
            Reason(
                "poisoned_span",
                f"{len(poisoned)} span(s) rewritten more than {limit} "
                f"times without a recompute: {_names(poisoned)}",
                {"spans": poisoned, "max_rewrites_without_recompute": limit},
            )
        )


def _check_orphans(spans: SpanColumns, tombstones: frozenset[str], found: _Findings) -> None:
    live = set(spans.ids)
    orphans: dict[str, list[str]] = {}
    for i, derived in enumerate(spans.derived):
        if not derived:
            continue  # most spans derive from nothing: no list to build
        span_id = spans.ids[i]
        missing = [p for p in derived if p != span_id and p not in live and p not in tombstones]
        if missing:
            orphans[span_id] = missing
            found.stale.add(i)
    if orphans:
        found.reasons.append(
            Reason(
                "orphaned_parent",
                f"{len(orphans)} span(s) derive from parents that are gone without a tombstone: "
                f"{_names(list(orphans))}",
                {"spans": orphans},
            )
        )


def _check_invalidation(turn: TurnStats | None, found: _Findings) -> None:
    if turn is None or turn.spans_modified == 0 or turn.scores_invalidated >= turn.spans_modified:
        return
    found.recompute_all = True
    found.reasons.append(
        Reason(
            "invalidation_gap",
            f"the rewrite modified {turn.spans_modified} span(s) but invalidated only "
            f"{turn.scores_invalidated} score(s); which scores are stale cannot be told",
            {"spans_modified": turn.spans_modified, "scores_invalidated": turn.scores_invalidated},
        )
    )


def _check_inflation(turns: tuple[Turn, ...], s: StalenessSettings, found: _Findings) -> None:
    window = s.drift_consecutive_turns
    if len(turns) < window + 1:
        return
    pairs = list(zip(turns[-window - 1 : -1], turns[-window:], strict=True))
    for before, after in pairs:
        if not _inflates(before, after, s.drift_tolerance):
            return
    found.recompute_all = True
    found.reasons.append(
        Reason(
            "relevance_inflation",
            f"mean relevance rose by more than {s.drift_tolerance:.0%} while tokens fell, "
            f"{window} turn(s) in a row: a compression artifact, not a quality signal",
            {
                "turns": [
                    {"turn": t.turn, "mean_relevance": t.mean_relevance, "tokens": t.tokens}
                    for t in turns[-window - 1 :]
                ],
                "drift_tolerance": s.drift_tolerance,
            },
        )
    )


def _inflates(before: Turn, after: Turn, tolerance: float) -> bool:
    shrank = after.tokens < before.tokens
    rise = after.mean_relevance - before.mean_relevance
    # Relative to the magnitude, so a flat or falling mean never counts, whatever its sign.
    return shrank and rise > 0 and rise > tolerance * abs(before.mean_relevance)


def _remedies(
    spans: SpanColumns, request: StalenessColumns, s: StalenessSettings, found: _Findings
) -> list[Action]:
    poisoned = set(found.poisoned)
    ids = spans.ids
    positions = (
        range(len(ids))
        if found.recompute_all
        else _neighbourhood(spans, found.stale, s.recompute_hops)
    )
    recompute = [ids[i] for i in sorted(positions) if ids[i] not in poisoned]
    actions: list[Action] = []
    if recompute:
        budget = request.recompute_budget
        too_many = budget is not None and len(recompute) > budget
        actions.append(Action("freeze") if too_many else Action("recompute", tuple(recompute)))
    if found.poisoned:
        actions.append(Action("drop", tuple(found.poisoned)))
    return actions


def _neighbourhood(spans: SpanColumns, stale: set[int], hops: int) -> set[int]:
    """Stale positions, those within ``hops`` of one, and the live parents of stale spans."""
    count = len(spans.ids)
    index = {span_id: i for i, span_id in enumerate(spans.ids)}
    out: set[int] = set()
    for i in stale:
        out.update(range(max(0, i - hops), min(count, i + hops + 1)))
        out.update(index[p] for p in spans.derived[i] if p in index)
    return out


def _top_k(spans: SpanColumns, k: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    # sorted() is stable, so equal scores keep their input order; absent scores rank last. The
    # keys are built in one pass, not by a function called per span.
    ids = spans.ids
    ranks = [(True, 0.0) if score is None else (False, -score) for score in spans.scores]
    ranked = sorted(range(len(ids)), key=ranks.__getitem__)
    keep = set(ranked[:k])
    kept = tuple(ids[i] for i in ranked[:k])
    evicted = tuple(span_id for i, span_id in enumerate(ids) if i not in keep)
    return kept, evicted


def _names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# The inverse of each refusing condition above.


def _positions(request: StalenessRequest, ids: list[str]) -> list[int]:
    wanted = set(ids)
    return [i for i, span in enumerate(request.spans) if span.span_id in wanted]


def _bound_changes(request: StalenessRequest, ids: list[str]) -> list[Change]:
    """Each span bound again: a score, and the hash of the text it holds now."""
    changes = []
    for i in _positions(request, ids):
        span = request.spans[i]
        digest = span.text_digest or text_sha256(span.text)
        changes.append(change(f"spans[{i}].text_sha256", "==", digest))
        if span.score is None:
            changes.append(change(f"spans[{i}].score", "!=", None))
    return changes


def _explain_unbound(s: StalenessSettings, r: StalenessRequest, reason: Reason) -> Reason:  # noqa: ARG001
    ids = reason.detail["spans"]
    return explained(
        reason,
        [together(_bound_changes(r, ids))],
        f"{len(ids)} span(s) unbound: allowed once each carries a score bound to its text's "
        "SHA-256 (rescore them); no policy value allows an unbound score",
    )


def _explain_mismatch(s: StalenessSettings, r: StalenessRequest, reason: Reason) -> Reason:  # noqa: ARG001
    ids = reason.detail["spans"]
    return explained(
        reason,
        [together(_bound_changes(r, ids))],
        f"{len(ids)} span(s) scored against older text: allowed once each score is recomputed "
        "and bound to the text's current SHA-256; no policy value allows it",
    )


def _explain_poisoned(s: StalenessSettings, r: StalenessRequest, reason: Reason) -> Reason:
    positions = _positions(r, reason.detail["spans"])
    most = max(r.spans[i].rewrite_count for i in positions)
    limit = s.max_rewrites_without_recompute
    alternatives = [change("spec.staleness.max_rewrites_without_recompute", ">=", most)]
    alternatives.append(
        together([change(f"spans[{i}].rewrite_count", "<=", limit) for i in positions])
    )
    return explained(
        reason,
        alternatives,
        f"rewritten up to {most} times > {limit}: allowed at max_rewrites_without_recompute "
        f"\u2265 {most}, or once each is recomputed from its source (rewrite_count \u2264 {limit})",
    )


def _explain_orphans(s: StalenessSettings, r: StalenessRequest, reason: Reason) -> Reason:  # noqa: ARG001
    parents = sorted({p for missing in reason.detail["spans"].values() for p in missing})
    return explained(
        reason,
        [change("tombstones", "contains", parents)],
        f"parents {', '.join(parents)} are gone unrecorded: allowed once tombstones name them",
    )


def _explain_gap(s: StalenessSettings, r: StalenessRequest, reason: Reason) -> Reason:  # noqa: ARG001
    modified = reason.detail["spans_modified"]
    return explained(
        reason,
        [change("turn.scores_invalidated", ">=", modified)],
        f"{reason.detail['scores_invalidated']} of {modified} modified span(s) invalidated: "
        f"allowed once the rewrite invalidates \u2265 {modified} score(s)",
    )


def _tolerates(before: Turn, after: Turn) -> Callable[[float], bool]:
    """Whether a drift tolerance lets this pair of turns pass."""

    def tolerates(tolerance: float) -> bool:
        return not _inflates(before, after, tolerance)

    return tolerates


def _inflating_streak(turns: tuple[Turn, ...], tolerance: float) -> int:
    """How many consecutive pairs of turns, up to the last, inflate."""
    streak = 0
    for before, after in zip(reversed(turns[:-1]), reversed(turns[1:]), strict=True):
        if not _inflates(before, after, tolerance):
            break
        streak += 1
    return streak


def _explain_inflation(s: StalenessSettings, r: StalenessRequest, reason: Reason) -> Reason:
    window = s.drift_consecutive_turns
    pairs = list(zip(r.turns[-window - 1 : -1], r.turns[-window:], strict=True))
    tolerances = []
    for before, after in pairs:
        magnitude = abs(before.mean_relevance)
        if magnitude == 0:
            continue  # no tolerance covers a rise from zero
        rise = after.mean_relevance - before.mean_relevance
        tolerates = _tolerates(before, after)
        above = nearest_passing(rise / magnitude, tolerates, math.inf)
        # The smallest tolerance the pair passes, to the exact float.
        found = None if above is None else edge(tolerates, s.drift_tolerance, above)
        if found is not None:
            tolerances.append(found)
    alternatives: list[Change] = []
    wording = []
    if tolerances and min(tolerances) <= 1:  # the schema's maximum for drift_tolerance
        alternatives.append(change("spec.staleness.drift_tolerance", ">=", min(tolerances)))
        wording.append(f"drift_tolerance \u2265 {figure(min(tolerances))}")
    # A window one turn longer than the run of inflating pairs the history ends with.
    streak = _inflating_streak(r.turns, s.drift_tolerance)
    if streak < 1000:  # the schema's maximum for drift_consecutive_turns
        alternatives.append(change("spec.staleness.drift_consecutive_turns", ">=", streak + 1))
        wording.append(f"drift_consecutive_turns \u2265 {streak + 1}")
    return explained(
        reason,
        alternatives,
        f"relevance rose more than {s.drift_tolerance:.0%} while tokens fell for {window} "
        "turn(s): allowed at " + (" or ".join(wording) if wording else "no value"),
    )


_EXPLAINERS: dict[str, Explainer] = {
    "unbound_score": _explain_unbound,
    "hash_mismatch": _explain_mismatch,
    "poisoned_span": _explain_poisoned,
    "orphaned_parent": _explain_orphans,
    "invalidation_gap": _explain_gap,
    "relevance_inflation": _explain_inflation,
}
