"""What ``prunewarden calibrate`` prints: the fit and each trace's first halt, as text or as one
JSON document (``--format json``), and the stages it is in on standard error (``--progress``,
by default when standard error is a terminal), so that a fit over many traces is not silent."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import IO, Any

from prunewarden.policy import Policy
from prunewarden.replay import Fit, TraceData, TraceDiff


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """``--format text|json`` and ``--progress``."""
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text: readable (default); json: the fit, the base and fitted policies and each "
        "trace's first halt as one JSON document",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="say on standard error which stage the fit is in, and how far the replays are "
        "(default: when it is a terminal)",
    )


class Stages:
    """One line on standard error as each stage begins: ``calibrate: fitting to 12 healthy
    trace(s)``."""

    def __init__(self, stream: IO[str], *, on: bool | None) -> None:
        self.stream = stream
        self.on = _isatty(stream) if on is None else on

    def say(self, text: str) -> None:
        if self.on:
            self.stream.write(f"calibrate: {text}\n")
            self.stream.flush()

    def done(self) -> None:
        self.say("done")


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def fit_document(
    base: Policy,
    fitted: Fit,
    traces: tuple[Sequence[TraceData], Sequence[TraceData]],
    out: str,
    compared: Sequence[TraceDiff],
) -> dict[str, Any]:
    """``--format json``: the base and the fitted policy (and where it was written), what was
    fitted (the calibration block the fitted policy records) and each trace's first halt under
    the base and the fit; ``missed``: the known-collapsed traces the fit does not halt on."""
    healthy, collapsed = traces
    roles = ["healthy"] * len(healthy) + ["collapsed"] * len(collapsed)
    rows = [
        {
            "trace": found.trace,
            "role": role,
            "base_halt": _halt_document(found.base_halt),
            "fitted_halt": _halt_document(found.candidate_halt),
            "changed": found.changed,
        }
        for role, found in zip(roles, compared, strict=True)
    ]
    policy = fitted.policy
    return {
        "base": _identity(base),
        "fitted": {**_identity(policy), "file": out},
        "calibration": policy.document["metadata"]["calibration"],
        "traces": rows,
        "missed": [
            row["trace"] for row in rows if row["role"] == "collapsed" and not row["fitted_halt"]
        ],
    }


def _identity(policy: Policy) -> dict[str, str]:
    return {"name": policy.name, "version": policy.version, "digest": policy.digest}


def _halt_document(halt: Any) -> dict[str, Any] | None:
    if halt is None:
        return None
    return {"cycle": halt.cycle, "reason": halt.reason}


def render(  # noqa: PLR0913 - the fit, its traces and what each decided
    base: Policy,
    fitted: Fit,
    healthy: Sequence[TraceData],
    collapsed: Sequence[TraceData],
    out: str,
    *,
    compared: Sequence[TraceDiff],
) -> str:
    """The fit, then each trace's first halt under the base and the fitted policy."""
    policy = fitted.policy
    results = policy.document["metadata"]["calibration"]["results"]
    lines = [
        f"base    {base.name}@{base.version} {base.digest[:19]}",
        f"fitted  {policy.name}@{policy.version} {policy.digest[:19]} -> {out}",
        (
            f"scale   raw {fitted.scale.low} -> 0, {fitted.scale.high} -> 1 "
            f"(5th and 95th percentile of {len(healthy)} healthy trace(s))"
        ),
        _signal_line(fitted),
        "",
        f"{'':10}{'base':>12}{'fitted':>12}",
        _row("healthy", results, "healthy"),
    ]
    if collapsed:
        lines.append(_row("collapsed", results, "collapsed"))
    lines += ["", "first halt per trace (base -> fitted):"]
    found_per_trace = iter(compared)
    for role, traces in (("healthy", healthy), ("collapsed", collapsed)):
        for trace in traces:
            found = next(found_per_trace)
            lines.append(
                f"  {role:9} {trace.path}: {_halt(found.base_halt)} -> "
                f"{_halt(found.candidate_halt)} ({found.changed} decision(s) changed)"
            )
    return "\n".join(lines) + "\n"


def _signal_line(fitted: Fit) -> str:
    if fitted.cusum is None:
        record = fitted.policy.document["metadata"]["calibration"]["spread_floor"]
        alone = ", on spread evidence alone" if "from" in record else ""
        return f"floor   {fitted.floor} (largest quiet floor {fitted.largest_quiet_floor}{alone})"
    record = fitted.policy.document["metadata"]["calibration"]["cusum"]
    return (
        f"cusum   threshold {fitted.cusum.threshold} (largest halting threshold "
        f"{record['largest_halting_threshold']} + margin {record['margin']}), "
        f"prior ln-spread {fitted.cusum.prior_log_spread}, prior weight "
        f"{fitted.cusum.prior_weight}, slack {fitted.cusum.slack}"
    )


def _row(label: str, results: dict[str, Any], role: str) -> str:
    cells = [
        f"{results[which][f'{role}_halted']}/{results[which][f'{role}_traces']} halt"
        for which in ("base", "calibrated")
    ]
    return f"{label:10}{cells[0]:>12}{cells[1]:>12}"


def _halt(halt: Any) -> str:
    if halt is None:
        return "no halt"
    return f"halt at cycle {halt.cycle} ({halt.reason})"
