"""``prunewarden calibrate``: fit a policy's score scale and spread floor to one scorer's traces.

From healthy traces (sessions known not to have collapsed) it fits:

- the scale: the 5th percentile of every raw cycle score maps to 0 and the 95th to 1
  (``spec.scores.calibration: {fixed: {low, high}}``);
- the absolute spread floor: the largest floor (on the fitted scale) under which the collapse guard
  halts on at most the target share of the healthy traces, found by replaying them, times the
  headroom (0.5 by default), so that held-out healthy sessions have room.

It writes a new version of the base policy (same name, minor version bumped) that ``extends`` the
base and states only what was fitted, with ``metadata.calibration`` saying what it was fitted on:
each trace's SHA-256, the counts, the date, the target. Then it replays every trace under the base
and the fitted policy and prints what each decided, next to each other; known-collapsed traces
that the fitted policy does not halt on are named, and the exit code is 1.

Deterministic: the same traces, options and base give byte-identical output; the date is
``--date`` (today in UTC when omitted, the one input from the clock).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from prunewarden._files import open_regular
from prunewarden._stats import pstdev
from prunewarden.engine import Engine
from prunewarden.errors import ExitCode, PrunewardenError
from prunewarden.policy import Calibration, CusumSettings, Policy, parse_policy
from prunewarden.replay._fit_cusum import DEFAULT_CUSUM_MARGIN, fit_cusum
from prunewarden.replay._fit_extends import base_outside
from prunewarden.replay._run import SilentLogger, replay_trace
from prunewarden.replay._trace import TraceReader

LOW_QUANTILE = 0.05
HIGH_QUANTILE = 0.95
DEFAULT_RATE = 0.05
DEFAULT_HEADROOM = 0.5
SpreadTest = Literal["absolute", "cusum"]
FloorFrom = Literal["halts", "spread"]  # what the absolute floor is fitted on
_DIGITS = 6  # fitted numbers are rounded (down, for the floor) to this many decimals


class CalibrationError(PrunewardenError):
    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class TraceData:
    """A trace's file, its SHA-256 and its cycles' raw scores."""

    path: str
    sha256: str
    cycles: tuple[tuple[float, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.path, "sha256": self.sha256, "cycles": len(self.cycles)}


@dataclass(frozen=True, slots=True)
class Fit:
    """What was fitted, and what the fitted policy halts on."""

    scale: Calibration
    floor: float
    largest_quiet_floor: float
    policy: Policy
    text: str
    cusum: CusumSettings | None = None  # with the cusum spread test, what was fitted of it


def read_trace(path: str, base: Policy) -> TraceData:
    """The raw cycle scores of a trace, checked in full against the base's score range."""
    try:
        with open_regular(path) as stream:
            digest = hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot read: {exc.strerror}") from None
    with TraceReader(path, scores=base.spec.scores) as reader:
        cycles = [
            tuple(float(v) for v in event.arguments()["scores"].values())
            for event in reader
            if event.type == "cycle"
        ]
    return TraceData(path, digest, tuple(cycles))


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks of sorted values (numpy's default)."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def fit_scale(healthy: Sequence[TraceData]) -> Calibration:
    values = sorted(v for trace in healthy for cycle in trace.cycles for v in cycle)
    if not values:
        raise CalibrationError("the healthy traces have no cycle scores to fit a scale to")
    low = round(quantile(values, LOW_QUANTILE), _DIGITS)
    high = round(quantile(values, HIGH_QUANTILE), _DIGITS)
    if not low < high:
        message = f"the healthy traces' scores do not spread (5th and 95th percentile {low})"
        raise CalibrationError(message)
    return Calibration(low, high)


def halts(policy: Policy, traces: Sequence[TraceData]) -> list[str]:
    """The traces on which the collapse guard halts at least once under ``policy``."""
    engine = Engine(policy, logger=SilentLogger())
    found = []
    for trace in traces:
        summary = replay_trace(engine, trace.path)
        if summary.problems or summary.failure:
            problems = [str(p) for p in summary.problems] or [summary.failure]
            raise CalibrationError("; ".join(problems))
        if summary.outcomes.get("collapse", {}).get("halt", 0):
            found.append(trace.path)
    return found


def spread_signal_traces(policy: Policy, traces: Sequence[TraceData]) -> list[str]:
    """The traces on which signal A of ``policy``'s absolute floor holds at least once, whatever
    their canary: some judged cycle (from cycle ``consecutive_cycles`` + 1 on, with at least
    ``min_live_entries`` entries) ends a run of ``consecutive_cycles`` spreads under the floor."""
    collapse = policy.spec.collapse
    scale = policy.spec.calibration
    n = collapse.consecutive_cycles
    found = []
    for trace in traces:
        spreads = [
            pstdev([v if scale is None else scale.apply(v) for v in cycle])
            for cycle in trace.cycles
        ]
        if any(
            len(trace.cycles[last]) >= collapse.min_live_entries
            and all(s < collapse.spread_floor for s in spreads[last - n + 1 : last + 1])
            for last in range(n, len(spreads))
        ):
            found.append(trace.path)
    return found


def fit(  # noqa: PLR0913 - the fit's inputs, each a command-line option
    base: Policy,
    base_ref: str,
    out: str,
    healthy: Sequence[TraceData],
    collapsed: Sequence[TraceData],
    *,
    rate: float = DEFAULT_RATE,
    headroom: float = DEFAULT_HEADROOM,
    date: str,
    spread_test: SpreadTest | None = None,
    cusum_margin: float = DEFAULT_CUSUM_MARGIN,
    power: dict[str, Any] | None = None,
    floor_from: FloorFrom = "halts",
    horizon: int | None = None,
) -> Fit:
    """Fit the scale and the floor (or, with the cusum spread test, named by ``spread_test`` or
    the base's mode, the cusum settings); the fitted policy's text and its compiled form.

    ``floor_from``: ``halts`` counts the healthy traces the guard halts on (the default);
    ``spread`` counts those on which signal A holds, whatever their canary, so that a canary
    that never inverts cannot lift the floor above every healthy spread."""
    scale = fit_scale(healthy)
    spread_test = _spread_test(base, spread_test, floor_from, horizon, healthy)
    if spread_test == "cusum":
        cusum, record = fit_cusum(base, scale, [t.cycles for t in healthy], cusum_margin, horizon)
        provisional = _policy(base, out, _document(base, base_ref, scale, 0.0, {}, cusum=cusum))
        metadata = _metadata(
            base,
            date=date,
            rate=rate,
            headroom=None,
            scale=scale,
            fitted={"cusum": record},
            traces=(healthy, collapsed),
            results={
                "base": _results(base, healthy, collapsed),
                "calibrated": _results(provisional, healthy, collapsed),
            },
            power=power,
        )
        document = _document(base, base_ref, scale, 0.0, metadata, cusum=cusum)
        text = _text(document, base)
        floor = base.spec.collapse.spread_floor
        return Fit(scale, floor, floor, _parse(text, base, out), text, cusum)

    def policy_at(floor: float) -> Policy:
        return _policy(base, out, _document(base, base_ref, scale, floor, {}))

    largest = _largest_quiet_floor(policy_at, scale, healthy, rate=rate, floor_from=floor_from)
    floor = math.floor(largest * headroom * 10**_DIGITS) / 10**_DIGITS
    provisional = policy_at(floor)
    results = {
        "base": _results(base, healthy, collapsed),
        "calibrated": _results(provisional, healthy, collapsed),
    }
    metadata = _metadata(
        base,
        date=date,
        rate=rate,
        headroom=headroom,
        scale=scale,
        fitted={"spread_floor": _floor_record(floor, largest, floor_from)},
        traces=(healthy, collapsed),
        results=results,
        power=power,
    )
    document = _document(base, base_ref, scale, floor, metadata)
    text = _text(document, base)
    return Fit(scale, floor, largest, _parse(text, base, out), text)


def _spread_test(
    base: Policy,
    spread_test: SpreadTest | None,
    floor_from: FloorFrom,
    horizon: int | None,
    healthy: Sequence[TraceData],
) -> SpreadTest:
    """What signal A is fitted as (given, else the base's mode), checked against the options
    that only one of the two takes."""
    if spread_test is None:
        spread_test = "cusum" if base.spec.collapse.spread_floor_mode == "cusum" else "absolute"
    if floor_from == "spread" and (
        spread_test == "cusum" or base.spec.collapse.spread_floor_mode != "absolute"
    ):
        msg = "--floor-from spread fits an absolute floor, and the fit is not of one"
        raise CalibrationError(msg)
    if horizon is not None:
        _check_horizon(horizon, healthy, spread_test)
    return spread_test


def _largest_quiet_floor(
    policy_at: Callable[[float], Policy],
    scale: Calibration,
    healthy: Sequence[TraceData],
    *,
    rate: float,
    floor_from: FloorFrom,
) -> float:
    """The largest absolute floor (among the healthy spreads, 0 and 1) at which at most
    ``rate`` of the healthy traces halt (``floor_from`` halts) or raise signal A (spread).
    ``policy_at``: the fitted policy with a given floor."""
    spreads = {
        math.floor(pstdev([scale.apply(v) for v in cycle]) * 10**_DIGITS) / 10**_DIGITS
        for trace in healthy
        for cycle in trace.cycles
    }
    candidates = sorted(spreads | {0.0, 1.0})
    allowed = math.floor(rate * len(healthy) + 1e-9)

    def quiet(floor: float) -> bool:
        return len(halts(policy_at(floor), healthy)) <= allowed

    def quiet_spread(floor: float) -> bool:
        return len(spread_signal_traces(policy_at(floor), healthy)) <= allowed

    if not quiet(0.0):
        message = (
            "the healthy traces halt above the target rate even with a spread floor of 0 "
            "(history or entry settings of the base halt them): nothing to fit"
        )
        raise CalibrationError(message)
    holds = quiet_spread if floor_from == "spread" else quiet
    lo, hi = 0, len(candidates) - 1  # holds(candidates[lo]) does; find the last that does
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(candidates[mid]):
            lo = mid
        else:
            hi = mid - 1
    return candidates[lo]


def _check_horizon(horizon: int, healthy: Sequence[TraceData], spread_test: SpreadTest) -> None:
    """A horizon is a bound on the cusum fit, and one the traces must reach to check it."""
    if spread_test != "cusum":
        raise CalibrationError(
            "--horizon bounds the cusum threshold's fit: add --spread-test cusum"
        )
    longest = max((len(trace.cycles) for trace in healthy), default=0)
    if longest < horizon:
        message = (
            f"--horizon {horizon}: the longest healthy trace has {longest} cycle(s), so the "
            f"false-halt bound cannot be checked up to {horizon}; give traces at least that long"
        )
        raise CalibrationError(message)


def _floor_record(floor: float, largest: float, floor_from: FloorFrom) -> dict[str, Any]:
    """``metadata.calibration.spread_floor``; ``from`` only off the default, which records
    what it always did."""
    record: dict[str, Any] = {"fitted": floor, "largest_quiet": largest}
    if floor_from == "spread":
        record["from"] = "spread evidence alone (--floor-from spread)"
    return record


def _metadata(  # noqa: PLR0913 - what metadata.calibration records
    base: Policy,
    *,
    date: str,
    rate: float,
    headroom: float | None,
    scale: Calibration,
    fitted: dict[str, Any],
    traces: tuple[Sequence[TraceData], Sequence[TraceData]],
    results: dict[str, Any],
    power: dict[str, Any] | None,
) -> dict[str, Any]:
    """``metadata.calibration``; ``headroom`` None where the fit has none, ``power`` (from
    ``calibrate --power``) None where it was not asked for."""
    healthy, collapsed = traces
    metadata: dict[str, Any] = {
        "base": base.identity.to_dict(),
        "date": date,
        "target_false_positive_rate": rate,
    }
    if headroom is not None:
        metadata["headroom"] = headroom
    metadata["scale"] = {
        "quantiles": [LOW_QUANTILE, HIGH_QUANTILE],
        "low": scale.low,
        "high": scale.high,
        "scores": sum(len(c) for t in healthy for c in t.cycles),
    }
    metadata = {
        **metadata,
        **fitted,
        "healthy": [trace.to_dict() for trace in healthy],
        "collapsed": [trace.to_dict() for trace in collapsed],
        "results": results,
    }
    if power is not None:
        metadata["power"] = power
    return metadata


def _results(
    policy: Policy, healthy: Sequence[TraceData], collapsed: Sequence[TraceData]
) -> dict[str, Any]:
    return {
        "healthy_halted": len(halts(policy, healthy)),
        "healthy_traces": len(healthy),
        "collapsed_halted": len(halts(policy, collapsed)),
        "collapsed_traces": len(collapsed),
    }


def _document(  # noqa: PLR0913 - what the fitted policy states
    base: Policy,
    base_ref: str,
    scale: Calibration,
    floor: float,
    calibration: dict[str, Any],
    *,
    cusum: CusumSettings | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": base.name, "version": bump_minor(base.version)}
    fitted = (
        f"spread floor {floor} on that scale"
        if cusum is None
        else f"cusum spread test, threshold {cusum.threshold}"
    )
    if calibration:
        metadata["description"] = (
            f"{base.name}@{base.version} calibrated to its scorer: raw {scale.low} -> 0, "
            f"{scale.high} -> 1; {fitted}. Fitted by prunewarden "
            "calibrate on the traces named in metadata.calibration."
        )
        metadata["calibration"] = calibration
    collapse: dict[str, Any] = {"spread_floor": floor}
    if cusum is not None:
        collapse = {"spread_floor_mode": "cusum", "cusum": cusum.to_dict()}
    return {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "extends": base_ref,
        "metadata": metadata,
        "spec": {
            "scores": {"calibration": {"fixed": {"low": scale.low, "high": scale.high}}},
            "collapse": collapse,
        },
    }


def _text(document: dict[str, Any], base: Policy) -> str:
    header = (
        f"# Written by prunewarden calibrate from {base.name}@{base.version}. Review it with\n"
        "# `prunewarden policy diff` against the base, lock it, and run it as a shadow first\n"
        "# (docs/calibration.md).\n"
    )
    if base_outside(document["extends"]):
        header += (
            "# Its base is outside this file's folder: load it with `prunewarden --base-dir DIR`,\n"
            "# DIR the folder of the base (calibrate printed the command).\n"
        )
    body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    return header + body


def _policy(base: Policy, out: str, document: dict[str, Any]) -> Policy:
    return _parse(_text(document, base), base, out)


def _parse(text: str, base: Policy, out: str) -> Policy:
    """The fitted policy, which extends the base wherever ``out`` is: the folders of the base's
    chain are allowed bases (the caller named the base, and its chain has loaded)."""
    folders = tuple(
        os.path.dirname(os.path.abspath(source.path))  # noqa: PTH100, PTH120 - as named
        for source in base.sources
        if not source.path.startswith("builtin:")
    )
    return parse_policy(text, out, base_dirs=folders)


_VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


def bump_minor(version: str) -> str:
    """``1.4.2`` -> ``1.5.0`` (a pre-release or build suffix is dropped)."""
    match = _VERSION.match(version)
    if match is None:  # pragma: no cover - the schema admits only semantic versions
        raise CalibrationError(f"base version {version!r} is not a semantic version")
    return f"{match[1]}.{int(match[2]) + 1}.0"
