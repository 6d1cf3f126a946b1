"""Dotted versions are one fact: a changed patch or minor number is a lost fact."""

from __future__ import annotations

import pytest
from prunewarden.fidelity import FidelitySettings, check_fidelity, extract_facts


class TestVersions:
    @pytest.mark.parametrize(
        ("text", "version"),
        [
            ("The image pins Python 3.11.9.", "3.11.9"),
            ("Run the image etl-runner:1.8.2 nightly.", "1.8.2"),
        ],
    )
    def test_a_dotted_version_is_read_whole(self, text: str, version: str) -> None:
        """A version of three or more numbers is one identifier, not a truncated decimal."""
        assert extract_facts(text).by_kind == {"identifier": frozenset({version})}

    def test_a_changed_version_is_a_lost_fact(self) -> None:
        """3.11.9 summarized as 3.12.9 loses the identifier; 3.11.9 kept loses nothing."""
        parent = [("m1", "The CI image pins Python 3.11.9 and runs in eu-west-1.")]
        settings = FidelitySettings()
        changed = check_fidelity(parent, ("s1", "CI pins Python 3.12.9 in eu-west-1."), settings)
        assert [(r.code, r.detail["lost"]) for r in changed.reasons] == [
            ("fact_lost", ["identifier"])
        ]
        kept = check_fidelity(parent, ("s1", "CI pins Python 3.11.9 in eu-west-1."), settings)
        assert kept.reasons == ()

    def test_decimals_and_thousands_stay_numbers(self) -> None:
        """8,443, 0.5 s and 12.5% are still numbers with their units."""
        facts = extract_facts("Port 8,443 answers in 0.5 s for 12.5% of calls.")
        assert facts.by_kind == {"number": frozenset({"8443", "0.5 s", "12.5 %"})}
