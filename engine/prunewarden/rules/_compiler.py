"""Compiling an expression when the policy loads, so that nothing it could be refused for is
left to run time.

Its length, its nesting and the names it uses are checked (see the checker), then it is
evaluated on schema-shaped samples, which catches a ``when`` that gives something other than a
bool and operators applied to the wrong types.

It parses with :class:`~celpy.celparser.CELParser` rather than through ``celpy.Environment()``,
which raises the process-wide recursion limit.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import lark
from celpy.celparser import CELParseError, CELParser
from celpy.evaluation import CELEvalError

from prunewarden.rules._budget import BudgetExceededError, Deadline, DeadlineExceededError
from prunewarden.rules._checker import Checker, depth_problems
from prunewarden.rules._evaluation import clean_message, run
from prunewarden.rules._expression import (
    Expression,
    ExpressionError,
    ExpressionProblem,
    Result,
    Shape,
    json_type,
)
from prunewarden.rules._values import is_bool, to_cel, type_name

MAX_EXPRESSION_CHARS = 2048

_compile_lock = threading.Lock()


def compile_expression(
    source: str,
    variables: Mapping[str, Shape],
    *,
    result: Result = "bool",
    constants: Mapping[str, Any] | None = None,
) -> Expression:
    """Parse and check ``source``; raise :class:`ExpressionError` listing what is wrong.

    ``variables`` are the names the expression may read, with their schema. ``constants`` are
    variables whose values are known now (the policy's params); the others are sampled from their
    schema for the trial evaluation.
    """
    if len(source) > MAX_EXPRESSION_CHARS:
        message = (
            f"expression is {len(source)} characters long; the limit is {MAX_EXPRESSION_CHARS}"
        )
        raise ExpressionError([ExpressionProblem(message)])
    tree = _parse(source)
    problems = depth_problems(tree, source)
    if problems:
        raise ExpressionError(problems)
    checker = Checker(variables, source)
    checker.visit(tree, {}, 0)
    if checker.problems:
        raise ExpressionError(checker.problems)
    expression = Expression(source, without_pass_through(tree), checker.frozen_reads())
    problem = _trial(expression, variables, result, constants or {})
    if problem is not None:
        raise ExpressionError([problem])
    return expression


def _parse(source: str) -> Any:
    with _compile_lock:
        try:
            return CELParser().parse(source)
        except CELParseError as exc:
            cause = exc.__context__
            line, column = exc.line or 0, exc.column or 0
            token = getattr(cause, "token", None)
            char = getattr(cause, "char", None)
            if token is not None and token.type == "$END":
                what = "unexpected end of expression"
                line, column = _end_of(source)
            elif token is not None:
                what = f"unexpected {str(token)!r}"
            elif char is not None:
                what = f"unexpected character {char!r}"
            else:
                what = "invalid expression"
            problem = ExpressionProblem(f"syntax error: {what}", line, column, source)
            raise ExpressionError([problem]) from None


# Grammar levels that, holding one child, evaluate to that child's value unchanged: ``a < b``
# parses as expr > conditionalor > conditionaland > relation(...), and a bare ``a`` as eight such
# levels above its ``primary``. ``primary`` is not one of them (it dispatches on its child).
_PASS_THROUGH = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
    }
)


def without_pass_through(tree: Any) -> Any:
    """``tree`` without the single-child levels that only hand their child's value up.

    The evaluator visits every node (and the rule budget checks its deadline at each), so these
    levels were about half of an evaluation's nodes. Every node left keeps its data, children
    and position, so values, errors and their locations are those of the full tree.
    """
    if not isinstance(tree, lark.Tree):
        return tree
    while tree.data in _PASS_THROUGH and len(tree.children) == 1:
        child = tree.children[0]
        if not isinstance(child, lark.Tree):
            break
        tree = child
    children = [without_pass_through(child) for child in tree.children]
    return lark.Tree(tree.data, children, tree.meta)


def _end_of(source: str) -> tuple[int, int]:
    lines = source.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


# --- trial evaluation --------------------------------------------------------------------------

_TRIAL_SECONDS = 2.0
_SAMPLES = 3


def _trial(
    expression: Expression,
    variables: Mapping[str, Shape],
    result: Result,
    constants: Mapping[str, Any],
) -> ExpressionProblem | None:
    """Evaluate on schema-shaped samples: a wrong result type or an operator applied to the
    wrong types is a problem of the expression. Errors that depend on the data (a missing map
    key, a division by zero, an empty list) are left to run time, where they fail closed."""
    for k in range(_SAMPLES):
        values = {
            name: constants[name] if name in constants else sample(variables[name], k)
            for name in expression.reads
        }
        try:
            cel_values = {n: to_cel(v) for n, v in values.items()}
            value = run(expression, cel_values, Deadline(_TRIAL_SECONDS))
        except CELEvalError as exc:
            if len(exc.args) > 1 and exc.args[1] is TypeError:
                line, column = exc.line or 0, exc.column or 0
                message = f"type error: {clean_message(exc)}"
                return ExpressionProblem(message, line, column, expression.source)
            continue
        except DeadlineExceededError:
            message = f"took longer than {_TRIAL_SECONDS:g} s on a sample input"
            return ExpressionProblem(message)
        except BudgetExceededError as exc:
            return ExpressionProblem(f"over its budget on a sample input: {exc}")
        except RecursionError:
            return ExpressionProblem("too deeply nested to evaluate")
        if not (is_bool(value) if result == "bool" else isinstance(value, str)):
            noun = "a bool" if result == "bool" else "a string"
            return ExpressionProblem(
                f"must give {noun}, but gives {type_name(value)} on a sample input"
            )
    return None


def sample(shape: Shape, k: int) -> Any:
    """The ``k``-th sample value of a schema: a middle, a low and a high variant."""
    choices = shape.get("enum") if shape is not None else None
    kind = json_type(shape)
    if isinstance(choices, list) and choices:  # an enum needs no type to be sampled
        value = choices[k % len(choices)]
    elif shape is None or not kind:
        value = {}
    else:
        value = _sample_typed(shape, kind, k)
    return value


def _sample_typed(shape: Mapping[str, Any], kind: str, k: int) -> Any:
    if kind == "object":
        properties: Mapping[str, Any] = shape.get("properties", {})
        if properties:
            return {name: sample(sub, k) for name, sub in properties.items()}
        extra = shape.get("additionalProperties")
        if isinstance(extra, Mapping) and k != 1:
            return {"a": sample(extra, k), "b": sample(extra, k)}
        return {}
    if kind == "array":
        count = (2, 0, 1)[k % 3]
        return [sample(shape.get("items"), k) for _ in range(count)]
    samples: dict[str, tuple[Any, ...]] = {
        "number": (0.5, 0.0, 1.0),
        "string": ("sample text", "", "x"),
        "boolean": (True, False, True),
    }
    return samples.get(kind, (None,) * 3)[k % 3]
