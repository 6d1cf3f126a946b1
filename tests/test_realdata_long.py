"""What ``make realdata``'s long-session study builds and measures, on small synthetic traces
(the real sessions need the ``realdata`` extra and minutes)."""

from __future__ import annotations

from prunewarden import parse_policy
from prunewarden.replay._power import Cycle

from benchmarks.realdata_long import CANDIDATES, CYCLES, base_policy, choose, meets, study_long


def healthy(seed: int) -> list[Cycle]:
    """Eight entries with a steady spread, the pinned task on top: nothing to catch."""
    out: list[Cycle] = []
    for cycle in range(1, CYCLES + 1):
        scores = {f"e{i}": 0.2 + 0.08 * i + 0.01 * ((seed + cycle) % 3) for i in range(8)}
        scores["task"] = 0.95
        out.append((scores, ("task",)))
    return out


def test_every_candidate_is_a_valid_cusum_base_with_its_settings() -> None:
    for label, settings in CANDIDATES.items():
        policy = parse_policy(base_policy(label, settings), "base.yaml")
        collapse = policy.spec.collapse
        assert collapse.spread_floor_mode == "cusum"
        assert collapse.canary_cycles == settings["canary_cycles"]
        assert collapse.cusum is not None
        assert collapse.cusum.reference_mode == settings["reference"].get("mode", "early")


def test_a_steady_healthy_session_is_quiet_and_every_injection_is_measured() -> None:
    label = "tracking 0.1, canary 2"
    policy = parse_policy(base_policy(label, CANDIDATES[label]), "base.yaml")
    record = study_long(policy, [healthy(0), healthy(1)])
    assert record["sessions"] == 2
    assert [record[f"false_by_{n}"] for n in (10, 20, 50)] == [0.0, 0.0, 0.0]
    assert record["canary_glitch"] == record["spread_glitch"] == 0.0
    assert record["recall_0.2"] == 1.0  # a squeeze to a fifth, canary below the median
    assert set(record) >= {"recall_0.35", "recall_0.5", "drift_0.35", "false_all"}


def test_the_choice_prefers_a_candidate_meeting_the_targets() -> None:
    quiet = {"false_by_20": 0.0, "false_by_50": 0.0, "canary_glitch": 0.0, "spread_glitch": 0.0}
    loud = {**quiet, "false_by_50": 0.1}
    records = {
        "loud": {**loud, "recall_0.35": 1.0, "recall_0.2": 1.0, "drift_0.35": 1.0},
        "quiet": {**quiet, "recall_0.35": 0.8, "recall_0.2": 1.0, "drift_0.35": 1.0},
    }
    assert meets(records["quiet"])
    assert not meets(records["loud"])
    assert choose(records) == "quiet"
    del records["quiet"]
    assert choose(records) == "loud"  # none meets them: the fewest false halts by 50
