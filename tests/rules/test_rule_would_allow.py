"""``would_allow`` on a matched rule's reason: the inverted comparison where the condition is a
field compared with a constant or a param (null checks allowed), nothing otherwise; applying
the change stops the rule matching."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import Decision, Engine, parse_policy

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: rules, version: 1.0.0}\n"
SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))


def engine(rules: list[dict[str, Any]], params: dict[str, Any] | None = None) -> Engine:
    """An engine whose policy holds ``rules`` (a generous timeout each) and ``params``."""
    spec: dict[str, Any] = {"rules": [{"timeout_ms": 10_000, **rule} for rule in rules]}
    if params:
        spec["params"] = params
    return Engine(parse_policy(HEADER + yaml.safe_dump({"spec": spec}, sort_keys=False)))


def eviction(score: float, kind: str = "turn") -> dict[str, Any]:
    """An eviction the guard allows (tombstoned, stable): only the rule can refuse it."""
    return {
        "check": "eviction",
        "segment": {"id": "s1", "kind": kind, "text": "ran it", "tombstone_written": True},
        "score": score,
        "perturbed_score": score,
        "eviction_candidates": ["s1"],
    }


def rule(when: str, check: str = "eviction") -> dict[str, Any]:
    return {"name": "r", "check": check, "when": when, "effect": "deny", "message": "no"}


def reason_of(decision: Decision) -> Any:
    (found,) = [r for r in decision.reasons if r.code == "rule:r"]
    return found


class TestAnalysed:
    @pytest.mark.parametrize(
        ("when", "change"),
        [
            ("score < 0.2", {"field": "score", "op": ">=", "value": 0.2}),
            ("0.2 > score", {"field": "score", "op": ">=", "value": 0.2}),
            ("score >= 0.05", {"field": "score", "op": "<", "value": 0.05}),
            ('segment.kind == "turn"', {"field": "segment.kind", "op": "!=", "value": "turn"}),
            (
                "segment.tombstone_written == true",
                {"field": "segment.tombstone_written", "op": "!=", "value": True},
            ),
            (
                "perturbed_score != null && perturbed_score < 0.2",
                {"field": "perturbed_score", "op": ">=", "value": 0.2},
            ),
        ],
    )
    def test_a_comparison_with_a_constant_is_inverted(
        self, when: str, change: dict[str, Any]
    ) -> None:
        """The one comparison deciding the rule, inverted, with the constant as its value."""
        decision = engine([rule(when)]).evaluate(eviction(0.1), explain=True)
        reason = reason_of(decision)
        assert reason.detail["would_allow"] == [change]
        assert reason.detail["would_allow_text"].startswith("rule 'r' matched ")

    def test_a_param_is_the_constant_and_names_itself(self) -> None:
        """score < params.floor: the alternative compares with the param's value, and the
        sentence names the param."""
        decision = engine([rule("score < params.floor")], {"floor": 0.25}).evaluate(
            eviction(0.1), explain=True
        )
        reason = reason_of(decision)
        assert reason.detail["would_allow"] == [{"field": "score", "op": ">=", "value": 0.25}]
        assert reason.detail["would_allow_text"] == (
            "rule 'r' matched score < params.floor (0.25): "
            "allowed at score \u2265 params.floor (0.25)"
        )

    def test_a_param_compared_with_a_literal_is_a_policy_change(self) -> None:
        """params.strict == true: the change is to the policy, spec.params.strict."""
        decision = engine([rule("params.strict == true")], {"strict": True}).evaluate(
            eviction(0.1), explain=True
        )
        assert reason_of(decision).detail["would_allow"] == [
            {"field": "spec.params.strict", "op": "!=", "value": True}
        ]

    def test_a_per_item_rule_names_the_items_it_matched(self) -> None:
        """A collapse rule on each canary: the change holds on each canary it matched."""
        when = "canary.score != null && canary.score < params.canary_floor"
        policy_rule = {**rule(when, "collapse"), "effect": "halt"}
        document = {
            "check": "collapse",
            "history": [
                {"cycle": 1, "scores": {"task": 0.9, "x": 0.1, "y": 0.5}, "pinned": ["task"]},
                {"cycle": 2, "scores": {"task": 0.2, "x": 0.15, "y": 0.6}, "pinned": ["task"]},
            ],
        }
        decision = engine([policy_rule], {"canary_floor": 0.3}).evaluate(document, explain=True)
        reason = reason_of(decision)
        assert reason.detail["would_allow"] == [{"field": "canary.score", "op": ">=", "value": 0.3}]
        assert reason.detail["would_allow_text"].endswith(" on each of task")


class TestNotAnalysed:
    @pytest.mark.parametrize(
        "when",
        [
            "size(candidates) > 0 && score < 0.5",
            "score < 0.5 || score > 0.9",
            "score * 2.0 < 1.0",
            "score < perturbed_score + 0.5",
            "segment.kind in ['turn', 'tool_output']",
        ],
    )
    def test_another_condition_has_no_alternative_and_says_so(self, when: str) -> None:
        """Outside the subset: an empty list, and a sentence pointing at the rule's trace."""
        decision = engine([rule(when)]).evaluate(eviction(0.1), explain=True)
        reason = reason_of(decision)
        assert reason.detail["would_allow"] == []
        assert (
            "its trace (explanation.rules) shows what decided it"
            in (reason.detail["would_allow_text"])
        )

    def test_a_failed_rule_is_not_explained(self) -> None:
        """rule_error:<name> (the rule failed, counted as matched) carries no would_allow."""
        decision = engine([rule("segment.metadata.missing == 1.0")]).evaluate(
            eviction(0.1), explain=True
        )
        (failed,) = [r for r in decision.reasons if r.code == "rule_error:r"]
        assert "would_allow" not in failed.detail

    def test_the_default_path_computes_nothing(self) -> None:
        """Without explain, a rule's reason carries no would_allow."""
        decision = engine([rule("score < 0.2")]).evaluate(eviction(0.1))
        assert "would_allow" not in reason_of(decision).detail


