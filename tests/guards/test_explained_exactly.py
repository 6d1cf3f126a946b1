"""What an explained refusal says, exactly: each refusing reason's ``would_allow`` list (every
field, operator and value, in order) and its ``would_allow_text`` sentence, for every branch of
the eviction and staleness explainers.

``explain_verdict`` swallows an explainer that raises (the reason then carries no alternative),
so each test asserts the alternatives themselves, not only that the call succeeded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from prunewarden.decision import Reason, Verdict
from prunewarden.guards import GUARDS
from prunewarden.guards.staleness import text_sha256
from prunewarden.inputs import (
    EvictionRequest,
    ScoreRange,
    Segment,
    Span,
    StalenessRequest,
    Turn,
)
from prunewarden.inputs._model import TurnStats
from prunewarden.policy import load_builtin_policy

SPEC = load_builtin_policy("default").spec


def judged(check: str, guard_settings: Any, request: Any) -> Verdict:
    """The guard's verdict on the request, explained."""
    guard = GUARDS[check]
    return guard.explain(guard_settings, request, guard.evaluate(guard_settings, request))


def reasons_of(verdict: Verdict) -> dict[str, Reason]:
    return {reason.code: reason for reason in verdict.reasons}


def segment(
    kind: str = "turn",
    *,
    non_recoverable: bool = False,
    dependencies: tuple[str, ...] = (),
    tombstone: bool = True,
) -> Segment:
    return Segment("s", kind, "ran the migration", non_recoverable, dependencies, tombstone, None)


def evict(
    seg: Segment,
    score: float,
    perturbed: float | None,
    candidates: frozenset[str] = frozenset(),
    **changed: Any,
) -> Verdict:
    return judged(
        "eviction",
        replace(SPEC.eviction, **changed),
        EvictionRequest(seg, score, perturbed, candidates),
    )


