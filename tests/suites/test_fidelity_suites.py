"""Policy test suites with rewrite fidelity: a case expects the lost negation, and coverage
counts the fidelity codes as applicable once the policy has spec.fidelity."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINT = "All timestamps must be UTC; never emit local time."
SUITE = f"""\
apiVersion: prunewarden/v1
kind: TestSuite
name: fidelity
policy: policy.yaml
cases:
  - name: the seed's constraint summarized without its negation
    input:
      check: transition
      before: [{{id: c1, kind: constraint, text: "{CONSTRAINT}"}}]
      after: [{{id: s1, kind: summary, text: "UTC; emit local time.", derived_from: [c1]}}]
      tombstones: [c1]
    expect:
      outcome: deny
      reasons: [negation_lost]
      actions_include: [restore]
"""


class TestFidelitySuites:
    def test_a_case_expects_the_lost_negation(self, tmp_path: Path) -> None:
        """The suite passes; the fidelity codes are applicable, negation_lost exercised."""
        policy = (ROOT / "policies" / "default.yaml").read_text(encoding="utf-8")
        (tmp_path / "policy.yaml").write_text(
            policy.replace("name: default", "name: fidelity") + "  fidelity: {}\n",
            encoding="utf-8",
        )
        (tmp_path / "fidelity_test.yaml").write_text(textwrap.dedent(SUITE), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        code = run(["test", str(tmp_path), "--format", "json"], out, err)
        report = json.loads(out.getvalue())
        assert code == 0, err.getvalue()
        (coverage,) = report["coverage"]
        assert coverage["reasons"]["negation_lost"] == 1
        assert {"fact_lost", "summary_is_error"} <= set(coverage["never_exercised"])
        assert "meaning_drift" in coverage["not_applicable"]
