"""Plots: the series a trace's plot is drawn from, and the PNGs of every ``--plot``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.plot_traces import cycle_trace
from matplotlib.image import imread
from matplotlib.text import Text
from prunewarden._stats import pstdev
from prunewarden.cli._main import run
from prunewarden.engine import Engine
from prunewarden.plots import collect_series
from prunewarden.plots._canvas import literal_text
from prunewarden.plots._traces import diff_figure, replay_figure
from prunewarden.policy import load_policy, parse_policy
from prunewarden.replay import SilentLogger, diff_trace

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "examples" / "traces").glob("*.jsonl"))
DEFAULT = str(ROOT / "policies" / "default.yaml")
LOOSE = str(ROOT / "examples" / "policies" / "loose-candidate.yaml")


def trace_named(name: str) -> str:
    return str(ROOT / "examples" / "traces" / name)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def policy_with(**spec: Any) -> Any:
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "plotted", "version": "1.0.0"},
        "spec": spec,
    }
    return parse_policy(yaml.safe_dump(document), "plotted.yaml")


def assert_drawn(path: Path) -> None:
    """A PNG of some size whose pixels are not all one colour (lines, text and marks drawn)."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 20_000
    pixels = imread(path)[:, :, :3]
    not_white = (pixels.min(axis=2) < 0.9).mean()
    assert 0.02 < not_white < 0.6
    assert len({tuple(row) for row in pixels.reshape(-1, 3)[::97].tolist()}) > 8


class TestSeries:
    def test_cycles_carry_spread_floor_canary_and_halts(self) -> None:
        """Per cycle: the spread, the absolute floor, the canary against the median of the
        others, and the halts where the guard halted."""
        series = collect_series([load_policy(DEFAULT)], trace_named("collapse-narrowing.jsonl"))
        (policy,) = series.policies
        assert [p.cycle for p in policy.cycles] == list(range(1, 15))
        assert [p.cycle for p in policy.cycles if p.halted] == [12, 13, 14]
        assert {p.floor for p in policy.cycles} == {0.08}
        first = policy.cycles[0]
        assert first.canaries == {"task": 0.9}
        assert first.median_others == pytest.approx(0.175)
        assert first.spread == pytest.approx(0.2, abs=0.001)
        assert series.session_id == "seed-000-narrowing"

    def test_relative_floor_follows_the_early_spread(self) -> None:
        """A relative floor is the factor times the early spread, as the guard holds it."""
        policy = policy_with(
            collapse={
                "spread_floor": 0.5,
                "spread_floor_mode": "relative",
                "relative_to": {"first_cycles": 2},
            }
        )
        series = collect_series([policy], trace_named("collapse-narrowing.jsonl"))
        cycles = series.policies[0].cycles
        early = (cycles[0].spread + cycles[1].spread) / 2
        assert series.policies[0].floor_mode == "relative"
        assert cycles[0].floor == pytest.approx(0.5 * cycles[0].spread)
        assert {round(p.floor or 0, 9) for p in cycles[1:]} == {round(0.5 * early, 9)}

    def test_calibrated_policy_plots_the_judged_scale(self) -> None:
        """Under a calibrated policy the spread is that of the calibrated scores."""
        policy = policy_with(scores={"calibration": {"fixed": {"low": 0.1, "high": 0.6}}})
        series = collect_series([policy], trace_named("collapse-narrowing.jsonl"))
        first = series.policies[0].cycles[0]
        with Path(trace_named("collapse-narrowing.jsonl")).open() as lines:
            scores = json.loads(lines.readlines()[1])["scores"]
        scaled = [min(max((v - 0.1) / 0.5, 0.0), 1.0) for v in scores.values()]
        assert first.spread == pytest.approx(pstdev(scaled))
        assert first.canaries == {"task": 1.0}

    def test_turns_mark_the_drift_signal(self) -> None:
        """Each turn whose tokens fell while relevance rose beyond the tolerance is a drift
        step; the guard's window of such steps is relevance inflation."""
        series = collect_series(
            [load_policy(DEFAULT)], trace_named("staleness-paraphrase-drift.jsonl")
        )
        assert [(t.turn, t.drifting, t.inflating) for t in series.turns] == [
            (1, False, False),
            (2, True, False),
            (3, True, True),
            (4, True, True),
        ]

    def test_differing_events_are_the_diff_changes(self) -> None:
        """Under two policies, the events marked as differing are those diff reports."""
        base, candidate = load_policy(DEFAULT), load_policy(LOOSE)
        for trace in map(str, TRACES):
            series = collect_series([base, candidate], trace)
            changes = io.StringIO()
            engines = (
                Engine(base, logger=SilentLogger()),
                Engine(candidate, logger=SilentLogger()),
            )
            diff_trace(*engines, trace, changes=changes)
            changed = {
                json.loads(line)["event"]
                for line in changes.getvalue().splitlines()
                if json.loads(line)["kind"] != "halt moved"
            }
            assert {e.event for e in series.differing} == changed, trace

    def test_malformed_trace_keeps_what_came_before(self, tmp_path: Path) -> None:
        """A bad line stops the series there; the cycles before it stand and the problem is
        named."""
        lines = Path(trace_named("collapse-narrowing.jsonl")).read_text().splitlines()
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join([*lines[:6], '{"type": "cycle", "scores": 3}']) + "\n")
        series = collect_series([load_policy(DEFAULT)], str(bad))
        assert len(series.policies[0].cycles) == 3
        assert series.problems
        assert series.problems[0].line == 7


