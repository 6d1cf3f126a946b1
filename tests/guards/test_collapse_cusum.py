"""The collapse guard's cusum spread test: the arithmetic on hand-computed sequences, the
guard's decisions and detail, glitches that must not halt, and the squeeze that must.

Spreads are built from three scores: a canary ``c`` and two entries at ``0.5 -/+ d``. The
properties run bounded examples, ``PRUNEWARDEN_FUZZ_SCALE`` times more under ``make fuzz``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import Decision, Engine, Policy, PolicyError, parse_policy
from prunewarden._cusum import SPREAD_FLOOR, CusumParameters, CusumTrack, replay

PolicyFactory = Callable[..., Policy]
EngineFactory = Callable[..., Engine]

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))

# n = 2, k = 0.4, h = 0.9, a reference of the first 2 cycles and no prior: the numbers.
CUSUM = {
    "spread_floor_mode": "cusum",
    "consecutive_cycles": 2,
    "cusum": {
        "slack": 0.4,
        "threshold": 0.9,
        "reference": {"first_cycles": 2, "prior_log_spread": -1.5, "prior_weight": 0},
    },
}


CUSUM_POLICY = parse_policy(
    json.dumps(
        {
            "apiVersion": "prunewarden/v1",
            "kind": "Policy",
            "metadata": {"name": "cusum", "version": "1.0.0"},
            "spec": {"collapse": CUSUM},
        }
    ),
    "<cusum-policy>",
)


SMALL_POLICY = parse_policy(
    json.dumps(
        {
            "apiVersion": "prunewarden/v1",
            "kind": "Policy",
            "metadata": {"name": "cusum-small", "version": "1.0.0"},
            "spec": {"collapse": {**CUSUM, "min_live_entries": 3}},
        }
    ),
    "<cusum-small-policy>",
)


def parameters(
    *,
    n: int = 2,
    slack: float = 0.4,
    threshold: float = 0.9,
    first_cycles: int = 1,
    prior_log_spread: float = -1.5,
    prior_weight: float = 0.0,
) -> CusumParameters:
    return CusumParameters(n, slack, threshold, first_cycles, prior_log_spread, prior_weight)


def cycles(spreads: Sequence[float]) -> list[tuple[int, float, bool]]:
    return [(i, s, True) for i, s in enumerate(spreads, start=1)]


# A canary near the middle, so that it barely moves the spread: above the others' median (0.5)
# it holds, below it it has inverted.
HELD, INVERTED = 0.55, 0.45


def scores(d: float, canary: float = HELD) -> dict[str, float]:
    return {"c": canary, "x": 0.5 - d, "y": 0.5 + d}


def snap(cycle: int, values: dict[str, float]) -> dict[str, Any]:
    return {"cycle": cycle, "scores": values, "pinned": ["c"]}


def history(widths: Sequence[float], canaries: Sequence[float]) -> list[dict[str, Any]]:
    return [snap(i, scores(d, c)) for i, (d, c) in enumerate(zip(widths, canaries, strict=True), 1)]


def detail(decision: Decision) -> dict[str, Any]:
    return decision.reasons[0].detail


class TestArithmetic:
    def test_hand_computed_sequence_reaches_the_threshold_in_two_capped_steps(self) -> None:
        """ln R = -1 from cycle 1; cycles 3 and 4 at e^-2 add min(1 - 0.4, 0.45) each."""
        track = replay(parameters(), cycles([math.exp(-1), 0.5, math.exp(-2), math.exp(-2)]))
        assert track.total == pytest.approx(0.9)
        assert [s.cycle for s in track.run] == [3, 4]
        assert [s.log_ratio for s in track.run] == pytest.approx([1.0, 1.0])
        assert [s.increment for s in track.run] == pytest.approx([0.6, 0.6])
        assert track.signal(parameters()) is True

    def test_the_prior_shrinks_the_reference(self) -> None:
        """w = 2, mu = -1.5 and one own cycle at ln -1: ln R = (2 x -1.5 - 1) / 3 = -4/3."""
        track = replay(parameters(first_cycles=5, prior_weight=2.0), cycles([math.exp(-1)] * 3))
        (step,) = track.run
        assert step.log_reference == pytest.approx(-4 / 3)
        assert step.reference_cycles == 1
        assert step.log_ratio == pytest.approx(-4 / 3 + 1)
        assert track.total == 0.0

    def test_the_reference_grows_with_the_cycles_before_the_window(self) -> None:
        """Cycle 5 with n = 2 and first_cycles 5 reads cycles 1..3: ln R is their mean log."""
        spreads = [math.exp(-1), math.exp(-2), math.exp(-3), 0.5, math.exp(-2)]
        track = replay(parameters(first_cycles=5), cycles(spreads))
        assert track.run[-1].reference_cycles == 3
        assert track.run[-1].log_reference == pytest.approx(-2.0)
        assert track.run[-1].log_ratio == pytest.approx(0.0)

    def test_a_zero_spread_is_floored_before_the_log(self) -> None:
        """A spread of 0 counts as 1e-6: its log-ratio is finite, and the cap bounds it."""
        track = replay(parameters(), cycles([math.exp(-1), 0.5, 0.0]))
        (step,) = track.run
        assert step.log_ratio == pytest.approx(-1 - math.log(SPREAD_FLOOR))
        assert track.total == pytest.approx(0.45)

    def test_the_sum_is_floored_at_zero(self) -> None:
        """Spreads wider than the reference add negative increments; S stays at 0."""
        track = replay(parameters(), cycles([0.1, 0.1, 0.3, 0.3]))
        assert track.total == 0.0
        assert all(step.increment < 0 for step in track.run)

    def test_a_cycle_with_too_few_entries_keeps_the_sum_and_resets_the_run(self) -> None:
        """An unjudgeable cycle between squeezed ones: S as it was, and n new steps needed."""
        squeezed = math.exp(-2)
        sequence = [*cycles([math.exp(-1), 0.5, squeezed, squeezed]), (5, 0.01, False)]
        track = replay(parameters(), sequence)
        assert track.total == pytest.approx(0.9)
        assert track.run == ()
        assert track.signal(parameters()) is False
        track = replay(parameters(), [*sequence, (6, squeezed, True)])
        assert track.signal(parameters()) is False  # one step of the run only
        track = replay(parameters(), [*sequence, (6, squeezed, True), (7, squeezed, True)])
        assert track.signal(parameters()) is True

    def test_a_cycle_too_small_to_judge_stays_out_of_the_reference(self) -> None:
        """A first cycle of two entries (spread 0) is not the reference: cycle 4 reads cycle 2
        alone, the first judgeable one before its window, as a session starting small needs."""
        sequence = [(1, 0.0, False), (2, math.exp(-1), True), (3, 0.5, True), (4, 0.1, True)]
        step = replay(parameters(first_cycles=2), sequence).run[-1]
        assert step.cycle == 4
        assert step.reference_cycles == 1
        assert step.log_reference == pytest.approx(-1.0)

    def test_judgeable_cycles_count_the_reference_before_the_window(self) -> None:
        """With cycles 1 and 3 too small, cycle 6 is the 4th judgeable: n = 2 leaves 2 before
        its window (cycles 2 and 4), whatever first_cycles allows."""
        sequence = [
            (1, 0.0, False), (2, math.exp(-1), True), (3, 0.0, False),
            (4, math.exp(-3), True), (5, 0.5, True), (6, 0.5, True),
        ]  # fmt: skip
        step = replay(parameters(first_cycles=5), sequence).run[-1]
        assert (step.cycle, step.reference_cycles) == (6, 2)
        assert step.log_reference == pytest.approx(-2.0)

    def test_the_sum_alone_does_not_signal(self) -> None:
        """S at h after a non-positive increment: each of the last n must be positive."""
        track = CusumTrack(1.0, replay(parameters(), cycles([0.1, 0.1, 0.05, 0.1])).run)
        assert track.signal(parameters()) is False


HEALTHY = st.floats(0.2, 0.28)  # ln(0.28 / 0.2) < 0.4: no healthy cycle adds evidence
ANY_SPREAD = st.floats(0.0, 0.5)


class TestProperties:
    @settings(max_examples=60 * SCALE)
    @given(
        spreads=st.lists(ANY_SPREAD, min_size=3, max_size=30),
        n=st.integers(2, 5),
        threshold=st.floats(0.1, 5.0),
        prior_weight=st.floats(0.0, 5.0),
    )
    def test_no_cycle_adds_more_than_the_cap(
        self, spreads: list[float], n: int, threshold: float, prior_weight: float
    ) -> None:
        """Each cycle raises S by at most h / n, and S never goes below 0."""
        p = parameters(n=n, threshold=threshold, first_cycles=3, prior_weight=prior_weight)
        before = 0.0
        for end in range(1, len(spreads) + 1):
            total = replay(p, cycles(spreads[:end])).total
            assert 0.0 <= total <= before + p.cap + 1e-12
            before = total

    @settings(max_examples=60 * SCALE)
    @given(
        healthy=st.lists(HEALTHY, min_size=4, max_size=20),
        glitch=ANY_SPREAD,
        at=st.integers(0, 19),
        n=st.integers(2, 4),
    )
    def test_no_single_cycle_can_signal(
        self, healthy: list[float], glitch: float, at: int, n: int
    ) -> None:
        """Healthy spreads with any one glitching cycle never raise signal A, at any cycle."""
        spreads = list(healthy)
        spreads[at % len(spreads)] = glitch
        p = parameters(n=n, first_cycles=3, prior_log_spread=math.log(0.24), prior_weight=1.0)
        for end in range(1, len(spreads) + 1):
            assert replay(p, cycles(spreads[:end])).signal(p) is False

    @settings(max_examples=25 * SCALE)
    @given(
        widths=st.lists(st.floats(0.0, 0.45), min_size=1, max_size=12),
        canaries=st.lists(st.sampled_from([HELD, INVERTED]), min_size=12, max_size=12),
    )
    def test_the_session_sum_equals_the_recomputed_one(
        self, widths: list[float], canaries: list[float]
    ) -> None:
        """Cycle by cycle, a session's kept S and run equal those recomputed statelessly."""
        engine = Engine(CUSUM_POLICY)
        session = engine.session("s")
        cases = history(widths, canaries[: len(widths)])
        for end, cycle in enumerate(cases, start=1):
            kept = session.observe_cycle(cycle["scores"], cycle["pinned"])
            recomputed = engine.detect_collapse(cases[:end])
            assert kept.outcome == recomputed.outcome
            assert kept.codes == recomputed.codes
            if "cusum" in detail(kept):
                assert detail(kept)["accumulated"] == "session"
                assert detail(recomputed)["from_cycle"] == 1
                for field in ("cusum", "increments", "reference", "reference_cycles"):
                    assert detail(kept)[field] == detail(recomputed)[field]

    @settings(max_examples=25 * SCALE)
    @given(
        widths=st.lists(st.floats(0.0, 0.45), min_size=1, max_size=12),
        small=st.lists(st.booleans(), min_size=12, max_size=12),
        canaries=st.lists(st.sampled_from([HELD, INVERTED]), min_size=12, max_size=12),
    )
    def test_with_cycles_too_small_to_judge_the_session_sum_equals_the_recomputed_one(
        self, widths: list[float], small: list[bool], canaries: list[float]
    ) -> None:
        """Cycles of two entries under min_live_entries 3 stay out of the reference and the
        sum alike, in a session and recomputed over its history."""
        engine = Engine(SMALL_POLICY)
        session = engine.session("s")
        cases = history(widths, canaries[: len(widths)])
        for case, drop in zip(cases, small, strict=False):
            if drop:
                del case["scores"]["y"]
        for end, cycle in enumerate(cases, start=1):
            kept = session.observe_cycle(cycle["scores"], cycle["pinned"])
            recomputed = engine.detect_collapse(cases[:end])
            assert (kept.outcome, kept.codes) == (recomputed.outcome, recomputed.codes)
            if "cusum" in detail(kept):
                for field in ("cusum", "increments", "reference", "reference_cycles"):
                    assert detail(kept)[field] == detail(recomputed)[field]


