"""A fit that disables a signal without saying so: ``calibrate`` refuses to write it unless
``--accept-degenerate`` says the reviewer knows.

- an absolute floor at or above every healthy spread (on the fitted scale): signal A then holds
  on every cycle, and the guard halts on the canary alone (one cycle's canary glitch halts);
- a cusum threshold below every healthy trace's peak sum S: the sum then crosses it in every
  healthy session, and only the run of positive increments keeps signal A down.

Each finding names the healthy traces with the number that makes the fit degenerate for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prunewarden._stats import pstdev
from prunewarden.replay._fit import Fit, TraceData
from prunewarden.replay._fit_cusum import peaks


@dataclass(frozen=True, slots=True)
class Degenerate:
    """Why a fit disables a signal, and each healthy trace with its number."""

    why: str
    traces: tuple[tuple[str, float], ...]

    def message(self) -> str:
        named = ", ".join(f"{path} ({value:.6g})" for path, value in self.traces)
        return (
            f"{self.why}; not written (pass --accept-degenerate to write it anyway). "
            f"Healthy traces: {named}"
        )

    def to_dict(self) -> dict[str, object]:
        return {"why": self.why, "traces": [{"trace": p, "value": v} for p, v in self.traces]}


def degenerate(
    fitted: Fit, healthy: Sequence[TraceData], horizon: int | None = None
) -> Degenerate | None:
    """What makes ``fitted`` degenerate on ``healthy`` (a cusum fit: on their first
    ``horizon`` cycles, the session length it was fitted for), or None."""
    settings = fitted.policy.spec.collapse
    if fitted.cusum is not None:
        return _threshold_below_peaks(fitted, healthy, horizon)
    if settings.spread_floor_mode != "absolute":
        return None
    largest = [
        (trace.path, max(pstdev([fitted.scale.apply(v) for v in c]) for c in trace.cycles if c))
        for trace in healthy
        if any(trace.cycles)
    ]
    if not largest or any(fitted.floor < spread for _, spread in largest):
        return None
    why = (
        f"the fitted floor {fitted.floor} is at or above every healthy spread (each trace's "
        "largest below): signal A would hold on every cycle, so the guard would halt on the "
        "canary alone (consider --floor-from spread or --spread-test cusum)"
    )
    return Degenerate(why, tuple(largest))


def _threshold_below_peaks(
    fitted: Fit, healthy: Sequence[TraceData], horizon: int | None
) -> Degenerate | None:
    cusum = fitted.cusum
    if cusum is None:  # pragma: no cover - the caller checked
        return None
    collapse = fitted.policy.spec.collapse
    entries = collapse.min_live_entries
    cycles = [
        [
            (i, pstdev([fitted.scale.apply(v) for v in c]), len(c) >= entries)
            for i, c in enumerate(trace.cycles[:horizon], 1)
        ]
        for trace in healthy
    ]
    found = peaks(cusum, collapse.consecutive_cycles, cycles)
    if not found or any(peak <= cusum.threshold for peak in found):
        return None
    why = (
        f"the fitted threshold {cusum.threshold} is below the peak sum S of every healthy "
        "trace (each trace's peak below): the sum crosses it in every healthy session, and "
        "only the run of positive increments holds signal A down"
    )
    paths = [trace.path for trace in healthy]
    return Degenerate(why, tuple(zip(paths, found, strict=True)))
