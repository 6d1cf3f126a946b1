"""Calibrated scores: raw scores mapped onto the scale the guards judge, before every guard.

A policy with ``spec.scores.calibration: {fixed: {low, high}}`` judges ``(raw - low) / (high -
low)``, clipped to [0, 1], wherever a guard or a rule reads a score: cycle scores and baselines
(collapse), a segment's score and perturbed score (eviction), span scores and each turn's mean
relevance (staleness), each window segment's scores (transition). Rules see the calibrated
scores too, so that a rule's thresholds and the guards' are on one scale. Every reason of such a
decision records the scale under ``detail.calibration``, with the raw values next to the
calibrated ones where a single score decided (eviction) and the raw spreads next to the
calibrated ones (collapse).

The map is monotonic, so the order of scores (what the planner evicts first, which span falls
outside the top k) never changes; only distances do.
"""

from __future__ import annotations

from typing import Any

from prunewarden._stats import pstdev
from prunewarden._values import replace_value
from prunewarden.decision import Reason
from prunewarden.inputs import (
    CollapseRequest,
    EvictionRequest,
    Request,
    Snapshot,
    StalenessRequest,
    TransitionRequest,
    TransitionSegment,
)
from prunewarden.policy import Calibration


def calibrate(calibration: Calibration, request: Request) -> Request:
    """``request`` with every score it carries on the calibrated scale."""
    apply = calibration.apply
    if isinstance(request, CollapseRequest):
        baseline = request.baseline
        return replace_value(
            request,
            history=tuple(
                Snapshot(s.cycle, {k: apply(v) for k, v in s.scores.items()}, s.pinned)
                for s in request.history
            ),
            baseline=None if baseline is None else {k: apply(v) for k, v in baseline.items()},
        )
    if isinstance(request, EvictionRequest):
        perturbed = request.perturbed_score
        return replace_value(
            request,
            score=apply(request.score),
            perturbed_score=None if perturbed is None else apply(perturbed),
        )
    if isinstance(request, StalenessRequest):
        return replace_value(
            request,
            spans=tuple(
                span if span.score is None else replace_value(span, score=apply(span.score))
                for span in request.spans
            ),
            turns=tuple(
                replace_value(t, mean_relevance=apply(t.mean_relevance)) for t in request.turns
            ),
        )
    if isinstance(request, TransitionRequest):
        # The scores a transition judges: a removal's, which require_scores hands to the
        # eviction guard. Bindings compare hashes, not scores.
        return replace_value(
            request,
            before=tuple(_calibrated_segment(apply, s) for s in request.before),
            after=tuple(_calibrated_segment(apply, s) for s in request.after),
        )
    return request  # pragma: no cover - the four requests are all there are


def _calibrated_segment(apply: Any, segment: TransitionSegment) -> TransitionSegment:
    score, perturbed = segment.score, segment.perturbed_score
    if score is None and perturbed is None:
        return segment
    return replace_value(
        segment,
        score=None if score is None else apply(score),
        perturbed_score=None if perturbed is None else apply(perturbed),
    )


def record(calibration: Calibration, raw: Request, judged: Request, recent: int) -> dict[str, Any]:
    """What ``detail.calibration`` says: the scale, and the raw values next to the judged ones
    where they decide (``recent``: how many last cycles the collapse guard read)."""
    out = calibration.to_dict()
    if isinstance(raw, EvictionRequest) and isinstance(judged, EvictionRequest):
        out.update(raw_score=raw.score, score=judged.score)
        if raw.perturbed_score is not None:
            out.update(
                raw_perturbed_score=raw.perturbed_score, perturbed_score=judged.perturbed_score
            )
    elif isinstance(raw, CollapseRequest) and raw.history:
        out["raw_spreads"] = [
            {"cycle": s.cycle, "spread": pstdev(s.scores.values())} for s in raw.history[-recent:]
        ]
    return out


def annotate(reasons: list[Reason], detail: dict[str, Any]) -> list[Reason]:
    """Each reason with ``detail.calibration`` added."""
    return [r.with_detail({**r.detail, "calibration": detail}) for r in reasons]