SQUEEZE_WIDTHS = [0.3, 0.3, 0.3, 0.1, 0.1, 0.1]


class TestGuard:
    def test_a_sustained_squeeze_halts_with_the_evidence_in_the_detail(
        self, make_policy: PolicyFactory
    ) -> None:
        """Spreads squeezed to a third with the canary inverted halt on the second such cycle."""
        engine = Engine(make_policy(collapse=CUSUM))
        cases = history(SQUEEZE_WIDTHS, [HELD, HELD, HELD, INVERTED, INVERTED, INVERTED])
        codes = [engine.detect_collapse(cases[:end]).codes[0] for end in range(1, 7)]
        assert codes[:5] == [
            "insufficient_history",
            "insufficient_history",
            "spread_healthy",
            "spread_healthy",
            "collapse_detected",
        ]
        halted = engine.detect_collapse(cases[:5])
        found = detail(halted)
        assert halted.outcome == "halt"
        assert found["spread_floor_mode"] == "cusum"
        assert found["accumulated"] == "history"
        assert found["from_cycle"] == 1
        assert found["threshold"] == 0.9
        assert found["slack"] == 0.4
        assert found["cap"] == 0.45
        assert found["cusum"] == pytest.approx(0.9)
        assert found["reference_cycles"] == 2
        spread = statistics.pstdev(scores(0.3).values())
        assert found["reference"] == pytest.approx(spread)
        assert [i["cycle"] for i in found["increments"]] == [4, 5]
        assert all(i["increment"] > 0 for i in found["increments"])
        assert found["canary"]["id"] == "c"

    def test_cycles_of_exactly_min_live_entries_count_in_the_recomputed_sum(
        self, make_policy: PolicyFactory
    ) -> None:
        """Recomputed from a document's history, a cycle scoring exactly min_live_entries
        entries is judged: the squeeze halts on the same cycles as without the setting."""
        engine = Engine(make_policy(collapse={**CUSUM, "min_live_entries": 3}))
        cases = history(SQUEEZE_WIDTHS, [HELD, HELD, HELD, INVERTED, INVERTED, INVERTED])
        halted = engine.detect_collapse(cases[:5])
        assert halted.codes == ("collapse_detected",)
        assert [i["cycle"] for i in detail(halted)["increments"]] == [4, 5]
        assert detail(halted)["cusum"] == pytest.approx(0.9)

    def test_a_healthy_reason_says_whether_the_evidence_reached_the_threshold(self) -> None:
        """spread_healthy says the evidence is below the threshold, or that it reached it
        without each of the last n cycles adding to it (a squeeze followed by a healthy cycle)."""
        engine = Engine(CUSUM_POLICY)
        below = engine.detect_collapse(history([0.3] * 4, [INVERTED] * 4))
        widths = [*SQUEEZE_WIDTHS, 0.3]
        reached = engine.detect_collapse(history(widths, [HELD] * 6 + [INVERTED]))
        assert (below.codes, reached.codes) == (("spread_healthy",), ("spread_healthy",))
        assert below.reasons[0].message == "spread evidence 0 is below the threshold 0.9"
        assert reached.reasons[0].message == (
            "spread evidence 0.95 reached 0.9 but not each of the last 2 cycle(s) added to it"
        )
        assert detail(reached)["cusum"] == pytest.approx(0.95)

    def test_a_one_cycle_spread_glitch_does_not_halt(self, make_policy: PolicyFactory) -> None:
        """One flat cycle under an inverted canary adds the cap only: S stays below h."""
        engine = Engine(make_policy(collapse=CUSUM))
        cases = history([0.3, 0.3, 0.3, 0.0, 0.3, 0.3], [INVERTED] * 6)
        decisions = [engine.detect_collapse(cases[:end]) for end in range(1, 7)]
        assert all(d.outcome == "allow" for d in decisions)
        assert detail(decisions[3])["cusum"] == pytest.approx(0.45)

    def test_a_one_cycle_canary_glitch_does_not_halt(self, make_policy: PolicyFactory) -> None:
        """A canary inverted once under healthy spreads allows: signal A never holds."""
        engine = Engine(make_policy(collapse=CUSUM))
        cases = history([0.3] * 6, [HELD, HELD, HELD, INVERTED, HELD, HELD])
        decisions = [engine.detect_collapse(cases[:end]) for end in range(1, 7)]
        assert all(d.outcome == "allow" for d in decisions)
        assert decisions[3].codes == ("spread_healthy",)

    def test_a_squeeze_under_a_healthy_canary_is_a_homogeneous_buffer(
        self, make_policy: PolicyFactory
    ) -> None:
        """Signal A with the canary holding: canary_healthy, as in the other modes."""
        engine = Engine(make_policy(collapse=CUSUM))
        cases = history(SQUEEZE_WIDTHS, [HELD] * 6)
        assert engine.detect_collapse(cases[:5]).codes == ("canary_healthy",)

    def test_a_session_keeps_the_sum_past_its_snapshot_window(
        self, make_policy: PolicyFactory
    ) -> None:
        """The session halts where the full history does, keeping only n + 1 snapshots."""
        engine = Engine(make_policy(collapse=CUSUM))
        session = engine.session("s")
        cases = history(SQUEEZE_WIDTHS, [HELD, HELD, HELD, INVERTED, INVERTED, INVERTED])
        codes = [session.observe_cycle(c["scores"], c["pinned"]).codes[0] for c in cases[:5]]
        assert codes[-1] == "collapse_detected"
        state = session.state()
        assert len(state["snapshots"]) == 3
        assert state["cusum"]["sum"] == pytest.approx(0.9)
        assert [step["cycle"] for step in state["cusum"]["run"]] == [4, 5]


