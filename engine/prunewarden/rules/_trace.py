"""A rule's condition evaluated once more, recording the value of every sub-expression.

Only an explained decision (``explain=True``) pays for this: the rule is evaluated again by a
tree-walking evaluator that keeps, for each node it visits, the node's source text and value.
Nodes the evaluator never visits are not listed, so the steps are the path that decided it.
Values never carry a segment's text: every string stands as its length and SHA-256, and a list
or map as its size. Traces are made by cel-python whatever backend evaluates the rules: the
native backend exposes no sub-expression values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import lark
from celpy.evaluation import CELEvalError

from prunewarden.rules._budget import BudgetExceededError, Deadline, Meter, current
from prunewarden.rules._evaluation import _Activation as Activation
from prunewarden.rules._evaluation import _Evaluator as Evaluator
from prunewarden.rules._evaluation import clean_message
from prunewarden.rules._expression import Expression
from prunewarden.rules._functions import FUNCTIONS
from prunewarden.rules._values import is_bool, type_name

# The most steps one trace keeps; a long expression's trace says how many it left off.
MAX_TRACE_STEPS = 200


# Grammar nodes whose value is the list of a call's arguments, not a value of the expression.
_OPERAND_LISTS = frozenset({"exprlist", "fieldinits", "mapinits"})


class _Recorder(Evaluator):
    """Records each visited node's value, after its children (innermost first)."""

    def __init__(self, ast: Any, activation: Any, deadline: Deadline, source: str) -> None:
        super().__init__(ast, activation, deadline)
        self.source = source
        self.steps: dict[tuple[int, int], Any] = {}
        self.nodes = 0

    def sub_evaluator(self, ast: Any) -> Any:
        # A macro's body runs once per element: its inner values are not part of the trace.
        return Evaluator(ast, self.activation, self._deadline)

    def _visit_tree(self, tree: Any) -> Any:
        # lark's visit and visit_children both go through here: every node passes once.
        self.nodes += 1
        value = super()._visit_tree(tree)
        meta = tree.meta
        # A plain list is a grammar node's list of operands (an operator and its left side, a
        # call's arguments), not a value of the expression; a CEL list is a ListType.
        if (
            type(value) is not list
            and tree.data not in _OPERAND_LISTS
            and not meta.empty
            and hasattr(meta, "start_pos")
        ):
            # The outermost node of a span is visited last and has the same value: keep one.
            self.steps[(meta.start_pos, meta.end_pos)] = value
        return value


def trace(
    expression: Expression, variables: Mapping[str, Any], deadline: Deadline
) -> dict[str, Any]:
    """The value of ``expression`` and of each sub-expression visited, in source order, and
    the number of nodes visited (its cost in this evaluator)."""
    activation = Activation(vars=dict(variables), functions=FUNCTIONS)
    recorder = _Recorder(expression.tree, activation, deadline, expression.source)
    token = current.set(Meter(deadline))
    try:
        result: Any = recorder.evaluate()
    except CELEvalError as exc:
        result = exc
    except (BudgetExceededError, RecursionError, lark.exceptions.VisitError) as exc:
        result = CELEvalError(type(exc).__name__)
    finally:
        current.reset(token)
    ordered = sorted(recorder.steps.items(), key=lambda item: (item[0][0], -item[0][1]))
    steps = [
        {"expression": expression.source[start:end], "at": start, "value": shown(value)}
        for (start, end), value in ordered[:MAX_TRACE_STEPS]
    ]
    out: dict[str, Any] = {
        "value": shown(result),
        "steps": steps,
        "cost": {"nodes": recorder.nodes},
    }
    if len(ordered) > MAX_TRACE_STEPS:
        out["steps_left_off"] = len(ordered) - MAX_TRACE_STEPS
    return out


def shown(value: Any) -> Any:  # noqa: PLR0911 - one answer per kind of CEL value
    """A CEL value as a trace shows it: never a text (its length and hash stand in)."""
    if isinstance(value, BaseException):
        return {"error": clean_message(value)}
    if value is None:
        return None
    if is_bool(value):
        return bool(value)
    if isinstance(value, str | bytes):
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        return {"type": type_name(value), "length": len(value), "sha256": _sha(data)}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {"type": "map", "size": len(value)}
    if isinstance(value, list | tuple):
        return {"type": "list", "size": len(value)}
    return {"type": type_name(value)}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
