"""The cusum test's tracking reference and the canary held over cycles: a reference that follows
healthy drift without following a collapse, and no single cycle (spread or canary) that halts.

Spreads are built as in test_collapse_cusum.py: a canary ``c`` and two entries at ``0.5 -/+ d``
(the canary just above or below their median, 0.5, barely moves the spread, and alike).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prunewarden import Engine, Policy, PolicyError, parse_policy
from prunewarden._cusum import CusumParameters, replay, tracks
from prunewarden.guards import GUARDS
from prunewarden.inputs import CollapseRequest, Snapshot

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
HELD, INVERTED = 0.55, 0.45

EARLY = {"first_cycles": 3, "prior_log_spread": -1.5, "prior_weight": 0}
TRACKING = {**EARLY, "mode": "tracking", "rate": 0.2}


def policy(reference: dict[str, Any], **collapse: Any) -> Policy:
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "tracking", "version": "1.0.0"},
        "spec": {
            "collapse": {
                "spread_floor_mode": "cusum",
                "consecutive_cycles": 2,
                "cusum": {"slack": 0.4, "threshold": 0.9, "reference": reference},
                **collapse,
            }
        },
    }
    return parse_policy(json.dumps(document), "<tracking-policy>")


TRACKING_POLICY = policy(TRACKING, canary_cycles=2)
EARLY_POLICY = policy(EARLY)


def parameters(mode: str = "tracking", rate: float = 0.2) -> CusumParameters:
    return CusumParameters(2, 0.4, 0.9, 3, -1.5, 0.0, mode, rate if mode == "tracking" else 0.0)


def cycles(spreads: Sequence[float]) -> list[tuple[int, float, bool]]:
    return [(i, s, True) for i, s in enumerate(spreads, start=1)]


def drifting(start: float, per_cycle: float, count: int) -> list[float]:
    return [start * math.exp(per_cycle * i) for i in range(count)]


def cycle(number: int, width: float, canary: float = HELD) -> dict[str, Any]:
    scores = {"c": canary, "x": 0.5 - width, "y": 0.5 + width}
    return {"cycle": number, "scores": scores, "pinned": ["c"]}


def halts(engine: Engine, history: Sequence[dict[str, Any]]) -> list[int]:
    """The cycles a session halts at."""
    session = engine.session("s")
    return [
        c["cycle"]
        for c in history
        if session.observe_cycle(c["scores"], c["pinned"]).outcome == "halt"
    ]


class TestTrackingArithmetic:
    def test_a_slow_healthy_drift_adds_evidence_to_the_early_reference_only(self) -> None:
        """Spreads narrowing 3% a cycle for 80 cycles: the early reference halts the drift,
        the tracking one follows it and its sum never leaves 0."""
        spreads = cycles(drifting(0.3, -0.03, 80))
        assert replay(parameters("early"), spreads).signal(parameters("early")) is True
        assert all(t.total == 0.0 for t in tracks(parameters(), spreads))
        last = replay(parameters(), spreads)
        assert last.tracked is not None
        assert last.updates == 80 - 2 - 2  # every judged cycle once the reference is complete

    def test_a_squeeze_after_the_drift_is_judged_against_the_spread_before_it(self) -> None:
        """After 40 cycles of drift, a squeeze to 0.35 halts within two cycles, and the
        reference stays where the drift had brought it while it adds evidence."""
        healthy = drifting(0.3, -0.03, 40)
        squeeze = [healthy[-1] * 0.35] * 3
        found = list(tracks(parameters(), cycles([*healthy, *squeeze])))
        before = found[len(healthy) - 1].tracked
        assert before is not None
        assert [t.signal(parameters()) for t in found[len(healthy) :]] == [False, True, True]
        assert [t.tracked for t in found[len(healthy) :]] == [before] * 3
        assert found[-1].updates == found[len(healthy) - 1].updates

    def test_a_gradual_drift_to_a_third_over_five_cycles_is_caught(self) -> None:
        """A squeeze reaching 0.35 over five cycles: only the first steps move the reference."""
        healthy = [0.3] * 10
        ramp = [0.3 * (1 - (i / 5) * 0.65) for i in range(1, 6)] + [0.3 * 0.35] * 3
        found = list(tracks(parameters(), cycles([*healthy, *ramp])))
        assert any(t.signal(parameters()) for t in found)
        assert found[-1].tracked == pytest.approx(math.log(0.3), abs=0.1)

    @settings(max_examples=60 * SCALE)
    @given(
        spreads=st.lists(st.floats(0.0, 0.5), min_size=6, max_size=30),
        rate=st.floats(0.01, 1.0),
    )
    def test_no_cycle_moves_the_reference_by_more_than_rate_times_slack(
        self, spreads: list[float], rate: float
    ) -> None:
        p = parameters(rate=rate)
        previous = None
        for track in tracks(p, cycles(spreads)):
            if previous is not None and track.tracked is not None:
                assert abs(track.tracked - previous) <= rate * 0.4 + 1e-12
            previous = track.tracked if track.tracked is not None else previous

    @settings(max_examples=40 * SCALE)
    @given(spreads=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=30))
    def test_the_early_reference_keeps_no_tracked_value(self, spreads: list[float]) -> None:
        """Today's cusum: the track carries nothing new, so its state and detail are as before."""
        for track in tracks(parameters("early"), cycles(spreads)):
            assert (track.tracked, track.updates) == (None, 0)