class TestPolicy:
    def test_defaults_enter_the_resolved_policy_only_under_the_cusum_mode(
        self, make_policy: PolicyFactory
    ) -> None:
        """cusum mode fills the block's defaults; any other mode drops the block entirely."""
        opted = make_policy(collapse={"spread_floor_mode": "cusum"})
        assert opted.document["spec"]["collapse"]["cusum"] == {
            "slack": 0.4,
            "threshold": 0.9,
            "reference": {"first_cycles": 5, "prior_log_spread": -1.5, "prior_weight": 2.0},
        }
        plain = make_policy()
        inert = make_policy(collapse={"cusum": {"slack": 1.0}})
        assert "cusum" not in plain.document["spec"]["collapse"]
        assert inert.digest == plain.digest

    def test_spelling_the_defaults_out_keeps_the_digest(self, make_policy: PolicyFactory) -> None:
        """A cusum block at its defaults digests as the bare mode does."""
        bare = make_policy(collapse={"spread_floor_mode": "cusum"})
        spelled = make_policy(
            collapse={
                "spread_floor_mode": "cusum",
                "cusum": {"slack": 0.4, "threshold": 0.9, "reference": {"first_cycles": 5.0}},
            }
        )
        assert spelled.digest == bare.digest
        assert bare.spec.collapse.early_cycles == 5 + 2  # first_cycles + consecutive_cycles

    @pytest.mark.parametrize(
        ("cusum", "path"),
        [
            ({"threshold": 0}, "$.spec.collapse.cusum.threshold"),
            ({"slack": -0.1}, "$.spec.collapse.cusum.slack"),
            ({"reference": {"first_cycles": 0}}, "$.spec.collapse.cusum.reference.first_cycles"),
            (
                {"reference": {"prior_log_spread": 1}},
                "$.spec.collapse.cusum.reference.prior_log_spread",
            ),
            ({"reference": {"prior_weight": -1}}, "$.spec.collapse.cusum.reference.prior_weight"),
            ({"treshold": 1}, "$.spec.collapse.cusum.treshold"),
        ],
    )
    def test_bad_settings_are_located(
        self, make_policy: PolicyFactory, cusum: dict[str, Any], path: str
    ) -> None:
        """An out-of-range or unknown cusum setting is one located policy problem."""
        with pytest.raises(PolicyError) as raised:
            make_policy(collapse={"spread_floor_mode": "cusum", "cusum": cusum})
        assert [p.path for p in raised.value.problems] == [path]


