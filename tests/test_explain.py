"""Explained decisions: ``Engine.evaluate(explain=True)``, ``prunewarden explain`` and
``evaluate --explain``; rule traces on the example policies."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prunewarden import Engine, load_policy
from prunewarden.cli import run

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "examples" / "inputs"
CONTENT_PINS = ROOT / "examples" / "policies" / "content-pins.yaml"
# The example policies with rules (base.yaml is the rules of every deployment overlay).
WITH_RULES = [CONTENT_PINS, ROOT / "examples" / "deployments" / "base.yaml"]
DECISION = Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.v1.schema.json").read_text(encoding="utf-8"))
)


def document(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((INPUTS / name).read_text(encoding="utf-8"))
    return loaded


def unstable() -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": "t1", "kind": "turn", "text": "ran it", "tombstone_written": True},
        "score": 0.44,
        "perturbed_score": 0.75,
        "eviction_candidates": ["t1"],
    }


class TestEngine:
    def test_default_path_carries_no_explanation(self, engine: Engine) -> None:
        """Without explain, no reason has would_allow and the decision no explanation."""
        decision = engine.evaluate(unstable())
        assert decision.explanation is None
        assert "would_allow" not in decision.reasons[0].detail
        assert "explanation" not in decision.to_dict()

    def test_explained_refusal_says_what_would_allow_it(self, engine: Engine) -> None:
        """explain=True: the refusing reason lists its alternatives and a sentence."""
        decision = engine.evaluate(unstable(), explain=True)
        (reason,) = decision.reasons
        assert reason.code == "unstable_score"
        assert [c["field"] for c in reason.detail["would_allow"]] == [
            "spec.eviction.stability_delta",
            "perturbed_score",
        ]
        assert reason.detail["would_allow_text"].startswith("|\u0394| 0.31 > 0.25")
        assert decision.explanation == {"mode": "enforce", "rules": [], "rule_backend": None}

    def test_explained_allow_is_the_same_decision(self, engine: Engine) -> None:
        """An allowed decision gains only the explanation; its reasons are unchanged."""
        plain = engine.evaluate(document("eviction-healthy.json"))
        explained = engine.evaluate(document("eviction-healthy.json"), explain=True)
        assert explained.outcome == plain.outcome == "allow"
        assert explained.reasons == plain.reasons

    @pytest.mark.parametrize("path", sorted(INPUTS.glob("*.json")), ids=lambda p: p.stem)
    def test_every_example_input_explains_to_a_valid_decision(self, path: Path) -> None:
        """Every example input, explained under content-pins, is a valid decision.v1 whose
        guard refusals each carry would_allow."""
        engine = Engine(load_policy(CONTENT_PINS))
        decision = engine.evaluate(json.loads(path.read_text(encoding="utf-8")), explain=True)
        out = decision.to_dict()
        assert list(DECISION.iter_errors(out)) == []
        guard_refusals = [
            r for r in decision.reasons if decision.refused and not r.code.startswith("rule")
        ]
        assert all("would_allow" in r.detail for r in guard_refusals)


class TestRuleTraces:
    def test_a_matched_rule_shows_each_value_on_its_path(self) -> None:
        """pin-negations on the untagged negation: each sub-expression's value, text hashed."""
        engine = Engine(load_policy(CONTENT_PINS))
        decision = engine.evaluate(document("eviction-untagged-negation.json"), explain=True)
        assert decision.explanation is not None
        traces = {t["rule"]: t for t in decision.explanation["rules"]}
        assert list(traces) == ["pin-negations", "pin-definitions"]
        negation = traces["pin-negations"]
        assert negation["matched"] is True
        assert negation["value"] is True
        steps = {step["expression"]: step["value"] for step in negation["steps"]}
        assert steps["score < params.low_score"] is True
        assert steps["params.low_score"] == 0.2
        text = steps["segment.text"]
        assert set(text) == {"type", "length", "sha256"}
        assert negation["params"] == {
            "low_score": 0.2,
            "negations": ["never", "do not", "don't", "must not", "must never"],
        }
        assert negation["cost"]["nodes"] > 0
        assert negation["traced_with"] == "cel-python"

    def test_no_text_of_the_segment_appears_in_a_trace(self) -> None:
        """No word of the segment's text appears in the explained decision."""
        engine = Engine(load_policy(CONTENT_PINS))
        data = document("eviction-untagged-negation.json")
        data["segment"]["text"] = "the zebraquartz token must never be logged"
        decision = engine.evaluate(data, explain=True)
        assert decision.explanation is not None
        assert decision.explanation["rules"][0]["matched"] is True
        assert "zebraquartz" not in json.dumps(decision.to_dict())

    def test_per_item_rule_names_the_item_it_traced(self) -> None:
        """A canary rule traces the first matching canary and says how many there were."""
        engine = Engine(load_policy(CONTENT_PINS))
        decision = engine.evaluate(document("collapse-seed-narrowing.json"), explain=True)
        assert decision.explanation is not None
        (canary,) = [t for t in decision.explanation["rules"] if t["rule"] == "canary-floor"]
        assert canary["items"]["count"] >= 1
        assert canary["items"]["traced"] in [*canary["items"]["matched"], "task"]

    @pytest.mark.parametrize("policy", WITH_RULES, ids=lambda p: p.stem)
    def test_every_rule_of_the_example_policies_is_traced(self, policy: Path) -> None:
        """On every example input, each rule of the input's check has a trace with steps (or,
        per item, no item to trace), and none failed to trace."""
        engine = Engine(load_policy(policy))
        for path in sorted(INPUTS.glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            decision = engine.evaluate(data, explain=True)
            assert decision.explanation is not None
            names = [r.name for r in engine.policy.rules if r.check == data["check"]]
            traces = decision.explanation["rules"]
            assert [t["rule"] for t in traces] == names
            for trace in traces:
                assert "trace_error" not in trace
                assert trace.get("steps") or trace["items"]["traced"] is None

    def test_native_backend_rules_are_traced_by_cel_python(self) -> None:
        """Under cel="native" the decision names the backend and each trace says cel-python."""
        engine = Engine(load_policy(CONTENT_PINS), cel="native")
        decision = engine.evaluate(document("eviction-untagged-negation.json"), explain=True)
        assert decision.explanation is not None
        assert decision.explanation["rule_backend"] == "native"
        (negation, _) = decision.explanation["rules"]
        assert (negation["traced_with"], negation["matched"], negation["value"]) == (
            "cel-python",
            True,
            True,
        )


class TestCommandLine:
    @pytest.fixture(autouse=True)
    def _log(self, tmp_path: Path) -> None:
        self.log = str(tmp_path / "audit.jsonl")

    def cli(self, command: str, *argv: str) -> tuple[int, str, str]:
        """The command run in process, its records to a log file (else they go to stderr)."""
        out, err = io.StringIO(), io.StringIO()
        code = run([command, "--audit-log", self.log, *argv], out, err)
        return code, out.getvalue(), err.getvalue()

    def test_explain_prints_the_explained_decision_as_json(self) -> None:
        """prunewarden explain: the decision with would_allow and explanation; exit 1 refused."""
        code, out, err = self.cli("explain", str(INPUTS / "eviction-utc-constraint.json"))
        assert (code, err) == (1, "")
        decision = json.loads(out)
        assert decision["explanation"]["mode"] == "enforce"
        assert decision["reasons"][0]["code"] == "pinned"
        assert decision["reasons"][0]["detail"]["would_allow"] == [
            {"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "constraint"}
        ]

    def test_text_format_follows_each_reason_with_what_would_allow_it(self) -> None:
        """--format text: a would allow line and one line per alternative."""
        code, out, _ = self.cli(
            "explain", "--format", "text", str(INPUTS / "eviction-utc-constraint.json")
        )
        assert code == 1
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("  pinned:"))
        assert lines[at + 1].startswith("    would allow: kind 'constraint' is pinned")
        assert lines[at + 2] == '      - spec.eviction.pinned_kinds excludes "constraint"'

    def test_evaluate_explain_is_the_explain_command(self) -> None:
        """evaluate --explain prints what explain prints, up to ids and times."""
        name = str(INPUTS / "eviction-utc-constraint.json")
        _, explained, _ = self.cli("explain", name)
        _, evaluated, _ = self.cli("evaluate", "--explain", name)
        drop = ("decision_id", "evaluated_at")
        first, second = json.loads(explained), json.loads(evaluated)
        assert {k: v for k, v in first.items() if k not in drop} == {
            k: v for k, v in second.items() if k not in drop
        }
