"""Rewrite fidelity inside transitions: the seed's constraint, sessions, records, rules, scope,
fail-closed, and the policy section's digests and diff.

The golden cases (tests/cases/transition/fidelity-*) pin each reason code; these pin what a
case cannot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from prunewarden import (
    AuditLog,
    Engine,
    Policy,
    PolicyError,
    UnsafeTransitionError,
    parse_policy,
)
from prunewarden.audit._verify import verify_files
from prunewarden.policy import resolve_file
from prunewarden.policy._diff import diff

EngineFactory = Callable[..., Engine]
PolicyFactory = Callable[..., Policy]

UTC = "All timestamps must be UTC; never emit local time."
LOSSY = "Timestamps are UTC; emit local time in reports."
FAITHFUL = "Timestamps are UTC; local time is never emitted."
SYSTEM = {"id": "sys", "kind": "system", "text": "You are a coding agent."}
CONSTRAINT = {"id": "c1", "kind": "constraint", "text": UTC}
TURN = {"id": "t1", "kind": "turn", "text": "The gateway listens on port 8443."}
ENFORCE = {"fidelity": {"mode": "enforce"}}


def _summarized(text: str, *parents: dict[str, Any]) -> dict[str, Any]:
    """A transition folding ``parents`` into one summary with ``text``, every parent
    tombstoned (so only fidelity can refuse it)."""
    ids = [parent["id"] for parent in parents]
    summary = {"id": "sum", "kind": "summary", "text": text, "derived_from": ids}
    return {
        "check": "transition",
        "before": [SYSTEM, *parents],
        "after": [SYSTEM, summary],
        "tombstones": ids,
    }


class TestSeedConstraint:
    def test_without_the_section_a_lossy_summary_passes(self) -> None:
        """The default policy has no fidelity section: behaviour and digest are unchanged."""
        decision = Engine.default().evaluate(_summarized(LOSSY, CONSTRAINT))
        assert decision.codes == ("transition_clean",)

    def test_the_negation_lost_is_refused_and_restored(self, engine_with: EngineFactory) -> None:
        """The seed's UTC constraint paraphrased without its negation is refused."""
        decision = engine_with(**ENFORCE).evaluate(_summarized(LOSSY, CONSTRAINT, TURN))
        assert decision.blocks
        assert [r.to_dict()["detail"] for r in decision.reasons] == [
            {"parent": "c1", "child": "sum", "lost": ["negation"]}
        ]
        assert decision.restore == ("c1",)

    def test_a_faithful_paraphrase_is_allowed(self, engine_with: EngineFactory) -> None:
        """The same constraint, still negated in other words, is allowed."""
        decision = engine_with(**ENFORCE).evaluate(_summarized(FAITHFUL, CONSTRAINT, TURN))
        assert decision.codes == ("transition_clean",)

    def test_a_session_refuses_it_and_enforce_raises(self, engine_with: EngineFactory) -> None:
        """Session.verify refuses; Session.enforce raises UnsafeTransitionError."""
        session = engine_with(**ENFORCE).session("agent-1")
        document = _summarized(LOSSY, CONSTRAINT)
        verdict = session.verify(document["before"], document["after"], tombstones=["c1"])
        assert verdict.codes == ("negation_lost",)
        with pytest.raises(UnsafeTransitionError) as raised:
            session.enforce(document)
        assert raised.value.decision.codes == ("negation_lost",)

    def test_a_canary_is_protected_whatever_its_kind(self, engine_with: EngineFactory) -> None:
        """A turn named as a canary is a protected parent."""
        turn = {**CONSTRAINT, "kind": "turn"}
        document = {**_summarized(LOSSY, turn), "canaries": ["c1"]}
        assert engine_with(**ENFORCE).evaluate(document).codes == ("negation_lost",)


class TestScope:
    def test_an_unpinned_parent_is_not_checked_by_default(self, engine_with: EngineFactory) -> None:
        """scope protected: a turn's lost number refuses nothing."""
        decision = engine_with(**ENFORCE).evaluate(_summarized("A gateway exists.", TURN))
        assert decision.codes == ("transition_clean",)

    def test_scope_all_checks_every_parent(self, engine_with: EngineFactory) -> None:
        """scope all: the same summary loses the turn's number."""
        engine = engine_with(fidelity={"scope": "all"})
        decision = engine.evaluate(_summarized("A gateway exists.", TURN))
        assert [(r.code, r.detail["lost"]) for r in decision.reasons] == [("fact_lost", ["number"])]

    def test_a_parent_still_in_the_window_loses_nothing(self, engine_with: EngineFactory) -> None:
        """A summary beside the constraint it summarizes replaces nothing."""
        summary = {"id": "sum", "kind": "summary", "text": LOSSY, "derived_from": ["c1"]}
        document = {
            "check": "transition",
            "before": [SYSTEM, CONSTRAINT],
            "after": [SYSTEM, CONSTRAINT, summary],
        }
        assert engine_with(**ENFORCE).evaluate(document).codes == ("transition_clean",)


