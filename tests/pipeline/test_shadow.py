"""Shadow policies: the candidate decides beside the active policy and is recorded, not obeyed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Engine, load_policy, parse_policy
from prunewarden._resources import schema
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ROOT / "examples" / "deployments"
EXAMPLES = ROOT / "examples" / "inputs"
RECORD = Draft202012Validator(schema("audit-record"))
HEAD = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {{name: {name}, version: 1.0.0}}\n"


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return loaded


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def decisions(stream: io.StringIO) -> list[dict[str, Any]]:
    return [r for r in records(stream) if r["kind"] == "decision"]


@pytest.fixture
def active() -> Any:
    return load_policy(DEPLOYMENTS / "prod-eu.yaml")


@pytest.fixture
def candidate() -> Any:
    return load_policy(DEPLOYMENTS / "prod-eu-candidate.yaml")


class TestDecision:
    def test_the_caller_gets_the_active_decision(self, active: Any, candidate: Any) -> None:
        """The decision is the one the active policy alone gives; the candidate's verdict rides
        beside it."""
        document = example("eviction-healthy.json")
        alone = Engine(active, logger=structlog.testing.CapturingLogger()).evaluate(document)
        shadowed = Engine(
            active, shadow=candidate, logger=structlog.testing.CapturingLogger()
        ).evaluate(document)
        assert (shadowed.outcome, shadowed.codes, shadowed.policy) == (
            alone.outcome,
            alone.codes,
            alone.policy,
        )
        assert shadowed.to_dict().keys() == alone.to_dict().keys()  # nothing added for callers
        assert shadowed.shadow is not None
        assert (shadowed.shadow.outcome, shadowed.shadow.policy.version) == ("deny", "1.5.0")
        assert [r.code for r in shadowed.shadow.reasons] == ["unstable_score"]
        assert not shadowed.shadow.agrees_with(shadowed)

    def test_a_refusal_the_candidate_would_allow_still_refuses(self, candidate: Any) -> None:
        """Swapped roles: the active refusal binds whatever the candidate says."""
        looser = parse_policy(HEAD.format(name="loose") + "spec:\n  eviction: {mode: 'off'}\n")
        engine = Engine(candidate, shadow=looser, logger=structlog.testing.CapturingLogger())
        decision = engine.evaluate(example("eviction-healthy.json"))
        assert decision.blocks
        assert decision.shadow is not None
        assert decision.shadow.outcome == "allow"
        assert not decision.shadow.blocks

    def test_agreement_is_outcome_and_consequence(self, active: Any) -> None:
        """Same outcome, one enforced and one audited: they do not agree."""
        audited = parse_policy(HEAD.format(name="audited") + "spec:\n  eviction: {mode: audit}\n")
        engine = Engine(active, shadow=audited, logger=structlog.testing.CapturingLogger())
        denied = engine.evaluate(example("eviction-buf-definition.json"))
        assert denied.shadow is not None
        assert (denied.outcome, denied.shadow.outcome) == ("deny", "deny")
        assert not denied.shadow.agrees_with(denied)
        allowed = engine.evaluate(example("eviction-healthy.json"))
        assert allowed.shadow is not None
        assert allowed.shadow.agrees_with(allowed)

    def test_a_candidate_refusing_the_input_is_recorded_not_raised(self, active: Any) -> None:
        """A narrower score range makes the document invalid for the candidate only."""
        narrow = parse_policy(HEAD.format(name="narrow") + "spec:\n  scores: {min: 0.5, max: 1}\n")
        engine = Engine(active, shadow=narrow, logger=structlog.testing.CapturingLogger())
        decision = engine.evaluate(example("eviction-healthy.json"))
        assert decision.outcome == "allow"
        assert decision.shadow is not None
        assert decision.shadow.outcome is None
        assert decision.shadow.error is not None
        assert decision.shadow.error.startswith("the candidate refuses the input: ")
        assert "outside the policy's score range [0.5, 1.0]" in decision.shadow.error

    def test_a_failing_candidate_rule_stays_in_the_shadow(self, active: Any) -> None:
        """A rule error in the candidate fails closed inside the candidate's verdict only."""
        broken = parse_policy(
            HEAD.format(name="broken")
            + "spec:\n  rules:\n    - {name: div, check: eviction, when: '1 / 0 > 0',"
            " effect: deny, message: m}\n"
        )
        engine = Engine(active, shadow=broken, logger=structlog.testing.CapturingLogger())
        decision = engine.evaluate(example("eviction-healthy.json"))
        assert decision.outcome == "allow"
        assert decision.shadow is not None
        assert decision.shadow.outcome == "deny"
        assert "rule_error:div" in [r.code for r in decision.shadow.reasons]

    def test_shadow_results_follow_every_typed_entry_point(
        self, active: Any, candidate: Any
    ) -> None:
        """detect_collapse, authorize_eviction and prune decide under both policies too."""
        engine = Engine(active, shadow=candidate, logger=structlog.testing.CapturingLogger())
        collapse = example("collapse-healthy.json")
        found = engine.detect_collapse(collapse["history"], collapse.get("baseline"))
        assert found.shadow is not None
        assert found.shadow.outcome == found.outcome

    def test_the_candidate_decides_staleness_the_columns_would_take(self) -> None:
        """A staleness document the columns decide alone (a plain guard, no rules) is decided
        by the candidate too once a shadow policy is set: here one that audits what the
        active policy enforces, its verdict beside the active decision."""
        document = example("staleness-healthy.json")
        plain = Engine.default(logger=structlog.testing.CapturingLogger())
        assert plain._staleness_columns
        audited = parse_policy(HEAD.format(name="audited") + "spec:\n  staleness: {mode: audit}\n")
        engine = Engine(plain.policy, shadow=audited, logger=structlog.testing.CapturingLogger())
        decision = engine.evaluate(document)
        assert (decision.outcome, decision.codes) == (
            plain.evaluate(document).outcome,
            plain.evaluate(document).codes,
        )
        assert decision.shadow is not None
        assert (decision.shadow.outcome, decision.shadow.enforced) == (decision.outcome, False)
        assert decision.shadow.policy.name == "audited"


