"""The plots of ``calibrate --plot`` and ``audit report --plot``: one PNG each.

The calibration plot shows what the fit was made of: every cycle's spread of the healthy traces
and the known-collapsed ones on the fitted scale, the largest floor under which the healthy
traces stay quiet, and the fitted floor below it (the gap between them is the headroom left for
held-out sessions). The audit plot counts the decisions of a log per day, stacked by outcome,
one panel per policy version, so that a rollout's change in halts or denials shows as a change
of colour from one day to the next.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prunewarden._identity import PolicyIdentity
from prunewarden._stats import pstdev
from prunewarden.audit import RecordFilter, Skipped, query
from prunewarden.plots._canvas import (
    FLOOR_COLOUR,
    OUTCOME_COLOURS,
    empty_panel,
    new_figure,
    prepare_file,
    save,
)
from prunewarden.plots._series import identity_label
from prunewarden.replay import Fit, TraceData

HEALTHY_COLOUR = "#2e7d32"
COLLAPSED_COLOUR = "#c62828"
MAX_POLICY_PANELS = 6  # the policy versions with the most decisions; the rest share a panel
OUTCOMES = ("allow", "deny", "halt")


def write_calibration_plot(
    fitted: Fit,
    base: PolicyIdentity,
    healthy: Sequence[TraceData],
    collapsed: Sequence[TraceData],
    file: str,
) -> Path:
    """The healthy and collapsed traces' spreads per cycle on the fitted scale, the largest
    quiet floor and the fitted floor, as a PNG at ``file``."""
    path = prepare_file(file)
    figure = new_figure(1, height=4.5)
    figure.suptitle(
        f"calibration: {identity_label(fitted.policy.identity)} fitted from "
        f"{base.name}@{base.version}"
    )
    axes = figure.subplots()
    n = fitted.policy.spec.collapse.consecutive_cycles
    axes.set_title(
        f"score spread per cycle on the fitted scale: signal A holds when {n} cycle(s) in a "
        "row lie under the fitted floor",
        loc="left",
    )
    for role, traces, colour in (
        ("healthy", healthy, HEALTHY_COLOUR),
        ("collapsed", collapsed, COLLAPSED_COLOUR),
    ):
        for n, trace in enumerate(traces):
            spreads = [pstdev([fitted.scale.apply(v) for v in cycle]) for cycle in trace.cycles]
            axes.plot(
                range(1, len(spreads) + 1),
                spreads,
                color=colour,
                alpha=0.7,
                linestyle="-" if role == "healthy" else "--",
                label=f"{role} traces ({len(traces)})" if n == 0 else None,
            )
    axes.axhline(
        fitted.largest_quiet_floor,
        color=FLOOR_COLOUR,
        linestyle=":",
        label=f"largest quiet floor {fitted.largest_quiet_floor}: the highest floor the "
        "healthy traces pass",
    )
    spreads = [pstdev([fitted.scale.apply(v) for v in c]) for t in healthy for c in t.cycles if c]
    above_all = bool(spreads) and fitted.floor >= max(spreads)
    meaning = (
        "at or above every healthy spread: signal A always holds, the canary alone decides"
        if above_all
        else "under it for the run of cycles, signal A holds"
    )
    axes.axhline(fitted.floor, color=FLOOR_COLOUR, label=f"fitted floor {fitted.floor}: {meaning}")
    axes.axhspan(
        fitted.floor,
        fitted.largest_quiet_floor,
        color=FLOOR_COLOUR,
        alpha=0.08,
        label="headroom",
    )
    axes.set_xlabel("cycle")
    axes.set_ylabel("spread (population std. dev.)")
    axes.set_ylim(bottom=0)
    axes.legend(loc="upper right", fontsize="small")
    return save(figure, path)


RECALL_GUIDE = 0.9  # the recall a milder collapse should be caught with, drawn as a guide


def write_power_plot(record: dict[str, Any], fitted: PolicyIdentity, file: str) -> Path:
    """``calibrate --power-plot``: recall of the base and the fit versus the squeeze, with a
    90% guide line, as a PNG at ``file``."""
    path = prepare_file(file)
    figure = new_figure(1, height=4.5)
    figure.suptitle(
        f"detection power: {identity_label(fitted)}, leave-one-out over "
        f"{record['held_out']} healthy trace(s)"
    )
    axes = figure.subplots()
    axes.set_title(
        "synthetic squeeze toward each cycle's mean from the onset on; "
        "a gradual collapse is caught less often",
        loc="left",
        fontsize="small",
    )
    factors = record["factors"]
    for name, colour in (("base", FLOOR_COLOUR), ("fitted", HEALTHY_COLOUR)):
        axes.plot(factors, record["recall"][name], marker="o", color=colour, label=name)
    axes.axhline(RECALL_GUIDE, color=COLLAPSED_COLOUR, linestyle=":", label="90% recall")
    axes.set_xlabel("squeeze (spread kept, as a share of healthy)")
    axes.set_ylabel("recall (held-out copies halted)")
    axes.set_ylim(0, 1.05)
    axes.legend(loc="lower left", fontsize="small")
    return save(figure, path)


@dataclass(slots=True)
class DailyCounts:
    """Decisions per day and outcome, per policy version (``name@version digest``)."""

    days: list[str]
    counts: dict[str, dict[tuple[str, str], int]]  # policy -> (day, outcome) -> count
    skipped: Skipped


def count_daily(
    paths: Iterable[str | os.PathLike[str]], where: RecordFilter | None = None
) -> DailyCounts:
    """Count the decision records of the logs per UTC day, outcome and policy version."""
    skipped = Skipped()
    counts: dict[str, dict[tuple[str, str], int]] = {}
    days: set[str] = set()
    for _, record in query(paths, where or RecordFilter(), skipped):
        day = str(record.get("ts", ""))[:10]
        policy = _policy_label(record.get("policy"))
        key = (day, str(record.get("outcome")))
        by_day = counts.setdefault(policy, {})
        by_day[key] = by_day.get(key, 0) + 1
        days.add(day)
    return DailyCounts(sorted(days), counts, skipped)


def _policy_label(policy: Any) -> str:
    if not isinstance(policy, dict):
        return "(no policy)"
    digest = str(policy.get("digest", ""))
    return f"{policy.get('name')}@{policy.get('version')} {digest[:19]}".rstrip()


def write_audit_plot(daily: DailyCounts, sources: Sequence[str], file: str) -> Path:
    """Decisions per day stacked by outcome, one panel per policy version, at ``file``."""
    path = prepare_file(file)
    ranked = sorted(daily.counts, key=lambda p: (-sum(daily.counts[p].values()), p))
    panels = ranked[:MAX_POLICY_PANELS]
    rest = ranked[MAX_POLICY_PANELS:]
    figure = new_figure(max(len(panels) + bool(rest), 1), height=2.6)
    figure.suptitle(_audit_title(sources, daily))
    axes_list = figure.subplots(max(len(panels) + bool(rest), 1), 1, squeeze=False)[:, 0]
    if not panels:
        empty_panel(axes_list[0], "no decision records")
        return save(figure, path)
    groups = [(p, [p]) for p in panels]
    if rest:
        groups.append((f"{len(rest)} other policy versions", rest))
    for axes, (title, members) in zip(axes_list, groups, strict=True):
        axes.set_title(f"policy {title}", loc="left")
        bottom = [0] * len(daily.days)
        for outcome in OUTCOMES:
            heights = [
                sum(daily.counts[m].get((day, outcome), 0) for m in members) for day in daily.days
            ]
            if any(heights):
                axes.bar(
                    daily.days,
                    heights,
                    bottom=bottom,
                    width=0.6,
                    color=OUTCOME_COLOURS[outcome],
                    label=outcome,
                )
                bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        axes.set_xlim(-1, len(daily.days))  # a single day stays a bar, not a wall
        axes.locator_params(axis="y", integer=True)
        axes.set_xlabel("day (UTC)")
        axes.set_ylabel("decisions")
        axes.legend(loc="upper right", fontsize="small")
    return save(figure, path)


def _audit_title(sources: Sequence[str], daily: DailyCounts) -> str:
    names = ", ".join(Path(source).name for source in sources[:3])
    more = f" and {len(sources) - 3} more" if len(sources) > 3 else ""
    total = sum(sum(by.values()) for by in daily.counts.values())
    versions = len(daily.counts)
    return (
        f"decisions per day by outcome and policy version: {names}{more}\n"
        f"{total} decisions, {versions} policy version(s), {len(daily.days)} day(s)"
    )
