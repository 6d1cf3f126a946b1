"""What an explained collapse refusal offers, exactly: which alternatives (field, operator, value)
and the sentence, for a short history and for the cusum spread test. The property tests
(test_would_allow.py) show that each alternative offered flips the halt; these pin that the
alternatives are offered at all, since an explainer that fails is swallowed and leaves none."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from prunewarden._cusum import replay
from prunewarden._stats import pstdev
from prunewarden.decision import Reason
from prunewarden.guards import GUARDS
from prunewarden.inputs import CollapseRequest, Snapshot
from prunewarden.policy import CollapseSettings, CusumSettings, load_builtin_policy

DEFAULT = load_builtin_policy("default").spec.collapse
CUSUM = replace(DEFAULT, spread_floor_mode="cusum", cusum=CusumSettings())
GUARD = GUARDS["collapse"]
ALLOW_SHORT = {"field": "spec.collapse.on_insufficient_history", "op": "==", "value": "allow"}
# Two wide cycles, then two narrow ones in which canary "c" falls below the median (0.505) and by
# more than the margin from its baseline (0.9): signal A under the default cusum test (the sum
# reaches 0.9 in two capped steps of 0.45) and an inverted canary.
WIDE = {"a": 0.1, "b": 0.5, "c": 0.9}
NARROW = {"a": 0.5, "b": 0.51, "c": 0.49}
# ln(R / s) of the two narrow cycles. The sum reaches the threshold 0.9 only when both
# increments ln(R / s) - slack are capped at 0.45: the smallest slack that ends signal A is the
# first log-ratio less the cap (to the float the guard itself accepts), not the log-ratio.
LOG_RATIOS = (3.434894978066094, 3.4983910970780543)
SLACK = {"field": "spec.collapse.cusum.slack", "op": ">=", "value": 2.984894978066094}
CANARY_RAISED = {"field": "history[3].scores.c", "op": ">=", "value": 0.65}
PIN_A_CANARY = "or pin a canary that holds its rank (then its rank is judged)"


def explained(settings: CollapseSettings, request: CollapseRequest) -> Reason:
    """The collapse guard's one (refusing) reason for ``request``, explained."""
    verdict = GUARD.explain(settings, request, GUARD.evaluate(settings, request))
    assert verdict.refused
    [reason] = verdict.reasons
    return reason


def short_history(cycles: int) -> CollapseRequest:
    history = tuple(Snapshot(cycle, WIDE, ()) for cycle in range(1, cycles + 1))
    return CollapseRequest(history, None)


def cycles(*scores: dict[str, float]) -> CollapseRequest:
    """A history of these cycles' scores, numbered from 1, without a canary."""
    history = tuple(Snapshot(cycle, s, ()) for cycle, s in enumerate(scores, start=1))
    return CollapseRequest(history, None)


def narrowing(*, pinned: tuple[str, ...] = ("c",), kept: bool = False) -> CollapseRequest:
    """Two wide cycles then two narrow ones; with ``kept``, the cusum track handed in as a
    session keeps it (the same track the history gives) instead of recomputed."""
    history = tuple(
        Snapshot(cycle, scores, pinned)
        for cycle, scores in enumerate((WIDE, WIDE, NARROW, NARROW), start=1)
    )
    if not kept:
        return CollapseRequest(history, None)
    parameters = CUSUM.cusum_parameters()
    assert parameters is not None
    track = replay(parameters, [(s.cycle, pstdev(s.scores.values()), True) for s in history])
    return CollapseRequest(history, None, cusum=track)


class TestShortHistory:
    @pytest.mark.parametrize(
        ("cycles", "more"),
        [(2, 2), (3, 1)],
    )
    def test_a_history_of_two_cycles_or_more_offers_fewer_consecutive_cycles(
        self, cycles: int, more: int
    ) -> None:
        """Two cycles or more: consecutive_cycles one below the history's length allows too."""
        halting = replace(DEFAULT, consecutive_cycles=3, on_insufficient_history="halt")
        reason = explained(halting, short_history(cycles))
        assert reason.code == "insufficient_history"
        assert reason.detail["would_allow"] == [
            ALLOW_SHORT,
            {"field": "spec.collapse.consecutive_cycles", "op": "<=", "value": cycles - 1},
        ]
        assert reason.detail["would_allow_text"] == (
            f"{cycles} cycle(s) < 4 needed: allowed with {more} more cycle(s) of history, or at "
            f"on_insufficient_history allow, or consecutive_cycles \u2264 {cycles - 1}"
        )

    def test_a_single_cycle_offers_only_allowing_short_histories(self) -> None:
        """One cycle: no consecutive_cycles (at least 1) is short enough; only the policy's
        on_insufficient_history allows."""
        halting = replace(DEFAULT, consecutive_cycles=3, on_insufficient_history="halt")
        reason = explained(halting, short_history(1))
        assert reason.detail["would_allow"] == [ALLOW_SHORT]
        assert reason.detail["would_allow_text"] == (
            "1 cycle(s) < 4 needed: allowed with 3 more cycle(s) of history, or at "
            "on_insufficient_history allow"
        )


