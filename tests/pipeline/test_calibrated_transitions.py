"""A calibrated policy judges a transition's segment scores on its scale, as every other
request's (docs/calibration.md): scores and perturbed scores of both windows, each on its own;
a segment without either is left as it is."""

from __future__ import annotations

from typing import Any

from prunewarden.inputs import ScoreRange, TransitionRequest, parse_request
from prunewarden.pipeline._calibration import calibrate
from prunewarden.policy import Calibration

SCALE = Calibration(0.2, 0.6)


def segment(segment_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": segment_id, "kind": "turn", "text": f"text of {segment_id}", **fields}


def transition(before: list[Any], after: list[Any]) -> TransitionRequest:
    document = {"check": "transition", "before": before, "after": after}
    _, request = parse_request(document, ScoreRange(0.0, 1.0))
    assert isinstance(request, TransitionRequest)
    return request


class TestCalibratedTransitions:
    def test_each_score_of_both_windows_is_put_on_the_scale(self) -> None:
        """A score alone, a perturbed score alone and both are each calibrated."""
        raw = transition(
            [segment("a", score=0.3), segment("b", perturbed_score=0.5)],
            [segment("a", score=0.3, perturbed_score=0.4)],
        )
        judged = calibrate(SCALE, raw)
        assert isinstance(judged, TransitionRequest)
        before = [(s.id, s.score, s.perturbed_score) for s in judged.before]
        after = [(s.id, s.score, s.perturbed_score) for s in judged.after]
        assert before == [("a", SCALE.apply(0.3), None), ("b", None, SCALE.apply(0.5))]
        assert after == [("a", SCALE.apply(0.3), SCALE.apply(0.4))]
        assert SCALE.apply(0.3) != 0.3  # the control: the scale moves these scores

    def test_an_unscored_segment_and_the_edit_are_kept(self) -> None:
        """A segment with no score is the same segment; the derived edit is unchanged."""
        raw = transition([segment("a"), segment("b", score=0.3)], [segment("a")])
        judged = calibrate(SCALE, raw)
        assert isinstance(judged, TransitionRequest)
        assert judged.before[0] is raw.before[0]
        assert judged.edit == raw.edit
