"""The CEL layer: load-time checks, evaluation, values and engine functions."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden.rules._budget import Deadline
from prunewarden.rules._checker import MAX_NESTING
from prunewarden.rules._compiler import _parse, compile_expression
from prunewarden.rules._evaluation import EvaluationError, _Activation, evaluate
from prunewarden.rules._expression import Expression, ExpressionError, ExpressionProblem, Result
from prunewarden.rules._functions import FUNCTIONS
from prunewarden.rules._values import MAX_VALUE_DEPTH, to_cel, type_name
from prunewarden.rules._variables import variable_shapes

EVICTION = {
    **variable_shapes("eviction"),
    "params": {
        "type": "object",
        "properties": {"floor": {"type": "number"}, "words": {"type": "array"}},
        "additionalProperties": False,
    },
}
PARAMS = {"floor": 0.3, "words": ["never", "do not"]}


def compile_eviction(source: str, result: Result = "bool") -> Expression:
    return compile_expression(source, EVICTION, result=result, constants={"params": PARAMS})


def refusal(source: str) -> ExpressionProblem:
    with pytest.raises(ExpressionError) as info:
        compile_eviction(source)
    return info.value.problems[0]


def run(source: str, **variables: Any) -> Any:
    expression = compile_eviction(source)
    values = {name: to_cel(value) for name, value in variables.items()}
    return evaluate(expression, values, deadline=Deadline(5))


REFUSED = [
    # (expression, message start, line, column)
    ("score < < 0.2", "syntax error: unexpected '<'", 1, 9),
    ("score <\n  (0.2", "syntax error: unexpected end of expression", 2, 7),
    ("score # 1", "syntax error: unexpected character '#'", 1, 7),
    ("scroe < 0.2", "unknown variable 'scroe' (known: candidates, params, perturbed", 1, 1),
    ("segment.txt == ''", "unknown field 'txt' of 'segment' (known: id, kind, metadata", 1, 1),
    ("params.flor > 0.1", "unknown field 'flor' of 'params' (known: floor, words)", 1, 1),
    ("segment.id.x == ''", "the value is a string: it has no field 'x'", 1, 1),
    ("candidates.x == ''", "'candidates' is a list: it has no field 'x'", 1, 1),
    ("shout(segment.text)", "unknown function 'shout' (known: abs, bool", 1, 1),
    ("segment.text.shout()", "unknown function 'shout'", 1, 1),
    ("candidates.reduce(a, b, 0, a + b) > 0", "unknown function 'reduce'", 1, 1),
    ("mean(candidates, 1.0) > 0.0", "mean() takes 1 argument(s), not 2", 1, 1),
    ("score", "must give a bool, but gives double on a sample input", 0, 0),
    ("score > 0.5 ? true : 'no'", "must give a bool, but gives string", 0, 0),
    ("candidates.map(c, c)", "must give a bool, but gives list", 0, 0),
    (
        "1 + score > 0.0",
        "type error: no matching overload for '+' applied to '(int, double)'",
        1,
        1,
    ),
    (  # cel-python computed these; CEL and cel-cpp refuse an int and a double together
        "score * 2 > 1.0",
        "type error: no matching overload for '*' applied to '(double, int)'",
        1,
        1,
    ),
    (
        "score > 0.5 || 0 / score > 1.0",
        "type error: no matching overload for '/' applied to '(int, double)'",
        1,
        16,
    ),
    ("mean(segment.text) > 0.0", "type error: mean() takes a list or a map of numbers", 0, 0),
    ("x" * 2049, "expression is 2049 characters long; the limit is 2048", 0, 0),
    ("(" * 60 + "score" + ")" * 60 + " < 1.0", "nested 60 levels deep", 1, 60),
    (
        "[[[[[[[[[score]]]]]]]]] == []",
        "nested 9 levels deep (parentheses, brackets and calls)",
        1,
        9,
    ),
    (" && ".join(["score < 1.0"] * 130), "too complex: its parse tree is", 0, 0),
    (
        "candidates.exists(c, candidates.exists(d, c == d))",
        "exists() nested inside another comprehension",
        1,
        22,
    ),
    ("candidates.all(score, score == '')", "loop variable 'score' hides a variable", 1, 16),
    ("candidates.exists(c.d, true)", "the first argument of exists() must be a plain name", 1, 19),
    ("candidates.exists(c) ", "exists() takes a loop variable and an expression", 1, 1),
    ("score.exists(c, true)", "exists() needs a list or a map, not a number", 1, 1),
    ("exists(candidates)", "exists() is a macro: write list.exists(x, condition)", 1, 1),
    ("has(score)", "has() takes a field selection", 1, 1),
    ("T{a: 1} == T{a: 1}", "message construction (Type{...}) is not supported", 1, 1),
    (".score < 1.0", "names with a leading '.' are not supported", 1, 1),
]


class TestRefusedAtLoad:
    @pytest.mark.parametrize(("source", "message", "line", "column"), REFUSED)
    def test_refusal_is_precise(self, source: str, message: str, line: int, column: int) -> None:
        """Every malformed or abusive expression is refused with its reason and position."""
        problem = refusal(source)
        assert problem.message.startswith(message), problem.message
        assert (problem.line, problem.column) == (line, column)

    def test_caret_points_at_the_culprit(self) -> None:
        """The description quotes the expression's line with a caret under the column."""
        described = refusal("score < < 0.2").describe()
        assert described == (
            "syntax error: unexpected '<' (at 1:9)\n    | score < < 0.2\n    |         ^"
        )

    def test_every_problem_of_an_expression_is_reported(self) -> None:
        """Static problems come together, not one at a time."""
        with pytest.raises(ExpressionError) as info:
            compile_eviction("scroe < 0.2 && segment.txt == '' && shout(1)")
        assert len(info.value.problems) == 3

    def test_message_expression_must_give_a_string(self) -> None:
        """A message expression is checked for a string the way a condition is for a bool."""
        with pytest.raises(ExpressionError) as info:
            compile_eviction("score", result="string")
        assert "must give a string, but gives double" in info.value.problems[0].message
        assert compile_eviction("'id ' + segment.id", result="string").reads == {
            "segment": frozenset({"id"})
        }

    def test_data_dependent_errors_are_left_to_run_time(self) -> None:
        """A missing metadata key or an empty list is not a load-time problem."""
        compile_eviction("segment.metadata.owner == 'x'")
        compile_eviction("mean(candidates.map(c, 1.0)) > 0.5")

    @settings(max_examples=300, deadline=None)
    @given(
        st.text(
            alphabet=st.sampled_from(list("score<>=!&|()[]{}.,'\"?: +-*/%01._abcdegimnpstx\n")),
            max_size=40,
        )
    )
    def test_any_text_compiles_or_is_refused(self, source: str) -> None:
        """Whatever the text, compiling gives an expression or an ExpressionError, nothing else."""
        problems: tuple[ExpressionProblem, ...] = ()
        try:
            compile_eviction(source)
        except ExpressionError as exc:
            problems = exc.problems
            assert problems
        assert all(p.message for p in problems)


