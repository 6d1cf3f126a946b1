"""The collapse guard: halt only when the spread collapsed *and* a pinned canary inverted.

Boundary values are exact in binary floating point (0.125, 0.375, 0.5, ...), so a boundary test
really sits at equality: a population standard deviation of ``{0.375, 0.625}`` is exactly 0.125.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from prunewarden import (
    Decision,
    Engine,
    InputError,
    RefusedError,
    RelevanceCollapseError,
    parse_policy,
)

EngineFactory = Callable[..., Engine]

HALT_ACTIONS = ["halt_pruning", "freeze_buffer", "escalate"]
WIDE = {"c": 0.5, "x": 0.125, "y": 0.875}  # population sd well above any floor used here
FLAT = {"c": 0.5, "x": 0.5, "y": 0.5}  # population sd 0


def snap(cycle: int, scores: Mapping[str, float], pinned: Sequence[str] = ()) -> dict[str, Any]:
    return {"cycle": cycle, "scores": dict(scores), "pinned": list(pinned)}


def collapsed(
    last: Mapping[str, float], pinned: Sequence[str] = ("c",), first: Mapping[str, float] = WIDE
) -> list[dict[str, Any]]:
    """A wide first cycle (the default baseline), then two cycles holding ``last``."""
    return [snap(1, first, pinned), snap(2, last, pinned), snap(3, last, pinned)]


def action_names(decision: Decision) -> list[str]:
    return [action.action for action in decision.actions]


def primary_detail(decision: Decision) -> dict[str, Any]:
    return decision.reasons[0].detail


class TestInsufficientHistory:
    @pytest.mark.parametrize("cycles", [0, 1, 2])
    def test_short_history_allows_by_default(self, engine: Engine, cycles: int) -> None:
        """Fewer than consecutive_cycles + 1 snapshots allow with insufficient_history."""
        history = [snap(i, FLAT, ["c"]) for i in range(1, cycles + 1)]
        decision = engine.detect_collapse(history)
        assert decision.outcome == "allow"
        assert decision.enforced is True
        assert decision.codes == ("insufficient_history",)
        assert action_names(decision) == []
        assert primary_detail(decision) == {"cycles": cycles, "required": 3}

    def test_seed_prune_single_snapshot_is_a_decision(self, engine: Engine) -> None:
        """One snapshot (what seed 000's prune() passed) is a decision, not an exception."""
        decision = engine.detect_collapse([snap(7, {"c": 0.125, "x": 0.5}, ["c"])], baseline={})
        assert decision.outcome == "allow"
        assert decision.codes == ("insufficient_history",)

    def test_halt_policy_halts_on_short_history(self, engine_with: EngineFactory) -> None:
        """on_insufficient_history: halt refuses a short history with the halt actions."""
        guarded = engine_with(collapse={"on_insufficient_history": "halt"})
        history = [snap(1, WIDE, ["c"]), snap(2, WIDE, ["c"])]
        decision = guarded.detect_collapse(history)
        assert decision.outcome == "halt"
        assert decision.enforced is True
        assert decision.codes == ("insufficient_history",)
        assert action_names(decision) == HALT_ACTIONS
        with pytest.raises(RelevanceCollapseError) as raised:
            guarded.enforce({"check": "collapse", "history": history})
        assert raised.value.decision.codes == ("insufficient_history",)

    def test_halt_policy_does_not_halt_a_long_enough_history(
        self, engine_with: EngineFactory
    ) -> None:
        """on_insufficient_history only applies when the history is actually short."""
        guarded = engine_with(collapse={"on_insufficient_history": "halt"})
        decision = guarded.detect_collapse([snap(i, WIDE, ["c"]) for i in (1, 2, 3)])
        assert decision.outcome == "allow"
        assert decision.codes == ("spread_healthy",)

    def test_exactly_required_history_is_evaluated(self, engine: Engine) -> None:
        """consecutive_cycles + 1 snapshots are enough to evaluate the signals."""
        decision = engine.detect_collapse([snap(i, WIDE, ["c"]) for i in (1, 2, 3)])
        assert decision.codes == ("spread_healthy",)

    def test_consecutive_cycles_sets_required_history(self, engine_with: EngineFactory) -> None:
        """consecutive_cycles: 3 needs four snapshots."""
        guarded = engine_with(collapse={"consecutive_cycles": 3})
        history = [snap(1, WIDE, ["c"]), *(snap(i, FLAT, []) for i in (2, 3, 4))]
        short = guarded.detect_collapse(history[:3])
        assert short.codes == ("insufficient_history",)
        assert primary_detail(short) == {"cycles": 3, "required": 4}
        assert guarded.detect_collapse(history).codes == ("no_canary",)


class TestSpreadSignal:
    def test_wide_spread_allows(self, engine: Engine) -> None:
        """Not signal A: spread at or above the floor allows with spread_healthy."""
        decision = engine.detect_collapse([snap(i, WIDE, ["c"]) for i in (1, 2, 3)])
        assert decision.outcome == "allow"
        assert decision.codes == ("spread_healthy",)
        assert action_names(decision) == []
        detail = primary_detail(decision)
        assert detail["spread_floor"] == 0.08
        assert [s["cycle"] for s in detail["spreads"]] == [2, 3]

    def test_spread_equal_to_floor_is_healthy(self, engine_with: EngineFactory) -> None:
        """The floor test is strict: a spread exactly at spread_floor is not a collapse."""
        guarded = engine_with(collapse={"spread_floor": 0.125})
        at_floor = {"a": 0.375, "b": 0.625}  # population sd exactly 0.125
        decision = guarded.detect_collapse(collapsed(at_floor, pinned=()))
        assert decision.codes == ("spread_healthy",)
        assert primary_detail(decision)["spreads"] == [
            {"cycle": 2, "spread": 0.125},
            {"cycle": 3, "spread": 0.125},
        ]

    def test_spread_below_a_raised_floor_collapses(self, engine_with: EngineFactory) -> None:
        """Raising spread_floor above the same spread turns signal A on (here: no_canary)."""
        guarded = engine_with(collapse={"spread_floor": 0.1875})
        decision = guarded.detect_collapse(collapsed({"a": 0.375, "b": 0.625}, pinned=()))
        assert decision.outcome == "halt"
        assert decision.codes == ("no_canary",)

    def test_lowered_floor_turns_a_collapse_into_healthy(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """The same inverted history halts under the default floor and allows under a lower one."""
        history = collapsed({"c": 0.4375, "x": 0.5, "y": 0.5})
        assert engine.detect_collapse(history).outcome == "halt"
        lowered = engine_with(collapse={"spread_floor": 0.015625})
        decision = lowered.detect_collapse(history)
        assert decision.outcome == "allow"
        assert decision.codes == ("spread_healthy",)

    def test_one_collapsed_cycle_is_not_enough(self, engine: Engine) -> None:
        """Signal A needs the spread below the floor in each of the last consecutive_cycles."""
        inverted = {"c": 0.125, "x": 0.125, "y": 0.125}
        history = [snap(1, WIDE, ["c"]), snap(2, WIDE, ["c"]), snap(3, inverted, ["c"])]
        assert engine.detect_collapse(history).codes == ("spread_healthy",)

    def test_earlier_collapse_followed_by_recovery_is_healthy(self, engine: Engine) -> None:
        """Only the most recent consecutive_cycles snapshots count."""
        history = [
            snap(1, WIDE, ["c"]),
            snap(2, FLAT, ["c"]),
            snap(3, FLAT, ["c"]),
            snap(4, WIDE, ["c"]),
        ]
        assert engine.detect_collapse(history).codes == ("spread_healthy",)

    def test_spread_includes_pinned_scores(self, engine: Engine) -> None:
        """The spread is over all scores, pinned included: a high canary keeps it open."""
        last = {"c": 1.0, "x": 0.5, "y": 0.5, "z": 0.5}  # sd 0.2165; without c it would be 0
        decision = engine.detect_collapse(collapsed(last, first={"c": 1.0, "x": 0.5}))
        assert decision.codes == ("spread_healthy",)
        spreads = [s["spread"] for s in primary_detail(decision)["spreads"]]
        assert spreads == [pytest.approx(statistics.pstdev(last.values()))] * 2

    def test_single_consecutive_cycle_policy(self, engine_with: EngineFactory) -> None:
        """consecutive_cycles: 1 decides on the last snapshot with two cycles of history."""
        guarded = engine_with(collapse={"consecutive_cycles": 1})
        decision = guarded.detect_collapse([snap(1, WIDE), snap(2, FLAT)])
        assert decision.outcome == "halt"
        assert decision.codes == ("no_canary",)
        assert [s["cycle"] for s in primary_detail(decision)["spreads"]] == [2]


class TestCanaryValidity:
    def test_no_pinned_entry_halts(self, engine: Engine) -> None:
        """Signal A with no pinned id in the last snapshot halts with no_canary."""
        decision = engine.detect_collapse(collapsed(FLAT, pinned=()))
        assert decision.outcome == "halt"
        assert decision.codes == ("no_canary",)
        assert action_names(decision) == HALT_ACTIONS

    def test_canary_pinned_only_earlier_does_not_count(self, engine: Engine) -> None:
        """Only the last snapshot's pinned ids are canaries (seed 000 returned False here)."""
        history = [snap(1, WIDE, ["c"]), snap(2, FLAT, ["c"]), snap(3, FLAT, [])]
        assert engine.detect_collapse(history).codes == ("no_canary",)

    def test_canary_missing_from_last_scores_halts(self, engine: Engine) -> None:
        """A pinned id without a score in the last snapshot halts with canary_missing."""
        history = [snap(1, WIDE, ["c"]), snap(2, FLAT, ["c"]), snap(3, {"x": 0.5, "y": 0.5}, ["c"])]
        decision = engine.detect_collapse(history)
        assert decision.outcome == "halt"
        assert decision.codes == ("canary_missing",)
        assert action_names(decision) == HALT_ACTIONS
        assert primary_detail(decision)["missing"] == ["c"]

    def test_canary_missing_from_explicit_baseline_halts(self, engine: Engine) -> None:
        """A pinned id absent from the given baseline cannot be audited: canary_missing."""
        decision = engine.detect_collapse(collapsed(FLAT), baseline={"x": 0.5})
        assert decision.outcome == "halt"
        assert decision.codes == ("canary_missing",)
        assert primary_detail(decision)["missing"] == ["c"]

    def test_canary_missing_from_default_baseline_halts(self, engine: Engine) -> None:
        """A pinned id absent from the earliest snapshot (the default baseline) halts."""
        decision = engine.detect_collapse(collapsed(FLAT, first={"x": 0.125, "y": 0.875}))
        assert decision.codes == ("canary_missing",)

    def test_only_missing_canaries_are_listed(self, engine: Engine) -> None:
        """The detail lists exactly the pinned ids that cannot be audited."""
        last = {"c": 0.5, "x": 0.5, "y": 0.5}
        history = collapsed(last, pinned=("c", "d", "e"), first={**WIDE, "e": 0.5})
        decision = engine.detect_collapse(history)
        assert decision.codes == ("canary_missing",)
        assert primary_detail(decision)["missing"] == ["d", "e"]

    def test_validity_is_not_checked_while_spread_is_healthy(self, engine: Engine) -> None:
        """Without signal A there is nothing to audit: a missing canary still allows."""
        history = [
            snap(1, WIDE, ["c"]),
            snap(2, WIDE, ["c"]),
            snap(3, {"x": 0.125, "y": 0.875}, ["c"]),
        ]
        assert engine.detect_collapse(history).codes == ("spread_healthy",)


class TestCanaryInversion:
    def test_canary_at_median_is_healthy(self, engine: Engine) -> None:
        """The median test is strict: a canary equal to the median does not invert."""
        decision = engine.detect_collapse(collapsed(FLAT))
        assert decision.outcome == "allow"
        assert decision.codes == ("canary_healthy",)
        assert primary_detail(decision)["median"] == 0.5
        assert action_names(decision) == []

    def test_canary_below_median_halts(self, engine: Engine) -> None:
        """A canary below the median of the non-pinned scores is signal B."""
        last = {"c": 0.4375, "x": 0.5, "y": 0.5}
        decision = engine.detect_collapse(collapsed(last, first={**WIDE, "c": 0.4375}))
        assert decision.outcome == "halt"
        assert decision.codes == ("collapse_detected",)
        assert action_names(decision) == HALT_ACTIONS
        assert primary_detail(decision)["canary"] == {
            "id": "c",
            "score": 0.4375,
            "baseline": 0.4375,
            "signals": ["below_median"],
        }

    def test_drop_equal_to_margin_is_healthy(self, engine: Engine) -> None:
        """The margin test is strict: a drop of exactly canary_margin (0.75 -> 0.5) is healthy."""
        decision = engine.detect_collapse(collapsed(FLAT, first={**WIDE, "c": 0.75}))
        assert decision.codes == ("canary_healthy",)

    def test_drop_beyond_margin_halts(self, engine: Engine) -> None:
        """baseline - score > canary_margin (0.875 -> 0.5) is signal B."""
        decision = engine.detect_collapse(collapsed(FLAT, first={**WIDE, "c": 0.875}))
        assert decision.outcome == "halt"
        assert decision.codes == ("collapse_detected",)
        assert primary_detail(decision)["canary"]["signals"] == ["dropped_by_margin"]

    def test_policy_margin_changes_the_decision(
        self, engine: Engine, engine_with: EngineFactory
    ) -> None:
        """A drop of 0.25 is healthy at the default margin and a collapse at margin 0.125."""
        history = collapsed(FLAT, first={**WIDE, "c": 0.75})
        assert engine.detect_collapse(history).outcome == "allow"
        tightened = engine_with(collapse={"canary_margin": 0.125})
        decision = tightened.detect_collapse(history)
        assert decision.outcome == "halt"
        assert decision.codes == ("collapse_detected",)

    def test_both_sub_signals_are_named(self, engine: Engine) -> None:
        """A canary both below the median and dropped by the margin names both sub-signals."""
        last = {"c": 0.4375, "x": 0.5, "y": 0.5}
        decision = engine.detect_collapse(collapsed(last, first={**WIDE, "c": 0.875}))
        assert primary_detail(decision)["canary"]["signals"] == [
            "below_median",
            "dropped_by_margin",
        ]

    def test_median_excludes_pinned_scores(self, engine: Engine) -> None:
        """The median is over non-pinned scores only (all scores would give 0.5, not 0.53125)."""
        last = {"c": 0.5, "d": 0.5, "x": 0.5, "y": 0.5625}
        decision = engine.detect_collapse(collapsed(last, pinned=("c", "d"), first=last))
        assert decision.outcome == "halt"
        assert decision.codes == ("collapse_detected",)
        detail = primary_detail(decision)
        assert detail["median"] == 0.53125
        assert detail["canary"]["signals"] == ["below_median"]

    def test_only_pinned_snapshot_uses_margin_test(self, engine: Engine) -> None:
        """With no non-pinned score there is no median; only the margin test applies."""
        last = {"c": 0.5, "d": 0.5}
        healthy = engine.detect_collapse(collapsed(last, pinned=("c", "d"), first=last))
        assert healthy.codes == ("canary_healthy",)
        assert primary_detail(healthy)["median"] is None
        dropped = engine.detect_collapse(
            collapsed(last, pinned=("c", "d"), first={"c": 0.875, "d": 0.5})
        )
        assert dropped.outcome == "halt"
        assert primary_detail(dropped)["median"] is None
        assert primary_detail(dropped)["canary"] == {
            "id": "c",
            "score": 0.5,
            "baseline": 0.875,
            "signals": ["dropped_by_margin"],
        }

    def test_first_inverted_canary_is_named(self, engine: Engine) -> None:
        """The detail's canary is the first inverted pinned id; canaries lists every one."""
        last = {"c": 0.5, "d": 0.4375, "e": 0.4375, "x": 0.5, "y": 0.5}
        decision = engine.detect_collapse(
            collapsed(last, pinned=("c", "d", "e"), first={**last, "e": 0.875})
        )
        detail = primary_detail(decision)
        assert detail["canary"]["id"] == "d"
        assert [c["id"] for c in detail["canaries"]] == ["d", "e"]
        assert detail["canaries"][1]["signals"] == ["below_median", "dropped_by_margin"]

    def test_halt_detail_carries_spreads(self, engine: Engine) -> None:
        """collapse_detected names the spreads and the floor that signal A used."""
        decision = engine.detect_collapse(collapsed(FLAT, first={**WIDE, "c": 0.875}))
        detail = primary_detail(decision)
        assert detail["spreads"] == [{"cycle": 2, "spread": 0.0}, {"cycle": 3, "spread": 0.0}]
        assert detail["spread_floor"] == 0.08
        assert detail["median"] == 0.5


class TestBaseline:
    def history(self) -> list[dict[str, Any]]:
        return [
            snap(1, {"c": 0.875, "x": 0.125}, ["c"]),
            snap(2, {"c": 0.625, "x": 0.125}, ["c"]),
            snap(3, FLAT, ["c"]),
            snap(4, FLAT, ["c"]),
        ]

    def test_default_baseline_is_earliest_snapshot(self, engine: Engine) -> None:
        """Without a baseline the earliest snapshot's scores are the reference (0.875 here)."""
        decision = engine.detect_collapse(self.history())
        assert decision.codes == ("collapse_detected",)
        assert primary_detail(decision)["canary"]["baseline"] == 0.875

    def test_explicit_baseline_replaces_the_default(self, engine: Engine) -> None:
        """A given baseline is used instead of the earliest snapshot."""
        decision = engine.detect_collapse(self.history(), baseline={"c": 0.625})
        assert decision.codes == ("canary_healthy",)

    def test_an_empty_baseline_is_no_reference_not_the_default(self, engine: Engine) -> None:
        """baseline: {} states that no canary has a reference score: every pinned canary is
        missing its baseline (canary_missing, a halt), never a silent fall back to the earliest
        snapshot."""
        for decision in (
            engine.detect_collapse(self.history(), baseline={}),
            engine.evaluate({"check": "collapse", "history": self.history(), "baseline": {}}),
        ):
            assert decision.outcome == "halt"
            assert decision.codes == ("canary_missing",)
            assert primary_detail(decision)["missing"] == ["c"]

    def test_baseline_through_evaluate(self, engine: Engine) -> None:
        """evaluate() takes the same baseline as detect_collapse()."""
        document = {"check": "collapse", "history": self.history(), "baseline": {"c": 0.625}}
        assert engine.evaluate(document).codes == ("canary_healthy",)


class TestModes:
    def test_enforce_raises_with_the_decision(self, engine: Engine) -> None:
        """enforce() raises RelevanceCollapseError carrying the halting decision."""
        document = {"check": "collapse", "history": collapsed(FLAT, pinned=())}
        with pytest.raises(RelevanceCollapseError) as raised:
            engine.enforce(document)
        assert isinstance(raised.value, RefusedError)
        assert raised.value.decision.outcome == "halt"
        assert raised.value.decision.codes == ("no_canary",)
        assert raised.value.exit_code == 1

    def test_enforce_returns_an_allowing_decision(self, engine: Engine) -> None:
        """enforce() returns the decision when the guard allows."""
        decision = engine.enforce({"check": "collapse", "history": collapsed(FLAT)})
        assert decision.outcome == "allow"
        assert decision.codes == ("canary_healthy",)

    def test_audit_reports_the_verdict_without_enforcing(self, engine_with: EngineFactory) -> None:
        """audit keeps the halt verdict, sets enforced False, and enforce() does not raise."""
        audited = engine_with(collapse={"mode": "audit"})
        document = {"check": "collapse", "history": collapsed(FLAT, first={**WIDE, "c": 0.875})}
        decision = audited.enforce(document)
        assert decision.outcome == "halt"
        assert decision.enforced is False
        assert decision.blocks is False
        assert decision.codes == ("collapse_detected",)
        assert action_names(decision) == HALT_ACTIONS

    def test_off_allows_with_check_disabled(self, engine_with: EngineFactory) -> None:
        """off allows every request with reason check_disabled."""
        disabled = engine_with(collapse={"mode": "off"})
        decision = disabled.enforce({"check": "collapse", "history": collapsed(FLAT, pinned=())})
        assert decision.outcome == "allow"
        assert decision.enforced is False
        assert decision.codes == ("check_disabled",)
        assert action_names(decision) == []

    def test_off_still_rejects_malformed_input(self, engine_with: EngineFactory) -> None:
        """A disabled guard does not turn a malformed document into a decision."""
        disabled = engine_with(collapse={"mode": "off"})
        with pytest.raises(InputError):
            disabled.detect_collapse([snap(1, {"a": 2.0})])

    def test_other_guards_modes_do_not_leak(self, engine_with: EngineFactory) -> None:
        """Turning the eviction and staleness guards off leaves collapse enforcing."""
        guarded = engine_with(eviction={"mode": "off"}, staleness={"mode": "audit"})
        with pytest.raises(RelevanceCollapseError):
            guarded.enforce({"check": "collapse", "history": collapsed(FLAT, pinned=())})

    def test_decision_names_the_policy(self) -> None:
        """A decision carries the identity of the policy that made it."""
        policy = parse_policy(
            "apiVersion: prunewarden/v1\nkind: Policy\n"
            "metadata: {name: tight-collapse, version: 2.3.0}\n"
            "spec:\n  collapse:\n    canary_margin: 0.125\n"
        )
        decision = Engine(policy).detect_collapse(collapsed(FLAT, first={**WIDE, "c": 0.75}))
        assert decision.outcome == "halt"
        assert decision.check == "collapse"
        assert decision.policy.name == "tight-collapse"
        assert decision.policy.version == "2.3.0"
        assert decision.policy.digest == policy.digest


class TestIntegralPolicyNumbers:
    def test_integral_float_consecutive_cycles_behaves_like_the_integer(
        self, engine_with: EngineFactory
    ) -> None:
        """consecutive_cycles: 2.0 (an integer to JSON Schema) decides like 2, not an error."""
        history = collapsed(FLAT, first={**WIDE, "c": 0.875})
        decision = engine_with(collapse={"consecutive_cycles": 2.0}).detect_collapse(history)
        assert decision.codes == ("collapse_detected",)


# Seed 000, "What Was Observed": 2 pinned load-bearing entries drift 0.9 -> 0.6 while 30 noise
# entries drift from 0.10-0.30 toward 0.5 and four working entries from 0.55-0.95 toward 0.55.
SEED_CANARY = [0.9, 0.84, 0.78, 0.7, 0.6, 0.6]
SEED_PINNED = ["task-statement", "utc-constraint"]


def seed_000_history(canary: Sequence[float] = SEED_CANARY) -> list[dict[str, Any]]:
    history = []
    noise = [0.10 + 0.2 * i / 29 for i in range(30)]
    working = [0.55, 0.65, 0.8, 0.95]
    for cycle, canary_score in enumerate(canary, start=1):
        t = (cycle - 1) / (len(canary) - 1)
        scores = dict.fromkeys(SEED_PINNED, canary_score)
        scores.update({f"noise-{i:02d}": round(n + (0.5 - n) * t, 3) for i, n in enumerate(noise)})
        scores.update({f"work-{i}": round(w + (0.55 - w) * t, 3) for i, w in enumerate(working)})
        history.append(snap(cycle, scores, SEED_PINNED))
    return history


class TestSeed000Narrative:
    def test_the_fixture_narrows_as_observed(self) -> None:
        """The seed history goes from a 0.1-0.95 range to a spread below 0.08 in the last two."""
        spreads = [statistics.pstdev(s["scores"].values()) for s in seed_000_history()]
        first = seed_000_history()[0]["scores"].values()
        assert (min(first), max(first)) == (0.1, 0.95)
        assert [s < 0.08 for s in spreads] == [False, False, False, False, True, True]

    def test_halts_at_the_right_cycle_not_earlier(self, engine: Engine) -> None:
        """Cycle by cycle: insufficient, then healthy spreads, then the halt at cycle 6 only."""
        history = seed_000_history()
        codes = [engine.detect_collapse(history[:n]).codes[0] for n in range(1, 7)]
        assert codes == [
            "insufficient_history",
            "insufficient_history",  # cycles 1-2
            "spread_healthy",
            "spread_healthy",  # cycles 3-4: spread still above 0.08
            "spread_healthy",  # cycle 5: canary already dropped 0.3, spread low once only
            "collapse_detected",  # cycle 6: both signals, together
        ]

    def test_halt_names_the_canary_and_the_margin(self, engine: Engine) -> None:
        """At cycle 6 the task statement dropped 0.9 -> 0.6, past the 0.25 margin."""
        decision = engine.detect_collapse(seed_000_history())
        assert decision.outcome == "halt"
        assert decision.enforced is True
        assert action_names(decision) == HALT_ACTIONS
        detail = primary_detail(decision)
        assert detail["canary"]["id"] == "task-statement"
        assert detail["canary"]["signals"] == ["dropped_by_margin"]
        assert detail["canary"]["baseline"] == 0.9
        assert [c["id"] for c in detail["canaries"]] == SEED_PINNED
        assert [s["cycle"] for s in detail["spreads"]] == [5, 6]
        assert all(s["spread"] < 0.08 for s in detail["spreads"])

    def test_a_canary_holding_its_score_keeps_the_spread_open(self, engine: Engine) -> None:
        """Healthy counterpart: the same noise drift with the canaries at 0.9 never halts."""
        history = seed_000_history(canary=[0.9] * 6)
        assert engine.detect_collapse(history).codes == ("spread_healthy",)

    def test_homogeneous_buffer_is_benign_compression(self, engine: Engine) -> None:
        """Healthy counterpart: signal A alone (canary above the median, no drop) allows."""
        history = seed_000_history(canary=[0.6] * 6)
        decision = engine.detect_collapse(history)
        assert decision.outcome == "allow"
        assert decision.codes == ("canary_healthy",)

    def test_a_single_low_score_is_degradation(self, engine: Engine) -> None:
        """Signal B alone (one bad scoring call under a wide spread) allows."""
        history = [snap(1, WIDE, ["c"]), snap(2, WIDE, ["c"]), snap(3, {**WIDE, "c": 0.125}, ["c"])]
        assert engine.detect_collapse(history).codes == ("spread_healthy",)

    def test_a_window_without_the_cycle_one_baseline_needs_it_given(self, engine: Engine) -> None:
        """Given only cycles 4-6, the cycle-1 baseline must be passed to see the drop."""
        window = seed_000_history()[3:]
        assert engine.detect_collapse(window).codes == ("canary_healthy",)
        baseline = dict.fromkeys(SEED_PINNED, 0.9)
        assert engine.detect_collapse(window, baseline=baseline).codes == ("collapse_detected",)


class TestInputErrors:
    def paths(self, raised: pytest.ExceptionInfo[InputError]) -> list[str]:
        return [problem.path for problem in raised.value.problems]

    @pytest.mark.parametrize("second", [1, 0])
    def test_cycles_must_increase(self, engine: Engine, second: int) -> None:
        """A repeated or decreasing cycle is an input error at $.history[1].cycle."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, WIDE), snap(second, WIDE), snap(5, WIDE)])
        assert self.paths(raised) == ["$.history[1].cycle"]
        assert raised.value.exit_code == 2

    @pytest.mark.parametrize("value", [1.5, -0.125])
    def test_score_outside_policy_range(self, engine: Engine, value: float) -> None:
        """A score outside spec.scores is an input error naming its path."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, {"a": 0.5, "b": value})])
        assert self.paths(raised) == ["$.history[0].scores.b"]

    def test_baseline_outside_policy_range(self, engine: Engine) -> None:
        """A baseline score outside spec.scores is an input error."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, WIDE)], baseline={"c": 1.25})
        assert self.paths(raised) == ["$.baseline.c"]

    def test_policy_score_range_is_used(self, engine_with: EngineFactory) -> None:
        """A policy with scores 0-100 accepts 42 where the default rejects it."""
        wide_range = engine_with(scores={"min": 0, "max": 100})
        decision = wide_range.detect_collapse([snap(1, {"a": 42})])
        assert decision.codes == ("insufficient_history",)

    @pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
    def test_non_finite_scores(self, engine: Engine, value: float) -> None:
        """NaN and infinite scores are input errors, not decisions."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, {"a": 0.5}), snap(2, {"a": value})])
        assert self.paths(raised) == ["$.history[1].scores.a"]

    def test_non_finite_baseline(self, engine: Engine) -> None:
        """A NaN baseline is an input error."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, WIDE)], baseline={"c": math.nan})
        assert self.paths(raised) == ["$.baseline.c"]

    def test_boolean_score(self, engine: Engine) -> None:
        """A boolean is not a score."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, {"a": True})])
        assert self.paths(raised) == ["$.history[0].scores.a"]

    def test_boolean_cycle(self, engine: Engine) -> None:
        """A boolean is not a cycle number."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([{"cycle": True, "scores": {"a": 0.5}}])
        assert self.paths(raised) == ["$.history[0].cycle"]

    def test_huge_integer_score(self, engine: Engine) -> None:
        """An integer too large for a float is an input error, not an OverflowError."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, {"a": 10**400})])
        assert self.paths(raised) == ["$.history[0].scores.a"]

    def test_duplicate_pinned_ids(self, engine: Engine) -> None:
        """A pinned id listed twice is an input error."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([snap(1, WIDE, ["c", "c"])])
        assert self.paths(raised) == ["$.history[0].pinned"]

    def test_unknown_snapshot_field(self, engine: Engine) -> None:
        """An unknown field in a snapshot is an input error at that field."""
        with pytest.raises(InputError) as raised:
            engine.detect_collapse([{**snap(1, WIDE), "weights": {}}])
        assert self.paths(raised) == ["$.history[0].weights"]
        assert "unknown field 'weights'" in raised.value.problems[0].message

    def test_unknown_top_level_field(self, engine: Engine) -> None:
        """An unknown top-level field is an input error."""
        with pytest.raises(InputError) as raised:
            engine.evaluate({"check": "collapse", "history": [], "threshold": 0.5})
        assert self.paths(raised) == ["$.threshold"]

    def test_unknown_check(self, engine: Engine) -> None:
        """An unknown check is an input error at $.check."""
        with pytest.raises(InputError) as raised:
            engine.evaluate({"check": "entropy", "history": []})
        assert self.paths(raised) == ["$.check"]

    def test_every_problem_is_reported(self, engine: Engine) -> None:
        """All problems of a document are reported together, sorted."""
        history = [snap(3, {"a": 1.5}), snap(2, {"a": 0.5, "b": -1.0})]
        with pytest.raises(InputError) as raised:
            engine.detect_collapse(history, baseline={"a": 7.0})
        assert self.paths(raised) == [
            "$.baseline.a",
            "$.history[0].scores.a",
            "$.history[1].cycle",
            "$.history[1].scores.b",
        ]
