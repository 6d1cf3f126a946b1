"""Running a compiled expression: every failure becomes an :class:`EvaluationError`.

An error value, a spent budget, an exhausted stack and a bug in the evaluator all end as an
:class:`EvaluationError` with a short message that never quotes the activation, which cel-python
embeds in some of its own messages.

``celpy.Environment()`` raises the process-wide recursion limit; this package never creates one.
It evaluates with the tree-walking :class:`~celpy.evaluation.Evaluator` (what
``InterpretedRunner`` wraps), subclassed only to check the deadline between nodes; the engine
functions check it inside their loops, and :func:`run` once more after the last node, so a value
computed past the budget is never returned (see ``_budget``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import lark
from celpy.evaluation import Activation, CELEvalError, Evaluator

from prunewarden.rules._budget import BudgetExceededError, Deadline, Meter, current
from prunewarden.rules._expression import Expression
from prunewarden.rules._functions import FUNCTIONS
from prunewarden.rules._values import is_bool, type_name


class EvaluationError(Exception):
    """An expression failed while it was evaluated; the message is safe to show and log."""


class _Activation(Activation):
    """cel-python's activation, resolving a variable without building a typing construct.

    Activation's own ``resolve_variable`` spells ``cast(Union[Result, NameContainer], ...)``
    at every variable read: subscripting ``Union`` hashes cel-python's ``Result`` union, member
    by member, each time, which cost as much as the rest of the lookup together. Same lookup,
    same values, same ``KeyError`` when a name is neither a variable nor a function.
    """

    def resolve_variable(self, name: str) -> Any:
        try:
            return self.identifiers.resolve_name(self.package, name).value
        except KeyError:
            return self.functions[name]


class _Evaluator(Evaluator):
    """cel-python's tree-walking evaluator with a deadline checked at every node.

    ``visit_children`` replaces Evaluator's own (same body, plus the check) rather than wrapping
    it, so the check costs no stack frame: the evaluator already spends about 45 per level of
    parentheses.
    """

    def __init__(self, ast: Any, activation: Any, deadline: Deadline) -> None:
        super().__init__(ast, activation)
        self._deadline = deadline

    def sub_evaluator(self, ast: Any) -> _Evaluator:
        return _Evaluator(ast, self.activation, self._deadline)

    def visit_children(self, tree: Any) -> list[Any]:
        if self._deadline.expired():
            raise self._deadline.exceeded()
        self.level += 1
        values: list[Any] = lark.visitors.Interpreter.visit_children(self, tree)
        self.level -= 1
        return values


def run(expression: Expression, variables: Mapping[str, Any], deadline: Deadline) -> Any:
    """The value of ``expression``; raises :class:`BudgetExceededError` when the budget is spent
    before, during or by the end of the evaluation (then its value is not used)."""
    if deadline.expired():
        raise deadline.exceeded()
    activation = _Activation(vars=dict(variables), functions=FUNCTIONS)
    token = current.set(Meter(deadline))
    try:
        value = _Evaluator(expression.tree, activation, deadline).evaluate()
    finally:
        current.reset(token)
    if deadline.expired():  # the last node, or an engine function, may have run past it
        raise deadline.exceeded()
    return value


def evaluate(expression: Expression, variables: Mapping[str, Any], *, deadline: Deadline) -> Any:
    """Evaluate with CEL ``variables`` (see :func:`to_cel`), giving up when ``deadline``
    expires.

    Returns the CEL value; raises :class:`EvaluationError` with a clean message for every
    failure.
    """
    try:
        return run(expression, variables, deadline)
    except CELEvalError as exc:
        where = f" at {exc.line}:{exc.column}" if exc.line else ""
        raise EvaluationError(f"{clean_message(exc)}{where}") from None
    except BudgetExceededError as exc:
        raise EvaluationError(str(exc)) from None
    except RecursionError:
        raise EvaluationError("ran out of stack while evaluating") from None
    except Exception as exc:  # noqa: BLE001 - a bug in the evaluator must not escape as a traceback
        raise EvaluationError(f"the evaluator failed ({type(exc).__name__})") from None


def evaluate_bool(
    expression: Expression, variables: Mapping[str, Any], *, deadline: Deadline
) -> bool:
    value = evaluate(expression, variables, deadline=deadline)
    if not is_bool(value):
        raise EvaluationError(f"gave {type_name(value)}, not a bool")
    return bool(value)


def evaluate_text(
    expression: Expression, variables: Mapping[str, Any], *, deadline: Deadline
) -> str:
    value = evaluate(expression, variables, deadline=deadline)
    if not isinstance(value, str):  # cel-python's string concatenation returns a plain str
        raise EvaluationError(f"gave {type_name(value)}, not a string")
    return str(value)


_TYPE_NAME_RE = re.compile(r"<class '(?:celpy\.celtypes\.)?(\w+?)(?:Type)?'>")
_VALUE_RE = re.compile(r"\b(\w+?)Type\((?:[^()]|\([^()]*\))*\)")
_TOKEN_RE = re.compile(r"Token\('RULE', '(\w+)'\)")
# The parser's names of the operators, as an expression spells them.
_OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}


def clean_message(exc: BaseException) -> str:
    """cel-python's message without the activation it sometimes embeds or the values it quotes
    (a segment's text must not leak into decisions), shortened to one readable line."""
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    text = text.partition(" (in activation")[0]
    text = _TOKEN_RE.sub(lambda m: repr(_OPERATORS.get(m[1], m[1])), text)
    text = _TYPE_NAME_RE.sub(lambda m: _cel_type(m[1]), text)
    text = _VALUE_RE.sub(lambda m: _cel_type(m[1]), text)
    text = text.replace("found no matching overload", "no matching overload")
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _cel_type(name: str) -> str:
    return {"NoneType": "null", "Double": "double", "Int": "int", "String": "string"}.get(
        name, name.lower()
    )
