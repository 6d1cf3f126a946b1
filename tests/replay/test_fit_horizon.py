"""``prunewarden calibrate --horizon N`` and the tracking reference's fit, on long healthy traces
whose spread drifts: the threshold fitted on the first N cycles, the traces that must reach N,
and ``--power``'s false halts per session length.

The fixture corpus: 6 healthy traces of 24 cycles whose spread narrows by 8% a cycle (a slow,
healthy drift), each canary below the median in every third cycle; seeded, so fixed.
"""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import load_policy
from prunewarden.cli._main import run
from prunewarden.replay import degenerate, read_trace, render_power
from prunewarden.replay import fit as replay_fit

CYCLES = 24
ENTRIES = 10
TRACKING_BASE = """\
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: tracking, version: 1.0.0}
spec:
  collapse:
    spread_floor_mode: cusum
    canary_cycles: 2
    cusum: {reference: {mode: tracking, rate: 0.2}}
"""
EARLY_BASE = """\
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: early, version: 1.0.0}
spec:
  collapse: {spread_floor_mode: cusum}
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def drifting_session(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    lines: list[dict[str, Any]] = [
        {"type": "session", "trace_version": 1, "session_id": f"d{seed}", "labels": {}}
    ]
    for cycle in range(1, CYCLES + 1):
        width = 0.2 * math.exp(-0.08 * cycle) * rng.uniform(0.9, 1.1)
        scores = {f"e{i}": round(0.6 + width * (i - 4.5) / 4.5, 5) for i in range(ENTRIES)}
        scores["task"] = 0.55 if cycle % 3 == 0 else 0.7
        lines.append({"type": "cycle", "cycle": cycle, "scores": scores, "pinned": ["task"]})
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("long")
    paths = []
    for seed in range(6):
        path = folder / f"drift-{seed}.jsonl"
        lines = drifting_session(seed)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        paths.append(str(path))
    (folder / "tracking.yaml").write_text(TRACKING_BASE, encoding="utf-8")
    (folder / "early.yaml").write_text(EARLY_BASE, encoding="utf-8")
    return folder, paths


def fit(folder: Path, healthy: list[str], base: str, name: str, *more: str) -> dict[str, Any]:
    out = folder / f"{name}.yaml"
    code, _, stderr = cli(
        "calibrate", "--healthy", *healthy, "--base", str(folder / base), "--spread-test",
        "cusum", "--out", str(out), "--date", "2026-01-31", *more,
    )  # fmt: skip
    assert code == 0, stderr
    document: dict[str, Any] = yaml.safe_load(out.read_text(encoding="utf-8"))
    return document


class TestHorizon:
    def test_the_threshold_is_fitted_on_the_first_n_cycles(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        """A shorter horizon sees less of the drift: its threshold is no higher, and the
        record says which horizon the bound is for and how many traces reached it."""
        folder, healthy = corpus
        short = fit(folder, healthy, "early.yaml", "h10", "--horizon", "10")
        whole = fit(folder, healthy, "early.yaml", "h24", "--horizon", "24")
        record = short["metadata"]["calibration"]["cusum"]
        assert (record["horizon"], record["traces_reaching_horizon"]) == (10, 6)
        assert record["threshold"] < whole["metadata"]["calibration"]["cusum"]["threshold"]

    def test_without_a_horizon_the_record_is_as_before(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        folder, healthy = corpus
        record = fit(folder, healthy, "early.yaml", "plain")["metadata"]["calibration"]["cusum"]
        assert "horizon" not in record
        assert "reference_mode" not in record

    def test_a_horizon_the_traces_do_not_reach_is_refused(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        folder, healthy = corpus
        out = folder / "long.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", str(folder / "early.yaml"),
            "--spread-test", "cusum", "--horizon", "50", "--out", str(out),
        )  # fmt: skip
        assert code == 2
        assert not out.exists()
        assert "--horizon 50: the longest healthy trace has 24 cycle(s)" in stderr

    def test_a_horizon_is_refused_for_the_absolute_floor(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        folder, healthy = corpus
        code, _, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default", "--horizon", "10",
            "--out", str(folder / "absolute.yaml"),
        )  # fmt: skip
        assert code == 2
        assert "--horizon bounds the cusum threshold's fit" in stderr

    @pytest.mark.parametrize("value", ["0", "ten", "100001"])
    def test_a_horizon_must_be_a_number_of_cycles(
        self, corpus: tuple[Path, list[str]], value: str
    ) -> None:
        folder, healthy = corpus
        code, _, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--horizon", value, "--out", str(folder / "bad.yaml"),
        )  # fmt: skip
        assert code == 2
        assert "is not a number of cycles" in stderr


class TestTrackingFit:
    def test_the_tracking_reference_leaves_the_drift_less_evidence(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        """Fitted on the same drifting traces, the tracking reference's largest halting
        threshold is below the early one's: the drift adds up under the early reference."""
        folder, healthy = corpus
        early = fit(folder, healthy, "early.yaml", "e", "--horizon", "24")
        tracking = fit(folder, healthy, "tracking.yaml", "t", "--horizon", "24")
        e = early["metadata"]["calibration"]["cusum"]
        t = tracking["metadata"]["calibration"]["cusum"]
        assert t["largest_halting_threshold"] < e["largest_halting_threshold"]
        assert (t["reference_mode"], t["rate"]) == ("tracking", 0.2)
        reference = tracking["spec"]["collapse"]["cusum"]["reference"]
        assert (reference["mode"], reference["rate"]) == ("tracking", 0.2)


class TestPowerByLength:
    def test_false_halts_are_reported_per_session_length(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        """Traces of 24 cycles count for 10 and 20, none for 50: shown as '-'."""
        folder, healthy = corpus
        document = fit(folder, healthy, "tracking.yaml", "p", "--power")
        power = document["metadata"]["calibration"]["power"]
        by_length = power["false_halts_by_length"]
        assert list(by_length) == ["10", "20", "50"]
        assert [by_length[k]["traces"] for k in by_length] == [6, 6, 0]
        assert all(0.0 <= by_length[k]["rate"] <= 1.0 for k in by_length)
        line = render_power(power).splitlines()[-2]
        assert line.startswith("  held-out healthy traces halted by cycle (fitted): 10: ")
        assert line.endswith("50: - of 0")


class TestDegenerateThreshold:
    def test_a_threshold_below_every_healthy_peak_is_named(
        self, corpus: tuple[Path, list[str]]
    ) -> None:
        """Fitted on the first 10 cycles, the threshold lies below the sum every one of these
        drifting traces reaches by cycle 24: over 24 cycles that fit is degenerate, and each
        trace is named with its peak; over the 10 it was fitted for, it is not."""
        folder, healthy = corpus
        base = load_policy(folder / "early.yaml")
        traces = [read_trace(path, base) for path in healthy]
        fitted = replay_fit(
            base, "early.yaml", str(folder / "d.yaml"), traces, [], date="2026-01-31",
            spread_test="cusum", horizon=10,
        )  # fmt: skip
        assert degenerate(fitted, traces, 10) is None
        found = degenerate(fitted, traces, 24)
        assert found is not None
        assert [path for path, _ in found.traces] == healthy
        assert all(peak > 0.5 for _, peak in found.traces)
        assert "below the peak sum S of every healthy trace" in found.message()