class TestReads:
    @pytest.mark.parametrize(
        ("source", "reads"),
        [
            ("score < 0.2", {"score": None}),
            ("segment.text.contains('x') && segment.kind == 'turn'", {"segment": {"text", "kind"}}),
            ("has(segment.metadata.owner)", {"segment": {"metadata"}}),
            ("size(segment.score_dependencies) > 0 && size(segment) > 0", {"segment": None}),
            ("candidates.exists(c, c == segment.id)", {"candidates": None, "segment": {"id"}}),
            ("score < params.floor", {"score": None, "params": {"floor"}}),
        ],
    )
    def test_reads_name_variables_and_fields(
        self, source: str, reads: dict[str, set[str] | None]
    ) -> None:
        """What an expression reads, down to the fields when it reads fields only."""
        expected = {k: None if v is None else frozenset(v) for k, v in reads.items()}
        assert dict(compile_eviction(source).reads) == expected


class TestEvaluation:
    def test_json_integers_are_doubles(self) -> None:
        """A score of JSON 0 compares with 0.2 (cel-python refuses int < double)."""
        assert run("score < 0.2", score=0) is not None
        assert bool(run("score < 0.2", score=0))

    @pytest.mark.parametrize(
        ("source", "expected"),
        [
            ("score == 1", True),
            ("size(candidates) < 2.5", True),
            ("size(candidates) == 2.0", True),
            ("perturbed_score == null", True),
            ("perturbed_score != null", False),
            ("score != null", True),
            ("segment.tokens > 100", True),
        ],
    )
    def test_numbers_compare_across_int_and_double(self, source: str, expected: bool) -> None:
        """CEL's heterogeneous numeric comparison and null equality."""
        segment = {"tokens": 120}
        value = run(source, score=1, candidates=["a", "b"], perturbed_score=None, segment=segment)
        assert bool(value) is expected

    @pytest.mark.parametrize(
        ("source", "expected"),
        [
            ("mean(candidates.map(c, 0.5)) == 0.5", True),
            ("stdev([0.0, 1.0]) == 0.5", True),
            ("stdev([]) == 0.0", True),
            ("sum([0.25, 0.5]) == 0.75", True),
            ("minimum([0.3, 0.1]) == 0.1 && maximum([0.3, 0.1]) == 0.3", True),
            ("count_below([0.1, 0.2, 0.5], 0.25) == 2", True),
            ("count_above([0.1, 0.2, 0.5], 0.25) == 1", True),
            ("abs(-0.5) == 0.5", True),
            ("lower('Never') == 'never'", True),
            ("contains_any('We do NOT ship', params.words)", True),
            ("contains_any('nothing here', params.words)", False),
            ("segment.text.matches('(?i)\\\\bnever\\\\b')", True),
        ],
    )
    def test_engine_functions(self, source: str, expected: bool) -> None:
        """The aggregates and text functions rules use instead of comprehensions."""
        value = run(source, candidates=["a"], segment={"text": "Never do that"}, params=PARAMS)
        assert bool(value) is expected

    @pytest.mark.parametrize(
        ("source", "message"),
        [
            ("mean(candidates.map(c, 0.5)) > 0.0", "mean() of an empty list"),
            ("segment.metadata.owner == 'x'", "no such member in mapping: 'owner'"),
            ("score / 0.0 > 1.0 && candidates[3] == 'x'", "invalid_argument"),
        ],
    )
    def test_runtime_errors_are_clean(self, source: str, message: str) -> None:
        """A failure is an EvaluationError with a short message, never the activation."""
        with pytest.raises(EvaluationError) as info:
            run(source, candidates=[], segment={"metadata": {}}, score=0.5)
        text = str(info.value)
        assert message in text
        assert "activation" not in text
        assert len(text) < 200

    def test_clean_message_drops_values_and_activation(self) -> None:
        """cel-python's quoted values and activation never reach a message."""
        private = "the private text of a segment"
        with pytest.raises(EvaluationError) as info:
            run("segment.metadata.note.kind == 'x'", segment={"metadata": {"note": private}})
        assert private not in str(info.value)
        assert "does not support field selection" in str(info.value)

    def test_deadline_counts_work_not_waiting(self) -> None:
        """A budget is the thread's CPU time: waiting does not spend it, working does."""
        deadline = Deadline(0.01)
        time.sleep(0.05)
        assert not deadline.expired()
        spin_until = time.thread_time() + 0.05
        while time.thread_time() < spin_until:
            pass
        assert deadline.expired()

    def test_deadline_stops_a_long_evaluation(self) -> None:
        """A comprehension over a big list stops at the deadline with a clean error."""
        expression = compile_eviction("candidates.exists(c, c == 'never-there')")
        values = {"candidates": to_cel([str(i) for i in range(20_000)])}
        started = time.thread_time()  # CPU time: a loaded machine does not stretch it
        with pytest.raises(EvaluationError, match="timed out"):
            evaluate(expression, values, deadline=Deadline(0.02))
        assert time.thread_time() - started < 1.0

    def test_stack_exhaustion_is_an_evaluation_error(self) -> None:
        """Evaluating with almost no stack left fails cleanly, not with a RecursionError."""
        expression = compile_eviction("((((((((score)))))))) < 1.0")
        values = {"score": to_cel(0.5)}

        def deep(n: int) -> Any:
            if n:
                return deep(n - 1)
            return evaluate(expression, values, deadline=Deadline(5))

        depth = sys.getrecursionlimit() - 60
        with pytest.raises(EvaluationError, match="ran out of stack"):
            deep(depth)

    @pytest.mark.parametrize(
        "source",
        [
            "(" * MAX_NESTING + "score" + ")" * MAX_NESTING + " < 1.0",
            " && ".join(["score < 1.0"] * 117),  # the longest chain within MAX_TREE_DEPTH
        ],
        ids=["deepest-nesting", "deepest-tree"],
    )
    def test_the_deepest_allowed_expression_evaluates_at_the_default_limit(
        self, source: str
    ) -> None:
        """Limits keep an accepted expression within the default recursion limit, with 300
        frames left for the caller."""
        expression = compile_eviction(source)
        values = {"score": to_cel(0.5)}

        def deep(n: int) -> Any:
            if n:
                return deep(n - 1)
            return evaluate(expression, values, deadline=Deadline(5))

        assert sys.getrecursionlimit() == 1000
        assert bool(deep(300))