_OPS = ["<", "<=", ">", ">=", "==", "!="]


def _holding(op: str, value: float) -> float | None:
    """A score in [0, 1] for which ``score op value`` holds, or None."""
    candidates = {
        "<": math.nextafter(value, -math.inf),
        "<=": value,
        ">": math.nextafter(value, math.inf),
        ">=": value,
        "==": value,
        "!=": 0.0 if value != 0.0 else 1.0,
    }
    found = candidates[op]
    return found if 0.0 <= found <= 1.0 else None


class TestFlips:
    @settings(max_examples=40 * SCALE, deadline=None)
    @given(
        op=st.sampled_from(_OPS),
        constant=st.floats(min_value=0.0, max_value=1.0),
        mirrored=st.booleans(),
    )
    def test_applying_the_change_stops_the_rule(
        self, op: str, constant: float, mirrored: bool
    ) -> None:
        """For a matched comparison of the score with a constant, a score satisfying the
        change no longer matches the rule; the guard's decision is then an allow."""
        mirror = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
        when = f"{constant!r} {mirror[op]} score" if mirrored else f"score {op} {constant!r}"
        policy = engine([rule(when)])
        score = _holding(op, constant)
        if score is None:
            return
        matched = policy.evaluate(eviction(score), explain=True)
        offered = reason_of(matched).detail["would_allow"]
        if not offered:  # no score in range stops it (score >= 0.0): none is offered
            inverse = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[op]
            assert _holding(inverse, constant) is None
            return
        (change,) = offered
        flipped = _holding(change["op"], change["value"])
        assert flipped is not None  # an offered score lies within the range
        after = policy.evaluate(eviction(flipped))
        assert "rule:r" not in after.codes
        assert after.outcome == "allow"
