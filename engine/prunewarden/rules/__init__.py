"""Custom CEL rules: the only package that imports ``celpy``. Expressions are compiled and
checked against the documented variables when a policy loads, and evaluated with a deadline.
"""

from __future__ import annotations

from prunewarden.rules._cel import (
    Deadline,
    EvaluationError,
    Expression,
    ExpressionError,
    Shape,
    compile_expression,
    evaluate_bool,
    field_paths,
    to_cel,
)
from prunewarden.rules._model import DEFAULT_CACHE_SIZE, Rule
from prunewarden.rules._ruleset import RuleSet, compile_rules

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "Deadline",
    "EvaluationError",
    "Expression",
    "ExpressionError",
    "Rule",
    "RuleSet",
    "Shape",
    "compile_expression",
    "compile_rules",
    "evaluate_bool",
    "field_paths",
    "to_cel",
]
