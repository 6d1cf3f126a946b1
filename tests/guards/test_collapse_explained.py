"""What an explained collapse refusal offers, exactly: which alternatives (field, operator, value)
and the sentence, for a short history and for the cusum spread test. The property tests
(test_would_allow.py) show that each alternative offered flips the halt; these pin that the
alternatives are offered at all, since an explainer that fails is swallowed and leaves none."""

from __future__ import annotations

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
# ln(R / s) of the two narrow cycles: the slack that ends signal A is the smaller, the first.
LOG_RATIOS = (3.434894978066094, 3.4983910970780543)
SLACK = {"field": "spec.collapse.cusum.slack", "op": ">=", "value": LOG_RATIOS[0]}
CANARY_RAISED = {"field": "history[3].scores.c", "op": ">=", "value": 0.65}


def explained(settings: CollapseSettings, request: CollapseRequest) -> Reason:
    """The collapse guard's one (refusing) reason for ``request``, explained."""
    verdict = GUARD.explain(settings, request, GUARD.evaluate(settings, request))
    assert verdict.refused
    [reason] = verdict.reasons
    return reason


def short_history(cycles: int) -> CollapseRequest:
    history = tuple(Snapshot(cycle, WIDE, ()) for cycle in range(1, cycles + 1))
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
            "cusum.slack \u2265 3.435, or c \u2265 0.65"
        )

    def test_no_canary_under_the_cusum_test_offers_the_slack(self) -> None:
        """no_canary: the slack is the one policy value that allows without a canary."""
        reason = explained(CUSUM, narrowing(pinned=()))
        assert reason.code == "no_canary"
        assert reason.detail["would_allow"] == [SLACK]
        assert reason.detail["would_allow_text"] == (
            "spread evidence 0.9 \u2265 threshold 0.9 and no canary: allowed at cusum.slack "
            "\u2265 3.435; or pin a canary that holds its rank (then its rank is judged)"
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
