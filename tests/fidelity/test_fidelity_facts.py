"""The facts of a text: each kind found and normalized, negations with what they govern."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prunewarden.fidelity import FACT_KINDS, extract_facts

UTC = "All timestamps must be UTC; never emit local time."


class TestKinds:
    @pytest.mark.parametrize(
        ("text", "kind", "value"),
        [
            ("listen on port 8,443 now", "number", "8443"),
            ("a ratio of 1.0 here", "number", "1"),
            ("a ratio of 1.50 here", "number", "1.5"),
            ("wait 500ms first", "number", "500 ms"),
            ("wait 500 milliseconds first", "number", "500 ms"),
            ("a budget of $1,200.50 in total", "number", "1200.5 usd"),
            ("keep 12% free", "number", "12 %"),
            ("deploy to eu-west-1 today", "identifier", "eu-west-1"),
            ("pin v2.3.1 please", "identifier", "v2.3.1"),
            ("set max_tokens first", "identifier", "max_tokens"),
            ("call getUserName then", "identifier", "getusername"),
            ("use the HTTPClient class", "identifier", "httpclient"),
            (UTC, "identifier", "utc"),
            ("ship on 2024-05-01 at noon", "date", "2024-05-01"),
            ("meet at 14:30 sharp", "date", "14:30"),
            ("due on May 3rd, 2024 at the latest", "date", "2024-05-03"),
            ("due on May 3rd at the latest", "date", "may 3"),
            ("edit /etc/app/config.yaml then", "path", "/etc/app/config.yaml"),
            ("do not touch vendor/ at all", "path", "vendor"),
            ("edit config.yaml first", "path", "config.yaml"),
            ("call os.path.join here", "identifier", "os.path.join"),
            ("at 2:30 pm", "date", "14:30"),
            ("on 3 May 2024 or later", "date", "2024-05-03"),
            ("run it with --retries=3 once", "flag", "--retries=3"),
            ("see https://example.com/docs/ for more.", "url", "https://example.com/docs"),
            ("run `make  test` first", "code", "make test"),
            ('reply with "Exact   Phrase" only', "quoted", "exact phrase"),
            ("reply with 'single quotes' only", "quoted", "single quotes"),
        ],
    )
    def test_each_kind_is_found_normalized(self, text: str, kind: str, value: str) -> None:
        """Each kind of fact is found in prose and stored in its normalized form."""
        assert value in extract_facts(text).by_kind[kind]

    def test_plain_prose_holds_no_literal_fact(self) -> None:
        """Capitalized sentence starts, shouted prose and hyphenated words are no facts."""
        facts = extract_facts("The plan is well-known. NEVER DO THIS. Review it, then continue.")
        assert set(facts.by_kind) <= {"negation"}

    def test_a_url_is_not_also_a_path(self) -> None:
        """The longest kind wins: a URL's path is not read as a second fact."""
        facts = extract_facts("fetch https://example.com/a/b now")
        assert facts.by_kind == {"url": frozenset({"https://example.com/a/b"})}

    def test_an_apostrophe_inside_a_word_opens_no_quote(self) -> None:
        """``don't`` and ``it's`` do not pair up into a quoted string."""
        assert "quoted" not in extract_facts("don't do it, it's late").by_kind


class TestNegations:
    def test_a_negation_holds_the_words_it_governs(self) -> None:
        """``never emit local time`` governs emit, local, time (stemmed)."""
        assert extract_facts(UTC).by_kind["negation"] == {"emit local tim"}

    def test_a_negation_governs_up_to_a_comma(self) -> None:
        """ "No, the tests fail" negates nothing it could be held to."""
        assert "negation" not in extract_facts("No, the tests fail.").by_kind

    def test_contractions_and_curly_apostrophes_negate(self) -> None:
        """A contraction with a curly apostrophe negates like ``do not``."""
        assert extract_facts("Don\u2019t touch vendor/.").by_kind["negation"] == {"touch vendor"}
        assert extract_facts("Do not touch vendor/.").by_kind["negation"] == {"touch vendor"}

    def test_a_word_ending_in_a_negator_negates_nothing(self) -> None:
        """``know`` and ``piano`` hold no ``no``."""
        assert "negation" not in extract_facts("I know the piano tuner.").by_kind

    def test_a_negation_stops_at_its_clause(self) -> None:
        """The governed words end at the clause: the next sentence is not negated."""
        facts = extract_facts("Never delete backups. Rotate logs daily.")
        assert facts.by_kind["negation"] == {"delet backup"}


class TestTotality:
    @given(st.text(max_size=300))
    def test_any_text_yields_facts_of_known_kinds(self, text: str) -> None:
        """Any string yields facts of the documented kinds, and the same facts twice."""
        facts = extract_facts(text)
        assert set(facts.by_kind) <= set(FACT_KINDS)
        assert extract_facts(text) == facts
