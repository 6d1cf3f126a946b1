"""``prunewarden calibrate``'s fitted values as docs/calibration.md states them: the scale is the
5th and 95th percentile (linear interpolation between ranks, rounded to 6 decimals), the floor
the largest quiet one among the healthy spreads (bounded by 0 and 1), and a trace that cannot be
replayed refuses the fit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import load_builtin_policy
from prunewarden.replay._fit import (
    CalibrationError,
    Fit,
    TraceData,
    bump_minor,
    fit,
    fit_scale,
    halts,
    read_trace,
    spread_signal_traces,
)

FLAT = {f"e{i}": 0.5 for i in range(6)}
WIDE = {f"e{i}": 0.1 + 0.15 * i for i in range(6)}


def write_trace(path: Path, cycles: list[dict[str, float]]) -> str:
    lines: list[dict[str, object]] = [
        {"type": "session", "trace_version": 1, "session_id": path.stem, "labels": {}}
    ]
    lines += [
        {"type": "cycle", "cycle": n, "scores": scores, "pinned": []}
        for n, scores in enumerate(cycles, 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def scores(*values: float) -> TraceData:
    return TraceData("t.jsonl", "", (values,))


class TestScale:
    def test_percentiles_interpolate_between_neighbouring_ranks(self) -> None:
        """Of 0, 0.5 and 1 the 5th percentile is 0.05 and the 95th 0.95 (numpy's default)."""
        scale = fit_scale([scores(1.0, 0.0, 0.5)])
        assert (scale.low, scale.high) == (0.05, 0.95)

    def test_fitted_percentiles_are_rounded_to_six_decimals(self) -> None:
        """0.0333... and 0.9333... are written as 0.033333 and 0.933333."""
        scale = fit_scale([scores(0.0, 1 / 3, 1.0)])
        assert (scale.low, scale.high) == (0.033333, 0.933333)

    def test_percentiles_that_meet_after_rounding_do_not_spread(self) -> None:
        """Scores differing only past the sixth decimal have no scale."""
        with pytest.raises(CalibrationError, match="do not spread"):
            fit_scale([scores(0.5, 0.5, 0.5, 0.5 + 1e-9)])


class TestFloorSearch:
    def test_traces_that_never_halt_fit_the_largest_floor(self, tmp_path: Path) -> None:
        """Two-cycle traces never halt (too little history): every floor up to 1 (the whole
        scale) is quiet, and the default headroom halves it, as the shipped example shows."""
        base = load_builtin_policy()
        paths = [write_trace(tmp_path / f"h{i}.jsonl", [WIDE, FLAT]) for i in range(2)]
        traces = [read_trace(p, base) for p in paths]
        result = fit(
            base, "builtin:default", str(tmp_path / "f.yaml"), traces, [], date="2026-01-31"
        )
        assert (result.largest_quiet_floor, result.floor) == (1.0, 0.5)

    def test_a_floor_above_zero_halting_a_healthy_trace_fits_zero(self, tmp_path: Path) -> None:
        """Three flat cycles halt under any floor above 0 (their spread is 0): the largest quiet
        floor is 0 itself."""
        base = load_builtin_policy()
        trace = read_trace(write_trace(tmp_path / "flat.jsonl", [FLAT, FLAT, FLAT, WIDE]), base)
        result = fit(
            base, "builtin:default", str(tmp_path / "f.yaml"), [trace], [], date="2026-01-31"
        )
        assert (result.largest_quiet_floor, result.floor) == (0.0, 0.0)


def fitted_record(tmp_path: Path, **options: Any) -> tuple[Fit, dict[str, Any]]:
    """A fit on two quiet healthy traces and its ``metadata.calibration``."""
    base = load_builtin_policy()
    paths = [write_trace(tmp_path / f"h{i}.jsonl", [WIDE, FLAT]) for i in range(2)]
    traces = [read_trace(p, base) for p in paths]
    out = str(tmp_path / "f.yaml")
    result = fit(base, "builtin:default", out, traces, [], date="2026-01-31", **options)
    return result, yaml.safe_load(result.text)["metadata"]["calibration"]


class TestWhatTheFitRecords:
    def test_an_absolute_fit_records_its_headroom_and_floor(self, tmp_path: Path) -> None:
        """metadata.calibration holds the headroom, the scale and the fitted floor; no power
        section unless one was asked for."""
        _, record = fitted_record(tmp_path)
        assert record["headroom"] == 0.5
        assert record["scale"] == {
            "quantiles": [0.05, 0.95],
            "low": 0.1225,
            "high": 0.8275,
            "scores": 24,
        }
        assert record["spread_floor"] == {"fitted": 0.5, "largest_quiet": 1.0}
        assert "power" not in record

    def test_a_power_report_is_recorded_as_given(self, tmp_path: Path) -> None:
        """With calibrate --power, its report is metadata.calibration.power."""
        _, record = fitted_record(tmp_path, power={"collapsed_halted": 1})
        assert record["power"] == {"collapsed_halted": 1}

    def test_an_explicit_cusum_test_fits_cusum_on_an_absolute_base(self, tmp_path: Path) -> None:
        """--spread-test cusum overrides the base's absolute mode; the cusum fit has no
        headroom and no floor of its own."""
        result, record = fitted_record(tmp_path, spread_test="cusum")
        assert result.policy.spec.collapse.spread_floor_mode == "cusum"
        assert result.cusum is not None
        assert result.cusum == result.policy.spec.collapse.cusum
        assert "headroom" not in record
        assert "spread_floor" not in record
        assert record["cusum"]["threshold"] == result.cusum.threshold


class TestFittedVersion:
    def test_the_fitted_policy_is_the_next_minor_version(self) -> None:
        """1.4.2 -> 1.5.0; a pre-release or build suffix is dropped."""
        assert [bump_minor(v) for v in ("1.4.2", "0.9.0-rc.1", "2.0.1+build.7")] == [
            "1.5.0",
            "0.10.0",
            "2.1.0",
        ]

    def test_a_version_that_is_not_semantic_is_refused(self) -> None:
        """No next version can be named for one that is not semantic: refused, not guessed."""
        with pytest.raises(CalibrationError, match="'v1' is not a semantic version"):
            bump_minor("v1")


class TestTracesThatCannotBeReplayed:
    def test_a_malformed_trace_refuses_with_its_located_problem(self, tmp_path: Path) -> None:
        """A bad line in a trace refuses the fit, naming the trace's file and line."""
        base = load_builtin_policy()
        path = tmp_path / "bad.jsonl"
        good = write_trace(path, [FLAT])
        with path.open("a", encoding="utf-8") as stream:
            stream.write("{not json\n")
        with pytest.raises(CalibrationError) as info:
            halts(base, [TraceData(good, "", ())])
        assert str(info.value).startswith(f"{good}:3:")


SIGNAL_FLAT = (0.5, 0.5, 0.5, 0.5)  # spread 0
SIGNAL_WIDE = (0.0, 0.0, 1.0, 1.0)  # spread 0.5
SIGNAL_EDGE = (0.25, 0.25, 0.75, 0.75)  # spread 0.25 exactly: the floor below
SIGNAL_FEW = (0.5, 0.5, 0.5)  # spread 0, one entry short of min_live_entries


class TestSpreadSignal:
    """Signal A as ``--floor-from spread`` counts it: from cycle ``consecutive_cycles`` + 1 on,
    a cycle with at least ``min_live_entries`` entries ending a run of ``consecutive_cycles``
    spreads under the floor (2 cycles, 4 entries and 0.25 here)."""

    @pytest.mark.parametrize(
        ("cycles", "holds"),
        [
            ((SIGNAL_WIDE, SIGNAL_FLAT, SIGNAL_FLAT), True),
            ((SIGNAL_WIDE, SIGNAL_FLAT, SIGNAL_FLAT, SIGNAL_WIDE), True),
            ((SIGNAL_FLAT, SIGNAL_FLAT), False),
            ((SIGNAL_FLAT, SIGNAL_FLAT, SIGNAL_WIDE), False),
            ((SIGNAL_WIDE, SIGNAL_WIDE, SIGNAL_FLAT), False),
            ((SIGNAL_WIDE, SIGNAL_EDGE, SIGNAL_EDGE), False),
            ((SIGNAL_WIDE, SIGNAL_FLAT, SIGNAL_FEW), False),
            ((SIGNAL_WIDE, SIGNAL_WIDE, SIGNAL_WIDE), False),
        ],
        ids=[
            "run-ends-the-trace",
            "run-inside-the-trace",
            "too-early-to-judge",
            "run-broken-by-the-last",
            "one-spread-is-not-a-run",
            "at-the-floor-is-not-under",
            "last-cycle-too-few-entries",
            "never-under",
        ],
    )
    def test_which_traces_signal_a_holds_on(
        self, make_policy: Any, cycles: tuple[tuple[float, ...], ...], holds: bool
    ) -> None:
        """Signal A holds on a trace exactly when such a run ends on a judged cycle."""
        policy = make_policy(
            collapse={"consecutive_cycles": 2, "min_live_entries": 4, "spread_floor": 0.25}
        )
        found = spread_signal_traces(policy, [TraceData("t.jsonl", "", cycles)])
        assert found == (["t.jsonl"] if holds else [])


class TestFloorFromSpreadIsAbsoluteOnly:
    def test_a_cusum_base_is_refused_even_with_the_absolute_test(
        self, make_policy: Any, tmp_path: Path
    ) -> None:
        """--floor-from spread on a base whose spread floor is in cusum mode is refused, even
        when the absolute test is asked for: the base's floor is not an absolute one."""
        base = make_policy(collapse={"spread_floor_mode": "cusum"})
        trace = read_trace(write_trace(tmp_path / "h.jsonl", [WIDE, FLAT]), base)
        with pytest.raises(CalibrationError) as info:
            fit(
                base, "b.yaml", str(tmp_path / "f.yaml"), [trace], [], date="2026-01-31",
                spread_test="absolute", floor_from="spread",
            )  # fmt: skip
        assert str(info.value) == (
            "--floor-from spread fits an absolute floor, and the fit is not of one"
        )
