"""The two CEL backends agree on generated expressions: drawn from a grammar of the subset rules
accept (``_support/cel_grammar.py``), compiled by the project's compiler, evaluated by cel-python
and cel-cpp on the same generated input: one value, or both fail.

``make test`` draws a fixed, derandomized budget of expressions; ``PRUNEWARDEN_FUZZ_SCALE``
(``make fuzz``) multiplies it and lets Hypothesis explore.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import pytest
from _support.cel_grammar import bools, eviction_inputs, strings
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prunewarden.rules import Deadline, EvaluationError, ExpressionError, compile_expression, to_cel
from prunewarden.rules._evaluation import evaluate
from prunewarden.rules._expression import Expression, ExpressionProblem, Result
from prunewarden.rules._native import compile_native, evaluate_native
from prunewarden.rules._spec import _params_shape
from prunewarden.rules._variables import variable_shapes

pytest.importorskip("cel_expr_python")

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
SHAPES = {**variable_shapes("eviction"), "params": _params_shape({})}
SETTINGS = settings(
    max_examples=30 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=SCALE == 1,
)


def _plain(value: Any) -> Any:
    """A value of either backend as plain Python (NaN as a marker equal to itself)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if type(value).__name__ == "BoolType" or isinstance(value, bool):
        return bool(value)
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else float(value)
    if isinstance(value, int):
        return int(value)
    return str(value) if isinstance(value, str) else value


def _outcome(run: Any) -> tuple[str, Any]:
    try:
        return ("value", _plain(run()))
    except EvaluationError:
        return ("error", None)


def _compiled(source: str, result: Result) -> Expression:
    try:
        return compile_expression(source, SHAPES, result=result, constants={"params": {}})
    except ExpressionError:
        assume(False)  # refused at load on both backends alike: nothing to compare
        raise


def _agree(expression: Expression, inputs: dict[str, Any]) -> None:
    cel = {name: to_cel(inputs[name]) for name in expression.reads}
    native = compile_native(expression)
    python = _outcome(lambda: evaluate(expression, cel, deadline=Deadline(5.0)))
    cpp = _outcome(lambda: evaluate_native(native, cel, deadline=Deadline(5.0)))
    assert python == cpp, expression.source


class TestGeneratedExpressions:
    @SETTINGS
    @given(source=bools(), inputs=eviction_inputs())
    def test_a_generated_condition_gives_one_value_or_fails_on_both(
        self, source: str, inputs: dict[str, Any]
    ) -> None:
        """A generated ``when``: the same bool on both backends, or rule_error on both."""
        _agree(_compiled(source, "bool"), inputs)

    @SETTINGS
    @given(source=strings(), inputs=eviction_inputs())
    def test_a_generated_message_gives_one_text_or_fails_on_both(
        self, source: str, inputs: dict[str, Any]
    ) -> None:
        """A generated ``message_expression``: the same text on both backends, or both fail."""
        _agree(_compiled(source, "string"), inputs)


class TestGrammar:
    @settings(max_examples=40, derandomize=True, deadline=None)
    @given(data=st.data())
    def test_most_drawn_conditions_compile(self, data: st.DataObject) -> None:
        """The grammar stays inside the accepted subset: a drawn condition compiles, or is
        refused for a reason the trial finds on its samples (a type error or a non-bool)."""
        source = data.draw(bools())
        problems: tuple[ExpressionProblem, ...] = ()
        try:
            compile_expression(source, SHAPES, constants={"params": {}})
        except ExpressionError as exc:
            problems = exc.problems
        refused = [p.message for p in problems]
        assert all(m.startswith(("type error", "must give")) for m in refused), source
