"""calibrate --plot: the legend says what each line means, and says it when the fitted floor
lies above every healthy spread (signal A always on, the canary alone deciding)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _support.plot_traces import cycle_trace
from matplotlib.figure import Figure
from prunewarden.plots import _reports
from prunewarden.plots._reports import write_calibration_plot
from prunewarden.policy import load_builtin_policy
from prunewarden.replay import fit, read_trace


def steady_trace(folder: Path, name: str, width: float) -> str:
    """Twelve entries at a fixed spread, the canary above the median: it never inverts."""
    lines: list[dict[str, Any]] = [
        {"type": "session", "trace_version": 1, "session_id": name, "labels": {}}
    ]
    for cycle in range(1, 7):
        scores = {f"e{i:02d}": round(0.6 + width * (i - 5.5) / 5.5, 4) for i in range(12)}
        scores["task"] = 0.62
        lines.append({"type": "cycle", "cycle": cycle, "scores": scores, "pinned": ["task"]})
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def legend_of(tmp_path: Path, healthy: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The legend texts of the figure calibrate --plot draws for a fit on ``healthy``."""
    base = load_builtin_policy()
    traces = [read_trace(path, base) for path in healthy]
    fitted = fit(base, "builtin:default", str(tmp_path / "fit.yaml"), traces, [], date="2026-01-31")
    drawn: list[Figure] = []

    def keep(figure: Figure, path: Path) -> Path:
        drawn.append(figure)
        return path

    monkeypatch.setattr(_reports, "save", keep)
    write_calibration_plot(fitted, base.identity, traces, [], str(tmp_path / "plot.png"))
    (figure,) = drawn
    (axes,) = figure.axes
    legend = axes.get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()] + [axes.get_title(loc="left")]


def test_the_floor_line_says_what_it_means(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    healthy = [cycle_trace(tmp_path, f"h{n}", n, collapsed=False) for n in range(6)]
    texts = legend_of(tmp_path, healthy, monkeypatch)
    assert any(t.endswith(": under it for the run of cycles, signal A holds") for t in texts)
    assert any(t.endswith(": the highest floor the healthy traces pass") for t in texts)
    assert texts[-1].endswith("signal A holds when 2 cycle(s) in a row lie under the fitted floor")


def test_a_floor_above_every_healthy_spread_says_the_canary_alone_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = [steady_trace(tmp_path, f"s{n}", 0.05 + 0.01 * n) for n in range(3)]
    texts = legend_of(tmp_path, healthy, monkeypatch)
    assert any(
        t.endswith(": at or above every healthy spread: signal A always holds, the canary "
                   "alone decides")
        for t in texts
    )  # fmt: skip
