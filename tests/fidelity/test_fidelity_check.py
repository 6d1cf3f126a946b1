"""check_fidelity: facts kept and lost, negations, error summaries, reasons without text."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from prunewarden.fidelity import FidelitySettings, check_fidelity, is_error_text

UTC = "All timestamps must be UTC; never emit local time."
PORTS = "The gateway listens on port 8,443 in eu-west-1; run `make deploy` with --dry-run first."
DEFAULTS = FidelitySettings()


def _codes(parent: str, summary: str, settings: FidelitySettings = DEFAULTS) -> list[str]:
    result = check_fidelity([("m1", parent)], ("s1", summary), settings)
    return [reason.code for reason in result.reasons]


class TestNegation:
    def test_the_seed_paraphrased_without_its_negation_is_refused(self) -> None:
        """The UTC constraint summarized as "emit local time" loses its negation."""
        result = check_fidelity(
            [("m1", UTC)], ("s1", "Timestamps: UTC; emit local time."), DEFAULTS
        )
        assert [r.code for r in result.reasons] == ["negation_lost"]
        assert result.reasons[0].detail == {"parent": "m1", "child": "s1", "lost": ["negation"]}

    @pytest.mark.parametrize(
        "summary",
        [
            "All timestamps must be UTC; never emit local time.",
            "Timestamps are UTC. Local time is never emitted.",
            "Use UTC for timestamps and do not emit local time.",
            "UTC only; don\u2019t emit local times.",
        ],
    )
    def test_a_paraphrase_that_still_negates_is_kept(self, summary: str) -> None:
        """Reordered, passive or contracted, the negation of the same words is kept."""
        assert _codes(UTC, summary) == []

    def test_negating_other_words_does_not_keep_it(self) -> None:
        """A negation of something else in the summary does not keep the parent's."""
        assert _codes(UTC, "Timestamps are UTC; emit local time; never skip tests.") == [
            "negation_lost"
        ]


class TestFacts:
    def test_a_faithful_summary_keeps_every_fact(self) -> None:
        """Other wording, same number (other format), identifiers, code and flag: kept."""
        summary = "Gateway: port 8443, eu-west-1. First `make deploy` --dry-run."
        result = check_fidelity([("m1", PORTS)], ("s1", summary), DEFAULTS)
        assert result.reasons == ()
        assert result.kept_share == 1.0

    def test_a_changed_number_is_lost(self) -> None:
        """8443 summarized as 8080 loses a number; the reason names kinds and ids only."""
        summary = "Gateway: port 8080, eu-west-1. First `make deploy` --dry-run."
        result = check_fidelity([("m1", PORTS)], ("s1", summary), DEFAULTS)
        (reason,) = result.reasons
        assert reason.code == "fact_lost"
        assert reason.detail["lost"] == ["number"]
        assert (reason.detail["parent"], reason.detail["child"]) == ("m1", "s1")
        assert "8443" not in reason.message
        assert "8,443" not in reason.message

    def test_case_is_normalized(self) -> None:
        """``utc`` in the summary keeps ``UTC``."""
        result = check_fidelity([("m1", "Store UTC.")], ("s1", "store utc"), DEFAULTS)
        assert result.reasons == ()

    def test_a_unit_must_match_when_given(self) -> None:
        """500 ms summarized as 500 s is lost; summarized as a bare 500 it is kept."""
        assert _codes("Time out after 500 ms.", "Time out after 500 s.") == ["fact_lost"]
        assert _codes("Time out after 500 ms.", "Time out after 500.") == []

    def test_min_kept_share_tolerates_some_loss(self) -> None:
        """With min_kept_share 0.5, keeping most facts passes; negations still count."""
        settings = FidelitySettings(min_kept_share=0.5)
        assert _codes(PORTS, "Gateway: port 8443, eu-west-1, --dry-run.", settings) == []
        assert _codes(UTC, "UTC; emit local time.", settings) == ["negation_lost"]

    def test_only_the_counted_kinds_count(self) -> None:
        """A kind left out of ``kinds`` is neither counted nor lost."""
        settings = FidelitySettings(kinds=frozenset({"negation"}))
        assert _codes(PORTS, "A gateway.", settings) == []

    def test_every_parent_is_reported(self) -> None:
        """Two parents, one kept and one lost: one reason, per-parent shares."""
        result = check_fidelity(
            [("m1", UTC), ("m2", PORTS)], ("s1", "UTC, never emit local time."), DEFAULTS
        )
        assert [(p.parent, p.kept_share == 1.0) for p in result.parents] == [
            ("m1", True),
            ("m2", False),
        ]
        assert [r.detail["parent"] for r in result.reasons] == ["m2"]
        assert result.lost == ("number", "identifier", "flag", "code")


