"""``prunewarden calibrate --power``: how much of a synthetic collapse a fit would catch.

Leave-one-out over the healthy traces: for each one, the policy is fitted on all the others (as
``calibrate`` fits, with the same options), then copies of the held-out trace are replayed with
every score squeezed toward its cycle's mean from an onset on (by each factor in
:data:`FACTORS`) and each pinned canary set just below the median of the others, under the base
and under that fit. Reported: the share of held-out copies each policy halts on at or after the
onset (recall), the median delay from the onset to the halt, and the share of unmodified
held-out traces the fit halts on (false halts). Deterministic: no randomness, traces in order.

The squeeze is synthetic and sudden; a gradual collapse is caught less often and later.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from prunewarden._stats import median, pstdev
from prunewarden.engine import Engine
from prunewarden.policy import Policy
from prunewarden.replay._run import SilentLogger
from prunewarden.replay._trace import TraceReader

FACTORS = (0.2, 0.35, 0.5, 0.7)
LENGTHS = (10, 20, 50)  # session lengths the held-out false halts are reported for
CANARY_BELOW = 1e-3  # how far below the median an injected canary sits
METHOD = (
    "leave-one-out over the healthy traces; held-out copies with every score squeezed toward "
    "its cycle mean by each factor from the onset on, canaries just below the median (synthetic)"
)
ONSET = "cycle max(consecutive_cycles + 2, half the trace's cycles + 1)"

Cycle = tuple[dict[str, float], tuple[str, ...]]


def read_cycles(path: str, base: Policy) -> list[Cycle]:
    """A trace's cycles: each one's scores by id and its pinned ids."""
    with TraceReader(path, scores=base.spec.scores) as reader:
        return [
            (dict(event.arguments()["scores"]), tuple(event.arguments().get("pinned", ())))
            for event in reader
            if event.type == "cycle"
        ]


def squeezed(cycles: Sequence[Cycle], onset: int, factor: float) -> list[Cycle]:
    """``cycles`` with every score from the ``onset``-th cycle (1-based) on pressed toward its
    cycle's mean by ``factor``, and each canary just below the median of the others."""
    out = []
    for ordinal, (scores, pinned) in enumerate(cycles, start=1):
        if ordinal < onset or not scores:
            out.append((scores, pinned))
            continue
        mean = statistics.fmean(scores.values())
        pressed = {key: mean + factor * (value - mean) for key, value in scores.items()}
        others = [value for key, value in pressed.items() if key not in pinned]
        if others:
            below = median(others) - CANARY_BELOW
            pressed.update({c: below for c in pinned if c in pressed})
        out.append((pressed, pinned))
    return out


def first_halt(policy: Policy, cycles: Sequence[Cycle], start: int = 1) -> int | None:
    """The first 1-based cycle, from ``start`` on, at which the collapse guard halts a session
    of ``cycles`` (a halt before ``start``, under a policy that halts healthy cycles, is not a
    catch)."""
    session = Engine(policy, logger=SilentLogger()).session("power")
    for ordinal, (scores, pinned) in enumerate(cycles, start=1):
        halted = session.observe_cycle(scores, pinned).outcome == "halt"
        if halted and ordinal >= start:
            return ordinal
    return None


