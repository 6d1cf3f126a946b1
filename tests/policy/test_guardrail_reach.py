"""What a lock reaches and where a guardrail's refusal points (docs/deployments.md, section 3):
a lock on the rules, a rule or its expressions also locks the params they read and the score
scale; any other lock holds only its value; a refusal blames the line the overlay wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
from prunewarden import PolicyError, load_policy, parse_policy, rules
from prunewarden._json import JsonPath
from prunewarden._source import Origin, json_path
from prunewarden.errors import Problem
from prunewarden.policy._guardrails import (
    Validator,
    nearest,
    validator_problems,
    variable_shapes,
)

BASE = """\
spec:
  collapse: {spread_floor: 0.08}
  params:
    negations: [never, not]
    floor: 0.2
    shown: x
  rules:
    - name: pin-negations
      check: eviction
      when: score < params.floor && contains_any(segment.text, params.negations)
      effect: pin
      message: the segment states a negation
    - name: quiet
      check: eviction
      when: score < 0.01
      effect: deny
      message_expression: '"seen " + params.shown'
  locked: [LOCK]
"""


def policy(name: str, body: str = "", *, extends: str | None = None) -> str:
    head = "apiVersion: prunewarden/v1\nkind: Policy\n"
    if extends is not None:
        head += f"extends: '{extends}'\n"
    return head + f"metadata: {{name: {name}, version: 1.0.0}}\n" + body


def overlay(tmp_path: Path, lock: str, body: str) -> Path:
    (tmp_path / "base.yaml").write_text(policy("base", BASE.replace("LOCK", lock)))
    top = tmp_path / "top.yaml"
    top.write_text(policy("top", body, extends="base.yaml"))
    return top


def refusals(path: Path) -> list[Problem]:
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    return list(info.value.problems)


class TestWhatALockReaches:
    @pytest.mark.parametrize(
        ("lock", "rule"),
        [
            ("/spec/rules", "pin-negations"),
            ("/spec/rules/pin-negations/when", "pin-negations"),
        ],
    )
    def test_locking_the_rules_or_an_expression_locks_the_params_it_reads(
        self, tmp_path: Path, lock: str, rule: str
    ) -> None:
        """Changing params.floor under a lock on the rules or the rule's `when` is refused,
        at the overlay's value, naming the lock that implies it."""
        top = overlay(tmp_path, lock, "spec:\n  params: {floor: 0.0}\n")
        (problem,) = refusals(top)
        assert (problem.file, problem.line, problem.path) == (str(top), 6, "$.spec.params.floor")
        assert problem.message == (
            f"changes /spec/params/floor, which is locked by {tmp_path / 'base.yaml'}:21 "
            f"with {lock} (the locked rule {rule!r} reads it) (0.2 -> 0.0)"
        )

    def test_locking_the_rules_locks_every_rules_params(self, tmp_path: Path) -> None:
        """/spec/rules covers the second rule too: the param its message_expression reads."""
        top = overlay(tmp_path, "/spec/rules", "spec:\n  params: {shown: y}\n")
        (problem,) = refusals(top)
        assert problem.path == "$.spec.params.shown"
        assert "(the locked rule 'quiet' reads it)" in problem.message

    def test_a_message_expression_lock_locks_the_params_it_reads(self, tmp_path: Path) -> None:
        """A lock on a rule's message_expression covers the params read there."""
        top = overlay(
            tmp_path, "/spec/rules/quiet/message_expression", "spec:\n  params: {shown: y}\n"
        )
        (problem,) = refusals(top)
        assert problem.message.startswith("changes /spec/params/shown, which is locked by")

    def test_a_lock_on_one_rule_leaves_the_other_rules_params_open(self, tmp_path: Path) -> None:
        """Locking pin-negations does not lock the param only the rule quiet reads."""
        top = overlay(tmp_path, "/spec/rules/pin-negations", "spec:\n  params: {shown: y}\n")
        assert load_policy(top).document["spec"]["params"]["shown"] == "y"

    @pytest.mark.parametrize("lock", ["/spec/eviction", "/spec/collapse/spread_floor"])
    def test_a_lock_outside_the_rules_locks_no_params_or_scores(
        self, tmp_path: Path, lock: str
    ) -> None:
        """Any other pointer holds its own value only: params and scores stay open."""
        body = "spec:\n  params: {floor: 0.0}\n  scores: {min: 0.0, max: 100.0}\n"
        spec = load_policy(overlay(tmp_path, lock, body)).document["spec"]
        assert (spec["params"]["floor"], spec["scores"]["max"]) == (0.0, 100.0)

    def test_a_param_locked_both_ways_is_reported_once(self, tmp_path: Path) -> None:
        """A param locked explicitly and by a locked rule is one refusal, as declared."""
        base = BASE.replace(
            "locked: [LOCK]", "locked: [/spec/rules/pin-negations, /spec/params/floor]"
        )
        (tmp_path / "base.yaml").write_text(policy("base", base))
        top = tmp_path / "top.yaml"
        top.write_text(policy("top", "spec:\n  params: {floor: 0.0}\n", extends="base.yaml"))
        (problem,) = refusals(top)
        assert problem.message.startswith("changes /spec/params/floor, which is locked by")
        assert "(the locked rule" not in problem.message