COLLAPSE_CASES = sorted((Path(__file__).parents[1] / "cases" / "collapse").glob("*.yaml"))


def comparable(decision: Decision) -> dict[str, Any]:
    """A decision without what differs between any two decisions (its id and time) and the
    bytes of the policy file it came from (the digest stays)."""
    document = decision.to_dict()
    del document["decision_id"], document["evaluated_at"], document["policy"]["sources"]
    return document


class TestAbsoluteUnchanged:
    @pytest.mark.parametrize("path", COLLAPSE_CASES, ids=lambda path: path.stem)
    def test_an_inert_cusum_block_changes_no_golden_decision(
        self, make_policy: PolicyFactory, path: Path
    ) -> None:
        """Each golden collapse case decides byte for byte alike, and under the same digest,
        with a cusum block the policy's mode does not read."""
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = case.get("policy", {})
        collapse = spec.get("collapse", {})
        inert = {**collapse, "cusum": {"slack": 0.1, "threshold": 3.0}}
        plain, with_block = make_policy(**spec), make_policy(**{**spec, "collapse": inert})
        assert with_block.digest == plain.digest
        assert with_block.document == plain.document
        expected = comparable(Engine(plain).evaluate(case["input"]))
        assert comparable(Engine(with_block).evaluate(case["input"])) == expected
