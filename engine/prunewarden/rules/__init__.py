"""Custom CEL rules: the only package that imports ``celpy``, ``cel_expr_python`` (and ``re2``).
Expressions are compiled and checked against the documented variables when a policy loads, and
evaluated within a budget of CPU time and memory, by cel-python or (the ``cel-native`` extra)
cel-cpp.
"""

from __future__ import annotations

from prunewarden.rules._backend import BACKENDS, BackendUnavailableError, check_backend
from prunewarden.rules._budget import Budget, Deadline
from prunewarden.rules._checker import field_paths
from prunewarden.rules._compiler import compile_expression
from prunewarden.rules._evaluation import EvaluationError, evaluate_bool
from prunewarden.rules._expression import Expression, ExpressionError, Shape
from prunewarden.rules._model import DEFAULT_CACHE_SIZE, Rule
from prunewarden.rules._ruleset import RuleSet
from prunewarden.rules._spec import compile_rules
from prunewarden.rules._values import to_cel

__all__ = [
    "BACKENDS",
    "DEFAULT_CACHE_SIZE",
    "BackendUnavailableError",
    "Budget",
    "Deadline",
    "EvaluationError",
    "Expression",
    "ExpressionError",
    "Rule",
    "RuleSet",
    "Shape",
    "check_backend",
    "compile_expression",
    "compile_rules",
    "evaluate_bool",
    "field_paths",
    "to_cel",
]
