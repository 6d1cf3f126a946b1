"""``prunewarden calibrate`` counts as docs/calibration.md says: a trace halts when the guard
halts once, and the allowed false positives are the target rate times the healthy traces,
rounded down (a fraction of a trace is never allowed to halt)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from prunewarden import load_builtin_policy, load_policy
from prunewarden.replay._fit import CalibrationError, fit, fit_scale, halts, read_trace

FLAT = {f"e{i}": 0.5 for i in range(6)}
CYCLES = 6
ENTRIES = 10


def write_trace(path: Path, cycles: list[dict[str, float]], pinned: list[str]) -> str:
    lines: list[dict[str, object]] = [
        {"type": "session", "trace_version": 1, "session_id": path.stem, "labels": {}}
    ]
    lines += [
        {"type": "cycle", "cycle": n, "scores": scores, "pinned": pinned}
        for n, scores in enumerate(cycles, 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def healthy(path: Path, seed: int) -> str:
    """Scores bunched around 0.63 with a spread of its own, and a canary below the median: the
    default policy halts it once its floor is above the trace's spread."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    sigma = 0.02 + 0.01 * seed
    cycles = []
    for _ in range(CYCLES):
        scores = {
            f"e{i}": round(min(0.95, max(0.3, rng.gauss(0.63, sigma))), 4) for i in range(ENTRIES)
        }
        scores["task"] = 0.55
        cycles.append(scores)
    return write_trace(path, cycles, ["task"])


class TestHaltingCount:
    def test_one_halt_makes_a_halting_trace(self, tmp_path: Path) -> None:
        """A trace on which the guard halts once (its third cycle) counts as halting."""
        base = load_builtin_policy()
        trace = write_trace(tmp_path / "once.jsonl", [FLAT, FLAT, FLAT], [])
        assert halts(base, [read_trace(trace, base)]) == [trace]

    def test_a_trace_without_a_halt_does_not(self, tmp_path: Path) -> None:
        """Two cycles never halt (too little history): the trace is not counted."""
        base = load_builtin_policy()
        trace = write_trace(tmp_path / "never.jsonl", [FLAT, FLAT], [])
        assert halts(base, [read_trace(trace, base)]) == []


class TestAllowedFalsePositives:
    def test_a_fraction_of_a_trace_is_rounded_down(self, tmp_path: Path) -> None:
        """With 10 healthy traces and a target rate of 0.07 (0.7 of a trace), no healthy
        trace may halt under the fitted floor (with no headroom, the floor is the largest
        quiet one)."""
        base = load_builtin_policy()
        paths = [healthy(tmp_path / f"h{seed}.jsonl", seed) for seed in range(10)]
        traces = [read_trace(p, base) for p in paths]
        result = fit(
            base,
            "builtin:default",
            str(tmp_path / "fitted.yaml"),
            traces,
            [],
            rate=0.07,
            headroom=1.0,
            date="2026-01-31",
        )
        assert result.floor == result.largest_quiet_floor
        assert halts(result.policy, traces) == []
        higher = fit(
            base,
            "builtin:default",
            str(tmp_path / "fitted.yaml"),
            traces,
            [],
            rate=0.1,
            headroom=1.0,
            date="2026-01-31",
        )
        assert len(halts(higher.policy, traces)) == 1  # the control: one whole trace allowed


class TestWhatCannotBeFitted:
    def test_traces_without_cycles_have_no_scale(self, tmp_path: Path) -> None:
        """Healthy traces with no cycle scores: nothing to fit a scale to."""
        base = load_builtin_policy()
        trace = read_trace(write_trace(tmp_path / "empty.jsonl", [], []), base)
        with pytest.raises(CalibrationError, match="no cycle scores to fit a scale to"):
            fit_scale([trace])

    def test_scores_that_do_not_spread_have_no_scale(self, tmp_path: Path) -> None:
        """Healthy traces whose 5th and 95th percentiles meet: no scale."""
        base = load_builtin_policy()
        trace = read_trace(write_trace(tmp_path / "flat.jsonl", [FLAT, FLAT], []), base)
        with pytest.raises(CalibrationError, match="do not spread"):
            fit_scale([trace])

    def test_an_unreadable_trace_is_refused(self, tmp_path: Path) -> None:
        """A trace that cannot be read is refused by name."""
        missing = str(tmp_path / "missing.jsonl")
        with pytest.raises(CalibrationError, match=f"{missing}: cannot read"):
            read_trace(missing, load_builtin_policy())

    def test_healthy_traces_that_halt_at_floor_zero_cannot_be_fitted(self, tmp_path: Path) -> None:
        """When the base halts the healthy traces whatever the floor (here: too few entries,
        halting), there is nothing to fit."""
        (tmp_path / "b.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: b, version: 1.0.0}\n"
            "spec:\n  collapse: {min_live_entries: 100, on_too_few_entries: halt}\n",
            encoding="utf-8",
        )
        base = load_policy(tmp_path / "b.yaml")
        paths = [healthy(tmp_path / f"h{seed}.jsonl", seed) for seed in range(3)]
        traces = [read_trace(p, base) for p in paths]
        with pytest.raises(CalibrationError, match="nothing to fit"):
            fit(base, "b.yaml", str(tmp_path / "f.yaml"), traces, [], date="2026-01-31")
