"""The mutation gate's own checks, cheap enough for every ``make test``: its operators, its list
of areas, the regression patches still applying, and one known mutant killed."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from survivors import REGRESSIONS, ROOT, Regression, area_fails

from mutation._areas import AREAS
from mutation._equivalent import EQUIVALENT, Equivalent
from mutation._operators import Mutant, mutants

SAMPLE = '''
def gate(score, floor, pinned):
    """Docstrings are not mutated."""
    if score < floor and not pinned:
        raise ValueError("low")
    return score + 1
'''


class TestOperators:
    def test_each_operator_makes_its_edit(self) -> None:
        """Comparisons, boundaries, and/or, not, arithmetic, numbers, returns and raises are
        each mutated once, and every mutant compiles."""
        found = {(m.operator, m.replacement) for m in mutants("sample.py", SAMPLE)}
        assert found == {
            ("flip-compare", "score >= floor"),
            ("boundary-compare", "score <= floor"),
            ("swap-and-or", "(score < floor or not pinned)"),
            ("remove-not", "(pinned)"),
            ("delete-raise", "pass"),
            ("return-none", "return None"),
            ("swap-add-sub", "(score - 1)"),
            ("number-plus-one", "2"),
        }

    def test_a_mutant_replaces_only_its_span(self) -> None:
        """Applying a mutant changes its node's text and nothing else of the file."""
        (flip,) = [m for m in mutants("sample.py", SAMPLE) if m.operator == "flip-compare"]
        assert flip.apply(SAMPLE) == SAMPLE.replace("score < floor", "score >= floor")

    def test_log_calls_are_left_alone(self) -> None:
        """A call of the package's loggers (`_diagnostics`) or of `warnings` makes no mutant:
        what it writes is not what a caller is answered."""
        source = "def f(n):\n    _diagnostics.warning('at %d', n + 1)\n    warnings.warn('x')\n"
        assert mutants("sample.py", source) == []


class TestAreas:
    def test_every_module_and_test_path_exists(self) -> None:
        """The areas name modules and test paths that exist (a renamed file must be followed)."""
        for module, stages in AREAS.items():
            assert (ROOT / "engine" / module).is_file(), module
            for path in (p.split("::")[0] for stage in stages for p in stage):
                assert (ROOT / path).exists(), path


@functools.cache
def mutants_of(module: str) -> tuple[str, list[Mutant]]:
    """The source of ``module`` and its mutants (made once: each is compiled)."""
    source = (ROOT / "engine" / module).read_text(encoding="utf-8")
    return source, mutants(module, source)


class TestEquivalents:
    @pytest.mark.parametrize("entry", EQUIVALENT, ids=lambda e: f"{e.module}:{e.where}")
    def test_each_listing_names_a_mutant_of_today(self, entry: Equivalent) -> None:
        """Each mutant listed as equivalent is still made from today's source of its module."""
        assert entry.module in AREAS
        source, found = mutants_of(entry.module)
        lines = source.splitlines()
        assert [m for m in found if entry.names(m, lines)], entry.edit
        assert entry.why


class TestRegressions:
    @pytest.mark.parametrize("regression", REGRESSIONS, ids=lambda r: r.name)
    def test_each_patch_applies_once(self, regression: Regression) -> None:
        """Each kept survivor's patch finds its text exactly once in today's source."""
        source = (ROOT / "engine" / regression.module).read_text(encoding="utf-8")
        assert regression.apply(source) != source
        assert regression.module in AREAS

    def test_a_known_mutant_is_killed(self, tmp_path: Path) -> None:
        """The gate works end to end: the tool_output tombstone mutant, applied to a copy of
        the tree, fails a test of its area."""
        (tombstones,) = [r for r in REGRESSIONS if r.name == "tool-output-without-tombstone"]
        assert area_fails(tombstones, tmp_path) == 1