class TestRecursionLimit:
    def test_compiling_and_evaluating_leave_the_limit_alone(self) -> None:
        """cel-python's Environment() raises the process-wide limit; this layer never does."""
        before = sys.getrecursionlimit()
        assert bool(
            run("score < 0.2 && candidates.exists(c, c == 'a')", score=0.1, candidates=["a"])
        )
        assert sys.getrecursionlimit() == before


class TestValues:
    def test_to_cel_converts_json_values(self) -> None:
        """Booleans stay booleans, every number is a double, containers convert deeply."""
        value = to_cel({"a": [1, 2.5, True, None, "x"]})
        items = value["a"]
        assert [type_name(v) for v in items] == ["double", "double", "bool", "null", "string"]

    def test_to_cel_refuses_values_nested_too_deeply(self) -> None:
        """A hostile metadata document cannot exhaust the stack."""
        value: Any = "x"
        for _ in range(MAX_VALUE_DEPTH + 5):
            value = [value]
        with pytest.raises(ValueError, match="nested deeper"):
            to_cel(value)


# Expressions covering every grammar level, macros, literals and run-time errors.
FLATTENED = [
    "score < 0.2",
    "!(score < 0.2) || -score > -1.0",
    "score > 0.5 ? segment.text == 'a' : score * 2.0 + 1.0 > 2.0",
    "candidates.exists(c, c == 'a') && candidates.all(c, size(c) > 0)",
    "candidates.map(c, c + '!').filter(d, d != 'b!') == ['a!']",
    "has(segment.text) && segment.metadata['k'] == 'v'",
    "{'x': score}['x'] == score && [1.0, score][1] == score",
    "segment.metadata['missing'] == 'v'",
    "score / 0.0 > 1.0 || size(candidates) % 2 == 0",
    "'a' in candidates && contains_any(segment.text, params.words)",
]


