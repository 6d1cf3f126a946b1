"""Custom CEL rules: the only package that imports ``celpy``, ``cel_expr_python`` (and ``re2``).
Expressions are compiled and checked against the documented variables when a policy loads, their
worst-case cost estimated, and evaluated within a budget of CPU time and memory, by cel-python
or (the ``cel-native`` extra) cel-cpp.

The names below resolve from their modules on first use (PEP 562 ``__getattr__``), not when the
package is imported: cel-python, lark and pendulum take longer to import than the rest of
prunewarden together, and a module that only names a :class:`Rule` (a policy's value, an audit
record's redaction) or :data:`DEFAULT_CACHE_SIZE` should not pay for them. The CEL runtime loads
with the first name that needs it (compiling or evaluating an expression). Not to dodge a cycle:
the imports are the ones listed under ``TYPE_CHECKING``, which the layer contracts read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prunewarden.rules._backend import BACKENDS, BackendUnavailableError, check_backend
    from prunewarden.rules._budget import Budget, Deadline
    from prunewarden.rules._checker import field_paths
    from prunewarden.rules._classify import Classification, ClassifyRule, SegmentClassifier
    from prunewarden.rules._compiler import compile_expression
    from prunewarden.rules._cost import estimate_cost
    from prunewarden.rules._evaluation import EvaluationError, evaluate_bool
    from prunewarden.rules._expression import Cost, Expression, ExpressionError, Shape
    from prunewarden.rules._model import DEFAULT_CACHE_SIZE, Rule
    from prunewarden.rules._ruleset import RuleSet
    from prunewarden.rules._spec import compile_rules
    from prunewarden.rules._values import to_cel

# Each public name and the module defining it (the imports above, read at run time).
_MODULE_OF = {
    "BACKENDS": "_backend",
    "BackendUnavailableError": "_backend",
    "check_backend": "_backend",
    "Budget": "_budget",
    "Deadline": "_budget",
    "field_paths": "_checker",
    "Classification": "_classify",
    "ClassifyRule": "_classify",
    "SegmentClassifier": "_classify",
    "compile_expression": "_compiler",
    "estimate_cost": "_cost",
    "EvaluationError": "_evaluation",
    "evaluate_bool": "_evaluation",
    "Cost": "_expression",
    "Expression": "_expression",
    "ExpressionError": "_expression",
    "Shape": "_expression",
    "DEFAULT_CACHE_SIZE": "_model",
    "Rule": "_model",
    "RuleSet": "_ruleset",
    "compile_rules": "_spec",
    "to_cel": "_values",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # resolved once: later reads are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BACKENDS",
    "DEFAULT_CACHE_SIZE",
    "BackendUnavailableError",
    "Budget",
    "Classification",
    "ClassifyRule",
    "Cost",
    "Deadline",
    "EvaluationError",
    "Expression",
    "ExpressionError",
    "Rule",
    "RuleSet",
    "SegmentClassifier",
    "Shape",
    "check_backend",
    "compile_expression",
    "compile_rules",
    "estimate_cost",
    "evaluate_bool",
    "field_paths",
    "to_cel",
]
