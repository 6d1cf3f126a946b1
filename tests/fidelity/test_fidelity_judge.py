"""method: judge: the harness's own entailment check, asked of each parent instead of the facts,
recorded in the decision as the method used; without one, fail closed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prunewarden import Engine
from prunewarden.fidelity import FidelitySettings, check_fidelity

EngineFactory = Callable[..., Engine]
RULE = {
    "id": "c1",
    "kind": "constraint",
    "text": "All timestamps must be UTC; never emit local time.",
}


class ScriptedJudge:
    """Answers from a script: (parent, child) -> entailed; records what it was asked."""

    def __init__(self, script: dict[tuple[str, str], Any]) -> None:
        self.script = script
        self.asked: list[tuple[str, str]] = []

    def __call__(self, parent: str, child: str) -> Any:
        self.asked.append((parent, child))
        return self.script[(parent, child)]


def _summary(text: str) -> dict[str, Any]:
    return {"id": "s1", "kind": "summary", "text": text, "derived_from": ["c1"]}


def _edit(engine: Engine, text: str) -> Any:
    return engine.evaluate(
        {"check": "transition", "before": [RULE], "after": [_summary(text)], "tombstones": ["c1"]}
    )


class TestJudge:
    def test_the_judge_decides_what_the_facts_cannot(self, make_policy: Any) -> None:
        """A paraphrase the facts refuse passes when the judge says it is entailed."""
        paraphrase = "Use UTC only."
        judge = ScriptedJudge({(RULE["text"], paraphrase): True})
        facts = Engine(make_policy(fidelity={}))
        assert _edit(facts, paraphrase).codes == ("negation_lost",)
        judged = Engine(make_policy(fidelity={"method": "judge"}), judge=judge)
        assert _edit(judged, paraphrase).codes == ("transition_clean",)
        assert judge.asked == [(RULE["text"], paraphrase)]

    def test_a_refusal_names_the_method(self, make_policy: Any) -> None:
        lossy = "Always emit local time, not UTC."
        judge = ScriptedJudge({(RULE["text"], lossy): False})
        decision = _edit(Engine(make_policy(fidelity={"method": "judge"}), judge=judge), lossy)
        assert decision.codes == ("meaning_drift",)
        assert decision.reasons[0].detail == {
            "parent": "c1",
            "child": "s1",
            "lost": ["meaning"],
            "method": "judge",
        }
        assert decision.restore == ("c1",)

    def test_without_a_judge_every_checked_summary_is_refused(self, make_policy: Any) -> None:
        decision = _edit(Engine(make_policy(fidelity={"method": "judge"})), "UTC; no local time.")
        assert decision.codes == ("internal_error",)

    @pytest.mark.parametrize("answer", ["yes", 1, None])
    def test_a_judge_answering_other_than_a_bool_fails_closed(
        self, make_policy: Any, answer: Any
    ) -> None:
        judge = ScriptedJudge({(RULE["text"], "UTC."): answer})
        decision = _edit(Engine(make_policy(fidelity={"method": "judge"}), judge=judge), "UTC.")
        assert decision.codes == ("internal_error",)

    def test_an_error_is_no_summary_whatever_the_judge_says(self) -> None:
        judge = ScriptedJudge({})
        settings = FidelitySettings(method="judge")
        result = check_fidelity([("c1", RULE["text"])], ("s1", "   "), settings, judge=judge)
        assert [r.code for r in result.reasons] == ["summary_is_error"]
        assert judge.asked == []