class TestRecord:
    def test_the_record_carries_the_candidates_verdict(self, active: Any, candidate: Any) -> None:
        """The decision record has a schema-valid shadow block: identity with sources,
        outcome, reasons, actions and agreement; both policies are activated in the log."""
        stream = io.StringIO()
        with AuditLog(stream) as audit:
            engine = Engine(active, shadow=candidate, audit=audit)
            engine.evaluate(example("eviction-healthy.json"))
        lines = records(stream)
        for line in lines:
            assert list(RECORD.iter_errors(line)) == []
        (record,) = decisions(stream)
        shadow = record["shadow"]
        assert shadow["policy"]["digest"] == candidate.digest
        assert [s["path"] for s in shadow["policy"]["sources"]][:2] == [
            str(DEPLOYMENTS / "prod-eu-candidate.yaml"),
            str(DEPLOYMENTS / "prod-eu.yaml"),
        ]
        assert (shadow["outcome"], shadow["enforced"], shadow["agrees"]) == ("deny", True, False)
        assert [r["code"] for r in shadow["reasons"]] == ["unstable_score"]
        assert shadow["actions"] == [{"action": "rescore", "ids": ["turn-30"]}]
        assert record["policy"]["digest"] == active.digest
        activated = {r["policy"]["digest"] for r in lines if r["kind"] == "policy_activated"}
        assert activated == {active.digest, candidate.digest}

    def test_an_error_block_is_schema_valid(self, active: Any) -> None:
        """A candidate that could not decide is recorded with its error."""
        narrow = parse_policy(HEAD.format(name="narrow") + "spec:\n  scores: {min: 0.5, max: 1}\n")
        stream = io.StringIO()
        with AuditLog(stream) as audit:
            Engine(active, shadow=narrow, audit=audit).evaluate(example("eviction-healthy.json"))
        (record,) = decisions(stream)
        assert list(RECORD.iter_errors(record)) == []
        assert record["shadow"]["agrees"] is False
        assert "outcome" not in record["shadow"]

    def test_the_candidates_rule_messages_keep_text_out_of_the_log(self, active: Any) -> None:
        """A candidate rule quoting segment text is withheld, as the active policy's would be."""
        quoting = parse_policy(
            HEAD.format(name="quoting")
            + "spec:\n  rules:\n    - name: quote\n      check: eviction\n      when: 'true'\n"
            "      effect: warn\n      timeout_ms: 10000\n"
            "      message_expression: '\"saw \" + segment.text'\n"
        )
        document = example("eviction-untagged-negation.json")
        stream = io.StringIO()
        with AuditLog(stream) as audit:
            decision = Engine(active, shadow=quoting, audit=audit).evaluate(document)
        assert decision.shadow is not None
        assert document["segment"]["text"] in decision.shadow.reasons[-1].message
        assert document["segment"]["text"] not in stream.getvalue()

    def test_without_a_shadow_the_record_has_no_shadow_block(self, active: Any) -> None:
        """Only shadowed engines add the block."""
        stream = io.StringIO()
        with AuditLog(stream) as audit:
            Engine(active, audit=audit).evaluate(example("eviction-healthy.json"))
        (record,) = decisions(stream)
        assert "shadow" not in record


class TestCommandLine:
    def test_evaluate_with_a_shadow(self, tmp_path: Path) -> None:
        """--shadow prints the active decision (exit code included) and records the candidate's
        verdict; text format adds one line for it."""
        log = tmp_path / "audit.jsonl"
        out, err = io.StringIO(), io.StringIO()
        code = run(
            [
                "evaluate",
                "--format",
                "text",
                "--policy",
                str(DEPLOYMENTS / "prod-eu.yaml"),
                "--shadow",
                str(DEPLOYMENTS / "prod-eu-candidate.yaml"),
                "--audit-log",
                str(log),
                str(EXAMPLES / "eviction-healthy.json"),
            ],
            out,
            err,
        )
        assert (code, err.getvalue()) == (0, "")
        lines = out.getvalue().splitlines()
        assert lines[0] == "eviction: ALLOW (enforced)"
        assert lines[-1] == "  shadow prod-eu@1.5.0: DENY (enforced) unstable_score; differs"
        (record,) = [
            r for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "decision"
        ]
        assert record["shadow"]["outcome"] == "deny"

    def test_an_invalid_shadow_policy_exits_three(self) -> None:
        """The candidate must load: a refused one is an invalid policy."""
        out, err = io.StringIO(), io.StringIO()
        code = run(
            [
                "evaluate",
                "--shadow",
                str(DEPLOYMENTS / "replay.yaml"),
                str(EXAMPLES / "eviction-healthy.json"),
            ],
            out,
            err,
        )
        assert (code, out.getvalue()) == (3, "")
        assert "replay.yaml" in err.getvalue()
