"""The static checks of an expression: what a type checker and a cost model would refuse.

cel-python has neither, so before an expression is ever evaluated its parse tree is measured
(the evaluator recurses about 45 Python frames per level of parentheses, and nested
comprehensions multiply their cost) and every variable, field and function is checked against
the documented variable schema. The same walk records what the expression reads, so that only
those values need to be built and converted when it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lark

from prunewarden.rules._expression import Expression, ExpressionProblem, Shape, json_type
from prunewarden.rules._functions import ARITY, ENGINE_FUNCTIONS, STANDARD_FUNCTIONS

MAX_NESTING = 8
MAX_TREE_DEPTH = 128
MAX_COMPREHENSION_NESTING = 1

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Type names CEL lets an expression mention as values (``type(x) == double``).
_TYPE_NAMES = frozenset({"bool", "bytes", "double", "int", "list", "map", "string", "uint"})
# Nodes a reader counts as one level of nesting.
_NESTING_NODES = frozenset(
    {"paren_expr", "list_lit", "map_lit", "ident_arg", "member_dot_arg", "member_index"}
)
_ARTICLE = {"number": "a number", "string": "a string", "boolean": "a bool", "array": "a list"}


def depth_problems(tree: Any, source: str) -> list[ExpressionProblem]:
    """Nesting and tree depth, measured without recursion (the tree may be arbitrarily deep)."""
    deepest_nesting: tuple[int, Any] = (0, None)
    deepest_tree = 0
    stack: list[tuple[Any, int, int]] = [(tree, 1, 0)]
    while stack:
        node, depth, nesting = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if node.data in _NESTING_NODES:
            nesting += 1
            if nesting > deepest_nesting[0]:
                deepest_nesting = (nesting, node)
        deepest_tree = max(deepest_tree, depth)
        stack.extend((child, depth + 1, nesting) for child in node.children)
    problems = []
    nesting, culprit = deepest_nesting
    if nesting > MAX_NESTING and culprit is not None:
        line, column = _position(culprit)
        problems.append(
            ExpressionProblem(
                f"nested {nesting} levels deep (parentheses, brackets and calls); "
                f"the limit is {MAX_NESTING}",
                line,
                column,
                source,
            )
        )
    elif deepest_tree > MAX_TREE_DEPTH:
        problems.append(
            ExpressionProblem(
                f"too complex: its parse tree is {deepest_tree} levels deep and the limit is "
                f"{MAX_TREE_DEPTH}; split it into shorter conditions or several rules"
            )
        )
    return problems


def _position(node: Any) -> tuple[int, int]:
    meta = getattr(node, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return 0, 0
    return int(meta.line), int(meta.column)


class Checker:
    """Walks the parse tree once: names, fields, functions, macros; records what is read.

    Recursion here is bounded by :data:`MAX_TREE_DEPTH`, checked before.
    """

    def __init__(self, variables: Mapping[str, Shape], source: str) -> None:
        self.variables = variables
        self.source = source
        self.problems: list[ExpressionProblem] = []
        self.reads: dict[str, set[str] | None] = {}

    def frozen_reads(self) -> dict[str, frozenset[str] | None]:
        return {
            name: None if fields is None else frozenset(fields)
            for name, fields in self.reads.items()
        }

    def fail(self, node: Any, message: str) -> None:
        line, column = _position(node)
        self.problems.append(ExpressionProblem(message, line, column, self.source))

    def read(self, name: str, field_name: str | None) -> None:
        if field_name is None:
            self.reads[name] = None
            return
        fields = self.reads.setdefault(name, set())
        if fields is not None:
            fields.add(field_name)

    def visit(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        """Check ``node``; return its shape when it is a value whose schema is known."""
        if not isinstance(node, lark.Tree):
            return None
        handler = getattr(self, f"_{node.data}", None)
        if handler is not None:
            shape: Shape = handler(node, scope, comprehensions)
            return shape
        if node.data == "member_object":
            self.fail(node, "message construction (Type{...}) is not supported")
            return None
        if node.data in {"dot_ident", "dot_ident_arg"}:
            self.fail(node, "names with a leading '.' are not supported")
            return None
        shapes = [self.visit(child, scope, comprehensions) for child in node.children]
        # A node with one child (expr, member, primary, paren_expr, ...) has the child's shape.
        return shapes[0] if len(node.children) == 1 else None

    def _ident(self, node: Any, scope: Mapping[str, Shape], _: int) -> Shape:
        name = str(node.children[0])
        if name in scope:
            return scope[name]
        if name in self.variables:
            self.read(name, None)
            return self.variables[name]
        if name not in _TYPE_NAMES:
            known = ", ".join(sorted({*self.variables, *scope}))
            self.fail(node, f"unknown variable {name!r} (known: {known})")
        return None

    def _bare_variable(self, node: Any, scope: Mapping[str, Shape]) -> str | None:
        """The variable's name when ``node`` is nothing but a root variable (``segment``)."""
        while isinstance(node, lark.Tree) and node.data in {"member", "primary"}:
            if len(node.children) != 1:
                return None
            node = node.children[0]
        if isinstance(node, lark.Tree) and node.data == "ident":
            name = str(node.children[0])
            if name in self.variables and name not in scope:
                return name
        return None

    def _member_dot(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        receiver, token = node.children
        name = str(token)
        variable = self._bare_variable(receiver, scope)
        if variable is not None:
            self.read(variable, name)
            shape = self.variables[variable]
        else:
            shape = self.visit(receiver, scope, comprehensions)
        return self._field(node, shape, name, variable)

    def _field(self, node: Any, shape: Shape, name: str, owner: str | None) -> Shape:
        kind = json_type(shape)
        what = repr(owner) if owner else "the value"
        if shape is None or not kind:
            return None
        if kind != "object":
            self.fail(node, f"{what} is {_ARTICLE.get(kind, kind)}: it has no field {name!r}")
            return None
        properties: Mapping[str, Any] = shape.get("properties", {})
        if name in properties:
            found: Shape = properties[name]
            return found
        extra = shape.get("additionalProperties", True)
        if extra is False:
            known = ", ".join(sorted(properties))
            self.fail(node, f"unknown field {name!r} of {what} (known: {known or 'none'})")
            return None
        return extra if isinstance(extra, Mapping) else None

    def _member_index(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        receiver, index = node.children
        shape = self.visit(receiver, scope, comprehensions)
        self.visit(index, scope, comprehensions)
        kind = json_type(shape)
        if shape is None or kind == "":
            return None
        if kind == "array":
            items: Shape = shape.get("items")
            return items
        if kind == "object":
            extra = shape.get("additionalProperties", True)
            return extra if isinstance(extra, Mapping) else None
        self.fail(node, f"{_ARTICLE.get(kind, kind)} cannot be indexed")
        return None

    def _member_dot_arg(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        receiver, token, *rest = node.children
        name = str(token)
        args = list(rest[0].children) if rest else []
        if name in MACROS:
            return self._macro(
                node, name, receiver=receiver, args=args, scope=scope, depth=comprehensions
            )
        self._function(node, name, len(args) + 1)
        self.visit(receiver, scope, comprehensions)
        for arg in args:
            self.visit(arg, scope, comprehensions)
        return None

    def _ident_arg(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        token, *rest = node.children
        name = str(token)
        args = list(rest[0].children) if rest else []
        if name in {"has", "dyn"}:
            if len(args) != 1:
                self.fail(node, f"{name}() takes exactly one argument")
            if name == "has" and args and not _is_field_selection(args[0]):
                self.fail(node, "has() takes a field selection, such as has(segment.metadata.key)")
        elif name in MACROS:
            self.fail(node, f"{name}() is a macro: write list.{name}(x, condition)")
        else:
            self._function(node, name, len(args))
        for arg in args:
            self.visit(arg, scope, comprehensions)
        return None

    def _function(self, node: Any, name: str, arity: int) -> None:
        if name not in ENGINE_FUNCTIONS and name not in STANDARD_FUNCTIONS:
            known = ", ".join(sorted({*ENGINE_FUNCTIONS, *STANDARD_FUNCTIONS}))
            self.fail(node, f"unknown function {name!r} (known: {known})")
            return
        expected = ARITY.get(name)
        if expected is not None and arity != expected:
            self.fail(node, f"{name}() takes {expected} argument(s), not {arity}")

    def _macro(  # noqa: PLR0913 - the parts of a macro call, taken apart once by the caller
        self,
        node: Any,
        name: str,
        *,
        receiver: Any,
        args: list[Any],
        scope: Mapping[str, Shape],
        depth: int,
    ) -> Shape:
        comprehensions = depth
        target = self.visit(receiver, scope, comprehensions)
        if len(args) != 2:  # a loop variable and a body
            self.fail(node, f"{name}() takes a loop variable and an expression")
            return None
        variable = _simple_ident(args[0])
        if variable is None:
            self.fail(args[0], f"the first argument of {name}() must be a plain name")
            return None
        if variable in self.variables or variable in scope:
            self.fail(args[0], f"loop variable {variable!r} hides a variable; choose another name")
        if comprehensions + 1 > MAX_COMPREHENSION_NESTING:
            self.fail(
                node,
                f"{name}() nested inside another comprehension: the cost multiplies; use an "
                "engine function or a per-item variable instead",
            )
            return None
        kind = json_type(target)
        if kind == "array":
            item: Shape = target.get("items") if target is not None else None
        elif kind == "object":
            item = {"type": "string"}  # a comprehension over a map visits its keys
        elif kind:
            self.fail(node, f"{name}() needs a list or a map, not {_ARTICLE.get(kind, kind)}")
            return None
        else:
            item = None
        self.visit(args[1], {**scope, variable: item}, comprehensions + 1)
        return None


def field_paths(expression: Expression) -> frozenset[tuple[str, ...]]:
    """The longest field selections the expression makes on its variables:
    ``spec.collapse.spread_floor <= 0.15`` gives ``{("spec", "collapse", "spread_floor")}``.

    A selection through an index or a call stops there; comprehension variables are not
    variables. What a guardrail uses to point at the value that failed it.
    """
    found: set[tuple[str, ...]] = set()
    stack: list[Any] = [expression.tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if node.data == "member_dot":
            chain = _selection(node)
            if chain is not None and chain[0] in expression.reads:
                found.add(chain)
        stack.extend(node.children)
    return frozenset(
        path
        for path in found
        if not any(len(o) > len(path) and o[: len(path)] == path for o in found)
    )


def _selection(node: Any) -> tuple[str, ...] | None:
    names: list[str] = []
    while isinstance(node, lark.Tree):
        if node.data == "member_dot":
            receiver, token = node.children
            names.append(str(token))
            node = receiver
        elif node.data in {"member", "primary"} and len(node.children) == 1:
            node = node.children[0]
        elif node.data == "ident":
            names.append(str(node.children[0]))
            return tuple(reversed(names))
        else:
            return None
    return None


def _simple_ident(node: Any) -> str | None:
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def _is_field_selection(node: Any) -> bool:
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "member_dot":
        node = node.children[0]
    return isinstance(node, lark.Tree) and node.data == "member_dot"