class TestPassThroughLevels:
    def test_compiled_tree_has_no_single_child_level(self) -> None:
        """A compiled expression keeps no expr/relation/.../member level holding one child."""
        levels = {"expr", "conditionalor", "conditionaland", "relation", "addition"}
        levels |= {"multiplication", "unary", "member"}
        for source in FLATTENED:
            tree = compile_eviction(source).tree
            passing = [
                node.data
                for node in tree.iter_subtrees()
                if node.data in levels and len(node.children) == 1
            ]
            assert passing == [], source

    @pytest.mark.parametrize("source", FLATTENED)
    def test_flattened_tree_evaluates_like_the_parsed_one(self, source: str) -> None:
        """Values and error messages (with their positions) are those of the full tree."""
        compiled = compile_eviction(source)
        full = Expression(source, _parse(source), compiled.reads)
        variables = {
            "score": to_cel(0.1),
            "candidates": to_cel(["a", "b"]),
            "segment": to_cel({"text": "never", "metadata": {"k": "v"}}),
            "params": to_cel(PARAMS),
        }
        outcomes = []
        for expression in (compiled, full):
            try:
                outcomes.append(repr(evaluate(expression, variables, deadline=Deadline(5))))
            except EvaluationError as exc:
                outcomes.append(f"error: {exc}")
        assert outcomes[0] == outcomes[1]
        assert len(list(compiled.tree.iter_subtrees())) < len(list(full.tree.iter_subtrees()))


class TestActivation:
    def test_resolves_variables_then_functions(self) -> None:
        """A name is a variable's value, else an engine function; an unknown name is a KeyError."""
        activation = _Activation(vars={"score": to_cel(0.5)}, functions=FUNCTIONS)
        assert activation.resolve_variable("score") == 0.5
        assert activation.resolve_variable("contains_any") is FUNCTIONS["contains_any"]
        with pytest.raises(KeyError):
            activation.resolve_variable("nothing")