class TestEvictionExplained:
    def test_a_pinned_kind_is_unpinned(self) -> None:
        """A segment pinned by kind alone: the one alternative excludes its kind."""
        reason = evict(segment("constraint"), 0.1, 0.1).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "constraint"}
        ]
        assert reason.detail["would_allow_text"] == (
            "kind 'constraint' is pinned: no score allows it; write a tombstone and summarize, "
            "or unpin the kind"
        )

    def test_a_non_recoverable_segment_is_marked_recoverable(self) -> None:
        """A non-recoverable segment of an unpinned kind: the alternative marks it recoverable."""
        reason = evict(segment(non_recoverable=True), 0.1, 0.1).reasons[0]
        assert reason.code == "pinned"
        assert reason.detail["would_allow"] == [
            {"field": "segment.non_recoverable", "op": "==", "value": False}
        ]
        assert reason.detail["would_allow_text"] == (
            "it is non-recoverable: no score allows it; write a tombstone and summarize, "
            "or mark it recoverable"
        )

    def test_a_pinned_non_recoverable_segment_needs_both_changes(self) -> None:
        """Pinned by kind and non-recoverable: one alternative, unpinning and marking together."""
        reason = evict(segment("constraint", non_recoverable=True), 0.1, 0.1).reasons[0]
        assert reason.detail["would_allow"] == [
            {
                "field": "spec.eviction.pinned_kinds",
                "op": "excludes",
                "value": "constraint",
                "and": [{"field": "segment.non_recoverable", "op": "==", "value": False}],
            }
        ]
        assert reason.detail["would_allow_text"] == (
            "kind 'constraint' is pinned: no score allows it; write a tombstone and summarize, "
            "or unpin the kind and mark it recoverable"
        )

    def test_dependencies_slated_too_are_named(self) -> None:
        """Scored against candidates: they leave the candidates, or the score stops using them."""
        seg = segment(dependencies=("b", "a", "s", "z"))
        verdict = evict(seg, 0.1, 0.1, frozenset({"a", "b", "s"}))
        reason = reasons_of(verdict)["unscoreable"]
        assert reason.detail["would_allow"] == [
            {"field": "eviction_candidates", "op": "excludes", "value": ["a", "b"]},
            {"field": "segment.score_dependencies", "op": "excludes", "value": ["a", "b"]},
        ]
        assert reason.detail["would_allow_text"] == (
            "scored against a, b, also slated for eviction: allowed once they leave "
            "eviction_candidates (decide them first), or once the score no longer depends on them"
        )

    def test_a_missing_perturbed_score_offers_the_stable_interval(self) -> None:
        """No perturbed score: a perturbed score within ±delta first, then the policy switch."""
        reason = reasons_of(evict(segment(), 0.4, None))["perturbation_missing"]
        interval, switch = reason.detail["would_allow"]
        assert (interval["field"], interval["op"]) == ("perturbed_score", "in")
        assert [round(v, 9) for v in interval["value"]] == [0.15, 0.65]
        assert switch == {"field": "spec.eviction.require_perturbation", "op": "==", "value": False}
        assert reason.detail["would_allow_text"] == (
            "no perturbed score: allowed with a perturbed score in [0.15, 0.65] or at "
            "require_perturbation false"
        )

    def test_a_move_of_exactly_one_may_still_be_tolerated(self) -> None:
        """|Δ| exactly 1 (the schema's largest stability_delta) is offered as a delta; the
        stable interval is clipped to the score range [0, 1]."""
        reason = evict(segment(), 0.0, 1.0).reasons[0]
        assert reason.code == "unstable_score"
        assert reason.detail["would_allow"] == [
            {"field": "spec.eviction.stability_delta", "op": ">=", "value": 1.0},
            {"field": "perturbed_score", "op": "in", "value": [0.0, 0.25]},
        ]
        assert reason.detail["would_allow_text"] == (
            "|\u0394| 1 > 0.25: allowed at stability_delta \u2265 1 or a perturbed score in "
            "[0, 0.25]"
        )

    def test_a_move_beyond_one_offers_only_a_perturbed_score(self) -> None:
        """|Δ| above any allowed stability_delta (a score range of [-2, 2]): only the stable
        interval is offered, whole within that range."""
        guard = GUARDS["eviction"]
        request = EvictionRequest(segment(), 0.0, 1.5, frozenset())
        verdict = guard.evaluate(SPEC.eviction, request)
        reason = guard.explain(SPEC.eviction, request, verdict, ScoreRange(-2.0, 2.0)).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "perturbed_score", "op": "in", "value": [-0.25, 0.25]}
        ]
        assert reason.detail["would_allow_text"] == (
            "|\u0394| 1.5 > 0.25: allowed at a perturbed score in [-0.25, 0.25]"
        )

    def test_a_missing_tombstone_is_written_or_not_required(self) -> None:
        """No tombstone: write one, or stop requiring it."""
        reason = reasons_of(evict(segment(tombstone=False), 0.4, 0.4))["no_tombstone"]
        assert reason.detail["would_allow"] == [
            {"field": "segment.tombstone_written", "op": "==", "value": True},
            {"field": "spec.eviction.require_tombstone", "op": "==", "value": False},
        ]
        assert reason.detail["would_allow_text"] == (
            "no tombstone: allowed once one is written (segment.tombstone_written true), or at "
            "require_tombstone false"
        )

    def test_every_failed_condition_keeps_its_own_action(self) -> None:
        """Four refusing reasons, in order, each with its own remediation."""
        seg = segment("constraint", dependencies=("a",), tombstone=False)
        verdict = evict(seg, 0.4, None, frozenset({"a"}))
        assert [reason.code for reason in verdict.reasons] == [
            "pinned",
            "unscoreable",
            "perturbation_missing",
            "no_tombstone",
        ]
        assert [(a.action, a.ids) for a in verdict.actions] == [
            ("pin", ("s",)),
            ("resolve_dependencies_first", ("a",)),
            ("rescore", ("s",)),
            ("write_tombstone", ("s",)),
        ]


class TestEvictionMargin:
    def test_an_allowed_eviction_records_its_delta(self) -> None:
        """The allow's detail carries both scores and the delta between them."""
        verdict = evict(segment(), 0.5, 0.375)
        assert not verdict.refused
        assert verdict.reasons[0].detail == {
            "segment": "s",
            "score": 0.5,
            "perturbed_score": 0.375,
            "stability_delta": 0.25,
            "delta": 0.125,
        }

    def test_without_a_perturbed_score_there_is_no_delta(self) -> None:
        """Allowed with no perturbed score (not required): no delta is made up."""
        verdict = evict(segment(), 0.5, None, require_perturbation=False)
        assert not verdict.refused
        assert verdict.reasons[0].detail == {
            "segment": "s",
            "score": 0.5,
            "perturbed_score": None,
            "stability_delta": 0.25,
        }


def span(
    span_id: str,
    *,
    text: str = "the plan",
    score: float | None = 0.5,
    declared: str | None = None,
    rewrites: int = 0,
    derived_from: tuple[str, ...] = (),
) -> Span:
    return Span(
        span_id=span_id,
        text=text,
        score=score,
        text_sha256=text_sha256(text) if declared is None else declared,
        rewrite_count=rewrites,
        derived_from=derived_from,
    )


