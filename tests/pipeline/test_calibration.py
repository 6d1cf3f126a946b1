"""Scorer-aware thresholds: calibrated scores, relative spread floors, minimum live entries.

Scores here are raw cosine-like values bunched in [0.35, 0.91], as a sentence-embedding scorer
gives them; ``SCALE`` maps that band onto [0, 1].
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from prunewarden import Engine, PolicyError, load_builtin_policy, parse_policy
from prunewarden.policy._model import Calibration, Policy
from prunewarden.suites._coverage import applicable_reasons

EngineFactory = Callable[..., Engine]
PolicyFactory = Callable[..., Policy]
SCALE = {"calibration": {"fixed": {"low": 0.35, "high": 0.91}}}
SEGMENT = {"id": "s1", "kind": "note", "text": "a note", "tombstone_written": True}


def snap(
    cycle: int, scores: Mapping[str, float], pinned: Sequence[str] = ("task",)
) -> dict[str, Any]:
    return {"cycle": cycle, "scores": dict(scores), "pinned": list(pinned)}


def bunched(spread: float, canary: float = 0.6) -> dict[str, float]:
    """Raw scores around 0.63 with population spread ``spread``, and a task canary."""
    return {
        "task": canary,
        "a": 0.63 - spread,
        "b": 0.63 + spread,
        "c": 0.63 - spread,
        "d": 0.63 + spread,
    }


def policy_text(spec: Mapping[str, Any]) -> str:
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "t", "version": "1.0.0"},
    }
    return yaml.safe_dump({**document, "spec": dict(spec)}, sort_keys=False)


RELATIVE = {
    "spread_floor": 0.5,
    "spread_floor_mode": "relative",
    "relative_to": {"first_cycles": 1},
}


class TestPolicyFields:
    def test_default_digest_is_unchanged_by_implicit_values(
        self, make_policy: PolicyFactory
    ) -> None:
        """Spelling the new fields out at their implicit values leaves the digest alone."""
        plain = make_policy()
        spelled = make_policy(
            scores={"calibration": "none"},
            collapse={"spread_floor_mode": "absolute", "min_live_entries": 0},
        )
        assert spelled.digest == plain.digest
        assert "calibration" not in spelled.document["spec"]["scores"]

    def test_builtin_default_has_no_calibration(self) -> None:
        """The bundled policy judges raw scores with an absolute floor, as the seeds say."""
        spec = load_builtin_policy().spec
        assert spec.calibration is None
        assert spec.collapse.spread_floor_mode == "absolute"
        assert spec.collapse.min_live_entries == 0

    def test_fixed_scale_is_typed(self, make_policy: PolicyFactory) -> None:
        """A fixed scale reaches the spec as a Calibration, and changes the digest."""
        policy = make_policy(scores=SCALE)
        assert policy.spec.calibration == Calibration(0.35, 0.91)
        assert policy.digest != make_policy().digest

    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            (
                {"scores": {"calibration": {"fixed": {"low": 0.9, "high": 0.3}}}},
                "$.spec.scores.calibration.fixed.high: 0.3 must be greater than low (0.9)",
            ),
            (
                {"collapse": {"spread_floor_mode": "relative"}},
                "$.spec.collapse.spread_floor_mode: a relative spread floor needs relative_to",
            ),
            ({"scores": {"calibration": "minmax"}}, "$.spec.scores.calibration"),
            ({"collapse": {"min_live_entries": -1}}, "$.spec.collapse.min_live_entries"),
        ],
    )
    def test_bad_settings_are_policy_errors(self, spec: dict[str, Any], expected: str) -> None:
        """A scale upside down, a relative floor without its reference, a bad value: refused."""
        with pytest.raises(PolicyError) as caught:
            parse_policy(policy_text(spec), "p.yaml")
        assert expected in str(caught.value)


class TestScale:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [(0.35, 0.0), (0.91, 1.0), (0.63, 0.5), (0.0, 0.0), (-1.0, 0.0), (1.0, 1.0), (0.49, 0.25)],
    )
    def test_linear_and_clipped(self, raw: float, expected: float) -> None:
        """low -> 0, high -> 1, linear between, clipped outside."""
        assert Calibration(0.35, 0.91).apply(raw) == pytest.approx(expected)

    @given(st.floats(-1, 1), st.floats(-1, 1))
    def test_monotonic_into_unit_interval(self, a: float, b: float) -> None:
        """The map keeps order and lands in [0, 1], whatever the raw scores."""
        scale = Calibration(-0.2, 0.7)
        low, high = sorted((a, b))
        assert 0.0 <= scale.apply(low) <= scale.apply(high) <= 1.0


class TestCalibratedCollapse:
    def test_bunched_raw_scores_false_positive_without_a_scale(self, engine: Engine) -> None:
        """Raw spread 0.06 is under the seed floor: the canary below median halts (the problem)."""
        history = [snap(i, bunched(0.06)) for i in (1, 2, 3)]
        assert engine.detect_collapse(history).codes == ("collapse_detected",)

    def test_calibrated_scores_see_a_healthy_spread(self, engine_with: EngineFactory) -> None:
        """The same cycles on the fitted scale spread 0.107: healthy, with both spreads recorded."""
        history = [snap(i, bunched(0.06)) for i in (1, 2, 3)]
        decision = engine_with(scores=SCALE).detect_collapse(history)
        assert decision.codes == ("spread_healthy",)
        detail = decision.reasons[0].detail
        raw = statistics.pstdev(bunched(0.06).values())
        assert detail["spreads"][0]["spread"] == pytest.approx(raw / 0.56)
        assert detail["calibration"]["low"] == 0.35
        assert detail["calibration"]["raw_spreads"][0]["spread"] == pytest.approx(raw)

    def test_real_narrowing_still_halts(self, engine_with: EngineFactory) -> None:
        """Scores pressed together with the canary sinking still halt on the fitted scale."""
        narrow = bunched(0.01, 0.6)
        history = [snap(1, bunched(0.2, 0.9)), snap(2, narrow), snap(3, narrow)]
        assert engine_with(scores=SCALE).detect_collapse(history).codes == ("collapse_detected",)


class TestCalibratedEviction:
    def test_raw_and_calibrated_scores_recorded(self, engine_with: EngineFactory) -> None:
        """The stability delta judges calibrated scores; the detail keeps both."""
        engine = engine_with(scores=SCALE)
        # A raw delta of 0.112 is 0.2 on the fitted scale: still under the 0.25 threshold.
        decision = engine.authorize_eviction(SEGMENT, 0.49, 0.6020)
        assert decision.codes == ("authorized",)
        calibration = decision.reasons[0].detail["calibration"]
        assert calibration["raw_score"] == 0.49
        assert calibration["score"] == pytest.approx(0.25)
        assert calibration["perturbed_score"] == pytest.approx(0.45)

    def test_raw_delta_widens_past_the_threshold(self, engine_with: EngineFactory) -> None:
        """A raw delta of 0.168 is 0.3 calibrated: unstable on the fitted scale only."""
        assert Engine.default().authorize_eviction(SEGMENT, 0.49, 0.658).codes == ("authorized",)
        decision = engine_with(scores=SCALE).authorize_eviction(SEGMENT, 0.49, 0.658)
        assert decision.codes == ("unstable_score",)

    def test_rules_see_calibrated_scores(self, engine_with: EngineFactory) -> None:
        """A rule's threshold is on the judged scale: raw 0.49 is 0.25 calibrated."""
        rule = {
            "name": "low-notes",
            "check": "eviction",
            "when": "score < 0.3",
            "effect": "deny",
            "message": "low",
        }
        plain = engine_with(rules=[rule]).authorize_eviction(SEGMENT, 0.49, 0.49)
        scaled = engine_with(scores=SCALE, rules=[rule]).authorize_eviction(SEGMENT, 0.49, 0.49)
        assert plain.outcome == "allow"
        assert scaled.outcome == "deny"
        assert "rule:low-notes" in scaled.codes


