"""Counterfactuals are the smallest change that flips a refusal: for every alternative that
moves one number (a score, a threshold, a count), the value offered flips its reason, checked by
the real guard, and at the value one step closer to the request's own (one float ulp, or 1 for a
count) the guard refuses again. An interval's ends are each such an edge, unless the score
range clips them.

The requests and policies are the generated ones of test_would_allow.py; the runs are
derandomized. Alternatives that change several values together (``and``), flags and lists are
not numbers and have no step."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prunewarden._values import replace_value
from prunewarden.guards import GUARDS
from prunewarden.inputs import CollapseRequest, Snapshot, Turn
from prunewarden.policy import CusumSettings
from test_would_allow import (
    FIDELITY_CODES,
    SCALE,
    SPEC,
    Case,
    apply,
    apply_transition,
    collapse_cases,
    eviction_cases,
    fidelity_cases,
    fidelity_findings,
    judged,
    refusing_codes,
    staleness_cases,
)

MINIMAL = settings(max_examples=150 * SCALE, derandomize=True)
# The alternatives of one number, and which way "closer to the request" is for each operator.
_TOWARD = {">=": -math.inf, ">": -math.inf, "<=": math.inf, "<": math.inf}


def _step(value: float, toward: float) -> float:
    """One step from ``value`` toward ``toward``: 1 for a count, one ulp for a float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value + (1 if toward > 0 else -1)
    return math.nextafter(value, toward)


def _numeric(alternative: dict[str, Any]) -> bool:
    value = alternative["value"]
    if "and" in alternative:
        return False
    if alternative["op"] == "in":
        return True
    return alternative["op"] in _TOWARD and isinstance(value, int | float) and value is not True


def check_minimal(check: str, case: Case) -> int:
    """Every one-number alternative of every refusing reason is an edge; how many were held."""
    verdict = judged(check, case)
    assume(verdict.refused)
    held = 0
    for reason in verdict.reasons:
        for alternative in filter(_numeric, reason.detail["would_allow"]):
            for offered, closer in _edges(alternative):
                flipped = refusing_codes(check, apply(case, alternative, offered))
                assert reason.code not in flipped, (reason.code, alternative, offered)
                # One step short, something refuses again: the reason itself, or (a perturbed
                # score for a missing one) the instability it stood for.
                kept = refusing_codes(check, apply(case, alternative, closer))
                assert kept - flipped, (reason.code, alternative, closer)
                held += 1
    return held


