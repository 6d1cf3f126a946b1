"""A rule's parse tree as plain terms, for analysis that must not depend on the CEL runtime.

``prunewarden.analysis`` reasons about rules symbolically; it reads these terms, never the
parse tree, so the parser's node names stay behind this package's door. Only the subset the
analysis translates exactly becomes a term (literals, variables and their fields, comparisons,
arithmetic, boolean logic, the conditional, ``size``, ``in`` and list literals); anything else
raises :class:`NotTranslated` with what it was, so that a caller reports "not analysed" instead
of guessing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

# Terms are tuples, tagged by their first element:
#   ("lit", value)                 bool, int, float, str or None
#   ("var", ("segment", "kind"))   a variable and the fields read of it
#   ("list", (term, ...))          a list literal
#   ("op", name, (term, ...))      an operator: || && ! neg < <= > >= == != in + - * / % ?:
#   ("size", term)                 size() of a list or a string
Term = tuple[Any, ...]

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
        "primary",
        "paren_expr",
    }
)
_BINARY = {
    "conditionalor": "||",
    "conditionaland": "&&",
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


@dataclass(frozen=True, slots=True)
class NotTranslated(Exception):  # noqa: N818 - reads as the outcome it reports
    """A part of an expression outside the translated subset."""

    what: str

    def __str__(self) -> str:
        return self.what


def symbolic_term(tree: Any) -> Term:
    """The term of a parse tree (raises :class:`NotTranslated` outside the subset)."""
    return _term(tree)


def _is_tree(node: Any) -> bool:
    return hasattr(node, "data") and hasattr(node, "children")


def _trees(node: Any) -> list[Any]:
    return [child for child in node.children if _is_tree(child)]


def _term(node: Any) -> Term:  # noqa: C901, PLR0911 - one branch per kind of node
    if not _is_tree(node):
        msg = f"token {node!s}"
        raise NotTranslated(msg)
    data = node.data
    children = node.children
    if data in _PASS_THROUGH and len(children) == 1:
        return _term(children[0])
    if data in {"conditionalor", "conditionaland"} and len(children) == 2:
        return ("op", _BINARY[data], (_term(children[0]), _term(children[1])))
    if data in {"relation", "addition", "multiplication"} and len(children) == 2:
        operator, right = children
        (left,) = _trees(operator)
        return ("op", _BINARY[operator.data], (_term(left), _term(right)))
    if data == "expr" and len(children) == 3:
        return ("op", "?:", tuple(_term(child) for child in children))
    if data == "unary" and len(children) == 2:
        operator = {"unary_not": "!", "unary_neg": "neg"}[children[0].data]
        return ("op", operator, (_term(children[1]),))
    if data == "literal":
        return ("lit", _literal(children[0]))
    if data in {"ident", "member_dot"}:
        return ("var", _path(node))
    if data == "list_lit":
        items = _trees(children[0]) if children and children[0] is not None else []
        return ("list", tuple(_term(item) for item in items))
    if data == "ident_arg" and str(children[0]) == "size" and len(children) == 2:
        arguments = _trees(children[1]) if children[1] is not None else []
        if len(arguments) == 1:
            return ("size", _term(arguments[0]))
    if data == "member_dot_arg" and str(children[1]) == "size" and children[2:] == [None]:
        return ("size", _term(children[0]))
    raise NotTranslated(_describe(node))


def _path(node: Any) -> tuple[str, ...]:
    """``a.b.c`` as ("a", "b", "c"); anything else in the chain is outside the subset."""
    parts: list[str] = []
    while _is_tree(node):
        if node.data in _PASS_THROUGH and len(node.children) == 1:
            node = node.children[0]
        elif node.data == "member_dot":
            parts.append(str(node.children[1]))
            node = node.children[0]
        elif node.data == "ident":
            parts.append(str(node.children[0]))
            return tuple(reversed(parts))
        else:
            raise NotTranslated(_describe(node))
    raise NotTranslated(f"token {node!s}")


def _literal(token: Any) -> Any:
    kind, text = getattr(token, "type", ""), str(token)
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    if kind == "INT_LIT" and not text.lstrip("-").startswith("0x"):
        return int(text)
    if kind == "FLOAT_LIT":
        return float(text)
    if kind == "STRING_LIT" and text[0] in "\"'" and "\\" not in text:
        value = ast.literal_eval(text)
        if isinstance(value, str):
            return value
    msg = f"the literal {text}"
    raise NotTranslated(msg)


def _describe(node: Any) -> str:
    """What a node is, in the words of docs/rules.md rather than the grammar's."""
    if node.data in {"ident_arg", "member_dot_arg", "dot_ident_arg"}:
        names = [str(child) for child in node.children if not _is_tree(child) and child]
        return f"the function {names[0]}()" if names else "a function call"
    described = {
        "member_index": "indexing",
        "map_lit": "a map literal",
        "member_object": "a message literal",
        "dot_ident": "a qualified name",
    }
    return str(described.get(node.data, node.data))