def stale(
    spans: list[Span],
    *,
    turn: TurnStats | None = None,
    turns: tuple[Turn, ...] = (),
    **changed: Any,
) -> Verdict:
    request = StalenessRequest(
        spans=tuple(spans),
        keep_top_k=2,
        turn=turn,
        turns=turns,
        tombstones=frozenset(),
        recompute_budget=None,
    )
    return judged("staleness", replace(SPEC.staleness, **changed), request)


def shrinking(*means: float) -> tuple[Turn, ...]:
    """Turns whose tokens fall each turn, with these mean relevances."""
    return tuple(Turn(i, mean, 1000 - i) for i, mean in enumerate(means))


PLAN = text_sha256("the plan")


class TestStalenessBindingsExplained:
    def test_unbound_spans_are_bound_together(self) -> None:
        """Each unbound span gets its text's hash, and a score where it has none, as one
        alternative; spans already bound are left out."""
        verdict = stale([span("a"), span("b", score=None), span("c", declared="")])
        reason = reasons_of(verdict)["unbound_score"]
        assert reason.detail["would_allow"] == [
            {
                "field": "spans[1].text_sha256",
                "op": "==",
                "value": PLAN,
                "and": [
                    {"field": "spans[1].score", "op": "!=", "value": None},
                    {"field": "spans[2].text_sha256", "op": "==", "value": PLAN},
                ],
            }
        ]
        assert reason.detail["would_allow_text"] == (
            "2 span(s) unbound: allowed once each carries a score bound to its text's SHA-256 "
            "(rescore them); no policy value allows an unbound score"
        )

    def test_a_mismatched_span_is_bound_to_its_current_text(self) -> None:
        """A score bound to older text: the alternative is the current text's hash alone."""
        verdict = stale([span("a"), span("b", declared=text_sha256("the old plan"))])
        reason = reasons_of(verdict)["hash_mismatch"]
        assert reason.detail["would_allow"] == [
            {"field": "spans[1].text_sha256", "op": "==", "value": PLAN}
        ]
        assert reason.detail["would_allow_text"] == (
            "1 span(s) scored against older text: allowed once each score is recomputed and "
            "bound to the text's current SHA-256; no policy value allows it"
        )

    def test_poisoned_spans_name_the_most_rewrites(self) -> None:
        """Poisoned spans: a limit at the most rewrites, or every one of them recomputed."""
        verdict = stale([span("a", rewrites=5), span("b", rewrites=4), span("c")])
        reason = reasons_of(verdict)["poisoned_span"]
        assert reason.detail["would_allow"] == [
            {"field": "spec.staleness.max_rewrites_without_recompute", "op": ">=", "value": 5},
            {
                "field": "spans[0].rewrite_count",
                "op": "<=",
                "value": 2,
                "and": [{"field": "spans[1].rewrite_count", "op": "<=", "value": 2}],
            },
        ]
        assert reason.detail["would_allow_text"] == (
            "rewritten up to 5 times > 2: allowed at max_rewrites_without_recompute \u2265 5, "
            "or once each is recomputed from its source (rewrite_count \u2264 2)"
        )

    def test_orphans_name_each_missing_parent_once(self) -> None:
        """Parents gone without a tombstone are named once each, sorted."""
        spans = [
            span("a", derived_from=("p2", "p1", "a")),
            span("b", derived_from=("p1", "c")),
            span("c"),
        ]
        reason = reasons_of(stale(spans))["orphaned_parent"]
        assert reason.detail["would_allow"] == [
            {"field": "tombstones", "op": "contains", "value": ["p1", "p2"]}
        ]
        assert reason.detail["would_allow_text"] == (
            "parents p1, p2 are gone unrecorded: allowed once tombstones name them"
        )

    def test_an_invalidation_gap_names_the_count_needed(self) -> None:
        """A rewrite that invalidated too few scores: as many as it modified."""
        reason = reasons_of(stale([span("a")], turn=TurnStats(3, 1)))["invalidation_gap"]
        assert reason.detail["would_allow"] == [
            {"field": "turn.scores_invalidated", "op": ">=", "value": 3}
        ]
        assert reason.detail["would_allow_text"] == (
            "1 of 3 modified span(s) invalidated: allowed once the rewrite invalidates "
            "\u2265 3 score(s)"
        )


