"""A calibrated policy judges every request on its scale, and leaves what carries no score as
it is: a span without a score is still an unbound score, not a failure of the scale."""

from __future__ import annotations

import hashlib
from typing import Any

from prunewarden import Engine, parse_policy

POLICY = (
    "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: t, version: 1.0.0}\n"
    "spec:\n  scores:\n    calibration: {fixed: {low: 0.35, high: 0.91}}\n"
)


def span(span_id: str, score: float | None) -> dict[str, Any]:
    text = f"text of {span_id}"
    sha = hashlib.sha256(text.encode()).hexdigest() if score is not None else ""
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha}


class TestUnscoredSpans:
    def test_an_unscored_span_is_unbound_on_a_calibrated_scale(self) -> None:
        """A span without a score under a calibrated policy is refused as unbound_score, with
        the scale named; calibrating it is not attempted."""
        decision = Engine(parse_policy(POLICY)).prune([span("a", None), span("b", 0.63)], 1)
        assert decision.codes == ("unbound_score",)
        assert decision.reasons[0].detail["calibration"]["scale"] == "fixed"

    def test_scored_spans_are_judged_calibrated(self) -> None:
        """Scored spans are ranked on the calibrated scale (the control)."""
        decision = Engine(parse_policy(POLICY)).prune([span("a", 0.5), span("b", 0.63)], 1)
        assert decision.codes == ("bound",)
        assert decision.kept == ("b",)
