"""The mutation gate's own checks, cheap enough for every ``make test``: its operators, its list
of areas, the regression patches still applying, and one known mutant killed."""

from __future__ import annotations

import functools
import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from survivors import REGRESSIONS, ROOT, Regression, area_fails, chosen

from mutation import _main
from mutation._areas import AREAS
from mutation._changed import ChangedError, changed_modules
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


EVICTION, STALENESS, COLLAPSE = (
    f"prunewarden/guards/{name}.py" for name in ("eviction", "staleness", "collapse")
)


def git(root: Path, *argv: str) -> None:
    subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text, encoding="utf-8")


@pytest.fixture
def branch(tmp_path: Path) -> Path:
    """A repository whose branch ``work`` left ``main`` and then changed the eviction guard
    (committed), a doc (committed) and the staleness guard (not committed); ``main`` has since
    changed the collapse guard."""
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "gate@example.org")
    git(tmp_path, "config", "user.name", "gate")
    for module in (EVICTION, STALENESS, COLLAPSE):
        write(tmp_path, f"engine/{module}", "X = 1\n")
    write(tmp_path, "docs/guards.md", "# guards\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "start")
    git(tmp_path, "checkout", "-q", "-b", "work")
    write(tmp_path, f"engine/{EVICTION}", "X = 2\n")
    write(tmp_path, "docs/guards.md", "# the guards\n")
    git(tmp_path, "commit", "-q", "-am", "work")
    git(tmp_path, "checkout", "-q", "main")
    write(tmp_path, f"engine/{COLLAPSE}", "X = 3\n")
    git(tmp_path, "commit", "-q", "-am", "main moves on")
    git(tmp_path, "checkout", "-q", "work")
    write(tmp_path, f"engine/{STALENESS}", "X = 4\n")
    return tmp_path


class TestChangedModules:
    def test_the_modules_a_branch_changed_since_it_left_main(self, branch: Path) -> None:
        """Committed and uncommitted changes of the branch count, in the gate's order; main's
        own later changes and files that are not modules of the gate do not."""
        modules = sorted(AREAS)
        assert changed_modules(branch, "main", modules) == [EVICTION, STALENESS]
        assert changed_modules(branch, "main", [STALENESS]) == [STALENESS]

    def test_nothing_changed_is_no_module(self, branch: Path) -> None:
        git(branch, "checkout", "-q", "--", ".")
        git(branch, "checkout", "-q", "main")
        assert changed_modules(branch, "main", sorted(AREAS)) == []

    def test_an_unknown_base_is_named(self, branch: Path) -> None:
        with pytest.raises(ChangedError, match=r"^git merge-base HEAD trunk: fatal: "):
            changed_modules(branch, "trunk", sorted(AREAS))

    def test_the_command_prints_the_modules_it_would_run(
        self, branch: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``--changed --print-modules`` lists the modules, one a line (what make passes on);
        with none changed it says so and runs nothing; a bad base exits 2."""
        monkeypatch.setattr(_main, "ROOT", branch)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            assert _main.main(["--changed", "--print-modules"]) == 0
            assert _main.main(["--changed", "--base", "trunk", "--print-modules"]) == 2
            git(branch, "checkout", "-q", "--", ".")
            git(branch, "checkout", "-q", "main")
            assert _main.main(["--changed"]) == 0
        assert out.getvalue() == f"{EVICTION}\n{STALENESS}\n"
        bad_base = "git merge-base HEAD trunk: fatal: Not a valid object name trunk"
        assert err.getvalue().splitlines() == [
            f"python -m mutation --changed: {bad_base}",
            "no module of the gate changed since main",
        ]

    def test_make_runs_the_regressions_of_the_changed_modules_only(self) -> None:
        """MUTATION_MODULES (what make CHANGED=1 sets) keeps the regressions of those modules."""
        kept = chosen(REGRESSIONS, f"{EVICTION} {STALENESS}")
        assert {r.module for r in kept} == {EVICTION, STALENESS}
        assert chosen(REGRESSIONS, None) == REGRESSIONS
        assert chosen(REGRESSIONS, "") == []
