"""A parent's facts: read without the summary-only parts, kept by text digest, read in linear
time on runs that made the old patterns backtrack."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from prunewarden.fidelity import FidelitySettings, check_fidelity, extract_facts
from prunewarden.fidelity import _check as check

TEXTS = [
    "All timestamps must be UTC; never emit local time.",
    "Do not touch vendor/, and never run `make deploy` before 14:30 on May 3rd, 2024.",
    "Port 8,443 answers in 0.5 s; pin v2.3.1 in eu-west-1 (see https://example.com/a).",
    "Nothing else. Don\u2019t retry more than 3 times; avoid --force on /etc/app.yaml.",
]


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    check.clear_parent_facts()
    yield
    check.clear_parent_facts()


class TestParentFacts:
    @pytest.mark.parametrize("text", TEXTS)
    def test_a_parent_reads_the_same_facts_as_a_summary(self, text: str) -> None:
        """whole_text=False yields the same facts, and leaves the text and the clauses empty."""
        whole, parent = extract_facts(text), extract_facts(text, whole_text=False)
        assert (parent.by_kind, parent.text, parent.negated) == (whole.by_kind, "", ())

    @given(st.text(alphabet="ab19 .,;-/:'`\"nevrot\n", max_size=80))
    @example("no/1")  # a negator glued to a path: once read as a negation by one reading only
    def test_a_parent_reads_the_same_facts_on_any_text(self, text: str) -> None:
        """On any text, a parent's facts are a summary's, clauses aside."""
        assert extract_facts(text, whole_text=False).by_kind == extract_facts(text).by_kind

    def test_a_parent_checked_again_is_read_from_the_cache(self) -> None:
        """The second check of a parent text reuses its facts; another text gets its own."""
        first = check.parent_facts(TEXTS[0])
        assert check.parent_facts(TEXTS[0]) is first
        assert check.parent_facts(TEXTS[1]) is not first
        assert check.parent_facts(TEXTS[1]).by_kind == extract_facts(TEXTS[1]).by_kind

    def test_a_parent_with_a_lone_surrogate_is_read(self) -> None:
        """A text no codec would encode strictly (a lone surrogate) still gets its facts."""
        text = "Port 8443 \ud800 stays."
        assert check.parent_facts(text).by_kind == {"number": frozenset({"8443"})}

    def test_the_cache_is_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Past PARENT_CACHE_SIZE distinct texts, the least recently checked is forgotten."""
        monkeypatch.setattr(check, "PARENT_CACHE_SIZE", 2)
        first = check.parent_facts(TEXTS[0])
        check.parent_facts(TEXTS[1])
        check.parent_facts(TEXTS[2])
        assert len(check._PARENTS) == 2
        assert check.parent_facts(TEXTS[0]) is not first

    def test_a_cached_parent_still_refuses_a_lossy_summary(self) -> None:
        """Checking the same parent twice gives the same reasons both times."""
        parents = [("m1", TEXTS[0])]
        settings = FidelitySettings()
        codes = [
            [
                r.code
                for r in check_fidelity(
                    parents, ("s1", "Timestamps UTC; emit local time."), settings
                ).reasons
            ]
            for _ in range(2)
        ]
        assert codes == [["negation_lost"], ["negation_lost"]]


class TestLongRuns:
    def test_a_long_dotted_digit_run_is_one_version(self) -> None:
        """A run of 2,000 dotted numbers is read whole, as one identifier."""
        run = ".".join(["1"] * 2000)
        assert extract_facts(f"pin {run} now").by_kind == {"identifier": frozenset({run})}

    def test_a_long_dotted_word_run_holds_no_identifier(self) -> None:
        """A run of dotted one-letter words is no identifier, however long."""
        run = ".".join(["a"] * 2000)
        assert "identifier" not in extract_facts(f"see {run} now").by_kind

    def test_a_month_inside_a_word_is_no_date(self) -> None:
        """'3 Mayhem' holds the number 3, not the date May 3."""
        assert extract_facts("It was 3 Mayhem today").by_kind == {"number": frozenset({"3"})}