class TestRelativeFloor:
    @pytest.mark.parametrize(
        ("late", "code"), [(0.04, "collapse_detected"), (0.06, "spread_healthy")]
    )
    def test_floor_is_a_fraction_of_the_early_spread(
        self, engine_with: EngineFactory, late: float, code: str
    ) -> None:
        """Early spread 0.1, floor 0.5 of it: 0.04 is collapse, 0.06 is not."""
        engine = engine_with(collapse=RELATIVE)
        history = [
            snap(1, bunched(0.1, 0.9)),
            snap(2, bunched(late, 0.5)),
            snap(3, bunched(late, 0.5)),
        ]
        decision = engine.detect_collapse(history)
        assert decision.codes == (code,)
        detail = decision.reasons[0].detail
        assert detail["early_spread"] == pytest.approx(
            statistics.pstdev(bunched(0.1, 0.9).values())
        )
        assert detail["spread_floor"] == pytest.approx(0.5 * detail["early_spread"])
        assert detail["early_cycles"] == 1

    def test_session_keeps_its_first_spreads(self, engine_with: EngineFactory) -> None:
        """A session keeps the early spreads after the snapshots are gone, and no more of them."""
        collapse = {**RELATIVE, "relative_to": {"first_cycles": 2}}
        session = engine_with(collapse=collapse).session("s")
        for cycle in range(1, 21):
            decision = session.observe_cycle(bunched(0.1, 0.9), ["task"], cycle=cycle)
        assert decision.codes == ("spread_healthy",)
        assert decision.reasons[0].detail["early_cycles"] == 2
        for cycle in (21, 22):
            decision = session.observe_cycle(bunched(0.04, 0.5), ["task"], cycle=cycle)
        assert decision.codes == ("collapse_detected",)
        assert decision.reasons[0].detail["early_cycles"] == 2

    def test_early_spread_is_the_mean_of_the_first_cycles(self, engine_with: EngineFactory) -> None:
        """With three early cycles of different spreads the floor scales their mean (not their
        largest or their first), from a history and from a session alike."""
        collapse = {**RELATIVE, "relative_to": {"first_cycles": 3}}
        early = [bunched(0.05, 0.9), bunched(0.1, 0.9), bunched(0.3, 0.9)]
        spreads = [statistics.pstdev(scores.values()) for scores in early]
        mean = statistics.fmean(spreads)
        history = [snap(cycle, scores) for cycle, scores in enumerate(early, start=1)]
        history += [snap(4, bunched(0.01, 0.5)), snap(5, bunched(0.01, 0.5))]
        engine = engine_with(collapse=collapse)
        session = engine.session("mean")
        for snapshot in history:
            seen = session.observe_cycle(snapshot["scores"], ["task"], cycle=snapshot["cycle"])
        for decision in (engine.detect_collapse(history), seen):
            detail = decision.reasons[0].detail
            assert detail["early_cycles"] == 3
            assert detail["early_spread"] == pytest.approx(mean)
            assert detail["spread_floor"] == pytest.approx(0.5 * mean)
            assert mean < max(spreads)

    def test_default_absolute_floor_ignores_early_spread(self, engine: Engine) -> None:
        """Without the relative mode the detail is as before: no early spread."""
        history = [snap(i, bunched(0.1, 0.9)) for i in (1, 2, 3)]
        detail = engine.detect_collapse(history).reasons[0].detail
        assert set(detail) == {"spreads", "spread_floor"}


