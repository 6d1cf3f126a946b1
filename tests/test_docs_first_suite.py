"""docs/testing-policies.md's "A first suite" runs as written: saved where the page says, against
the deployment example's prod-eu policy, every case passes."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "testing-policies.md"


def first_suite() -> tuple[str, str]:
    """Where the section says to save its suite, and the suite's text."""
    section = PAGE.read_text(encoding="utf-8").split("## A first suite", 1)[1].split("\n## ", 1)[0]
    (where,) = re.findall(r"save it as\s+`([^`]+_test\.yaml)`", section)
    (suite,) = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    return where, suite


def test_the_first_suite_passes_against_prod_eu(tmp_path: Path) -> None:
    """The suite saved where the page says, in a copy of the repository's examples, passes:
    exit 0, its three cases passed."""
    for name in ("examples", "schemas", "policies"):
        shutil.copytree(ROOT / name, tmp_path / name)
    where, suite = first_suite()
    target = tmp_path / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(suite, encoding="utf-8")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run(["test", str(target.parent)], stdout, stderr)
    assert (code, stderr.getvalue()) == (0, "")
    assert "1 suite, 3 cases: 3 passed, 0 failed" in stdout.getvalue()


def test_its_modeline_names_the_schema_from_where_it_is_saved() -> None:
    """The suite's modeline resolves, from where the page saves it, to the bundled schema."""
    where, suite = first_suite()
    (modeline,) = re.findall(r"\$schema=(\S+)", suite.splitlines()[0])
    assert (ROOT / where).parent.joinpath(modeline).resolve() == (
        ROOT / "schemas" / "test-suite.v1.schema.json"
    )
