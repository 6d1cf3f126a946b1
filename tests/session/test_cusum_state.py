"""A session's cusum track in its state: kept across a restore, read from older state versions,
and started again under other cusum settings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prunewarden import Engine, Policy, SessionStateError, parse_policy
from prunewarden._schemas import validator

SQUEEZE = [0.3, 0.3, 0.3, 0.1]  # the half-widths of each cycle's two entries around 0.5


def cusum_policy(slack: float = 0.4, version: str = "1.0.0") -> Policy:
    collapse = {
        "spread_floor_mode": "cusum",
        "consecutive_cycles": 2,
        "cusum": {"slack": slack, "reference": {"first_cycles": 2, "prior_weight": 0}},
    }
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "cusum", "version": version},
        "spec": {"collapse": collapse},
    }
    return parse_policy(json.dumps(document), "<cusum-policy>")


def squeezed_state(policy: Policy) -> dict[str, Any]:
    session = Engine(policy).session("s")
    for d in SQUEEZE:
        session.observe_cycle({"c": 0.55, "x": 0.5 - d, "y": 0.5 + d}, ["c"])
    return session.state()


class TestCusumState:
    def test_the_state_holds_the_sum_and_run_and_validates(self) -> None:
        """After one squeezed cycle the state keeps S at the cap and a run of that cycle."""
        state = json.loads(json.dumps(squeezed_state(cusum_policy())))
        assert list(validator("session-state").iter_errors(state)) == []
        assert state["state_version"] == 4
        assert state["cusum"]["sum"] == pytest.approx(0.45)
        assert [step["cycle"] for step in state["cusum"]["run"]] == [3, 4]
        assert state["cusum"]["basis"].startswith("sha256:")

    def test_a_restore_under_the_same_policy_keeps_the_track(self) -> None:
        """Restored, the session continues the sum: one more squeezed cycle reaches h."""
        policy = cusum_policy()
        state = squeezed_state(policy)
        restored = Engine(policy).session("s", state=state)
        assert restored.state()["cusum"] == state["cusum"]
        decision = restored.observe_cycle({"c": 0.45, "x": 0.4, "y": 0.6}, ["c"])
        assert decision.codes == ("collapse_detected",)
        assert decision.reasons[0].detail["cusum"] == pytest.approx(0.9)

    def test_other_cusum_settings_start_the_sum_again(self) -> None:
        """Under another slack the kept sum means nothing: it restarts at 0, with no run."""
        state = squeezed_state(cusum_policy())
        restored = Engine(cusum_policy(slack=0.3, version="1.1.0")).session("s", state=state)
        assert restored.state()["cusum"]["sum"] == 0.0
        assert restored.state()["cusum"]["run"] == []

    def test_a_negative_sum_is_refused_with_its_path(self) -> None:
        """A state whose sum is below 0 is refused at $.cusum.sum."""
        state = squeezed_state(cusum_policy())
        state["cusum"]["sum"] = -1.0
        with pytest.raises(SessionStateError) as raised:
            Engine(cusum_policy()).session("s", state=state)
        assert [p.path for p in raised.value.problems] == ["$.cusum.sum"]