class TestFigures:
    def test_replay_figure_names_the_policy_and_labels_every_panel(self) -> None:
        """The title names the policy identity and the trace; each panel with data has
        labelled axes and a legend."""
        policy = load_policy(DEFAULT)
        series = collect_series([policy], trace_named("collapse-narrowing.jsonl"))
        figure = replay_figure(series)
        title = figure.get_suptitle()
        assert f"{policy.name}@{policy.version} {policy.digest[:19]}" in title
        assert "collapse-narrowing.jsonl" in title
        panels = [axes for axes in figure.axes if axes.get_title(loc="left")]
        assert len(panels) == 4
        for axes in panels:
            assert axes.get_xlabel()
            assert axes.get_ylabel()
            assert axes.get_legend() is not None
        legend = panels[0].get_legend()
        assert legend is not None
        assert [t.get_text() for t in legend.get_texts()] == [
            "spread",
            "floor (absolute, 0.08)",
            "halt (hollow: not enforced)",
        ]

    def test_diff_figure_names_both_policies_and_counts_differences(self) -> None:
        """The title names the base and the candidate and how many events differ."""
        series = collect_series(
            [load_policy(DEFAULT), load_policy(LOOSE)], trace_named("collapse-narrowing.jsonl")
        )
        title = diff_figure(series).get_suptitle()
        assert "base default@1.0.0 sha256:" in title
        assert "candidate loose-candidate@1.1.0-rc.1 sha256:" in title
        assert f"{len(series.differing)} of {len(series.events)} decided events differ" in title