class TestWhereALockRefusalPoints:
    def test_a_locked_section_blames_the_first_value_the_overlay_set_in_it(
        self, tmp_path: Path
    ) -> None:
        """Of two values the overlay changed inside a locked section, the first line is blamed."""
        body = "spec:\n  collapse:\n    consecutive_cycles: 4\n    spread_floor: 0.2\n"
        top = overlay(tmp_path, "/spec/collapse", body)
        (problem,) = refusals(top)
        assert (problem.line, problem.column, problem.path) == (
            7,
            25,
            "$.spec.collapse.consecutive_cycles",
        )

    def test_a_locked_list_item_blames_the_list_the_overlay_wrote(self, tmp_path: Path) -> None:
        """A lock on one item of a list (by index) blames the overlay's item that replaced it."""
        top = overlay(
            tmp_path, "/spec/params/negations/1", "spec:\n  params:\n    negations: [never, no]\n"
        )
        (problem,) = refusals(top)
        assert (problem.file, problem.line, problem.path) == (
            str(top),
            7,
            "$.spec.params.negations[1]",
        )
        assert problem.message.endswith("('not' -> 'no')")

    def test_a_locked_expression_blames_the_overlays_expression(self, tmp_path: Path) -> None:
        """Rewriting a locked rule's `when` is blamed at the overlay's `when`."""
        body = (
            "spec:\n  rules:\n    - name: pin-negations\n      check: eviction\n"
            "      when: score < 0.5\n      effect: pin\n      message: m\n"
        )
        top = overlay(tmp_path, "/spec/rules/pin-negations/when", body)
        (problem,) = refusals(top)
        assert (problem.line, problem.column, problem.path) == (9, 13, "$.spec.rules[0].when")

    def test_a_rule_added_under_a_lock_on_the_rules_is_blamed(self, tmp_path: Path) -> None:
        """With /spec/rules locked, a rule the overlay adds is the culprit."""
        rule = "{name: more, check: eviction, when: 'score < 0.01', effect: deny, message: m}"
        top = overlay(tmp_path, "/spec/rules", f"spec:\n  rules:\n    - {rule}\n")
        (problem,) = refusals(top)
        assert (problem.line, problem.path) == (7, "$.spec.rules[2]")
        assert problem.message.startswith("changes /spec/rules, which is locked by")

    def test_a_param_named_like_a_rule_is_blamed_as_the_param(self, tmp_path: Path) -> None:
        """Only a pointer into spec.rules is read by rule name: /spec/params/floor is the
        param even when a rule is named floor too."""
        rule = "{name: floor, check: eviction, when: 'score < 0.01', effect: deny, message: m}"
        base = f"spec:\n  params: {{floor: 0.2}}\n  rules:\n    - {rule}\n"
        (tmp_path / "base.yaml").write_text(
            policy("base", base + "  locked: [/spec/params/floor]\n")
        )
        top = tmp_path / "top.yaml"
        top.write_text(policy("top", "spec:\n  params: {floor: 0.5}\n", extends="base.yaml"))
        (problem,) = refusals(top)
        assert (problem.file, problem.line, problem.path) == (str(top), 6, "$.spec.params.floor")

    def test_a_shortened_list_blames_the_list_the_overlay_wrote(self, tmp_path: Path) -> None:
        """A locked list item the overlay's shorter list drops is blamed at that list."""
        body = "spec:\n  params:\n    negations: [never]\n"
        top = overlay(tmp_path, "/spec/params/negations/1", body)
        (problem,) = refusals(top)
        assert (problem.file, problem.line, problem.column, problem.path) == (
            str(top),
            7,
            16,
            "$.spec.params.negations",
        )
        assert problem.message.endswith("('not' -> nothing)")

    def test_a_value_that_becomes_a_list_is_named_without_values(self, tmp_path: Path) -> None:
        """Both values are quoted only when both are scalars."""
        top = overlay(tmp_path, "/spec/params/floor", "spec:\n  params:\n    floor: [a, b]\n")
        # With the cel-native extra, cel-cpp's checker also refuses score < params.floor.
        (problem,) = [p for p in refusals(top) if p.message.startswith("changes ")]
        assert problem.message == (
            f"changes /spec/params/floor, which is locked by {tmp_path / 'base.yaml'}:21"
        )

    def test_a_lock_on_a_setting_that_follows_another_holds(self, tmp_path: Path) -> None:
        """spec.transition.require_tombstones follows eviction.require_tombstone: an overlay
        changing the latter changes the locked former, and is refused though it never wrote it."""
        body = "spec:\n  eviction: {require_tombstone: false}\n"
        top = overlay(tmp_path, "/spec/transition/require_tombstones", body)
        (problem,) = refusals(top)
        assert problem.path == "$.spec.transition.require_tombstones"
        assert problem.message.startswith("changes /spec/transition/require_tombstones, which is")
        assert problem.message.endswith("(True -> False)")

    @pytest.mark.parametrize(
        "pointer",
        [
            "/spec/params/negations/2",
            "/spec/params/negations/x",
            "/spec/params/floor/x",
            "/spec/rules/pin-negations/when/x",
        ],
    )
    def test_a_lock_past_a_lists_end_or_through_a_scalar_names_nothing(
        self, tmp_path: Path, pointer: str
    ) -> None:
        """An index past a list's end, a name in a list, or a path through a scalar is
        refused where it is declared."""
        (tmp_path / "p.yaml").write_text(policy("p", BASE.replace("LOCK", pointer)))
        (problem,) = refusals(tmp_path / "p.yaml")
        assert (problem.line, problem.path) == (21, "$.spec.locked")
        assert "names nothing in this policy" in problem.message


