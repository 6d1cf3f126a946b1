"""The eviction guard: a self-scored number must not delete what the scorer cannot re-derive.

Refusal reasons come in a fixed order (pinned, unscoreable, perturbation_missing, unstable_score,
no_tombstone); every one that applies is reported and the first is primary. Stability boundaries
use binary-exact scores: |0.625 - 0.375| is exactly 0.25.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from prunewarden import Decision, Engine, InputError, RefusedError, UntrustedEvictionError
from prunewarden.guards.eviction import PassCheck
from prunewarden.inputs import eviction_request

EngineFactory = Callable[..., Engine]


def segment(seg_id: str = "turn-17", kind: str = "turn", **fields: Any) -> dict[str, Any]:
    """A recoverable, tombstoned segment with no dependencies unless told otherwise."""
    return {
        "id": seg_id,
        "kind": kind,
        "text": "ran the migration; 3 tables altered",
        "non_recoverable": False,
        "score_dependencies": [],
        "tombstone_written": True,
        **fields,
    }


def actions(decision: Decision) -> list[dict[str, Any]]:
    return [action.to_dict() for action in decision.actions]


def action_names(decision: Decision) -> list[str]:
    return [action.action for action in decision.actions]


class TestAuthorized:
    def test_scoreable_stable_tombstoned_segment_is_authorized(self, engine: Engine) -> None:
        """No failed condition allows with authorized and no action."""
        decision = engine.authorize_eviction(segment(), 0.125, perturbed_score=0.25)
        assert decision.outcome == "allow"
        assert decision.enforced is True
        assert decision.check == "eviction"
        assert decision.codes == ("authorized",)
        assert decision.actions == ()
        assert decision.reasons[0].detail == {
            "segment": "turn-17",
            "score": 0.125,
            "perturbed_score": 0.25,
            "delta": 0.125,
            "stability_delta": 0.25,
        }

    def test_allowed_without_perturbation_records_its_absence(
        self, engine_with: EngineFactory
    ) -> None:
        """With perturbation optional, the detail says no perturbed score was measured."""
        lenient = engine_with(eviction={"require_perturbation": False})
        decision = lenient.authorize_eviction(segment(), 0.125)
        assert decision.codes == ("authorized",)
        assert decision.reasons[0].detail["perturbed_score"] is None
        assert "delta" not in decision.reasons[0].detail

    def test_dependencies_outside_the_candidates_are_fine(self, engine: Engine) -> None:
        """Score dependencies that stay in the window do not make a segment unscoreable."""
        seg = segment(score_dependencies=["turn-16", "turn-18"])
        decision = engine.authorize_eviction(seg, 0.125, 0.125, eviction_candidates=["turn-19"])
        assert decision.codes == ("authorized",)

    def test_own_id_among_dependencies_is_not_unscoreable(self, engine: Engine) -> None:
        """The segment itself being a candidate does not make its own score circular."""
        seg = segment(score_dependencies=["turn-17"])
        decision = engine.authorize_eviction(seg, 0.125, 0.125, eviction_candidates=["turn-17"])
        assert decision.codes == ("authorized",)

    def test_enforce_returns_the_allowing_decision(self, engine: Engine) -> None:
        """enforce() returns the decision when eviction is authorized."""
        document = {"check": "eviction", "segment": segment(), "score": 0.5, "perturbed_score": 0.5}
        assert engine.enforce(document).codes == ("authorized",)


class TestPinned:
    @pytest.mark.parametrize("kind", ["constraint", "definition", "negation"])
    def test_pinned_kinds_are_refused(self, engine: Engine, kind: str) -> None:
        """A segment of a pinned kind is refused whatever its score, with action pin."""
        decision = engine.authorize_eviction(segment(kind=kind), 0.0, perturbed_score=0.0)
        assert decision.outcome == "deny"
        assert decision.codes == ("pinned",)
        assert actions(decision) == [{"action": "pin", "ids": ["turn-17"]}]
        assert decision.reasons[0].detail == {
            "segment": "turn-17",
            "kind": kind,
            "non_recoverable": False,
        }

    def test_non_recoverable_flag_pins_any_kind(self, engine: Engine) -> None:
        """non_recoverable pins a segment whose kind is not pinned."""
        decision = engine.authorize_eviction(segment(non_recoverable=True), 0.125, 0.125)
        assert decision.codes == ("pinned",)
        assert decision.reasons[0].detail["non_recoverable"] is True

    def test_policy_pinned_kinds_replace_the_default(self, engine_with: EngineFactory) -> None:
        """pinned_kinds in the policy decides which kinds are pinned."""
        custom = engine_with(eviction={"pinned_kinds": ["credential"]})
        assert custom.authorize_eviction(segment(kind="definition"), 0.1, 0.1).outcome == "allow"
        decision = custom.authorize_eviction(segment(kind="credential"), 0.1, 0.1)
        assert decision.codes == ("pinned",)

    def test_kind_match_is_exact(self, engine: Engine) -> None:
        """Kinds are matched exactly: 'Constraint' is not the pinned kind 'constraint'."""
        assert engine.authorize_eviction(segment(kind="Constraint"), 0.1, 0.1).outcome == "allow"


class TestUnscoreable:
    def test_dependency_slated_for_eviction_refuses(self, engine: Engine) -> None:
        """A score dependency that is itself an eviction candidate makes the score circular."""
        seg = segment(score_dependencies=["turn-3", "turn-9", "turn-12"])
        decision = engine.authorize_eviction(
            seg, 0.125, 0.125, eviction_candidates=["turn-17", "turn-12", "turn-3"]
        )
        assert decision.outcome == "deny"
        assert decision.codes == ("unscoreable",)
        # Only the pending dependencies, sorted (seed 001 listed every dependency).
        assert decision.reasons[0].detail == {
            "segment": "turn-17",
            "dependencies": ["turn-12", "turn-3"],
        }
        assert actions(decision) == [
            {"action": "resolve_dependencies_first", "ids": ["turn-12", "turn-3"]},
        ]


class TestPerturbation:
    def test_missing_perturbed_score_refuses(self, engine: Engine) -> None:
        """No perturbed score while required refuses with action rescore (seed 001 crashed)."""
        decision = engine.authorize_eviction(segment(), 0.125)
        assert decision.outcome == "deny"
        assert decision.codes == ("perturbation_missing",)
        assert actions(decision) == [{"action": "rescore", "ids": ["turn-17"]}]

    def test_missing_perturbed_score_allowed_when_not_required(
        self, engine_with: EngineFactory
    ) -> None:
        """require_perturbation: false lets a segment without a perturbed score through."""
        lenient = engine_with(eviction={"require_perturbation": False})
        assert lenient.authorize_eviction(segment(), 0.125).codes == ("authorized",)

    @pytest.mark.parametrize(("score", "perturbed"), [(0.625, 0.375), (0.375, 0.625)])
    def test_move_equal_to_stability_delta_is_stable(
        self, engine: Engine, score: float, perturbed: float
    ) -> None:
        """The stability test is strict: a move of exactly stability_delta (0.25) is stable."""
        assert engine.authorize_eviction(segment(), score, perturbed).codes == ("authorized",)

    @pytest.mark.parametrize(("score", "perturbed"), [(0.75, 0.375), (0.375, 0.75)])
    def test_move_beyond_stability_delta_refuses(
        self, engine: Engine, score: float, perturbed: float
    ) -> None:
        """|score - perturbed| > stability_delta refuses with unstable_score, either direction."""
        decision = engine.authorize_eviction(segment(), score, perturbed)
        assert decision.outcome == "deny"
        assert decision.codes == ("unstable_score",)
        assert actions(decision) == [{"action": "rescore", "ids": ["turn-17"]}]
        assert decision.reasons[0].detail == {
            "segment": "turn-17",
            "score": score,
            "perturbed_score": perturbed,
            "delta": 0.375,
            "stability_delta": 0.25,
        }

    def test_policy_stability_delta_changes_the_decision(self, engine_with: EngineFactory) -> None:
        """stability_delta 0.375 accepts a 0.375 move; 0.125 refuses a 0.25 move."""
        loose = engine_with(eviction={"stability_delta": 0.375})
        assert loose.authorize_eviction(segment(), 0.75, 0.375).codes == ("authorized",)
        tight = engine_with(eviction={"stability_delta": 0.125})
        assert tight.authorize_eviction(segment(), 0.625, 0.375).codes == ("unstable_score",)


class TestTombstone:
    def test_missing_tombstone_refuses(self, engine: Engine) -> None:
        """An eviction without a tombstone is refused with action write_tombstone."""
        decision = engine.authorize_eviction(segment(tombstone_written=False), 0.125, 0.125)
        assert decision.outcome == "deny"
        assert decision.codes == ("no_tombstone",)
        assert actions(decision) == [{"action": "write_tombstone", "ids": ["turn-17"]}]

    def test_tombstone_defaults_to_not_written(self, engine: Engine) -> None:
        """A segment that does not say it wrote a tombstone has not."""
        seg = {"id": "turn-17", "kind": "turn"}
        assert engine.authorize_eviction(seg, 0.125, 0.125).codes == ("no_tombstone",)

    def test_tombstone_not_required_by_policy(self, engine_with: EngineFactory) -> None:
        """require_tombstone: false authorizes without a tombstone."""
        lenient = engine_with(eviction={"require_tombstone": False})
        decision = lenient.authorize_eviction(segment(tombstone_written=False), 0.125, 0.125)
        assert decision.codes == ("authorized",)


class TestEveryReason:
    def test_all_reasons_in_order_with_their_remedies(self, engine: Engine) -> None:
        """Every failed condition is reported in the fixed order; the first is primary."""
        seg = segment(kind="negation", score_dependencies=["turn-2"], tombstone_written=False)
        decision = engine.authorize_eviction(seg, 0.125, eviction_candidates=["turn-2"])
        assert decision.codes == ("pinned", "unscoreable", "perturbation_missing", "no_tombstone")
        assert actions(decision) == [
            {"action": "pin", "ids": ["turn-17"]},
            {"action": "resolve_dependencies_first", "ids": ["turn-2"]},
            {"action": "rescore", "ids": ["turn-17"]},
            {"action": "write_tombstone", "ids": ["turn-17"]},
        ]

    def test_unstable_takes_the_place_of_missing(self, engine: Engine) -> None:
        """With a perturbed score, unstable_score sits between unscoreable and no_tombstone."""
        seg = segment(non_recoverable=True, score_dependencies=["turn-2"], tombstone_written=False)
        decision = engine.authorize_eviction(seg, 0.0, 1.0, eviction_candidates=["turn-2"])
        assert decision.codes == ("pinned", "unscoreable", "unstable_score", "no_tombstone")
        assert action_names(decision) == [
            "pin",
            "resolve_dependencies_first",
            "rescore",
            "write_tombstone",
        ]

    def test_primary_reason_is_in_the_error(self, engine: Engine) -> None:
        """enforce() raises UntrustedEvictionError naming the primary reason."""
        seg = segment(kind="constraint", tombstone_written=False)
        document = {"check": "eviction", "segment": seg, "score": 0.125}
        with pytest.raises(UntrustedEvictionError) as raised:
            engine.enforce(document)
        assert isinstance(raised.value, RefusedError)
        assert raised.value.decision.codes[0] == "pinned"
        assert str(raised.value).startswith("eviction deny: pinned:")


class TestModes:
    def test_audit_reports_the_verdict_without_enforcing(self, engine_with: EngineFactory) -> None:
        """audit keeps the deny verdict and its actions; enforce() does not raise."""
        audited = engine_with(eviction={"mode": "audit"})
        document = {
            "check": "eviction",
            "segment": segment(kind="definition"),
            "score": 0.09,
            "perturbed_score": 0.09,
        }
        decision = audited.enforce(document)
        assert decision.outcome == "deny"
        assert decision.enforced is False
        assert decision.codes == ("pinned",)
        assert action_names(decision) == ["pin"]

    def test_off_allows_with_check_disabled(self, engine_with: EngineFactory) -> None:
        """off allows a pinned segment with reason check_disabled."""
        disabled = engine_with(eviction={"mode": "off"})
        decision = disabled.authorize_eviction(segment(kind="constraint"), 0.11)
        assert decision.outcome == "allow"
        assert decision.enforced is False
        assert decision.codes == ("check_disabled",)
        assert decision.actions == ()


class TestSeed001Narrative:
    UTC = segment(
        "turn-3",
        kind="constraint",
        text="all timestamps must be UTC; never emit local time",
        tokens=14,
    )
    BUF = segment(
        "turn-12",
        kind="definition",
        text="`buf` refers to the pre-compaction buffer, not the network buffer",
        tokens=16,
    )

    def test_utc_constraint_scored_011_at_turn_41_is_refused(self, engine: Engine) -> None:
        """The UTC constraint at 0.11 is pinned: stable and tombstoned, it is still refused."""
        decision = engine.authorize_eviction(self.UTC, 0.11, perturbed_score=0.12)
        assert decision.outcome == "deny"
        assert decision.codes == ("pinned",)
        assert actions(decision) == [{"action": "pin", "ids": ["turn-3"]}]
        assert "0.11" in decision.reasons[0].message
        with pytest.raises(UntrustedEvictionError):
            engine.enforce(
                {"check": "eviction", "segment": self.UTC, "score": 0.11, "perturbed_score": 0.12}
            )

    def test_buf_definition_scored_009_is_refused(self, engine: Engine) -> None:
        """The `buf` definition evicted at 0.09 is pinned."""
        decision = engine.authorize_eviction(self.BUF, 0.09, perturbed_score=0.09)
        assert decision.codes == ("pinned",)
        assert decision.reasons[0].detail["kind"] == "definition"

    def test_buf_flagged_non_recoverable_is_refused_whatever_its_kind(self, engine: Engine) -> None:
        """The same definition stored as an ordinary turn is pinned by its flag."""
        seg = {**self.BUF, "kind": "turn", "non_recoverable": True}
        assert engine.authorize_eviction(seg, 0.09, 0.09).codes == ("pinned",)

    def test_constraint_whose_score_depends_on_the_timezone_turns(self, engine: Engine) -> None:
        """Scored against turns slated for eviction in the same pass, it is also unscoreable."""
        seg = {**self.UTC, "score_dependencies": ["turn-39", "turn-40"]}
        decision = engine.authorize_eviction(
            seg, 0.11, 0.45, eviction_candidates=["turn-3", "turn-40"]
        )
        assert decision.codes == ("pinned", "unscoreable", "unstable_score")
        assert decision.reasons[1].detail["dependencies"] == ["turn-40"]

    def test_ordinary_turn_at_the_same_score_is_authorized(self, engine: Engine) -> None:
        """Healthy counterpart: a recoverable, stable, tombstoned turn at 0.11 may go."""
        seg = segment("turn-40", text="converted 14:00 CET to 13:00 UTC for the log sample")
        assert engine.authorize_eviction(seg, 0.11, 0.12).codes == ("authorized",)


class TestInputErrors:
    def paths(self, raised: pytest.ExceptionInfo[InputError]) -> list[str]:
        return [problem.path for problem in raised.value.problems]

    @pytest.mark.parametrize("value", [1.5, -0.5])
    def test_score_outside_range(self, engine: Engine, value: float) -> None:
        """A score outside spec.scores is an input error at $.score."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(), value, 0.5)
        assert self.paths(raised) == ["$.score"]

    def test_perturbed_score_outside_range(self, engine: Engine) -> None:
        """A perturbed score outside spec.scores is an input error."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(), 0.5, 2.0)
        assert self.paths(raised) == ["$.perturbed_score"]

    @pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
    def test_non_finite_scores(self, engine: Engine, value: float) -> None:
        """NaN and infinities are input errors for score and perturbed score alike."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(), value, value)
        assert self.paths(raised) == ["$.perturbed_score", "$.score"]

    def test_boolean_score(self, engine: Engine) -> None:
        """A boolean is not a score."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(), True, False)
        assert self.paths(raised) == ["$.perturbed_score", "$.score"]

    def test_huge_integer_score(self, engine: Engine) -> None:
        """An integer too large for a float is an input error, not an OverflowError."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(), 10**400, 0.5)
        assert self.paths(raised) == ["$.score"]

    def test_policy_score_range_is_used(self, engine_with: EngineFactory) -> None:
        """Scores are checked against the policy's range, not a fixed 0-1."""
        wide_range = engine_with(scores={"min": 0, "max": 100})
        assert wide_range.authorize_eviction(segment(), 42, 42).codes == ("authorized",)

    def test_non_boolean_flags(self, engine: Engine) -> None:
        """non_recoverable and tombstone_written must be booleans."""
        seg = segment(non_recoverable="yes", tombstone_written=1)
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(seg, 0.5, 0.5)
        assert self.paths(raised) == ["$.segment.non_recoverable", "$.segment.tombstone_written"]

    def test_duplicate_candidates(self, engine: Engine) -> None:
        """An eviction candidate listed twice is an input error."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(), 0.5, 0.5, eviction_candidates=["a", "a"])
        assert self.paths(raised) == ["$.eviction_candidates"]

    def test_unknown_segment_field(self, engine: Engine) -> None:
        """An unknown segment field is an input error at that field."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction(segment(priority=3), 0.5, 0.5)
        assert self.paths(raised) == ["$.segment.priority"]

    def test_missing_segment_kind(self, engine: Engine) -> None:
        """A segment without a kind is an input error."""
        with pytest.raises(InputError) as raised:
            engine.authorize_eviction({"id": "turn-1"}, 0.5, 0.5)
        assert self.paths(raised) == ["$.segment"]


