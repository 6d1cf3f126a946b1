"""What ``make realdata`` injects into its real traces, and how it cuts the fit traces, on small
synthetic traces (the real ones need the ``realdata`` extra and minutes)."""

from __future__ import annotations

import json
import statistics
from typing import cast

import pytest
from prunewarden import Policy, load_builtin_policy, parse_policy
from prunewarden.replay._power import Cycle

from benchmarks.realdata import CUSUM_BASE, Scorer, scores, shorten
from benchmarks.realdata_study import (
    DRIFT_TO,
    canary_glitch,
    collapse_glitch,
    drift,
    explain,
    render_study,
    study,
)

CYCLES = 12


def healthy(seed: int, cycles: int = CYCLES) -> list[Cycle]:
    """Eight entries spread about 0.2 and more each cycle, the pinned task on top."""
    out: list[Cycle] = []
    for cycle in range(1, cycles + 1):
        scores = {f"e{i}": 0.2 + 0.08 * i + 0.01 * ((seed + cycle) % 3) for i in range(8)}
        scores["task"] = 0.95
        out.append((scores, ("task",)))
    return out


def spread(cycle: Cycle) -> float:
    return statistics.pstdev(cycle[0].values())


def below_median(cycle: Cycle) -> bool:
    scores, pinned = cycle
    others = [v for k, v in scores.items() if k not in pinned]
    return all(scores[c] < statistics.median(others) for c in pinned)


def cusum_policy() -> Policy:
    return parse_policy(CUSUM_BASE, "cusum.yaml")


class TestInjections:
    def test_a_canary_glitch_moves_one_canary_of_one_cycle(self) -> None:
        """Only the glitch cycle changes, and there only the canary, now below the median."""
        cycles = healthy(0)
        glitched = canary_glitch(cycles, 7)
        assert [i for i, (a, b) in enumerate(zip(cycles, glitched, strict=True)) if a != b] == [6]
        assert below_median(glitched[6])
        changed = {k for k, v in glitched[6][0].items() if v != cycles[6][0][k]}
        assert changed == {"task"}

    def test_a_collapse_glitch_squeezes_one_cycle_only(self) -> None:
        """The glitch cycle's others spread a fifth as wide; the next cycle is as recorded."""
        cycles = healthy(0)
        glitched = collapse_glitch(cycles, 7)
        others = [{k: v for k, v in c[0].items() if k != "task"} for c in (cycles[6], glitched[6])]
        widths = [statistics.pstdev(o.values()) for o in others]
        assert widths[1] / widths[0] == pytest.approx(0.2)
        assert below_median(glitched[6])
        assert glitched[7] == cycles[7]

    def test_a_drift_reaches_its_squeeze_after_five_cycles_and_holds(self) -> None:
        """Before the onset as recorded; the squeeze deepens for five cycles, then holds."""
        cycles = healthy(0)
        drifted = drift(cycles, 4)
        assert drifted[:3] == cycles[:3]
        others = [
            statistics.pstdev(v for k, v in c[0].items() if k != "task")
            for c in (*cycles[3:], *drifted[3:])
        ]
        ratios = [b / a for a, b in zip(others[:9], others[9:], strict=True)]
        assert ratios[0] > ratios[3] > ratios[4] - 1e-9
        assert [round(r, 9) for r in ratios[4:]] == [DRIFT_TO] * 5


class TestStudy:
    def test_the_record_covers_every_injection(self) -> None:
        """False halts, long halts by cycle, both glitches, sudden and gradual recall."""
        short = [healthy(seed) for seed in range(3)]
        long = [healthy(seed, 2 * CYCLES) for seed in range(3)]
        record = study(cusum_policy(), short, long)
        assert record["held_out"] == record["long"] == 3
        assert set(record["long_false_halts_by"]) == {"10", "15", "20"}
        assert record["sudden"]["factors"] == [0.2, 0.35, 0.5, 0.7]
        assert len(record["sudden_long"]["recall"]) == 4
        assert "gradual_to_0.35" in record

    def test_under_cusum_no_one_cycle_glitch_halts_and_a_squeeze_does(self) -> None:
        """The cap at work on the benchmark's own injections: a one-cycle collapse never
        halts, the same squeeze held from the onset on always does."""
        short = [healthy(seed) for seed in range(3)]
        record = study(cusum_policy(), short, [healthy(0, 2 * CYCLES)])
        assert record["false_halts"] == 0.0
        assert record["canary_glitch"] == record["collapse_glitch"] == 0.0
        assert record["sudden"]["recall"][0] == 1.0

    def test_each_halt_of_a_long_trace_is_explained_from_the_detail(self) -> None:
        """A long trace squeezed from cycle 16 halts, and the line gives the evidence."""
        long = healthy(0, 2 * CYCLES)
        squeezed = long[:15] + collapse_glitch(long, 16)[15:16] + collapse_glitch(long, 17)[16:17]
        (line,) = explain(cusum_policy(), [("t", [*squeezed, *collapse_glitch(long, 18)[17:]])])
        assert line.startswith("t: halt at cycle 17; reference ")
        assert "S " in line
        assert "canary task below_median" in line

    def test_the_table_has_a_row_per_policy(self) -> None:
        """One header, one row per policy, in order."""
        short = [healthy(0)]
        records = {
            "default": study(load_builtin_policy(), short, short),
            "cusum": study(cusum_policy(), short, short),
        }
        lines = render_study(records).splitlines()
        assert [line.split()[0] for line in lines[-2:]] == ["default", "cusum"]


class TestFitTraces:
    def test_a_fit_trace_is_the_first_cycles_with_their_evictions(self) -> None:
        """Cut before cycle N + 1: cycle N's eviction stays, nothing after it."""
        lines = [
            json.dumps({"type": "session", "trace_version": 1}),
            *(json.dumps({"type": "cycle", "cycle": c, "scores": {}}) for c in (1, 2)),
            json.dumps({"type": "eviction", "score": 0.1}),
            json.dumps({"type": "cycle", "cycle": 3, "scores": {}}),
        ]
        assert shorten(lines, 2) == lines[:4]
        assert shorten(lines, 5) == lines


class Axes:
    """Stands in for the embedding model: each text is a unit vector on its own axis."""

    def embed(self, text: str) -> list[float]:
        return [1.0 if text == axis else 0.0 for axis in ("a", "b", "c")]


class TestScores:
    def test_against_the_whole_buffer_each_segment_scores_alike(self) -> None:
        """Three orthogonal segments: each has cosine 1/sqrt(3) to the buffer's mean."""
        found = scores(cast("Scorer", Axes()), {"x": "a", "y": "b", "z": "c"})
        assert set(found.values()) == {round((1 / 3**0.5 + 1) / 2, 6)}

    def test_against_recent_turns_only_they_are_the_anchor(self) -> None:
        """Against segment z alone: z scores 1, the others (cos 0) score 0.5."""
        found = scores(cast("Scorer", Axes()), {"x": "a", "y": "b", "z": "c"}, ["z"])
        assert found == {"x": 0.5, "y": 0.5, "z": 1.0}