class _Located:
    """A merged document whose every problem is placed at its first line."""

    def __init__(self) -> None:
        self.origins: dict[JsonPath, Origin] = {}

    def problem(
        self,
        path: JsonPath,
        message: str,
        *,
        at_key: bool = False,  # noqa: ARG002 - the protocol's
    ) -> Problem:
        return Problem("merged.yaml", 1, 1, json_path(path), message)


class TestValidatorsFailClosed:
    def test_a_policy_the_validators_cannot_read_is_refused(self) -> None:
        """A resolved policy holding a value with no CEL form refuses, at $.spec, rather than
        skipping its validators."""
        expression = rules.compile_expression("true", variable_shapes())
        validator = Validator("v", "m", expression, Origin("base.yaml", 9, 7), frozenset())
        document = {"metadata": {"name": "p"}, "spec": {"params": {"odd": {1, 2}}}}
        (problem,) = validator_problems([validator], document, _Located())
        assert (problem.file, problem.line, problem.path) == ("merged.yaml", 1, "$.spec")
        assert problem.message == (
            "the policy cannot be checked by its validators: set has no CEL value"
        )

    @pytest.mark.parametrize(
        ("entry", "path"),
        [("5", "$.spec.validators[0]"), ("{name: v, message: m, expression: 5}", None)],
    )
    def test_a_malformed_validator_is_a_schema_problem(self, entry: str, path: str | None) -> None:
        """A validator that is not a map, or whose expression is not text, is reported by the
        schema, located, and not compiled."""
        text = policy("p", f"spec:\n  validators:\n    - {entry}\n")
        with pytest.raises(PolicyError) as info:
            parse_policy(text)
        paths = [problem.path for problem in info.value.problems]
        assert paths == [path or "$.spec.validators[0].expression"]

    def test_a_policy_breaking_its_own_rules_validator_is_refused_at_the_validator(
        self, tmp_path: Path
    ) -> None:
        """A validator over spec.rules whose own file breaks it blames the validator: only a
        descendant's values are culprits."""
        body = (
            "spec:\n  rules:\n"
            "    - {name: x, check: eviction, when: 'score < 0.1', effect: warn, message: m}\n"
            "  validators:\n"
            "    - name: no-warn\n"
            "      expression: spec.rules.all(r, r.effect != 'warn')\n"
            "      message: rules refuse\n"
        )
        path = tmp_path / "solo.yaml"
        path.write_text(policy("solo", body))
        (problem,) = refusals(path)
        assert (problem.line, problem.path) == (9, "$.spec.validators")
        assert problem.message.endswith("failed: rules refuse")


class TestNearestOrigin:
    def test_a_path_without_an_origin_is_placed_at_its_nearest_ancestor(self) -> None:
        """A problem at a value no file wrote points at the closest enclosing value one did."""
        root, spec, deep = Origin("a.yaml", 1, 1), Origin("a.yaml", 4, 1), Origin("b.yaml", 9, 5)
        origins: dict[JsonPath, Origin] = {(): root, ("spec",): spec, ("spec", "a", "b"): deep}
        assert nearest(origins, ("spec", "a", "b", "c", "d")) == deep
        assert nearest(origins, ("spec", "a", "b", "c")) == deep
        assert nearest(origins, ("spec", "x", "y")) == spec
        assert nearest(origins, ("metadata",)) == root
        assert nearest({}, ("spec", "x")) is None
