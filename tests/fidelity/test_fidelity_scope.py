"""A negation is kept only where the summary's own negator governs what the parent's governed,
comparators are facts, and faithful restatements (other digits, other units, numbers spelled
out) are kept."""

from __future__ import annotations

import pytest
from prunewarden.fidelity import FidelitySettings, check_fidelity, extract_facts

SEED = "All timestamps must be UTC; never emit local time."


def _codes(parent: str, summary: str) -> list[str]:
    result = check_fidelity([("p1", parent)], ("s1", summary), FidelitySettings())
    return [reason.code for reason in result.reasons]


class TestNegationScope:
    @pytest.mark.parametrize(
        "summary",
        [
            "Always emit local time, not UTC.",  # the "not" governs UTC
            "Timestamps are UTC; do not forget to emit local time.",  # not + forget
            "Timestamps are UTC; never skip emitting local time.",  # never + skip
            'Timestamps are UTC; the rule "never emit local time" is overruled.',  # quoted
            "Timestamps are UTC; never not emit local time.",  # a doubled negation
            "Timestamps are UTC; it is not true that we never emit local time.",
            "Timestamps are UTC; emit local time but not UTC offsets.",
        ],
    )
    def test_a_negator_governing_other_words_keeps_nothing(self, summary: str) -> None:
        """Each summary holds a negator and every word of "never emit local time"; none of
        them negates emitting local time."""
        assert _codes(SEED, summary) == ["negation_lost"]

    @pytest.mark.parametrize(
        "summary",
        [
            "Timestamps are UTC; local time is never emitted.",
            "Timestamps UTC, don't emit local times.",
            "Timestamps are UTC and local time must never be emitted.",
            "Timestamps are UTC; never emit local time and do not use naive datetimes.",
        ],
    )
    def test_a_negation_that_governs_the_same_words_is_kept(self, summary: str) -> None:
        assert _codes(SEED, summary) == []

    def test_a_negation_the_summary_adds_is_a_loss(self) -> None:
        """The parent says to emit local time; the summary says never to."""
        assert _codes("Emit local time in the report.", "Never emit local time in the report.") == [
            "negation_lost"
        ]
        assert _codes("Use port 8443.", "Do not use port 8443.") == ["negation_lost"]

    def test_a_negation_another_parent_holds_is_not_added(self) -> None:
        """A summary of two parents negates what one of them negates, not what the other
        affirms."""
        parents = [
            ("p1", "Run the migration 0042 to revert it."),
            ("p2", "The migration 0042 must not be reverted."),
        ]
        summary = ("s1", "Run migration 0042 to revert it. Migration 0042 must not be reverted.")
        assert check_fidelity(parents, summary, FidelitySettings()).reasons == ()

    def test_a_negation_inside_a_quotation_is_no_negation(self) -> None:
        facts = extract_facts('The docs say "never emit local time".')
        assert "negation" not in facts.by_kind
        assert facts.by_kind["quoted"] == frozenset({"never emit local time"})


class TestComparators:
    def test_a_bound_is_a_fact(self) -> None:
        assert extract_facts("Retry at most 3 times.").by_kind["number"] == {"3", "<= 3"}
        assert extract_facts("no more than 500 ms").by_kind == {"number": {"500 ms", "<= 500 ms"}}

    @pytest.mark.parametrize(
        ("parent", "summary"),
        [
            ("Retry at most 3 times.", "Retry at least 3 times."),
            ("Keep it under 5 minutes.", "Keep it over 5 minutes."),
            ("Allow no more than 10 requests.", "Allow more than 10 requests."),
            ("Wait at least 2 s.", "Wait 2 s."),
        ],
    )
    def test_another_bound_loses_the_fact(self, parent: str, summary: str) -> None:
        assert _codes(parent, summary) == ["fact_lost"]

    @pytest.mark.parametrize(
        ("parent", "summary"),
        [
            ("Retry no more than 3 times.", "Retry at most 3 times."),
            ("Keep it below 5 minutes.", "Keep it under 5 min."),
            ("Wait at least 500 ms.", "Wait >= 0.5 s."),
        ],
    )
    def test_the_same_bound_in_other_words_is_kept(self, parent: str, summary: str) -> None:
        assert _codes(parent, summary) == []

    def test_no_more_than_is_no_negation(self) -> None:
        assert "negation" not in extract_facts("Retry no more than 3 times.").by_kind


class TestRestatements:
    @pytest.mark.parametrize(
        ("parent", "summary"),
        [
            ("Listen on port 8443.", "Listen on port \uff18\uff14\uff14\uff13."),  # full-width
            ("Listen on port 8443.", "Listen on port \u0668\u0664\u0664\u0663."),  # Arabic-Indic
            ("Wait \uff15\uff10\uff10 ms.", "Wait 500 ms."),
            ("Time out after 500 ms.", "Time out after 0.5 s."),
            ("Time out after 2 hours.", "Time out after 120 minutes."),
            ("Keep 1 GiB free.", "Keep 1024 MiB free."),
            ("Batch 10k rows.", "Batch 10,000 rows."),
            ("Start 25 workers.", "Start twenty-five workers."),
            ("Keep 100 shards.", "Keep one hundred shards."),
            ("Load 3000 rows.", "Load three thousand rows."),
            ("Load 250 rows.", "Load two hundred and fifty rows."),
            ("Wait 500 ms.", "Wait five hundred milliseconds."),
        ],
    )
    def test_a_faithful_restatement_is_kept(self, parent: str, summary: str) -> None:
        assert _codes(parent, summary) == []

    @pytest.mark.parametrize(
        ("parent", "summary"),
        [
            ("Time out after 500 ms.", "Time out after 5 s."),
            ("Time out after 2 hours.", "Time out after 20 minutes."),
            ("Start 25 workers.", "Start twenty workers."),
        ],
    )
    def test_another_amount_is_still_lost(self, parent: str, summary: str) -> None:
        assert _codes(parent, summary) == ["fact_lost"]
