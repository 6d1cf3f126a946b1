"""The plots of ``replay --plot`` and ``diff --plot``: one PNG per trace.

A replay plot answers "why did (or didn't) it halt here?" at a glance: per cycle, the score
spread against the floor the guard held it to (the collapse guard's signal A), each pinned
canary against the median of the other entries (signal B), the halts marked where both held;
per turn, the mean relevance and tokens with the steps of the drift signal; and every decided
event by check and outcome. A diff plot draws the same spread under both policies, each with its
floor and halts, over both policies' decisions event by event, and marks every event whose
decisions differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prunewarden.plots._canvas import (
    CANARY_COLOURS,
    FLOOR_COLOUR,
    MEDIAN_COLOUR,
    OUTCOME_COLOURS,
    SPREAD_COLOUR,
    empty_panel,
    file_names,
    new_figure,
    prepare_folder,
    save,
)
from prunewarden.plots._series import (
    PolicySeries,
    TraceSeries,
    collect_series,
    identity_label,
)
from prunewarden.policy import Policy

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CHECK_ROWS = ("collapse", "eviction", "staleness", "plan")
POLICY_STYLES = (("-", "o"), ("--", "s"))  # base (or the one policy), candidate


def write_replay_plots(policy: Policy, traces: Sequence[str], folder: str) -> list[Path]:
    """One PNG per trace in ``folder`` (created if missing): what ``policy`` judged."""
    out = prepare_folder(folder)
    written = []
    for trace, name in zip(traces, file_names(list(traces)), strict=True):
        series = collect_series([policy], trace)
        written.append(save(replay_figure(series), out / name))
    return written


def write_diff_plots(
    base: Policy, candidate: Policy, traces: Sequence[str], folder: str
) -> list[Path]:
    """One PNG per trace in ``folder``: both policies' judgement, the differences marked."""
    out = prepare_folder(folder)
    written = []
    for trace, name in zip(traces, file_names(list(traces)), strict=True):
        series = collect_series([base, candidate], trace)
        written.append(save(diff_figure(series), out / name))
    return written


def _subtitle(series: TraceSeries) -> str:
    session = f"  session {series.session_id}" if series.session_id else ""
    stopped = "  (stopped early: malformed trace)" if not _complete(series) else ""
    return f"{series.trace}{session}{stopped}"


def _complete(series: TraceSeries) -> bool:
    return not series.problems and not series.failure


def replay_figure(series: TraceSeries) -> Figure:
    """Spread and floor, canary and median, turns and drift, decisions: four panels."""
    (policy,) = series.policies
    figure = new_figure(4)
    figure.suptitle(f"policy {identity_label(policy.identity)}\n{_subtitle(series)}")
    spread, canary, turns, decisions = figure.subplots(4, 1)
    _spread_panel(spread, series.policies)
    _canary_panel(canary, policy)
    _turns_panel(turns, series)
    _decisions_panel(decisions, series, ["decided"])
    return figure


def diff_figure(series: TraceSeries) -> Figure:
    """Both policies' spread, floor and halts; both policies' decisions, differences marked."""
    base, candidate = series.policies
    figure = new_figure(2, height=3.4)
    figure.suptitle(
        f"base {identity_label(base.identity)}  vs  candidate "
        f"{identity_label(candidate.identity)}\n{_subtitle(series)}: "
        f"{len(series.differing)} of {len(series.events)} decided events differ"
    )
    spread, decisions = figure.subplots(2, 1)
    _spread_panel(spread, series.policies, roles=("base", "candidate"))
    _decisions_panel(decisions, series, ["base", "candidate"])
    return figure


def _floor_label(policy: PolicySeries, floor: float, role: str) -> str:
    prefix = f"{role} " if role else ""
    if policy.floor_mode == "relative":
        return f"{prefix}floor (relative to the early spread)"
    return f"{prefix}floor (absolute, {floor:g})"


def _spread_panel(
    axes: Axes, policies: Sequence[PolicySeries], roles: Sequence[str] = ("",)
) -> None:
    axes.set_title("collapse signal A: score spread per cycle against the floor", loc="left")
    if not any(policy.cycles for policy in policies):
        empty_panel(axes, "no cycle events in this trace")
        return
    first = policies[0]
    cycles = [point.cycle for point in first.cycles]
    axes.plot(
        cycles, [p.spread for p in first.cycles], color=SPREAD_COLOUR, marker=".", label="spread"
    )
    for (line, marker), policy, role in zip(POLICY_STYLES, policies, roles, strict=False):
        floors = [(p.cycle, p.floor) for p in policy.cycles if p.floor is not None]
        if floors:
            axes.step(
                [c for c, _ in floors],
                [f for _, f in floors],
                where="mid",
                color=FLOOR_COLOUR,
                linestyle=line,
                label=_floor_label(policy, floors[-1][1], role),
            )
        halts = [p for p in policy.cycles if p.halted]
        if halts:
            name = f"{role} halt" if role else "halt"
            axes.scatter(
                [p.cycle for p in halts],
                [p.spread for p in halts],
                marker=marker,
                s=70,
                facecolors=[OUTCOME_COLOURS["halt"] if p.enforced else "none" for p in halts],
                edgecolors=OUTCOME_COLOURS["halt"],
                zorder=3,
                label=f"{name} (hollow: not enforced)",
            )
            for point in halts:
                axes.axvline(point.cycle, color=OUTCOME_COLOURS["halt"], alpha=0.15, lw=6)
    axes.set_xlabel("cycle")
    axes.locator_params(axis="x", integer=True)
    axes.set_ylabel("spread (population std. dev.)")
    axes.set_ylim(bottom=0)
    axes.legend(loc="best", fontsize="small")


