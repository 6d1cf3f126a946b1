"""``spec.compaction``: what a compaction hook blocks and does after an error of its own; a
``block_when`` compiled when the policy loads, a digest an absent section does not change, and
overlays, locks, validators and ``policy diff`` like every section."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.policy_sections import DEFAULT_DIGEST
from _support.policy_sections import policy_text as _policy
from _support.policy_sections import write_file as _write
from prunewarden import PolicyError, load_builtin_policy, load_policy, parse_policy
from prunewarden.policy import resolve_file
from prunewarden.policy._diff import diff

BLOCKING = """
spec:
  compaction:
    block_manual: true
    block_when: 'compaction.trigger == "manual" && window.exists(s, s.pinned && "path" in s.facts)'
    block_message: a pinned path would be summarized
    on_error: {auto: block}
"""


class TestSection:
    def test_the_implicit_values_block_nothing_and_warn_on_auto(self) -> None:
        settings = load_builtin_policy("default").spec.compaction
        assert (settings.block_manual, settings.block_when) == (False, None)
        assert (settings.on_error("auto"), settings.on_error("manual")) == ("warn", "block")

    def test_the_settings_are_read_and_the_condition_compiled(self) -> None:
        settings = parse_policy(_policy(BLOCKING)).spec.compaction
        assert settings.block_manual is True
        assert settings.block_when is not None
        assert settings.block_when.reads["compaction"] == frozenset({"trigger"})
        assert settings.block_message == "a pinned path would be summarized"
        assert (settings.on_error("auto"), settings.on_error("manual")) == ("block", "block")

    def test_a_condition_naming_an_unknown_field_is_a_located_problem(self) -> None:
        text = _policy("spec:\n  compaction:\n    block_when: 'compaction.trigerr == \"manual\"'\n")
        with pytest.raises(PolicyError) as raised:
            parse_policy(text, "p.yaml")
        (problem,) = raised.value.problems
        assert problem.path == "$.spec.compaction.block_when"
        assert (problem.line, problem.column) == (8, 17)
        assert "unknown field 'trigerr'" in problem.message

    def test_a_condition_that_is_no_bool_is_refused(self) -> None:
        text = _policy("spec:\n  compaction:\n    block_when: compaction.segments\n")
        with pytest.raises(PolicyError) as raised:
            parse_policy(text)
        assert raised.value.problems[0].path == "$.spec.compaction.block_when"

    def test_an_unknown_on_error_is_refused_by_the_schema(self) -> None:
        with pytest.raises(PolicyError) as raised:
            parse_policy(_policy("spec:\n  compaction: {on_error: {auto: ignore}}\n"))
        assert raised.value.problems[0].path == "$.spec.compaction.on_error.auto"

    def test_the_bundled_default_keeps_its_digest(self) -> None:
        policy = load_builtin_policy("default")
        assert policy.digest == DEFAULT_DIGEST
        assert "compaction" not in policy.document["spec"]

    def test_spelling_out_the_implicit_values_changes_nothing(self) -> None:
        plain = parse_policy(_policy())
        spelled = parse_policy(
            _policy(
                "spec:\n  compaction:\n    block_manual: false\n"
                "    on_error: {auto: warn, manual: block}\n"
            )
        )
        assert spelled.digest == plain.digest

    def test_settings_change_the_digest(self) -> None:
        policy = parse_policy(_policy(BLOCKING))
        assert policy.digest != parse_policy(_policy()).digest
        assert policy.document["spec"]["compaction"]["on_error"] == {"auto": "block"}


class TestOverlaysAndLocks:
    def test_an_overlay_sets_the_section(self, tmp_path: Path) -> None:
        _write(tmp_path, "base.yaml", _policy())
        child = _write(tmp_path, "child.yaml", _policy(BLOCKING, name="c", extends="base.yaml"))
        assert load_policy(child, lock=False).spec.compaction.block_manual is True

    def test_a_lock_on_on_error_refuses_an_overlay_that_changes_it(self, tmp_path: Path) -> None:
        """/spec/compaction/on_error is locked though the base leaves it implicit."""
        _write(tmp_path, "base.yaml", _policy("spec:\n  locked: [/spec/compaction/on_error]\n"))
        child = _write(tmp_path, "child.yaml", _policy(BLOCKING, name="c", extends="base.yaml"))
        with pytest.raises(PolicyError) as raised:
            load_policy(child, lock=False)
        assert "changes /spec/compaction/on_error" in str(raised.value)

    def test_a_validator_reads_the_effective_section(self) -> None:
        text = _policy(
            "spec:\n  validators:\n  - name: manual-blocks\n"
            "    expression: spec.compaction.on_error.manual == 'block'\n"
            "    message: a manual compaction's error blocks\n"
        )
        assert parse_policy(text).spec.compaction.on_error("manual") == "block"
        with pytest.raises(PolicyError) as raised:
            parse_policy(
                text.replace("spec:\n", "spec:\n  compaction: {on_error: {manual: warn}}\n", 1)
            )
        assert "a manual compaction's error blocks" in str(raised.value)

    def test_policy_diff_shows_the_settings(self, tmp_path: Path) -> None:
        a = _write(tmp_path, "a.yaml", _policy())
        b = _write(tmp_path, "b.yaml", _policy(BLOCKING))
        changes = sorted(c.path for c in diff(resolve_file(a), resolve_file(b)))
        assert changes == [
            "spec.compaction.block_manual",
            "spec.compaction.block_message",
            "spec.compaction.block_when",
            "spec.compaction.on_error",
        ]