def _item(kind: str = "turn", score: float = 0.5, **fields: Any) -> dict[str, Any]:
    """An item of a pass: ``perturbed`` (default the score) and segment fields."""
    perturbed = fields.pop("perturbed", score)
    seg = {"id": "s", "kind": kind, "tombstone_written": True, **fields}
    return {"segment": seg, "score": score, "perturbed_score": perturbed}


# Each condition of the guard alone, and the items the columns leave to the typed path.
COLUMN_ITEMS = {
    "authorized": _item(),
    "pinned-kind": _item("constraint"),
    "non-recoverable": _item(non_recoverable=True),
    "pinned-and-non-recoverable": _item("constraint", non_recoverable=True),
    "waits-on-a-candidate": _item(score_dependencies=["other", "s", "kept"]),
    "depends-on-itself": _item(score_dependencies=["s"]),
    "perturbation-missing": _item(perturbed=None),
    "unstable": _item(score=0.1, perturbed=0.9),
    "no-tombstone": _item(tombstone_written=False),
    "everything": _item(
        "constraint", perturbed=None, tombstone_written=False, score_dependencies=["other"]
    ),
    "metadata": _item(metadata={"k": "v"}),
    "score-out-of-range": _item(score=1.5),
    "perturbed-out-of-range": _item(perturbed=-0.5),
}


class TestColumnsOfOneSegment:
    @pytest.mark.parametrize("name", list(COLUMN_ITEMS))
    def test_a_planned_segment_is_checked_as_a_pass_item_is(self, name: str) -> None:
        """PassCheck.decide_segment (a plan's segment, typed) finds the bitmask and pending
        dependencies PassCheck.decide finds for the same item of a pass, and leaves to the
        typed path (None) what decide leaves to it."""
        policy = Engine.default().policy
        check = PassCheck.bind(policy.spec.eviction, policy.spec.scores)
        item = COLUMN_ITEMS[name]
        candidates = frozenset({"s", "other"})
        columns = check.decide([item], candidates)
        request = eviction_request(item, candidates)
        found = check.decide_segment(
            request.segment, request.score, request.perturbed_score, candidates
        )
        if columns is None:
            assert found is None
        else:
            assert found == (columns.masks[0], columns.dependencies.get(0, []))
            assert found[0] != 0