def _canary_panel(axes: Axes, policy: PolicySeries) -> None:
    axes.set_title("collapse signal B: pinned canary against the median of the others", loc="left")
    with_canary = [p for p in policy.cycles if p.canaries]
    if not with_canary:
        empty_panel(axes, "no pinned canary in this trace's cycles")
        return
    names = list(dict.fromkeys(name for p in with_canary for name in p.canaries))
    for colour, name in zip(CANARY_COLOURS, names, strict=False):
        points = [(p.cycle, p.canaries[name]) for p in with_canary if name in p.canaries]
        axes.plot(
            [c for c, _ in points], [s for _, s in points], color=colour, label=f"canary {name}"
        )
    medians = [(p.cycle, p.median_others) for p in policy.cycles if p.median_others is not None]
    axes.plot(
        [c for c, _ in medians],
        [m for _, m in medians],
        color=MEDIAN_COLOUR,
        linestyle="--",
        label="median of the others",
    )
    for point in policy.cycles:
        if point.halted:
            axes.axvline(point.cycle, color=OUTCOME_COLOURS["halt"], alpha=0.15, lw=6)
    axes.set_xlabel("cycle")
    axes.locator_params(axis="x", integer=True)
    axes.set_ylabel("score (as judged)")
    axes.legend(loc="best", fontsize="small")


def _turns_panel(axes: Axes, series: TraceSeries) -> None:
    axes.set_title("drift signal: mean relevance and tokens per turn", loc="left")
    if not series.turns:
        empty_panel(axes, "no turn events in this trace")
        return
    turns = [t.turn for t in series.turns]
    axes.plot(
        turns, [t.mean_relevance for t in series.turns], color=SPREAD_COLOUR, label="mean relevance"
    )
    drifting = [t for t in series.turns if t.drifting]
    if drifting:
        axes.scatter(
            [t.turn for t in drifting],
            [t.mean_relevance for t in drifting],
            color=OUTCOME_COLOURS["deny"],
            zorder=3,
            label="drift step: tokens fell, relevance rose",
        )
    inflating = [t.turn for t in series.turns if t.inflating]
    for n, turn in enumerate(inflating):
        label = "relevance inflation (the guard's window)" if n == 0 else None
        axes.axvspan(turn - 0.5, turn + 0.5, color=OUTCOME_COLOURS["deny"], alpha=0.2, label=label)
    axes.set_xlabel("turn")
    axes.locator_params(axis="x", integer=True)
    axes.set_ylabel("mean relevance")
    tokens = axes.twinx()
    tokens.plot(
        turns, [t.tokens for t in series.turns], color=MEDIAN_COLOUR, linestyle=":", label="tokens"
    )
    tokens.set_ylabel("tokens")
    handles, labels = axes.get_legend_handles_labels()
    more, more_labels = tokens.get_legend_handles_labels()
    axes.legend([*handles, *more], [*labels, *more_labels], loc="best", fontsize="small")


def _decisions_panel(axes: Axes, series: TraceSeries, tracks: Sequence[str]) -> None:
    axes.set_title("decisions per event, by check and outcome", loc="left")
    if not series.events:
        empty_panel(axes, "no decided events in this trace")
        return
    rows = [
        f"{check} {track}" if len(tracks) > 1 else check
        for check in CHECK_ROWS
        if any(e.check == check for e in series.events)
        for track in tracks
    ]
    points: dict[str, tuple[list[int], list[int]]] = {}  # per outcome: events, rows
    for e in series.events:
        for track, outcome in zip(tracks, e.outcomes, strict=True):
            row = f"{e.check} {track}" if len(tracks) > 1 else e.check
            xs, ys = points.setdefault(outcome, ([], []))
            xs.append(e.event)
            ys.append(rows.index(row))
    for outcome, (xs, ys) in points.items():
        axes.scatter(xs, ys, color=OUTCOME_COLOURS[outcome], s=30, label=outcome, zorder=3)
    if len(tracks) > 1:
        for n, e in enumerate(series.differing):
            label = "decisions differ" if n == 0 else None
            axes.axvline(e.event, color="#fbc02d", alpha=0.6, lw=3, label=label)
    axes.set_yticks(range(len(rows)), rows)
    axes.set_ylim(-0.7, len(rows) - 0.3)
    axes.set_xlabel("event (trace order)")
    axes.locator_params(axis="x", integer=True)
    axes.set_ylabel("check")
    axes.legend(loc="best", fontsize="small", ncols=3)