class TestMinLiveEntries:
    @pytest.mark.parametrize(
        ("on_too_few", "outcome", "actions"),
        [("allow", "allow", []), ("halt", "halt", ["halt_pruning", "freeze_buffer", "escalate"])],
    )
    def test_small_buffers_are_not_judged(
        self, engine_with: EngineFactory, on_too_few: str, outcome: str, actions: list[str]
    ) -> None:
        """Two entries spread 0 look collapsed; below min_live_entries the guard says so instead."""
        collapse = {"min_live_entries": 4, "on_too_few_entries": on_too_few}
        history = [
            snap(1, {"task": 0.9, "a": 0.5}),
            *(snap(i, {"task": 0.5, "a": 0.5}) for i in (2, 3)),
        ]
        assert Engine.default().detect_collapse(history).outcome == "halt"
        decision = engine_with(collapse=collapse).detect_collapse(history)
        assert decision.codes == ("too_few_entries",)
        assert decision.outcome == outcome
        assert [a.action for a in decision.actions] == actions
        assert decision.reasons[0].detail == {"entries": 2, "required": 4}

    def test_enough_entries_are_judged(self, engine_with: EngineFactory) -> None:
        """At min_live_entries the usual signals decide."""
        history = [snap(i, bunched(0.1, 0.9)) for i in (1, 2, 3)]
        decision = engine_with(collapse={"min_live_entries": 5}).detect_collapse(history)
        assert decision.codes == ("spread_healthy",)

    def test_coverage_expects_the_code_only_when_configured(
        self, make_policy: PolicyFactory
    ) -> None:
        """too_few_entries is applicable only with a minimum set."""
        assert applicable_reasons(make_policy())["too_few_entries"] == "min_live_entries is 0"
        assert (
            applicable_reasons(make_policy(collapse={"min_live_entries": 3}))["too_few_entries"]
            is None
        )


class TestCalibratedPlan:
    def test_plan_order_is_kept_and_recorded(self, engine_with: EngineFactory) -> None:
        """The map is monotonic: a pass evicts in raw order, each decision naming the scale."""
        segments = [
            {
                "id": sid,
                "kind": "turn",
                "text": f"text of {sid}",
                "tokens": 100,
                "score": score,
                "perturbed_score": score,
                "text_sha256": hashlib.sha256(f"text of {sid}".encode()).hexdigest(),
            }
            for sid, score in (("a", 0.62), ("b", 0.41), ("c", 0.88), ("d", 0.3))
        ]
        plan = engine_with(scores=SCALE).plan({"segments": segments, "free_tokens": 200})
        assert plan.evict == ("d", "b")
        evictions = [d for d in plan.decisions if d.check == "eviction"]
        assert [d.reasons[0].detail["calibration"]["raw_score"] for d in evictions] == [0.3, 0.41]
        assert evictions[0].reasons[0].detail["calibration"]["score"] == 0.0
