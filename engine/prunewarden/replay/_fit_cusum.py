"""``prunewarden calibrate --spread-test cusum``: the cusum spread test fitted to healthy traces.

On the fitted scale, with each cycle's spread floored at 1e-6 before logs, over the cycles the
guard judges (at least ``min_live_entries`` entries):

- μ (``reference.prior_log_spread``): the mean over the healthy traces of each trace's mean
  ln-spread;
- w (``reference.prior_weight``): the within-trace variance of the ln-spread (the mean of each
  trace's) over the between-trace variance of the traces' means, the latter floored at
  :data:`BETWEEN_FLOOR` and w capped at :data:`MAX_PRIOR_WEIGHT` (the schema's bound);
- h (``threshold``): the largest threshold, on a grid of :data:`THRESHOLD_STEP`, at which any
  healthy trace raises signal A (spread evidence alone, whatever its canary), plus the margin.

The slack, ``reference.first_cycles``, ``reference.mode`` and ``rate``, ``consecutive_cycles``
and ``min_live_entries`` stay as the base has them (the cusum block's defaults when the base is
not in cusum mode). With a horizon of N cycles, h is fitted on each trace's first N cycles: the
bound it gives holds for sessions up to N cycles long (a longer one has more chances to wobble),
and the traces must reach N for it to be checked there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from prunewarden._cusum import CusumParameters, log_spread, tracks
from prunewarden._stats import pstdev
from prunewarden.policy import Calibration, CusumSettings, Policy

DEFAULT_CUSUM_MARGIN = 0.5
BETWEEN_FLOOR = 0.01  # ln units squared: traces alike in mean do not make w unbounded
MAX_PRIOR_WEIGHT = 1000.0
THRESHOLD_STEP = 0.01
_DIGITS = 6


def fit_cusum(
    base: Policy,
    scale: Calibration,
    healthy: Sequence[Sequence[Sequence[float]]],
    margin: float = DEFAULT_CUSUM_MARGIN,
    horizon: int | None = None,
) -> tuple[CusumSettings, dict[str, Any]]:
    """The fitted cusum settings and what ``metadata.calibration.cusum`` records of the fit.
    ``healthy`` holds each healthy trace's cycles' raw scores; with ``horizon``, the threshold
    is fitted on the first ``horizon`` cycles of each."""
    collapse = base.spec.collapse
    entries = collapse.min_live_entries
    start = collapse.cusum or CusumSettings()
    spreads = [[pstdev([scale.apply(v) for v in cycle]) for cycle in trace] for trace in healthy]
    judged = [  # a cycle too small to judge stays out of the reference, so out of its prior
        [log_spread(s) for s, raw in zip(trace, raws, strict=True) if len(raw) >= entries]
        for trace, raws in zip(spreads, healthy, strict=True)
    ]
    logs = [trace for trace in judged if trace]
    means = [math.fsum(trace) / len(trace) for trace in logs]
    mu = math.fsum(means) / len(means) if means else start.prior_log_spread
    within = math.fsum(_variance(trace) for trace in logs) / len(logs) if logs else 0.0
    between = _variance(means)
    weight = min(within / max(between, BETWEEN_FLOOR), MAX_PRIOR_WEIGHT)
    reference = replace(
        start, prior_log_spread=_round(max(mu, math.log(1e-6))), prior_weight=_round(weight)
    )
    cycles = [
        [
            (i, s, len(raw) >= collapse.min_live_entries)
            for i, (s, raw) in enumerate(zip(trace, raws, strict=True), 1)
        ]
        for trace, raws in zip(spreads, healthy, strict=True)
    ]
    if horizon is not None:
        cycles = [trace[:horizon] for trace in cycles]
    largest = _largest_halting_threshold(reference, collapse.consecutive_cycles, cycles)
    fitted = replace(reference, threshold=_round(largest + margin))
    record = {
        "method": "capped cusum of ln(reference / spread); h from healthy spread evidence alone",
        "prior_log_spread": fitted.prior_log_spread,
        "prior_weight": fitted.prior_weight,
        "within_variance": _round(within),
        "between_variance": _round(between),
        "between_floor": BETWEEN_FLOOR,
        "largest_halting_threshold": _round(largest),
        "margin": margin,
        "threshold": fitted.threshold,
        "slack": fitted.slack,
        "first_cycles": fitted.first_cycles,
        "consecutive_cycles": collapse.consecutive_cycles,
    }
    if fitted.reference_mode == "tracking":
        record.update(reference_mode="tracking", rate=fitted.rate)
    if horizon is not None:
        record["horizon"] = horizon
        record["traces_reaching_horizon"] = sum(len(trace) >= horizon for trace in cycles)
    return fitted, record


def peaks(
    settings: CusumSettings, n: int, cycles: Sequence[Sequence[tuple[int, float, bool]]]
) -> list[float]:
    """Each healthy trace's largest sum S under ``settings`` (as the guard caps it)."""
    p = _parameters(settings, n, settings.threshold)
    return [max((t.total for t in tracks(p, trace)), default=0.0) for trace in cycles]


def _parameters(settings: CusumSettings, n: int, threshold: float) -> CusumParameters:
    return CusumParameters(
        n,
        settings.slack,
        threshold,
        settings.first_cycles,
        settings.prior_log_spread,
        settings.prior_weight,
        settings.reference_mode,
        settings.rate if settings.reference_mode == "tracking" else 0.0,
    )


def _largest_halting_threshold(
    settings: CusumSettings, n: int, cycles: Sequence[Sequence[tuple[int, float, bool]]]
) -> float:
    """The largest grid threshold at which some trace raises signal A (0.0: none does). No
    threshold above the largest sum reached without the cap can, which bounds the grid."""

    def parameters(threshold: float) -> CusumParameters:
        return _parameters(settings, n, threshold)

    uncapped = parameters(math.inf)
    bound = max((t.total for trace in cycles for t in tracks(uncapped, trace)), default=0.0)
    steps = math.floor(bound / THRESHOLD_STEP + 1e-9)
    for step in range(steps, 0, -1):
        threshold = step * THRESHOLD_STEP
        p = parameters(threshold)
        if any(t.signal(p) for trace in cycles for t in tracks(p, trace)):
            return threshold
    return 0.0


def _variance(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / len(values)


def _round(value: float) -> float:
    return round(value, _DIGITS)