def _edges(alternative: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(value offered, the value one step short of it) for each end of the alternative."""
    value = alternative["value"]
    if alternative["op"] != "in":
        return [(value, _step(value, _TOWARD[alternative["op"]]))]
    low, high = value
    ends = []
    if low > 0.0:  # the default score range starts at 0: a clipped end has no step outside
        ends.append((low, math.nextafter(low, -math.inf)))
    if high < 1.0:
        ends.append((high, math.nextafter(high, math.inf)))
    return ends


class TestMinimal:
    @MINIMAL
    @given(eviction_cases())
    def test_eviction_alternatives_are_edges(self, case: Case) -> None:
        """Stable intervals (both ends) and stability_delta."""
        check_minimal("eviction", case)

    @MINIMAL
    @given(staleness_cases())
    def test_staleness_alternatives_are_edges(self, case: Case) -> None:
        """drift_tolerance, drift_consecutive_turns, rewrite limits, invalidated scores."""
        check_minimal("staleness", case)

    @MINIMAL
    @given(collapse_cases(), st.sampled_from(["absolute", "relative", "cusum"]))
    def test_collapse_alternatives_are_edges(self, case: Case, mode: str) -> None:
        """spread_floor (each floor mode), cusum.slack, a canary's score, the counts of
        cycles and entries."""
        guard_settings, request = case
        guard_settings = replace(
            guard_settings,
            spread_floor_mode=mode,
            relative_first_cycles=2 if mode == "relative" else 0,
            cusum=CusumSettings() if mode == "cusum" else None,
        )
        check_minimal("collapse", (guard_settings, request))


@st.composite
def inflation_cases(draw: st.DrawFn) -> Case:
    """Turns whose tokens fall while the mean relevance moves: relevance_inflation often."""
    guard_settings, request = draw(staleness_cases())
    guard_settings = replace(
        guard_settings,
        drift_tolerance=draw(st.floats(0, 0.5)),
        drift_consecutive_turns=draw(st.integers(1, 3)),
    )
    means = draw(st.lists(st.floats(0.01, 1), min_size=2, max_size=6))
    turns = tuple(Turn(i, mean, 1000 - 10 * i) for i, mean in enumerate(means))
    return guard_settings, replace_value(request, turns=turns)


@st.composite
def canary_cases(draw: st.DrawFn) -> Case:
    """Histories whose last cycle's canary fell: the canary counts in the spread it fell in."""
    unit = st.floats(0, 1)
    guard_settings = replace(
        SPEC.collapse,
        spread_floor=draw(st.floats(0.01, 0.3)),
        consecutive_cycles=draw(st.integers(1, 2)),
        canary_margin=draw(st.floats(0.05, 0.5)),
    )
    ids = [f"e{i}" for i in range(draw(st.integers(2, 6)))]
    cycles = draw(st.integers(2, 4))
    history = tuple(
        Snapshot(
            cycle,
            {**{i: draw(unit) for i in ids}, "c": draw(unit)},
            ("c",),
        )
        for cycle in range(cycles)
    )
    return guard_settings, CollapseRequest(history, {"c": draw(st.floats(0.5, 1))})


class TestTargeted:
    @MINIMAL
    @given(inflation_cases())
    def test_drift_alternatives_are_edges(self, case: Case) -> None:
        """drift_tolerance and drift_consecutive_turns."""
        check_minimal("staleness", case)

    @MINIMAL
    @given(canary_cases())
    def test_canary_alternatives_are_edges(self, case: Case) -> None:
        """A fallen canary's score, alone, and the spread floor."""
        check_minimal("collapse", case)


class TestFidelityMinimal:
    @settings(max_examples=60 * SCALE, derandomize=True)
    @given(fidelity_cases())
    def test_fidelity_thresholds_are_edges(self, case: Case) -> None:
        """min_kept_share and embedding_floor: at the value offered the finding (code, parent,
        child) ends, one ulp past it it is back."""
        verdict = judged("transition", case)
        found = [r for r in verdict.reasons if r.code in FIDELITY_CODES]
        assume(verdict.refused and found)
        for reason in found:
            finding = (reason.code, reason.detail["parent"], reason.detail["child"])
            for alternative in filter(_numeric, reason.detail["would_allow"]):
                ((offered, closer),) = _edges(alternative)
                after = fidelity_findings(apply_transition(case, alternative))
                assert finding not in after, (finding, alternative)
                short = apply_transition(case, {**alternative, "value": closer})
                assert finding in fidelity_findings(short), (finding, alternative, closer)
                assert offered == alternative["value"]


class TestCanaryInTheSpread:
    """The canary counts in its own cycle's spread: raising it can end signal A before it holds
    its rank, and the score offered is the smaller of the two."""

    OTHERS: ClassVar[dict[str, float]] = {f"e{i}": 0.3 + 0.01 * i for i in range(8)}

    def request(self, canary: float) -> CollapseRequest:
        first = {**{k: 0.1 * i for i, k in enumerate(self.OTHERS)}, "task": 0.95}
        history = (
            Snapshot(1, first, ("task",)),
            Snapshot(2, {**self.OTHERS, "task": 0.5}, ("task",)),
            Snapshot(3, {**self.OTHERS, "task": canary}, ("task",)),
        )
        return CollapseRequest(history, None)

    def test_the_score_offered_is_the_smallest_that_allows(self) -> None:
        """Holding its rank needs 0.7 (baseline 0.95 less the margin 0.25); a spread over the
        floor 0.08 comes at about 0.58, and that is offered."""
        guard = GUARDS["collapse"]
        request = self.request(0.5)
        (reason,) = judged("collapse", (SPEC.collapse, request)).reasons
        assert reason.code == "collapse_detected"
        (raised,) = [c for c in reason.detail["would_allow"] if c["field"].endswith(".task")]
        assert raised["op"] == ">="
        assert 0.57 < raised["value"] < 0.59
        assert not guard.evaluate(SPEC.collapse, self.request(raised["value"])).refused
        closer = math.nextafter(raised["value"], 0.0)
        assert guard.evaluate(SPEC.collapse, self.request(closer)).refused
        assert f"task \u2265 {raised['value']:.4g}" in reason.detail["would_allow_text"]