class TestCusumAlternative:
    def test_a_collapse_from_the_history_offers_the_slack_and_the_canary(self) -> None:
        """A recomputed track: a slack at least the smallest recent log-ratio ends signal A."""
        reason = explained(CUSUM, narrowing())
        assert reason.code == "collapse_detected"
        assert [step["log_ratio"] for step in reason.detail["increments"]] == list(LOG_RATIOS)
        assert reason.detail["would_allow"] == [SLACK, CANARY_RAISED]
        assert reason.detail["would_allow_text"] == (
            "spread evidence 0.9 \u2265 threshold 0.9 and canary 0.49 < median 0.505: allowed at "
            "cusum.slack \u2265 2.985, or c \u2265 0.65"
        )

    def test_no_canary_under_the_cusum_test_offers_the_slack(self) -> None:
        """no_canary: the slack is the one policy value that allows without a canary."""
        reason = explained(CUSUM, narrowing(pinned=()))
        assert reason.code == "no_canary"
        assert reason.detail["would_allow"] == [SLACK]
        assert reason.detail["would_allow_text"] == (
            "spread evidence 0.9 \u2265 threshold 0.9 and no canary: allowed at cusum.slack "
            "\u2265 2.985; or pin a canary that holds its rank (then its rank is judged)"
        )

    def test_a_track_a_session_kept_offers_no_policy_value(self) -> None:
        """A session's accumulated track is not recomputed: only the canary's score allows."""
        reason = explained(CUSUM, narrowing(kept=True))
        assert reason.detail["accumulated"] == "session"
        assert reason.detail["would_allow"] == [CANARY_RAISED]
        assert reason.detail["would_allow_text"] == (
            "spread evidence 0.9 \u2265 threshold 0.9 and canary 0.49 < median 0.505: allowed at "
            "c \u2265 0.65"
        )

    def test_no_canary_with_a_kept_track_has_no_alternative(self) -> None:
        """no_canary on a session's track: no policy value allows; the sentence says so."""
        reason = explained(CUSUM, narrowing(pinned=(), kept=True))
        assert reason.detail["would_allow"] == []
        assert reason.detail["would_allow_text"] == (
            "spread evidence 0.9 \u2265 threshold 0.9 and no canary: allowed at no policy value; "
            "or pin a canary that holds its rank (then its rank is judged)"
        )

    def test_a_slack_below_one_is_offered(self) -> None:
        """The slack offered may be any value the schema allows from 0: here a hair above
        0.25, where the two increments 0.5 - slack of cycles narrowed by e^-0.5 no longer sum
        to the threshold 0.5 (slack 0, no prior)."""
        low = replace(CUSUM, cusum=CusumSettings(slack=0.0, threshold=0.5, prior_weight=0.0))
        half = 0.5 * math.exp(-0.5)
        wide, narrow = {"a": 0.0, "b": 1.0}, {"a": 0.5 - half, "b": 0.5 + half}
        reason = explained(low, cycles(wide, wide, narrow, narrow))
        [slack] = reason.detail["would_allow"]
        assert (slack["field"], slack["op"]) == ("spec.collapse.cusum.slack", ">=")
        assert slack["value"] == pytest.approx(0.25)
        assert reason.detail["would_allow_text"] == (
            f"spread evidence 0.5 \u2265 threshold 0.5 and no canary: allowed at cusum.slack "
            f"\u2265 0.25; {PIN_A_CANARY}"
        )

    def test_a_slack_above_the_schema_maximum_is_not_offered(self) -> None:
        """A log-ratio above 20 (scores on a wide range, then all alike) asks for a slack no
        policy may set: no alternative."""
        wide_range = replace(CUSUM, cusum=CusumSettings(prior_weight=0.0))
        wide, flat = {"a": 0.0, "b": 1600.0}, {"a": 5.0, "b": 5.0}
        reason = explained(wide_range, cycles(wide, wide, flat, flat))
        assert min(step["log_ratio"] for step in reason.detail["increments"]) == pytest.approx(
            math.log(800) - math.log(1e-6)
        )
        assert reason.detail["would_allow"] == []
        assert reason.detail["would_allow_text"] == (
            f"spread evidence 0.9 \u2265 threshold 0.9 and no canary: allowed at no policy value; "
            f"{PIN_A_CANARY}"
        )


