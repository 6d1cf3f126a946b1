"""What would stop a matched rule from matching: the ``would_allow`` of a ``rule:<name>`` reason.

A rule's condition is analysed when it is in a small subset, where the change that flips it can
be read off the expression itself:

- a comparison of a field with a constant, ``score < 0.2``, ``0.2 > score``,
  ``segment.kind == "tool_result"``, ``params.strict == true`` (``<``, ``<=``, ``>``, ``>=``,
  ``==``, ``!=``; a constant is a number, a bool, a plain string or ``null``);
- a comparison of a field with a param, ``canary.score < params.canary_floor``: the param is a
  constant of the policy, so the alternative compares the field with the param's value;
- either of those guarded by null checks of the fields it reads,
  ``spread != null && spread < 0.05``: making the comparison false makes the whole false.

The alternative is the comparison inverted (``spread >= 0.05``); a param's field is named by its
policy path (``spec.params.canary_floor``), any other field by the rule's own variable path
(``segment.tokens``, ``canary.score``; docs/rules.md), which a per-item rule reads on each item
it matched. Any other condition is not analysed, never guessed: no alternative, and the sentence
says the rule's trace (``explanation.rules``) shows what decided it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lark

from prunewarden.decision import Reason
from prunewarden.inputs import ScoreRange

# The comparison a relation's operator node stands for, and what each becomes when inverted
# (the rule no longer matches) or mirrored (the constant moved to the right side).
_OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
}
_INVERSE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
# As the guards' sentences write a comparison.
_SPOKEN = {"<": "<", "<=": "\u2264", ">": ">", ">=": "\u2265", "==": "==", "!=": "\u2260"}
_NOT_A_CONSTANT = object()
# The variables that hold a score (rule-variables.v1): one offered lies within spec.scores.
_SCORES = {
    ("score",),
    ("perturbed_score",),
    ("median",),
    ("canary", "score"),
    ("canary", "baseline"),
    ("span", "score"),
}


@dataclass(frozen=True, slots=True)
class _Comparison:
    path: tuple[str, ...]  # the field compared: ("segment", "tokens")
    op: str  # as the rule matches: path op value
    value: Any
    param: str | None = None  # the param the value is, when it is one


def explain_rule(
    reason: Reason, when: Any, params: Mapping[str, Any], scores: ScoreRange | None = None
) -> Reason:
    """``reason`` (a matched rule's) with ``would_allow`` and ``would_allow_text``: the change
    that flips the condition ``when`` (its parse tree) under the policy's ``params``, or none
    when the condition is not in the analysed subset, or when the change asks a score outside
    ``scores`` (the policy's score range; None: [0, 1])."""
    comparison = _analysed(when, params)
    name = reason.detail.get("rule", reason.code.removeprefix("rule:"))
    if comparison is None:
        sentence = (
            f"rule {name!r}: its condition is not a comparison of a field with a constant, so "
            "no change is computed; its trace (explanation.rules) shows what decided it"
        )
        return _explained(reason, [], sentence)
    op = _INVERSE[comparison.op]
    field = _field(comparison.path)
    change = {"field": field, "op": op, "value": comparison.value}
    items = reason.detail.get("items")
    where = f" on each of {', '.join(map(str, items))}" if items else ""
    constant = _shown(comparison.value)
    if comparison.param is not None:
        constant = f"params.{comparison.param} ({constant})"
    matched = f"{'.'.join(comparison.path)} {_SPOKEN[comparison.op]} {constant}"
    scale = scores if scores is not None else ScoreRange(0.0, 1.0)
    if comparison.path in _SCORES and not _reachable(op, comparison.value, scale):
        sentence = (
            f"rule {name!r} matched {matched}: no score in [{_shown(scale.min)}, "
            f"{_shown(scale.max)}] (spec.scores) stops it matching"
        )
        return _explained(reason, [], sentence)
    allowed = f"{field} {_SPOKEN[op]} {constant}"
    sentence = f"rule {name!r} matched {matched}: allowed at {allowed}{where}"
    return _explained(reason, [change], sentence)


def _reachable(op: str, value: Any, scores: ScoreRange) -> bool:
    """Whether some score of the range satisfies ``score op value``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return op == "!="  # a score is never equal to a non-number (null, a string)
    low, high = scores.min, scores.max
    return {
        "<": low < value,
        "<=": low <= value,
        ">": high > value,
        ">=": high >= value,
        "==": low <= value <= high,
        "!=": not low == high == value,
    }[op]


def _explained(reason: Reason, alternatives: list[dict[str, Any]], sentence: str) -> Reason:
    detail = {**reason.detail, "would_allow": alternatives, "would_allow_text": sentence}
    return reason.with_detail(detail)


def _analysed(tree: Any, params: Mapping[str, Any]) -> _Comparison | None:
    """The one comparison that decides ``tree``, when the tree is in the analysed subset."""
    terms = _conjuncts(tree)
    comparisons = [c for c in (_comparison(t, params) for t in terms) if c is not None]
    deciding = [c for c in comparisons if not _is_null_check(c)]
    if len(comparisons) != len(terms) or len(deciding) != 1:
        return None
    (found,) = deciding
    # The null checks may only guard the field compared, which the inverted comparison
    # keeps non-null.
    if any(c.path != found.path for c in comparisons if c is not found):
        return None
    return found


def _is_null_check(comparison: _Comparison) -> bool:
    return comparison.op == "!=" and comparison.value is None and comparison.param is None


def _conjuncts(tree: Any) -> list[Any]:
    """The terms of a chain of ``&&``, in source order (the tree itself when it is none)."""
    node = _unwrapped(tree)
    if isinstance(node, lark.Tree) and node.data == "conditionaland" and len(node.children) == 2:
        left, right = node.children
        return [*_conjuncts(left), right]
    return [node]


def _comparison(tree: Any, params: Mapping[str, Any]) -> _Comparison | None:
    """``field op constant`` (either way round), or None."""
    node = _unwrapped(tree)
    if not (isinstance(node, lark.Tree) and node.data == "relation" and len(node.children) == 2):
        return None
    operator, right = node.children
    if not isinstance(operator, lark.Tree) or operator.data not in _OPERATORS:
        return None
    op = _OPERATORS[operator.data]
    (left,) = operator.children
    left_path, right_path = _path(left), _path(right)
    if left_path is not None and left_path[0] != "params":
        constant = _constant(right, right_path, params)
        if constant is not None:
            return _Comparison(left_path, op, *constant)
    if right_path is not None and right_path[0] != "params":
        constant = _constant(left, left_path, params)
        if constant is not None:
            return _Comparison(right_path, _MIRROR[op], *constant)
    if left_path is not None and left_path[0] == "params":  # a param compared with a literal
        literal = _literal(right)
        if literal is not _NOT_A_CONSTANT:
            return _Comparison(left_path, op, literal)
    return None


def _constant(
    tree: Any, path: tuple[str, ...] | None, params: Mapping[str, Any]
) -> tuple[Any, str | None] | None:
    """A literal's value, or a param's value and name; None for anything else."""
    if path is not None:
        if len(path) == 2 and path[0] == "params" and path[1] in params:
            value = params[path[1]]
            return (value, path[1]) if _is_scalar(value) else None
        return None
    literal = _literal(tree)
    return None if literal is _NOT_A_CONSTANT else (literal, None)


def _path(tree: Any) -> tuple[str, ...] | None:
    """``a.b.c`` as its names, or None when the tree is not a plain field selection."""
    names: list[str] = []
    node = _unwrapped(tree)
    while isinstance(node, lark.Tree):
        if node.data == "member_dot" and len(node.children) == 2:
            receiver, token = node.children
            names.append(str(token))
            node = _unwrapped(receiver)
        elif node.data == "ident" and len(node.children) == 1:
            names.append(str(node.children[0]))
            return tuple(reversed(names))
        else:
            return None
    return None


def _literal(tree: Any) -> Any:  # noqa: PLR0911 - one answer per kind of literal
    """A literal's Python value (a number's sign is part of its token), else
    ``_NOT_A_CONSTANT``."""
    node = _unwrapped(tree)
    if not (isinstance(node, lark.Tree) and node.data == "literal" and len(node.children) == 1):
        return _NOT_A_CONSTANT
    token = node.children[0]
    kind, text = getattr(token, "type", ""), str(token)
    if kind == "FLOAT_LIT":
        return float(text)
    if kind == "INT_LIT":
        try:
            return int(text, 0)  # decimal or 0x hex, as CEL writes an int
        except ValueError:
            return _NOT_A_CONSTANT
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    # A plain quoted string; escapes, raw and triple-quoted strings are not decoded here.
    quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'"
    if kind == "STRING_LIT" and quoted and "\\" not in text and text[:3] != text[0] * 3:
        return text[1:-1]
    return _NOT_A_CONSTANT


def _unwrapped(tree: Any) -> Any:
    """The node under the single-child levels (and parentheses) that hand a value up."""
    while (
        isinstance(tree, lark.Tree)
        and len(tree.children) == 1
        and tree.data not in {"ident", "literal", "member_dot"}
        and isinstance(tree.children[0], lark.Tree)
    ):
        tree = tree.children[0]
    return tree


def _field(path: tuple[str, ...]) -> str:
    if path[0] == "params":
        return "spec." + ".".join(path)
    return ".".join(path)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return f"{value:g}" if isinstance(value, float) else str(value)
