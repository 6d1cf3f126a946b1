"""``prunewarden policy check``: the corpus of policy pairs with known relations, every witness
replayed through ``prunewarden evaluate``, the example policies, and the report formats."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden.analysis import CODES, Finding, check_policies, to_sarif
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "cases" / "policy_check"
CASES = sorted(path for path in CORPUS.iterdir() if path.is_dir())
EXAMPLES = sorted(
    [
        ROOT / "policies" / "default.yaml",
        *(ROOT / "examples" / "policies").glob("*.yaml"),
        *(ROOT / "examples" / "deployments").glob("*.yaml"),
        *(ROOT / "examples" / "agents").glob("minilm-*.yaml"),
    ]
)
# examples/deployments/replay.yaml breaks its base's guardrails on purpose (docs/deployments.md).
INVALID_EXAMPLES = {"replay.yaml"}
# What a claim says each policy does with its witness: True is "refuses".
CLAIMS = {
    "overlay-more-permissive": (False, True),
    "overlay-more-restrictive": (True, False),
}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def evaluate(policy: str, witness: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The decision ``prunewarden evaluate`` gives the witness under ``policy``."""
    document = folder / "witness.json"
    document.write_text(json.dumps(witness), encoding="utf-8")
    log = folder / "audit.jsonl"
    code, out, err = cli("evaluate", "--policy", policy, "--audit-log", str(log), str(document))
    assert code in {0, 1}, err
    decision: dict[str, Any] = json.loads(out)
    return decision


def blocks(decision: dict[str, Any]) -> bool:
    return bool(decision["outcome"] != "allow" and decision["enforced"])


def case_findings(case: Path) -> tuple[list[Finding], dict[str, Any], str]:
    expect = yaml.safe_load((case / "expect.yaml").read_text(encoding="utf-8"))
    against = str(case / expect["against"]) if "against" in expect else None
    policy = str(case / "policy.yaml")
    return check_policies([policy], against), expect, policy


def replay_witnesses(findings: list[Finding], folder: Path) -> int:
    """Replay every witnessed claim under both policies it names; how many were replayed."""
    replayed = 0
    for finding in findings:
        if finding.code not in CLAIMS:
            continue
        assert finding.witness is not None
        mine, base = finding.outcomes
        claimed = dict(zip((mine, base), CLAIMS[finding.code], strict=True))
        for policy, refuses in claimed.items():
            assert blocks(evaluate(policy, finding.witness, folder)) is refuses, (policy, finding)
        replayed += 1
    return replayed


class TestCorpus:
    @pytest.mark.parametrize("case", CASES, ids=lambda path: path.name)
    def test_finds_the_known_relation(self, case: Path) -> None:
        """Each policy pair yields exactly the findings its expect.yaml names."""
        findings, expect, _ = case_findings(case)
        assert sorted(f.code for f in findings) == sorted(expect["codes"])

    @pytest.mark.parametrize("case", CASES, ids=lambda path: path.name)
    def test_every_witness_reproduces_through_evaluate(self, case: Path, tmp_path: Path) -> None:
        """Every witnessed claim shows the claimed difference under ``prunewarden evaluate``."""
        findings, expect, _ = case_findings(case)
        witnessed = sum(code in CLAIMS for code in expect["codes"])
        assert replay_witnesses(findings, tmp_path) == witnessed

    def test_findings_point_at_the_fields_involved(self) -> None:
        """A permissive overlay is located at the line of the setting that loosened it."""
        findings, _, policy = case_findings(CORPUS / "more-permissive")
        (permissive,) = (f for f in findings if f.code == "overlay-more-permissive")
        pointers = {(loc.file, loc.line, loc.pointer) for loc in permissive.locations}
        assert (policy, 8, "/spec/eviction/require_tombstone") in pointers

    def test_production_findings_name_the_mode_and_the_label(self) -> None:
        """A guard off in a production policy is located at its mode and at the label."""
        findings, _, policy = case_findings(CORPUS / "production-guard-off")
        guard = next(f for f in findings if "staleness guard" in f.message)
        assert [(loc.pointer, loc.line) for loc in guard.locations] == [
            ("/spec/staleness/mode", 8),
            ("/metadata/labels/environment", 6),
        ]
        assert {loc.file for loc in guard.locations} == {policy}


class TestTranslation:
    def policy(self, tmp_path: Path, when: str, check: str = "eviction") -> str:
        effect = {"eviction": "deny", "collapse": "halt", "staleness": "deny"}[check]
        path = tmp_path / "policy.yaml"
        document = {
            "apiVersion": "prunewarden/v1",
            "kind": "Policy",
            "metadata": {"name": "rule", "version": "1.0.0"},
            "spec": {
                "params": {"limit": 10, "kinds": ["plan", "task"]},
                "rules": [
                    {"name": "r", "check": check, "when": when, "effect": effect, "message": "m"}
                ],
            },
        }
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        return str(path)

    @pytest.mark.parametrize(
        ("when", "check", "code"),
        [
            ("score < 0.0", "eviction", "rule-never-matches"),
            ("score <= 1", "eviction", "rule-always-matches"),  # int and double compare
            (
                "perturbed_score == null || perturbed_score >= 0.0",
                "eviction",
                "rule-always-matches",
            ),
            (
                "segment.kind in params.kinds && segment.kind == 'other'",
                "eviction",
                "rule-never-matches",
            ),
            (
                "size(span.derived_from) > params.limit && span.rewrite_count < 0",
                "staleness",
                "rule-never-matches",
            ),
            ("spread != null && spread < 0.0", "collapse", "rule-never-matches"),
            ("segment.kind in ['x', \"y\"] && segment.kind != 'x'", "eviction", None),
            ("segment.kind in ['x', 'y'] && segment.kind == 'z'", "eviction", "rule-never-matches"),
            ("segment.text == ''", "eviction", "not-analysed"),
            ("segment.id.startsWith('t')", "eviction", "not-analysed"),  # no string functions
        ],
    )
    def test_rule_conditions(self, tmp_path: Path, when: str, check: str, code: str | None) -> None:
        """Each condition is proved never or always to match, or reported as not analysed
        (None: it matches some inputs and not others)."""
        findings = check_policies([self.policy(tmp_path, when, check)])
        assert [f.code for f in findings] == ([code] if code else [])

    def test_a_satisfiable_condition_is_not_reported(self, tmp_path: Path) -> None:
        """A rule that matches some inputs and not others yields no finding."""
        assert (
            check_policies([self.policy(tmp_path, "score < 0.2 && !segment.tombstone_written")])
            == []
        )