class TestPlotCommands:
    def test_replay_plot_writes_one_png_per_trace(self, tmp_path: Path) -> None:
        """replay --plot DIR: one drawn PNG per trace, named after it, and where they went."""
        folder = tmp_path / "plots"
        code, out, err = cli("replay", "--plot", str(folder), *map(str, TRACES))
        assert code == 0
        assert out.startswith("policy default@1.0.0")
        assert err == f"plots: {len(TRACES)} PNGs written to {folder}\n"
        assert sorted(p.name for p in folder.iterdir()) == [f"{t.stem}.png" for t in TRACES]
        for path in folder.iterdir():
            assert_drawn(path)

    def test_same_stem_traces_get_numbered_files(self, tmp_path: Path) -> None:
        """Two traces with one file name do not overwrite each other's plot."""
        other = tmp_path / "elsewhere"
        other.mkdir()
        copy = other / "collapse-narrowing.jsonl"
        copy.write_bytes(Path(trace_named("collapse-narrowing.jsonl")).read_bytes())
        folder = tmp_path / "plots"
        code, _, _ = cli(
            "replay", "--plot", str(folder), trace_named("collapse-narrowing.jsonl"), str(copy)
        )
        assert code == 0
        assert sorted(p.name for p in folder.iterdir()) == [
            "collapse-narrowing-2.png",
            "collapse-narrowing.png",
        ]

    def test_diff_plot_writes_one_png_per_trace(self, tmp_path: Path) -> None:
        """diff --plot DIR: one drawn PNG per trace; the exit code still says what changed."""
        folder = tmp_path / "diff"
        code, _, err = cli(
            "diff",
            "--base",
            DEFAULT,
            "--candidate",
            LOOSE,
            "--plot",
            str(folder),
            *map(str, TRACES),
        )
        assert code == 1
        assert err.endswith(f"plots: {len(TRACES)} PNGs written to {folder}\n")
        assert len(list(folder.iterdir())) == len(TRACES)
        assert_drawn(folder / "collapse-narrowing.png")

    def test_calibrate_plot(self, tmp_path: Path) -> None:
        """calibrate --plot FILE: the healthy and collapsed spreads with the fitted floor."""
        healthy = [cycle_trace(tmp_path, f"healthy-{n}", n, collapsed=False) for n in range(6)]
        collapsed = [
            cycle_trace(tmp_path, f"collapsed-{n}", 50 + n, collapsed=True) for n in (0, 1)
        ]
        plot = tmp_path / "fit" / "calibration.png"
        code, _, err = cli(
            "calibrate",
            "--healthy",
            *healthy,
            "--collapsed",
            *collapsed,
            "--base",
            "builtin:default",
            "--out",
            str(tmp_path / "fitted.yaml"),
            "--date",
            "2026-01-31",
            "--plot",
            str(plot),
        )
        assert code in (0, 1)
        assert f"plot: written to {plot}\n" in err
        assert_drawn(plot)

    def test_audit_report_plot(self, tmp_path: Path) -> None:
        """audit report --plot FILE: the table as before, and the decisions per day drawn."""
        log = tmp_path / "audit.jsonl"
        assert cli("replay", "--audit-log", str(log), *map(str, TRACES))[0] == 0
        plain = cli("audit", "report", str(log))
        plot = tmp_path / "report.png"
        code, out, err = cli("audit", "report", "--plot", str(plot), str(log))
        assert (code, out) == (0, plain[1])
        assert err == f"plot: written to {plot}\n"
        assert_drawn(plot)

    def test_missing_extra_is_one_clear_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without matplotlib, --plot fails before any work with how to install it."""
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
        log = tmp_path / "audit.jsonl"
        code, out, err = cli(
            "replay", "--audit-log", str(log), "--plot", str(tmp_path / "p"), str(TRACES[0])
        )
        assert (code, out) == (2, "")
        assert err == "--plot needs matplotlib: pip install 'prunewarden[plot]'\n"
        assert not log.exists() or log.stat().st_size == 0
        assert not (tmp_path / "p").exists()

    def test_unwritable_folder_is_a_usage_error(self, tmp_path: Path) -> None:
        """A plot folder that cannot be made is refused before the replay runs."""
        blocker = tmp_path / "file"
        blocker.write_text("")
        code, out, err = cli("replay", "--plot", str(blocker / "plots"), str(TRACES[0]))
        assert (code, out) == (2, "")
        assert err.startswith(f"{blocker / 'plots'}: cannot create:")

    def test_no_plot_no_matplotlib(self) -> None:
        """Without --plot, neither importing the command line nor replaying imports matplotlib."""
        script = (
            "import io, sys; from prunewarden.cli._main import run; "
            f"code = run(['replay', {str(TRACES[0])!r}], io.StringIO(), io.StringIO()); "
            "print(code, 'matplotlib' in sys.modules)"
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        assert result.stdout == "0 False\n"


# matplotlib reads text between two dollars as TeX, and this is not valid TeX.
MATHTEXT = "$\\frac{$"


class TestTextAsWritten:
    def test_a_session_id_that_looks_like_tex_is_drawn_as_written(self, tmp_path: Path) -> None:
        """replay --plot and diff --plot over a trace whose session id, canary and file name
        hold $\\frac{$ write their PNGs (matplotlib's mathtext raised: exit 70)."""
        folder = tmp_path / "t$x$"
        folder.mkdir()
        trace = Path(cycle_trace(folder, "s", 7, collapsed=True))
        text = trace.read_text(encoding="utf-8").replace('"task"', json.dumps(MATHTEXT))
        trace = trace.with_name(f"{MATHTEXT}.jsonl")
        trace.write_text(
            text.replace('"session_id": "s"', json.dumps({"session_id": MATHTEXT})[1:-1])
        )
        replayed = cli("replay", "--plot", str(tmp_path / "replay"), str(trace))
        assert replayed[0] == 0, replayed[2]
        plots = str(tmp_path / "diff")
        differ = cli("diff", "--base", DEFAULT, "--candidate", LOOSE, "--plot", plots, str(trace))
        assert differ[0] in (0, 1), differ[2]
        for plot in [*(tmp_path / "replay").iterdir(), *(tmp_path / "diff").iterdir()]:
            assert_drawn(plot)

    def test_every_text_of_a_figure_is_literal(self, tmp_path: Path) -> None:
        """The figure saved keeps the text as written, with mathtext off on every text."""
        trace = Path(cycle_trace(tmp_path, "s", 7, collapsed=True))
        text = trace.read_text(encoding="utf-8")
        trace.write_text(text.replace('"session_id": "s"', f'"session_id": {json.dumps(MATHTEXT)}'))
        series = collect_series([load_policy(DEFAULT)], str(trace))
        figure = literal_text(replay_figure(series))
        assert MATHTEXT in figure.get_suptitle()
        texts = figure.findobj(Text)
        assert texts
        assert not any(t.get_parse_math() for t in texts)

    def test_an_audit_log_named_like_tex_is_plotted(self, tmp_path: Path) -> None:
        """audit report --plot names its sources in the title: a $ in a file name is text."""
        log = tmp_path / f"{MATHTEXT}.jsonl"
        assert cli("replay", "--audit-log", str(log), str(TRACES[0]))[0] == 0
        plot = tmp_path / "report.png"
        code, _, err = cli("audit", "report", "--plot", str(plot), str(log))
        assert (code, err) == (0, f"plot: written to {plot}\n")
        assert_drawn(plot)