class TestStalenessInflationExplained:
    def test_the_smallest_rise_sets_the_tolerance(self) -> None:
        """Over the window, the tolerance offered is the smallest relative rise (one pair
        under it ends the streak); the other alternative covers every turn."""
        turns = shrinking(0.5, 0.6, 0.7, 0.8)
        reason = reasons_of(stale([span("a")], turns=turns))["relevance_inflation"]
        tolerance, window = reason.detail["would_allow"]
        assert (tolerance["field"], tolerance["op"]) == ("spec.staleness.drift_tolerance", ">=")
        assert tolerance["value"] == pytest.approx(0.1 / 0.7)
        assert window == {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 4}
        assert reason.detail["would_allow_text"] == (
            "relevance rose more than 5% while tokens fell for 2 turn(s): allowed at "
            "drift_tolerance \u2265 0.1429 or drift_consecutive_turns \u2265 4"
        )

    def test_a_rise_of_exactly_one_is_a_tolerance(self) -> None:
        """A mean that doubles needs a tolerance of 1, the schema's largest: still offered."""
        turns = shrinking(0.5, 1.0)
        reason = stale([span("a")], turns=turns, drift_consecutive_turns=1).reasons[0]
        assert reason.code == "relevance_inflation"
        assert reason.detail["would_allow"] == [
            {"field": "spec.staleness.drift_tolerance", "op": ">=", "value": 1.0},
            {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 2},
        ]
        assert reason.detail["would_allow_text"] == (
            "relevance rose more than 5% while tokens fell for 1 turn(s): allowed at "
            "drift_tolerance \u2265 1 or drift_consecutive_turns \u2265 2"
        )

    def test_a_rise_beyond_one_offers_no_tolerance(self) -> None:
        """A mean that triples needs a tolerance of 2: no policy allows it, so none is offered."""
        turns = shrinking(0.25, 0.75)
        reason = stale([span("a")], turns=turns, drift_consecutive_turns=1).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 2}
        ]
        assert reason.detail["would_allow_text"] == (
            "relevance rose more than 5% while tokens fell for 1 turn(s): allowed at "
            "drift_consecutive_turns \u2265 2"
        )

    def test_a_rise_from_zero_has_no_tolerance(self) -> None:
        """No relative tolerance covers a rise from a mean of zero; the window still does."""
        turns = shrinking(0.0, 0.5)
        reason = stale([span("a")], turns=turns, drift_consecutive_turns=1).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 2}
        ]

    def test_a_zero_mean_in_the_window_leaves_the_other_pairs(self) -> None:
        """A pair rising from zero is skipped; the tolerance comes from the other pairs."""
        turns = shrinking(0.0, 0.5, 0.75)
        reason = stale([span("a")], turns=turns).reasons[0]
        tolerance = reason.detail["would_allow"][0]
        assert tolerance["field"] == "spec.staleness.drift_tolerance"
        assert tolerance["value"] == pytest.approx(0.5)

    def test_the_window_offered_is_one_longer_than_the_run(self) -> None:
        """A window of one turn more than the run of inflating pairs the history ends with
        allows; a long history before the run asks for no longer a window."""
        turns = shrinking(*([0.0] * 998), 0.0, 0.5)
        reason = stale([span("a")], turns=turns, drift_consecutive_turns=1).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 2}
        ]

    def test_a_thousand_turns_can_still_be_a_window(self) -> None:
        """1,000 turns rising all along (the schema's largest window), the last from zero,
        still offer drift_consecutive_turns."""
        turns = shrinking(*range(-998, 1), 0.5)
        reason = stale(
            [span("a")], turns=turns, drift_consecutive_turns=1, drift_tolerance=0.0
        ).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 1000}
        ]

    def test_past_a_thousand_turns_no_value_allows_it(self) -> None:
        """1,001 turns rising all along, the last from zero: no value of either setting allows
        it, and the sentence says so."""
        turns = shrinking(*range(-999, 1), 0.5)
        reason = stale(
            [span("a")], turns=turns, drift_consecutive_turns=1, drift_tolerance=0.0
        ).reasons[0]
        assert reason.detail["would_allow"] == []
        assert reason.detail["would_allow_text"] == (
            "relevance rose more than 0% while tokens fell for 1 turn(s): allowed at no value"
        )


class TestStalenessInflationBelowZero:
    def test_a_rise_between_negative_means_is_relative_to_the_first(self) -> None:
        """On a score range below zero, a mean rising from -0.5 to -0.2 rose by 0.3, 60% of
        the first mean's magnitude: the tolerance offered is 0.6, to the float."""
        turns = shrinking(-0.5, -0.2)
        reason = stale([span("a")], turns=turns, drift_consecutive_turns=1).reasons[0]
        assert reason.code == "relevance_inflation"
        tolerance, window = reason.detail["would_allow"]
        assert (tolerance["field"], tolerance["op"]) == ("spec.staleness.drift_tolerance", ">=")
        assert tolerance["value"] == pytest.approx(0.6)
        assert window == {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 2}
        assert reason.detail["would_allow_text"] == (
            "relevance rose more than 5% while tokens fell for 1 turn(s): allowed at "
            "drift_tolerance \u2265 0.6 or drift_consecutive_turns \u2265 2"
        )