def onset_of(policy: Policy, cycles: Sequence[Cycle]) -> int:
    return max(policy.spec.collapse.consecutive_cycles + 2, len(cycles) // 2 + 1)


def power(
    base: Policy,
    traces: Sequence[Sequence[Cycle]],
    fit_without: Callable[[int], Policy],
) -> dict[str, Any]:
    """The power record (``metadata.calibration.power``); ``fit_without(i)`` is the policy
    fitted on every healthy trace but the ``i``-th."""
    caught: dict[str, dict[float, list[int | None]]] = {"base": {}, "fitted": {}}
    false_halts = {"base": 0, "fitted": 0}
    by_length: dict[int, list[bool]] = {length: [] for length in LENGTHS}
    for index, cycles in enumerate(traces):
        fitted = fit_without(index)
        halt = first_halt(fitted, cycles)
        false_halts["fitted"] += halt is not None
        false_halts["base"] += first_halt(base, cycles) is not None
        for length, halted in by_length.items():
            if len(cycles) >= length:
                halted.append(halt is not None and halt <= length)
        onset = onset_of(base, cycles)
        for factor in FACTORS:
            copy = squeezed(cycles, onset, factor)
            for name, policy in (("base", base), ("fitted", fitted)):
                halt = first_halt(policy, copy, onset)
                delay = None if halt is None else halt - onset
                caught[name].setdefault(factor, []).append(delay)
    count = len(traces)
    return {
        "method": METHOD,
        "onset": ONSET,
        "factors": list(FACTORS),
        "recall": {name: [_share(delays) for delays in caught[name].values()] for name in caught},
        "median_delay": {
            name: [_median_delay(delays) for delays in caught[name].values()] for name in caught
        },
        "false_halts": _rate(false_halts["fitted"], count),
        "false_halts_base": _rate(false_halts["base"], count),
        "held_out": count,
        "false_halts_by_length": {
            str(length): {"traces": len(halted), "rate": _rate(sum(halted), len(halted))}
            for length, halted in by_length.items()
        },
    }


def canary_only_traces(
    fitted: Policy, floor: float, traces: Sequence[tuple[str, Sequence[Cycle]]]
) -> list[str]:
    """The healthy traces whose canary never inverts, when the fitted absolute ``floor`` is at
    or above every healthy spread: then signal A always holds and the floor was not fitted on
    spread evidence, so the guard halts on the canary alone. Empty when the floor is below some
    healthy spread (the fit saw spread evidence)."""
    scale = fitted.spec.calibration
    margin = fitted.spec.collapse.canary_margin

    def judged(scores: dict[str, float]) -> dict[str, float]:
        return scores if scale is None else {k: scale.apply(v) for k, v in scores.items()}

    spreads = [pstdev(judged(s).values()) for _, cycles in traces for s, _ in cycles if s]
    if not spreads or floor < max(spreads):
        return []
    return [
        path for path, cycles in traces if not _inverts([(judged(s), p) for s, p in cycles], margin)
    ]


def _inverts(cycles: Sequence[Cycle], margin: float) -> bool:
    baseline: dict[str, float] = {}
    for scores, pinned in cycles:
        others = [v for k, v in scores.items() if k not in pinned]
        for canary in pinned:
            if canary not in scores:
                continue
            first = baseline.setdefault(canary, scores[canary])
            below = bool(others) and scores[canary] < median(others)
            if below or first - scores[canary] > margin:
                return True
    return False


def render_power(record: dict[str, Any]) -> str:
    """The power table, with what it does not say."""
    lines = [
        (
            f"power   leave-one-out over {record['held_out']} healthy trace(s); held-out "
            f"healthy traces halted: base {record['false_halts_base']:.0%}, fitted "
            f"{record['false_halts']:.0%}"
        ),
        f"  {'squeeze':>8}{'base':>8}{'fitted':>8}{'delay':>8}",
    ]
    for i, factor in enumerate(record["factors"]):
        delay = record["median_delay"]["fitted"][i]
        lines.append(
            f"  {factor:>8}{record['recall']['base'][i]:>8.0%}{record['recall']['fitted'][i]:>8.0%}"
            f"{'-' if delay is None else delay:>8}"
        )
    lengths = record.get("false_halts_by_length", {})
    if lengths:
        cells = ", ".join(
            f"{length}: {'-' if not found['traces'] else format(found['rate'], '.0%')} "
            f"of {found['traces']}"
            for length, found in lengths.items()
        )
        lines.append(f"  held-out healthy traces halted by cycle (fitted): {cells}")
    lines.append(
        "  (recall: share of held-out copies halted at or after the onset; delay: median cycles "
        "from the onset, fitted. The squeeze is synthetic and sudden: a gradual collapse is "
        "caught less often.)"
    )
    return "\n".join(lines) + "\n"


def _rate(count: int, total: int) -> float:
    return round(count / total, 6) if total else 0.0


def _share(delays: Sequence[int | None]) -> float:
    return round(sum(d is not None for d in delays) / len(delays), 6) if delays else 0.0


def _median_delay(delays: Sequence[int | None]) -> float | None:
    found = [d for d in delays if d is not None]
    return float(statistics.median(found)) if found else None