class TestPolicy:
    def test_the_early_mode_spelled_out_digests_as_before(self) -> None:
        assert policy({**EARLY, "mode": "early"}).digest == EARLY_POLICY.digest
        assert policy({**EARLY, "mode": "early", "rate": 0.3}).digest == EARLY_POLICY.digest
        assert policy(EARLY, canary_cycles=1).digest == EARLY_POLICY.digest

    def test_the_tracking_mode_and_its_rate_are_in_the_resolved_policy(self) -> None:
        reference = TRACKING_POLICY.document["spec"]["collapse"]["cusum"]["reference"]
        assert (reference["mode"], reference["rate"]) == ("tracking", 0.2)
        assert TRACKING_POLICY.document["spec"]["collapse"]["canary_cycles"] == 2
        assert policy({**TRACKING, "rate": 0.1}).digest != TRACKING_POLICY.digest

    def test_more_canary_cycles_than_the_guard_sees_is_refused(self) -> None:
        with pytest.raises(PolicyError) as caught:
            policy(TRACKING, canary_cycles=4)
        assert "$.spec.collapse.canary_cycles: 4 is more cycles than the guard sees" in str(
            caught.value
        )

    def test_a_rate_outside_zero_to_one_is_refused(self) -> None:
        with pytest.raises(PolicyError, match=r"\$\.spec\.collapse\.cusum\.reference\.rate"):
            policy({**TRACKING, "rate": 0})


class TestDecisions:
    def test_a_halt_explains_its_reference_increments_sum_and_canary_cycles(self) -> None:
        history = [cycle(i, 0.2) for i in range(1, 11)]
        history += [cycle(i, 0.02, INVERTED) for i in range(11, 13)]
        decision = Engine(TRACKING_POLICY).detect_collapse(history)
        assert decision.outcome == "halt"
        detail = decision.reasons[0].detail
        assert detail["reference_mode"] == "tracking"
        assert detail["reference_rate"] == 0.2
        assert detail["reference_updates"] == 6  # cycles 5 to 10
        assert detail["reference_frozen"] is True
        assert [s["cycle"] for s in detail["increments"]] == [11, 12]
        assert detail["cusum"] >= detail["threshold"]
        assert detail["canary_cycles"] == [{"cycle": 11, "inverted": ["c"]}]

    def test_a_canary_inverted_in_the_last_cycle_only_does_not_halt(self) -> None:
        history = [cycle(i, 0.2) for i in range(1, 11)]
        history += [cycle(11, 0.02), cycle(12, 0.02, INVERTED)]
        decision = Engine(TRACKING_POLICY).detect_collapse(history)
        assert decision.outcome == "allow"
        reason = decision.reasons[0]
        assert reason.code == "canary_healthy"
        assert "no pinned canary inverted in each of the last 2 cycles" in reason.message
        assert reason.detail["canary_cycles"] == [{"cycle": 11, "inverted": []}]

    def test_the_early_detail_is_as_before(self) -> None:
        history = [cycle(i, 0.2) for i in range(1, 6)]
        detail = Engine(EARLY_POLICY).detect_collapse(history).reasons[0].detail
        assert "reference_mode" not in detail
        assert "canary_cycles" not in detail

    @settings(max_examples=25 * SCALE)
    @given(
        widths=st.lists(st.floats(0.0, 0.45), min_size=1, max_size=14),
        canaries=st.lists(st.sampled_from([HELD, INVERTED]), min_size=14, max_size=14),
    )
    def test_the_session_equals_the_recomputed_decision(
        self, widths: list[float], canaries: list[float]
    ) -> None:
        engine = Engine(TRACKING_POLICY)
        session = engine.session("s")
        pairs = zip(widths, canaries, strict=False)
        history = [cycle(i, w, c) for i, (w, c) in enumerate(pairs, start=1)]
        for end, each in enumerate(history, start=1):
            kept = session.observe_cycle(each["scores"], each["pinned"])
            recomputed = engine.detect_collapse(history[:end])
            assert (kept.outcome, kept.codes) == (recomputed.outcome, recomputed.codes)
            mine, theirs = kept.reasons[0].detail, recomputed.reasons[0].detail
            for field in ("cusum", "increments", "reference", "reference_updates"):
                assert mine.get(field) == theirs.get(field)


