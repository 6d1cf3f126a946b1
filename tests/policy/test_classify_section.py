"""``spec.classify``: ordered rules giving kinds to segments that arrive without one, the
defaults after them, RE2 patterns checked when the policy loads, a digest an absent section does
not change, and overlays, locks and ``policy diff`` like every section."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.policy_sections import DEFAULT_DIGEST
from _support.policy_sections import policy_text as _policy
from _support.policy_sections import write_file as _write
from prunewarden import PolicyError, load_builtin_policy, load_policy, parse_policy
from prunewarden.policy import classifier, resolve_file
from prunewarden.policy._diff import diff

RULES = """
spec:
  classify:
    rules:
      - {match: {role: tool, tool: read_notes}, kind: constraint}
      - {match: {role: [user, assistant], pattern: "(?i)\\\\bdeadline\\\\b"}, kind: deadline}
"""


class TestClassifier:
    def test_the_defaults_name_constraints_and_definitions(self) -> None:
        """Without the section: an imperative with never / must / do not is a constraint, "X
        means Y" a definition, for a user or system segment; anything else keeps its kind."""
        classify = classifier(load_builtin_policy("default")).classify
        never = classify("user", "All timestamps must be UTC; never emit local time.")
        assert never is not None
        assert never.kind == "constraint"
        assert never.rule.startswith("default constraint")
        means = classify("system", "A sprint means two calendar weeks.")
        assert means is not None
        assert means.kind == "definition"
        assert classify("assistant", "You must never do that.") is None  # not an instruction
        assert classify("user", "Where is the time read?") is None

    def test_the_policys_rules_come_first_in_order(self) -> None:
        """The first matching rule names the kind: a tool's results, a pattern over roles."""
        classify = classifier(parse_policy(_policy(RULES))).classify
        notes = classify("tool", "never leave the cache warm", tool="read_notes")
        assert notes is not None
        assert (notes.kind, notes.rule) == (
            "constraint",
            "spec.classify.rules[0]",
        )
        late = classify("assistant", "The deadline is Friday.")
        assert late is not None
        assert (late.kind, late.rule) == ("deadline", "spec.classify.rules[1]")
        assert classify("tool", "The deadline is Friday.", tool="calendar") is None
        # The defaults follow the rules.
        task = classify("user", "Never push on Fridays.")
        assert task is not None
        assert task.kind == "constraint"

    def test_defaults_false_leaves_only_the_policys_rules(self) -> None:
        policy = parse_policy(_policy("spec:\n  classify: {defaults: false}\n"))
        assert classifier(policy).classify("user", "Never push on Fridays.") is None

    def test_a_long_text_is_searched_within_its_bound(self) -> None:
        """A match past the searched prefix is not seen: one search has a bounded cost."""
        classify = classifier(load_builtin_policy("default")).classify
        assert classify("user", "x" * 20_000 + " never do that") is None


class TestSection:
    def test_an_invalid_pattern_is_a_located_problem(self) -> None:
        """A backreference is no RE2: the problem names the rule's pattern."""
        text = _policy(
            "spec:\n  classify:\n    rules:\n      - {match: {pattern: '(a)\\1'}, kind: x}\n"
        )
        with pytest.raises(PolicyError) as raised:
            parse_policy(text, "p.yaml")
        (problem,) = raised.value.problems
        assert problem.path == "$.spec.classify.rules[0].match.pattern"
        assert "RE2" in problem.message

    def test_an_unknown_role_is_refused_by_the_schema(self) -> None:
        with pytest.raises(PolicyError) as raised:
            parse_policy(_policy("spec:\n  classify: {rules: [{match: {role: bot}, kind: x}]}\n"))
        assert raised.value.problems[0].path.startswith("$.spec.classify.rules[0].match.role")

    def test_the_bundled_default_keeps_its_digest(self) -> None:
        policy = load_builtin_policy("default")
        assert policy.digest == DEFAULT_DIGEST
        assert "classify" not in policy.document["spec"]

    def test_spelling_out_the_implicit_values_changes_nothing(self) -> None:
        plain = parse_policy(_policy())
        spelled = parse_policy(_policy("spec:\n  classify: {rules: [], defaults: true}\n"))
        assert spelled.digest == plain.digest

    def test_rules_change_the_digest(self) -> None:
        policy = parse_policy(_policy(RULES))
        assert policy.digest != parse_policy(_policy()).digest
        assert policy.document["spec"]["classify"]["rules"][0]["match"]["role"] == "tool"


class TestOverlaysAndLocks:
    def test_an_overlay_adds_rules(self, tmp_path: Path) -> None:
        _write(tmp_path, "base.yaml", _policy())
        child = _write(tmp_path, "child.yaml", _policy(RULES, name="c", extends="base.yaml"))
        policy = load_policy(child, lock=False)
        assert [r.kind for r in policy.spec.classify.rules] == ["constraint", "deadline"]

    def test_a_lock_on_the_section_refuses_an_overlay_that_changes_it(self, tmp_path: Path) -> None:
        """/spec/classify is locked though the base leaves it implicit."""
        _write(tmp_path, "base.yaml", _policy("spec:\n  locked: [/spec/classify]\n"))
        child = _write(tmp_path, "child.yaml", _policy(RULES, name="c", extends="base.yaml"))
        with pytest.raises(PolicyError) as raised:
            load_policy(child, lock=False)
        assert "changes /spec/classify" in str(raised.value)

    def test_a_validator_reads_the_effective_section(self) -> None:
        text = _policy(
            "spec:\n  validators:\n  - name: defaults-kept\n"
            "    expression: spec.classify.defaults == true\n"
            "    message: the default classifier stays on\n"
        )
        assert parse_policy(text).spec.classify.defaults is True
        with pytest.raises(PolicyError) as raised:
            parse_policy(text.replace("spec:\n", "spec:\n  classify: {defaults: false}\n", 1))
        assert "the default classifier stays on" in str(raised.value)

    def test_policy_diff_shows_the_rules(self, tmp_path: Path) -> None:
        a = _write(tmp_path, "a.yaml", _policy())
        b = _write(tmp_path, "b.yaml", _policy(RULES))
        changes = [c.path for c in diff(resolve_file(a), resolve_file(b))]
        assert changes == ["spec.classify.rules"]