class TestSpreadFloorAlternative:
    def test_spreads_of_zero_offer_a_floor_of_zero(self) -> None:
        """Every score alike (spread 0): a floor of exactly 0 ends signal A, and is offered."""
        wide, flat = {"a": 0.1, "b": 0.5, "c": 0.9}, {"a": 0.5, "b": 0.5, "c": 0.5}
        reason = explained(DEFAULT, cycles(wide, flat, flat))
        assert reason.code == "no_canary"
        assert reason.detail["would_allow"] == [
            {"field": "spec.collapse.spread_floor", "op": "<=", "value": 0.0}
        ]
        assert reason.detail["would_allow_text"] == (
            f"spread 0 < floor 0.08 for 2 cycles and no canary: allowed at spread_floor \u2264 0; "
            f"{PIN_A_CANARY}"
        )

    @pytest.mark.parametrize(
        ("top", "early", "said"),
        [(0.5, 0.25, "spread 0.0125 < floor 0.125"), (4.0, 2.0, "spread 0.1 < floor 1")],
    )
    def test_a_relative_floor_offers_the_factor_of_the_early_spread(
        self, top: float, early: float, said: str
    ) -> None:
        """Relative: the factor offered is the widest recent spread over the early spread (a
        twentieth here), whether the early spread is below 1 or above it (a wide score range)."""
        relative = replace(
            DEFAULT, spread_floor=0.5, spread_floor_mode="relative", relative_first_cycles=2
        )
        wide, narrow = {"a": 0.0, "b": top}, {"a": 0.0, "b": top / 20}
        reason = explained(relative, cycles(wide, wide, narrow, narrow))
        assert reason.detail["early_spread"] == early
        assert reason.detail["would_allow"] == [
            {"field": "spec.collapse.spread_floor", "op": "<=", "value": 0.05}
        ]
        assert reason.detail["would_allow_text"] == (
            f"{said} for 2 cycles and no canary: allowed at spread_floor \u2264 0.05; "
            f"{PIN_A_CANARY}"
        )


class TestTooFewEntries:
    @pytest.mark.parametrize(
        ("last", "said"),
        [({"a": 0.5}, "1 entry"), ({"a": 0.5, "b": 0.4}, "2 entries")],
    )
    def test_the_policy_values_that_judge_a_small_cycle(
        self, last: dict[str, float], said: str
    ) -> None:
        """Below min_live_entries: allowed at on_too_few_entries allow, or a minimum at most
        the entries scored."""
        halting = replace(DEFAULT, min_live_entries=3, on_too_few_entries="halt")
        wide = {"a": 0.1, "b": 0.5, "c": 0.9}
        reason = explained(halting, cycles(wide, wide, last))
        assert reason.detail["would_allow"] == [
            {"field": "spec.collapse.on_too_few_entries", "op": "==", "value": "allow"},
            {"field": "spec.collapse.min_live_entries", "op": "<=", "value": len(last)},
        ]
        assert reason.detail["would_allow_text"] == (
            f"{said} < 3: allowed at on_too_few_entries allow, or min_live_entries \u2264 "
            f"{len(last)}"
        )


class TestCanaryAlternative:
    def test_a_canary_below_a_median_above_its_margin_is_raised_to_the_median(self) -> None:
        """A canary within its margin of the baseline but below a higher median: the score
        offered is the median (0.81), not the margin's floor (0.65)."""
        wide, narrow = {"a": 0.1, "b": 0.5, "c": 0.9}, {"a": 0.8, "b": 0.82, "c": 0.78}
        history = tuple(Snapshot(i, s, ("c",)) for i, s in enumerate((wide, narrow, narrow), 1))
        reason = explained(DEFAULT, CollapseRequest(history, None))
        assert reason.detail["canary"]["signals"] == ["below_median"]
        assert reason.detail["would_allow"] == [
            {"field": "spec.collapse.spread_floor", "op": "<=", "value": 0.016329931618554488},
            {"field": "history[2].scores.c", "op": ">=", "value": 0.81},
        ]
        assert reason.detail["would_allow_text"] == (
            "spread 0.01633 < floor 0.08 for 2 cycles and canary 0.78 < median 0.81: allowed at "
            "spread_floor \u2264 0.01633, or c \u2265 0.81"
        )
