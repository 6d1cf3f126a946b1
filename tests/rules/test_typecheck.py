"""Type checking at load with cel-cpp's checker (where cel-expr-python is installed): a real type
error is a located problem of the policy, and what the project's semantics allow still loads."""

from __future__ import annotations

import pytest
from prunewarden import PolicyError, parse_policy
from prunewarden.rules import compile_expression
from prunewarden.rules._spec import _params_shape
from prunewarden.rules._typecheck import checker_available, type_problems
from prunewarden.rules._variables import variable_shapes

pytest.importorskip("cel_expr_python")

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: types, version: 1.0.0}\n"


def problems_of(source: str, check: str = "eviction") -> list[tuple[str, int, int]]:
    params = {"phrases": ["never"], "limit": 2}
    shapes = {**variable_shapes(check), "params": _params_shape(params)}
    expression = compile_expression(source, shapes, constants={"params": params})
    return [(p.message, p.line, p.column) for p in type_problems(expression, shapes)]


class TestAccepted:
    @pytest.mark.parametrize(
        ("check", "source"),
        [
            ("eviction", "size(candidates) > 3.0"),
            ("eviction", "score > 1 && 1 == 1.0"),
            ("eviction", "segment.tokens == null || segment.tokens > 100"),
            ("eviction", "score != null && perturbed_score != null"),
            ("eviction", "has(segment.metadata.a) && segment.metadata.a == 1.0"),
            (
                "eviction",
                "contains_any(segment.text, params.phrases) && size(candidates) > params.limit",
            ),
            ("eviction", "lower(segment.text).matches('^def')"),
            ("collapse", "canary.score != null && canary.score < baseline[canary.id]"),
            ("staleness", "spans.exists(s, s.text.contains('x')) && turn != null"),
            ("transition", "after.exists(s, s.kind == 'summary') && transition.kept.size() > 1"),
        ],
    )
    def test_the_projects_semantics_check(self, check: str, source: str) -> None:
        """Heterogeneous numbers, null comparisons, engine functions, nested fields: no error."""
        assert problems_of(source, check) == []


class TestRefused:
    def test_a_branch_no_sample_reaches_is_checked(self) -> None:
        """A bool compared to a string behind a short circuit: a type error at its operator."""
        found = problems_of("score < 0.5 ||\n  segment.non_recoverable == 'yes'")
        assert found == [
            ("type error: found no matching overload for '_==_' applied to '(bool, string)'", 2, 27)
        ]

    def test_positions_are_the_sources_after_a_wrapped_literal(self) -> None:
        """Columns point into the expression as written, numbers wrapped for the check or not."""
        found = problems_of("score > 1 || segment.text == segment.non_recoverable")
        assert found == [
            ("type error: found no matching overload for '_==_' applied to '(string, bool)'", 1, 27)
        ]

    def test_a_policy_with_a_type_error_is_refused_at_its_expression(self) -> None:
        """parse_policy: one located problem at the rule's when, with the expression's position."""
        text = HEADER + (
            "spec:\n  rules:\n    - name: t\n      check: eviction\n"
            '      when: "score < 0.5 || segment.id == segment.tombstone_written"\n'
            "      effect: deny\n      message: m\n"
        )
        with pytest.raises(PolicyError) as info:
            parse_policy(text, "p.yaml")
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.path) == ("p.yaml", 8, "$.spec.rules[0].when")
        assert problem.message.startswith(
            "type error: found no matching overload for '_==_' applied to '(string, bool)'"
        )
        assert "(at 1:27)" in problem.message

    def test_the_checker_is_found(self) -> None:
        """With cel-expr-python installed, the checker runs at load."""
        assert checker_available()