class TestRecordsAndRules:
    def test_the_record_names_ids_and_kinds_never_text(
        self, tmp_path: Path, make_policy: PolicyFactory
    ) -> None:
        """The audit record of a refusal holds the reason's ids and kinds, not the texts."""
        log_path = tmp_path / "audit.jsonl"
        with AuditLog(log_path) as audit:
            Engine(make_policy(**ENFORCE), audit=audit).evaluate(_summarized(LOSSY, CONSTRAINT))
        text = log_path.read_text(encoding="utf-8")
        records = [json.loads(line) for line in text.splitlines()]
        (record,) = [r for r in records if r["kind"] == "decision"]
        assert record["reasons"][0]["detail"] == {
            "parent": "c1",
            "child": "sum",
            "lost": ["negation"],
        }
        assert "local time" not in text
        assert verify_files([log_path]).ok

    def test_a_rule_reads_what_fidelity_found(self, engine_with: EngineFactory) -> None:
        """fidelity.lost and fidelity.kept_share are rule variables of a transition."""
        rule = {
            "name": "no-lost-numbers",
            "check": "transition",
            "when": '"number" in fidelity.lost || fidelity.kept_share < 0.5',
            "effect": "deny",
            "message": "a summary lost a number",
        }
        engine = engine_with(fidelity={"mode": "audit", "scope": "all"}, rules=[rule])
        decision = engine.evaluate(_summarized("A gateway exists.", TURN))
        assert decision.codes == ("rule:no-lost-numbers",)
        guard = [reason["code"] for reason in decision.reasons[0].detail["guard"]]
        assert guard == ["transition_clean", "fact_lost"]  # audit: listed, not refusing
        clean = engine.evaluate(_summarized("The gateway: port 8443.", TURN))
        assert clean.codes == ("transition_clean",)


class TestFailClosed:
    def test_the_embedding_method_without_an_embedder_refuses(
        self, engine_with: EngineFactory
    ) -> None:
        """method embedding with no embedder bound: internal_error, never an allow."""
        engine = engine_with(fidelity={"method": "embedding"})
        decision = engine.evaluate(_summarized(FAITHFUL, CONSTRAINT))
        assert decision.blocks
        assert decision.codes == ("internal_error",)
        assert decision.reasons[0].detail == {"error": "LookupError"}


class TestPolicySection:
    BASE = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"

    def _policy(self, extra: str) -> Any:
        return parse_policy(self.BASE.read_text(encoding="utf-8") + extra, "<test>")

    def _file(self, tmp_path: Path, name: str, extra: str) -> Path:
        path = tmp_path / name
        path.write_text(self.BASE.read_text(encoding="utf-8") + extra, encoding="utf-8")
        return path

    def test_implicit_values_change_no_digest(self) -> None:
        """{} and {mode: enforce} and the defaults spelled out digest alike; off is absent."""
        absent = self._policy("")
        enforce = self._policy("  fidelity: {mode: enforce}\n")
        empty = self._policy("  fidelity: {}\n")
        spelled = self._policy(
            "  fidelity: {method: facts, scope: protected, min_kept_share: 1, "
            "embedding_floor: 0.5}\n"
        )
        off = self._policy("  fidelity: {mode: off, scope: all}\n")
        assert absent.digest == off.digest == Engine.default().policy.digest
        assert enforce.digest == empty.digest == spelled.digest != absent.digest
        assert enforce.spec.fidelity.mode == "enforce"
        assert absent.spec.fidelity.mode == "off"

    def test_a_bad_error_pattern_is_a_located_problem(self) -> None:
        """A pattern that does not compile names its file, line, column and JSON path."""
        with pytest.raises(PolicyError) as raised:
            self._policy('  fidelity: {error_patterns: ["("]}\n')
        (problem,) = raised.value.problems
        assert problem.path == "$.spec.fidelity.error_patterns[0]"
        assert problem.line > 0
        assert "not a regular expression" in problem.message

    def test_a_validator_reads_the_effective_mode(self) -> None:
        """A guardrail reads spec.fidelity.mode whether or not the policy sets it (off when
        absent): it refuses the policy without the section and accepts it with one."""
        validator = (
            "  validators:\n  - name: fidelity-enforced\n"
            "    expression: spec.fidelity.mode == 'enforce'\n"
            "    message: summaries must be checked\n"
        )
        with pytest.raises(PolicyError) as raised:
            self._policy(validator)
        assert "summaries must be checked" in raised.value.problems[0].message
        assert self._policy(validator + "  fidelity: {}\n").spec.fidelity.mode == "enforce"

    def test_diff_shows_the_effective_change(self, tmp_path: Path) -> None:
        """policy diff compares the filled-in section: turning it on shows its mode."""
        a = resolve_file(self._file(tmp_path, "a.yaml", ""))
        b = resolve_file(self._file(tmp_path, "b.yaml", "  fidelity: {}\n"))
        changes = {(c.path, c.before, c.after) for c in diff(a, b)}
        assert ("spec.fidelity.mode", "off", "enforce") in changes


class _LetterEmbedder:
    """Each text as its letter counts: a deterministic stand-in for a sentence embedder."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return [[float(t.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]


class TestEmbedder:
    def test_the_engines_embedder_serves_the_meaning_method(
        self, make_policy: PolicyFactory
    ) -> None:
        """Engine(embedder=...) reaches the check: one batch per summary (the constraint's two
        clauses and the summary's two), a verdict, no error."""
        embedder = _LetterEmbedder()
        engine = Engine(make_policy(fidelity={"method": "both"}), embedder=embedder)
        decision = engine.evaluate(_summarized(UTC, CONSTRAINT))
        assert decision.codes == ("transition_clean",)
        assert embedder.batches == [4]


class TestSummaryOfASummary:
    def test_a_summary_parent_is_protected(self, engine_with: EngineFactory) -> None:
        """A summary of a summary that drops the negation the first one kept is refused,
        though the first summary is of no pinned kind."""
        first = {"id": "s0", "kind": "summary", "text": FAITHFUL, "derived_from": ["c1"]}
        second = {"id": "s1", "kind": "summary", "text": LOSSY, "derived_from": ["s0"]}
        document = {
            "check": "transition",
            "before": [SYSTEM, first],
            "after": [SYSTEM, second],
            "tombstones": ["s0"],
        }
        decision = engine_with(**ENFORCE).evaluate(document)
        assert [(r.code, r.detail["parent"]) for r in decision.reasons] == [("negation_lost", "s0")]