class TestExamples:
    @pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: f"{path.parent.name}/{path.name}")
    def test_example_policies_check_with_reproducible_witnesses(
        self, path: Path, tmp_path: Path
    ) -> None:
        """Every shipped policy is checked against the default; its witnesses reproduce."""
        if path.name in INVALID_EXAMPLES:
            code, _, err = cli("policy", "check", str(path))
            assert (code, err.count("replay.yaml:")) == (3, 2)
            return
        findings = check_policies([str(path)], str(ROOT / "policies" / "default.yaml"))
        assert {f.code for f in findings} <= set(CODES)
        replay_witnesses(findings, tmp_path)

    def test_the_default_policy_is_clean(self) -> None:
        """The bundled default has no finding, and the command exits 0."""
        assert cli("policy", "check", "builtin:default") == (
            0,
            "0 error(s), 0 warning(s), 0 note(s)\n",
            "",
        )

    def test_a_loosened_candidate_is_an_error(self) -> None:
        """loose-candidate against the default: more permissive, exit 1."""
        candidate = str(ROOT / "examples" / "policies" / "loose-candidate.yaml")
        code, out, _ = cli("policy", "check", candidate, "--against", "builtin:default")
        assert code == 1
        assert "error overlay-more-permissive" in out


class TestReports:
    ARGS = (str(CORPUS / "pinned-kind-dropped" / "policy.yaml"),)

    def test_json_report(self) -> None:
        """--format json: the policies, a count per severity and every finding with witness."""
        code, out, _ = cli("policy", "check", *self.ARGS, "--format", "json")
        report = json.loads(out)
        assert code == 1
        assert report["summary"] == {"error": 2, "warning": 0, "note": 0}
        permissive = report["findings"][1]
        assert permissive["code"] == "overlay-more-permissive"
        assert permissive["witness"]["segment"]["kind"] == "negation"

    def test_sarif_report(self) -> None:
        """--format sarif: SARIF 2.1.0 with every code as a rule and located results."""
        code, out, _ = cli("policy", "check", *self.ARGS, "--format", "sarif")
        sarif = json.loads(out)
        (run_,) = sarif["runs"]
        rules = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
        assert (code, sarif["version"], rules) == (1, "2.1.0", sorted(CODES))
        first = run_["results"][0]
        assert rules[first["ruleIndex"]] == first["ruleId"] == "pinned-kind-dropped"
        region = first["locations"][0]["physicalLocation"]["region"]
        assert region == {"startLine": 7, "startColumn": 5}
        assert to_sarif([])["runs"][0]["results"] == []

    def test_witnesses_folder(self, tmp_path: Path) -> None:
        """--witnesses DIR writes each witness as an input document evaluate reads."""
        code, _, _ = cli("policy", "check", *self.ARGS, "--witnesses", str(tmp_path / "w"))
        (written,) = sorted((tmp_path / "w").iterdir())
        assert (code, written.name) == (1, "1-overlay-more-permissive.json")
        out = cli(
            "evaluate", "--policy", self.ARGS[0], "--audit-log", str(tmp_path / "log"), str(written)
        )
        assert json.loads(out[1])["outcome"] == "allow"

    def test_an_invalid_policy_exits_3(self, tmp_path: Path) -> None:
        """A policy that does not load is reported with its location, exit 3."""
        broken = tmp_path / "broken.yaml"
        broken.write_text("apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: x}\n")
        code, _, err = cli("policy", "check", str(broken))
        assert code == 3
        assert "$.metadata" in err

    def test_an_invalid_base_exits_3(self, tmp_path: Path) -> None:
        """--against naming a policy that does not load is reported like FILE, exit 3."""
        code, _, err = cli("policy", "check", *self.ARGS, "--against", str(tmp_path / "no.yaml"))
        assert code == 3
        assert "no.yaml" in err

    def test_without_z3_it_says_what_to_install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without z3-solver, policy check is a usage error naming the extra; show still runs."""
        monkeypatch.setitem(sys.modules, "z3", None)  # import z3 raises ImportError
        for module in [name for name in sys.modules if name.startswith("prunewarden.analysis")]:
            monkeypatch.delitem(sys.modules, module)
        monkeypatch.delitem(sys.modules, "prunewarden.cli._policy_check", raising=False)
        code, _, err = cli("policy", "check", *self.ARGS)
        assert (code, err) == (
            2,
            "prunewarden policy check: z3 is missing: pip install 'prunewarden[analyze]'\n",
        )
        assert cli("policy", "show", *self.ARGS)[0] == 0