class TestSessionState:
    def test_the_tracked_reference_survives_a_restore(self) -> None:
        engine = Engine(TRACKING_POLICY)
        session = engine.session("s")
        history = [cycle(i, 0.2 * math.exp(-0.03 * i)) for i in range(1, 21)]
        for each in history[:12]:
            session.observe_cycle(each["scores"], each["pinned"])
        state = session.state()
        assert set(state["cusum"]["reference"]) == {"log_reference", "updates"}
        restored = Engine(TRACKING_POLICY).session("s", state=json.loads(json.dumps(state)))
        for each in history[12:]:
            a = session.observe_cycle(each["scores"], each["pinned"])
            b = restored.observe_cycle(each["scores"], each["pinned"])
            assert a.reasons[0].detail["reference"] == b.reasons[0].detail["reference"]
        assert session.state()["cusum"] == restored.state()["cusum"]

    def test_an_early_reference_state_has_no_reference_field(self) -> None:
        session = Engine(EARLY_POLICY).session("s")
        for each in [cycle(i, 0.2) for i in range(1, 9)]:
            session.observe_cycle(each["scores"], each["pinned"])
        assert set(session.state()["cusum"]) == {"basis", "sum", "run"}


# Healthy histories: a spread drifting by at most 2.5% a cycle (either way), with at most 8% of
# noise, and a canary inverted in any cycles at all; then one cycle glitches.
START = st.floats(0.15, 0.3)
DRIFT = st.one_of(st.sampled_from([-0.025, 0.025]), st.floats(-0.025, 0.025))
NOISE = st.lists(st.floats(-0.08, 0.08), min_size=60, max_size=60)
CANARY = st.sets(st.integers(0, 59), max_size=8)  # the cycles (0-based) whose canary is inverted


def healthy_history(
    start: float, drift: float, noise: Sequence[float], inverted: AbstractSet[int], length: int
) -> list[dict[str, Any]]:
    return [
        cycle(
            i,
            min(0.45, start * math.exp(drift * i + noise[i - 1])),
            INVERTED if i - 1 in inverted else HELD,
        )
        for i in range(1, length + 1)
    ]


def glitched(
    history: list[dict[str, Any]], at: int, squeeze: float | None, canary: bool
) -> list[dict[str, Any]]:
    """``history`` with one cycle's spread squeezed by ``squeeze`` and/or its canary inverted."""
    out = [dict(c) for c in history]
    scores = dict(out[at]["scores"])
    if squeeze is not None:
        width = (scores["y"] - scores["x"]) / 2
        scores.update(x=0.5 - squeeze * width, y=0.5 + squeeze * width)
    if canary:
        scores["c"] = INVERTED
    out[at] = {**out[at], "scores": scores}
    return out


History = list[dict[str, Any]]


@st.composite
def one_glitch_apart(draw: st.DrawFn) -> tuple[History, History]:
    """A healthy history, and the same with one of its last 20 cycles glitched: its spread
    squeezed (to 0 at worst), its canary inverted, or both."""
    length = draw(st.integers(20, 60))
    history = healthy_history(draw(START), draw(DRIFT), draw(NOISE), draw(CANARY), length)
    at = length - draw(st.integers(1, 20))
    squeeze = draw(st.one_of(st.none(), st.floats(0.0, 0.6)))
    return history, glitched(history, at, squeeze, draw(st.booleans()))


class TestNoSingleCycleHalts:
    @settings(max_examples=60 * SCALE)
    @given(case=one_glitch_apart())
    def test_a_history_one_cycle_away_from_a_quiet_one_does_not_halt(
        self, case: tuple[History, History]
    ) -> None:
        """A spread glitch, a canary glitch, or both, in any of the last 20 cycles of a healthy
        history that never halts: no cycle of the result halts."""
        history, changed = case
        engine = Engine(TRACKING_POLICY)
        assume(halts(engine, history) == [])
        assert halts(engine, changed) == []

    def test_under_the_early_reference_a_drifting_session_halts_on_one_glitch(self) -> None:
        """What the property guards against: a healthy drift of 2.5% a cycle has filled the
        early reference's sum, and one cycle's canary inverted halts it; tracking does not."""
        history = healthy_history(0.3, -0.025, [0.0] * 60, set(), 40)
        assert halts(Engine(EARLY_POLICY), history) == []
        one_glitch = glitched(history, 30, None, canary=True)
        assert halts(Engine(EARLY_POLICY), one_glitch) == [31]
        assert halts(Engine(policy(TRACKING)), one_glitch) == []
        assert halts(Engine(TRACKING_POLICY), one_glitch) == []


class TestExplained:
    def test_a_tracking_halt_offers_the_canary_and_no_slack(self) -> None:
        """The tracking reference moves with the slack, so no slack is offered; raising the
        last cycle's canary allows, checked by the guard itself."""
        history = [cycle(i, 0.2) for i in range(1, 11)]
        history += [cycle(i, 0.02, INVERTED) for i in range(11, 13)]
        request = CollapseRequest(
            tuple(Snapshot(c["cycle"], c["scores"], tuple(c["pinned"])) for c in history), None
        )
        settings = TRACKING_POLICY.spec.collapse
        guard = GUARDS["collapse"]
        verdict = guard.explain(settings, request, guard.evaluate(settings, request))
        [reason] = verdict.reasons
        assert reason.code == "collapse_detected"
        offered = reason.detail["would_allow"]
        assert [o["field"] for o in offered] == ["history[11].scores.c"]
        raised = [{**s, "scores": {**s["scores"]}} for s in history]
        raised[-1]["scores"]["c"] = offered[0]["value"]
        assert Engine(TRACKING_POLICY).detect_collapse(raised).outcome == "allow"
