"""What an explained refusal offers lies within the policy's score range (``spec.scores``): a
stable interval of perturbed scores is clipped to it, and a rule whose flip asks a score outside
it offers nothing and says so."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import yaml
from prunewarden import Engine, parse_policy

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: ranged, version: 1.0.0}\n"


def engine(spec: dict[str, Any]) -> Engine:
    return Engine(parse_policy(HEADER + yaml.safe_dump({"spec": spec}, sort_keys=False)))


def eviction(score: float, perturbed: float) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": "s1", "kind": "turn", "text": "ran it", "tombstone_written": True},
        "score": score,
        "perturbed_score": perturbed,
        "eviction_candidates": ["s1"],
    }


def offered(decision: Any, code: str) -> tuple[list[dict[str, Any]], str]:
    (reason,) = [r for r in decision.reasons if r.code == code]
    return reason.detail["would_allow"], reason.detail["would_allow_text"]


class TestStableInterval:
    def test_the_interval_ends_at_the_top_of_a_wide_range(self) -> None:
        """Scores on [0, 10], delta 1: a score of 9.5 is stable for perturbed scores in
        [8.5, 10.5] on paper, and [8.5, 10] in the range a request may carry."""
        policy = engine({"scores": {"min": 0, "max": 10}, "eviction": {"stability_delta": 1}})
        alternatives, sentence = offered(
            policy.evaluate(eviction(9.5, 0.5), explain=True), "unstable_score"
        )
        assert {"field": "perturbed_score", "op": "in", "value": [8.5, 10.0]} in alternatives
        assert sentence.endswith("a perturbed score in [8.5, 10]")

    def test_the_interval_starts_at_the_bottom_of_the_default_range(self) -> None:
        """The default range [0, 1]: a score of 0.1 is stable from 0, not from -0.15."""
        alternatives, _ = offered(
            Engine.default().evaluate(eviction(0.1, 0.9), explain=True), "unstable_score"
        )
        interval = alternatives[-1]
        assert (interval["field"], interval["op"]) == ("perturbed_score", "in")
        low, high = interval["value"]
        assert low == 0.0
        assert high == pytest.approx(0.35)


class TestRuleFlip:
    RULE: ClassVar[dict[str, str]] = {
        "name": "r",
        "check": "eviction",
        "effect": "deny",
        "message": "no",
    }

    def test_a_flip_past_the_range_is_not_offered(self) -> None:
        """``score < 1.5`` on [0, 1] matches every score: no score stops it."""
        policy = engine({"rules": [{**self.RULE, "when": "score < 1.5"}]})
        alternatives, sentence = offered(
            policy.evaluate(eviction(0.5, 0.5), explain=True), "rule:r"
        )
        assert alternatives == []
        assert sentence == (
            "rule 'r' matched score < 1.5: no score in [0, 1] (spec.scores) stops it matching"
        )

    def test_a_flip_within_a_wide_range_is_offered(self) -> None:
        """The same rule on [0, 10]: scores of 1.5 and more stop it."""
        policy = engine(
            {"scores": {"min": 0, "max": 10}, "rules": [{**self.RULE, "when": "score < 1.5"}]}
        )
        alternatives, _ = offered(policy.evaluate(eviction(0.5, 0.5), explain=True), "rule:r")
        assert alternatives == [{"field": "score", "op": ">=", "value": 1.5}]
