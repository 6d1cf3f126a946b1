"""A calibrated decision names its scale; when that record cannot be built, the decision
refuses (fail closed) instead of keeping the guard's allow."""

from __future__ import annotations

import pytest
from prunewarden import Engine, parse_policy
from prunewarden.pipeline import _calibration

POLICY = (
    "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: t, version: 1.0.0}\n"
    "spec:\n  scores:\n    calibration: {fixed: {low: 0.35, high: 0.91}}\n"
)
SEGMENT = {"id": "s1", "kind": "turn", "tombstone_written": True}


class TestRecordFailure:
    def test_a_record_that_cannot_be_built_refuses(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The guard allows, the calibration record fails: the decision is a refusal with
        internal_error, not the allow."""
        engine = Engine(parse_policy(POLICY))

        def broken(*_args: object) -> None:
            message = "cannot describe the scale"
            raise ValueError(message)

        monkeypatch.setattr(_calibration, "record", broken)
        decision = engine.authorize_eviction(SEGMENT, 0.5, 0.5)
        assert decision.outcome == "deny"
        assert decision.codes == ("internal_error",)
        assert decision.reasons[0].detail == {"error": "ValueError"}

    def test_with_its_record_the_guard_decides(self) -> None:
        """The same eviction with the record built is the guard's allow, naming the scale."""
        decision = Engine(parse_policy(POLICY)).authorize_eviction(SEGMENT, 0.5, 0.5)
        assert decision.codes == ("authorized",)
        calibration = decision.reasons[0].detail["calibration"]
        assert (calibration["scale"], calibration["low"], calibration["high"]) == (
            "fixed",
            0.35,
            0.91,
        )