class TestErrors:
    @pytest.mark.parametrize(
        "summary",
        [
            "",
            "   \n",
            "Error: 429 Too Many Requests",
            "openai.RateLimitError: rate limit exceeded",
            'Traceback (most recent call last):\n  File "x.py", line 1',
            '{"error": {"type": "overloaded_error"}}',
            "503 Service Unavailable",
            "Error code: 429 - {'error': {'message': 'Rate limit reached'}}",
            "Request failed with status code 500",
            "context_length_exceeded: the prompt is too long",
            "I'm sorry, but I can't help with that.",
            "I cannot summarize this conversation.",
            "As an AI language model, I have no opinions.",
        ],
    )
    def test_an_error_or_refusal_is_no_summary(self, summary: str) -> None:
        """Empty text, provider errors, stack traces and refusals are summary_is_error."""
        result = check_fidelity([("m1", UTC)], ("s1", summary), DEFAULTS)
        assert [r.code for r in result.reasons] == ["summary_is_error"]
        assert result.reasons[0].detail["lost"] == ["identifier", "negation"]
        assert result.kept_share == 0.0

    @pytest.mark.parametrize(
        "summary",
        [
            "Error handling: retries back off; the 429 rate limit is respected.",
            "The user asked; I can't tell whether the tests pass, so rerun them.",
        ],
    )
    def test_a_summary_that_mentions_an_error_is_a_summary(self, summary: str) -> None:
        """The patterns are anchored: mentioning an error or a refusal is allowed."""
        assert not is_error_text(summary)

    def test_a_policy_may_add_patterns(self) -> None:
        """``error_patterns`` replaces the defaults (case-insensitive)."""
        settings = FidelitySettings(error_patterns=(r"^\s*summary unavailable",))
        assert _codes(UTC, "Summary unavailable.", settings) == ["summary_is_error"]


class _Embedder:
    """Vectors from a fixed table: each text's letters counted, for a deterministic cosine."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [
            [float(text.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"] for text in texts
        ]


class TestMeaning:
    def test_the_embedding_method_needs_an_embedder(self) -> None:
        """Without an embedder the meaning method raises, for the guard to refuse."""
        with pytest.raises(LookupError):
            check_fidelity([("m1", UTC)], ("s1", UTC), FidelitySettings(method="embedding"))

    def test_one_batch_per_check_and_drift_below_the_floor(self) -> None:
        """Every sentence embedded in one call (the parent's two clauses and the child's one);
        a far sentence is meaning_drift."""
        embedder = _Embedder()
        settings = FidelitySettings(method="embedding", embedding_floor=0.99)
        result = check_fidelity([("m1", UTC)], ("s1", "zzz qqq."), settings, embedder=embedder)
        assert embedder.calls == [3]
        assert [r.code for r in result.reasons] == ["meaning_drift"]
        same = check_fidelity([("m1", UTC)], ("s1", UTC), settings, embedder=embedder)
        assert same.reasons == ()


class TestParaphrase:
    @pytest.mark.parametrize(
        ("parent", "summary"),
        [
            ("Retry 3 times with --dry-run.", "Retry three times, in dry-run mode."),
            ("Ship on May 3rd, 2024.", "Ship 2024-05-03."),
            ("The job runs at 2:30 pm.", "Job: 14:30."),
            (
                "Do not touch vendor/ at all.",
                "Leave vendor alone: never touch vendor, it is frozen.",
            ),
            (
                "Do not modify files under vendor/ or third_party/.",
                "Files in vendor/ and third_party/ must not be modified.",
            ),
            ("Never commit directly to main; open a PR.", "No direct commits to main: use a PR."),
            ("Avoid calling the billing API in tests.", "Tests should not call the billing API."),
        ],
    )
    def test_other_forms_of_the_same_fact_are_kept(self, parent: str, summary: str) -> None:
        """Spelled-out numbers, flags without dashes, ISO dates, 24-hour times, paths without
        their slash, negations turned passive or into "no": kept."""
        assert _codes(parent, summary) == []
