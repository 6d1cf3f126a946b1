"""What an expression costs at worst, known when the policy loads, before any input arrives.

Like Kubernetes' CEL cost estimation: every node of the parse tree is priced, and so is the work
that grows with the size of a value (scanning a text, a list, a regular expression's steps). The
sizes are the largest the variables can have: the ``maxLength``, ``maxItems`` and
``maxProperties`` of the rule-variables schema (the input limits, :mod:`prunewarden.limits`),
and the real sizes of the policy's ``params``. A comprehension multiplies its body's cost by the
items it may visit; a conditional costs its dearer branch; ``&&`` and ``||`` both of their sides.

One unit is about one node of cel-python's evaluator; a text is scanned at
:data:`CHARS_PER_UNIT` characters, a list aggregated at :data:`ITEMS_PER_UNIT` and searched
(``in``) at :data:`SEARCHED_PER_UNIT` items per unit, and a
``matches`` at :data:`STEPS_PER_UNIT` RE2 steps (what ``_patterns`` prices). The benchmark
``benchmarks/rules_cost.py`` holds the estimate to measured evaluation times. The estimate is an
upper bound of the work, not of the time a loaded machine takes: the run-time budget
(``_budget``) stays the second line of defence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import lark
from celpy.evaluation import celstr

from prunewarden.limits import MAX_INPUT_CHARS, MAX_MATCH_STEPS
from prunewarden.rules._checker import MACROS
from prunewarden.rules._expression import Cost, Expression, Shape, json_type
from prunewarden.rules._functions import CASEFOLD_GROWTH, ENGINE_FUNCTIONS, LOWER_GROWTH
from prunewarden.rules._patterns import program_size

CHARS_PER_UNIT = 1024
ITEMS_PER_UNIT = 64
# ``x in list`` compares CEL values one by one: cel-python took a unit per 56 to 80 items of
# 1,024 and 8,192 ids (benchmarks/rules_cost.py), so 64 would underestimate a long list.
SEARCHED_PER_UNIT = 16
STEPS_PER_UNIT = 512
# One item of a comprehension, beyond its body: binding the loop variable, the macro's step.
ITERATION_UNITS = 32
# A size the schema does not bound: what one input document can hold.
UNBOUNDED = MAX_INPUT_CHARS
_UTF8_BYTES_PER_CHAR = 4
_SNIPPET_CHARS = 48


def estimate_cost(
    expression: Expression, variables: Mapping[str, Shape], constants: Mapping[str, Any] = {}
) -> Cost:
    """The worst-case cost of evaluating ``expression`` once on any input of ``variables``'
    shapes; ``constants`` (the params) are priced at their real sizes."""
    shapes = {**variables, **{name: sized_shape(value) for name, value in constants.items()}}
    found = _Estimator(shapes, expression.source, constants).visit(expression.tree, {})
    return Cost(found.units, found.path, found.line, found.column)


# The list a per-item variable's items come from (``_model.PER_ITEM``): a per-item rule is
# evaluated once per item of it.
_ITEMS_OF = {"canary": "pinned", "span": "spans"}


def rule_cost(costs: Sequence[Cost], variables: Mapping[str, Shape], per_item: str | None) -> Cost:
    """A rule's worst case on one request: the costs of its expressions (``when``,
    ``message_expression``) together, times the items a per-item rule is evaluated on."""
    dearest = max(costs, key=lambda c: c.units)
    units = sum(c.units for c in costs)
    if per_item is None:
        return Cost(units, dearest.path, dearest.line, dearest.column)
    items = size_of(variables.get(_ITEMS_OF[per_item]))
    step = f"per {per_item} ({items} {_ITEMS_OF[per_item]} x {units})"
    return Cost(units * items, (step, *dearest.path), dearest.line, dearest.column)


def sized_shape(value: Any) -> Shape:
    """The shape of a known value, with its real sizes as the schema's maxima."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int | float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string", "maxLength": len(value)}
    if isinstance(value, list):
        items = [sized_shape(item) for item in value]
        largest = max(items, key=size_of, default=None)
        return {"type": "array", "maxItems": len(value), "items": largest}
    if isinstance(value, Mapping):
        properties = {str(key): sized_shape(item) for key, item in value.items()}
        return {"type": "object", "maxProperties": len(value), "properties": properties}
    return {"type": "null"}


def size_of(shape: Shape) -> int:
    """The largest size a value of ``shape`` can have: characters, items or entries; 1 for a
    scalar; :data:`UNBOUNDED` when the schema says nothing."""
    kind = json_type(shape)
    if shape is not None and shape.get("type") == "null":
        return 1
    if shape is None or not kind:
        return UNBOUNDED
    limit = {"string": "maxLength", "array": "maxItems", "object": "maxProperties"}.get(kind)
    if limit is None:
        return 1
    bound = shape.get(limit)
    return int(bound) if isinstance(bound, int) else UNBOUNDED


def _per(size: int, per_unit: int) -> int:
    return math.ceil(size / per_unit)


@dataclass(frozen=True, slots=True)
class _Priced:
    units: int
    shape: Shape = None
    path: tuple[str, ...] = ()
    line: int = 0
    column: int = 0


def _text(size: int) -> Shape:
    return {"type": "string", "maxLength": size}


_NUMBER: Shape = {"type": "number"}
_BOOL: Shape = {"type": "boolean"}


class _Estimator:
    """One walk of the tree, pricing each node from its children's costs and shapes.

    Recursion is bounded by the checker's ``MAX_TREE_DEPTH``, checked before.
    """

    def __init__(
        self, variables: Mapping[str, Shape], source: str, constants: Mapping[str, Any]
    ) -> None:
        self.variables = variables
        self.source = source
        self.constants = constants

    def visit(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        if not isinstance(node, lark.Tree):
            return _Priced(0)
        handler: Callable[[Any, Mapping[str, Shape]], _Priced] | None = getattr(
            self, f"_{node.data}", None
        )
        if handler is not None:
            return handler(node, scope)
        parts = [self.visit(child, scope) for child in node.children]
        shape = parts[0].shape if len(parts) == 1 else None
        return self._sum(parts, shape)

    # --- combining -------------------------------------------------------------------------

    @staticmethod
    def _sum(parts: list[_Priced], shape: Shape, own: int = 1) -> _Priced:
        dearest = max(parts, key=lambda p: p.units, default=_Priced(0))
        total = own + sum(p.units for p in parts)
        return _Priced(total, shape, dearest.path, dearest.line, dearest.column)

    def _step(self, node: Any, why: str, units: int, inner: _Priced, shape: Shape) -> _Priced:
        """A priced operation: named on the path when it costs more than what it contains."""
        if units - inner.units < inner.units and inner.path:
            return _Priced(units, shape, inner.path, inner.line, inner.column)
        line, column = _position(node)
        return _Priced(units, shape, (f"{self._snippet(node)} ({why})",), line, column)

    def _snippet(self, node: Any) -> str:
        meta = node.meta
        text = " ".join(self.source[meta.start_pos : meta.end_pos].split())
        return text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 3] + "..."

    # --- values ----------------------------------------------------------------------------

    def _literal(self, node: Any, _: Mapping[str, Shape]) -> _Priced:
        token = node.children[0]
        kind = token.type
        if kind in {"STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"}:
            return _Priced(1, _text(len(str(token))))
        return _Priced(1, _BOOL if kind == "BOOL_LIT" else _NUMBER)

    def _ident(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        name = str(node.children[0])
        return _Priced(1, scope[name] if name in scope else self.variables.get(name))

    def _member_dot(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        receiver = self.visit(node.children[0], scope)
        return self._sum([receiver], _field(receiver.shape, str(node.children[1])))

    def _member_index(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        receiver = self.visit(node.children[0], scope)
        index = self.visit(node.children[1], scope)
        kind = json_type(receiver.shape)
        shape: Shape = None
        if receiver.shape is not None and kind == "array":
            shape = receiver.shape.get("items")
        elif receiver.shape is not None and kind == "object":
            extra = receiver.shape.get("additionalProperties")
            shape = extra if isinstance(extra, Mapping) else None
        return self._sum([receiver, index], shape)

    def _list_lit(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        items = [self.visit(child, scope) for child in _arguments(node)]
        largest = max((p.shape for p in items), key=size_of, default=None)
        shape = {"type": "array", "maxItems": len(items), "items": largest}
        return self._sum(items, shape)

    def _map_lit(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        entries = [self.visit(child, scope) for child in _arguments(node)]
        return self._sum(entries, {"type": "object", "maxProperties": len(entries) // 2})

    # --- operators -------------------------------------------------------------------------

    def _expr(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        """``c ? a : b``: the condition and the dearer branch."""
        condition, *branches = (self.visit(child, scope) for child in node.children)
        dearer = max(branches, key=lambda p: p.units)
        return self._sum([condition, dearer], dearer.shape)

    def _relation(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        operator, right_node = node.children
        left = self.visit(operator.children[0], scope)
        right = self.visit(right_node, scope)
        base = self._sum([left, right], _BOOL)
        if operator.data == "relation_in":
            scanned = size_of(right.shape) if json_type(right.shape) != "object" else 1
            why = f"{scanned} items searched"
            units = base.units + _per(scanned, SEARCHED_PER_UNIT)
            return self._step(node, why, units, base, _BOOL)
        compared = min(size_of(left.shape), size_of(right.shape))
        if compared <= 1:
            return base
        why = f"{compared} characters or items compared"
        return self._step(node, why, base.units + _per(compared, CHARS_PER_UNIT), base, _BOOL)

    def _addition(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        operator, right_node = node.children
        left = self.visit(operator.children[0], scope)
        right = self.visit(right_node, scope)
        base = self._sum([left, right], _NUMBER)
        sized = {json_type(left.shape), json_type(right.shape)} & {"string", "array", ""}
        if operator.data != "addition_add" or not sized:
            return base
        built = min(size_of(left.shape) + size_of(right.shape), UNBOUNDED)
        kind = json_type(left.shape) or json_type(right.shape) or "string"
        shape = {"type": kind, "maxLength" if kind == "string" else "maxItems": built}
        why = f"up to {built} characters or items built"
        return self._step(node, why, base.units + _per(built, CHARS_PER_UNIT), base, shape)

    def _multiplication(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        operator, right = node.children
        return self._sum([self.visit(operator.children[0], scope), self.visit(right, scope)], None)

    # --- calls -----------------------------------------------------------------------------

    def _ident_arg(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        name = str(node.children[0])
        args = [self.visit(child, scope) for child in _arguments(node)]
        return self._call(node, name, args)

    def _member_dot_arg(self, node: Any, scope: Mapping[str, Shape]) -> _Priced:
        receiver_node, token = node.children[:2]
        name = str(token)
        receiver = self.visit(receiver_node, scope)
        if name in MACROS:
            return self._comprehension(node, name, receiver, scope)
        args = [self.visit(child, scope) for child in _arguments(node)]
        return self._call(node, name, [receiver, *args])

    def _comprehension(
        self, node: Any, name: str, receiver: _Priced, scope: Mapping[str, Shape]
    ) -> _Priced:
        variable, body_node = _arguments(node)
        target = receiver.shape
        items = size_of(target)
        item: Shape = None
        if target is not None and json_type(target) == "array":
            item = target.get("items")
        elif target is not None and json_type(target) == "object":
            item = _text(UNBOUNDED)  # a comprehension over a map visits its keys
        body = self.visit(body_node, {**scope, _name(variable): item})
        units = 1 + receiver.units + items * (body.units + ITERATION_UNITS)
        shape: Shape = _BOOL
        if name == "map":
            shape = {"type": "array", "maxItems": items, "items": body.shape}
        elif name == "filter":
            shape = target
        line, column = _position(node)
        step = f"{self._snippet(node)} ({items} items x {body.units + ITERATION_UNITS})"
        return _Priced(units, shape, (step, *body.path), line, column)

    def _pattern(self, node: Any) -> str | None:
        """The last argument of a call when known at load: a string literal or a param."""
        arguments = _arguments(node)
        found = arguments[-1] if arguments else None
        while isinstance(found, lark.Tree) and len(found.children) == 1:
            if found.data == "literal":
                break
            found = found.children[0]
        if not isinstance(found, lark.Tree):
            return None
        token = found.children[0]
        if isinstance(token, lark.Token) and token.type in {"STRING_LIT", "MLSTRING_LIT"}:
            try:
                return str(celstr(token))
            except ValueError:  # an escape cel-python refuses: the evaluation fails alike
                return None
        if found.data == "member_dot":
            receiver, field = found.children
            value = self.constants.get(_name(receiver))
            if value is not None:
                known = value.get(str(field)) if isinstance(value, Mapping) else None
                return known if isinstance(known, str) else None
        return None

    def _call(self, node: Any, name: str, args: list[_Priced]) -> _Priced:
        price, shape, why = _function_price(name, args, self._pattern(node))
        base = self._sum(args, shape)
        if not price:
            return base
        return self._step(node, why, base.units + price, base, shape)


def _field(shape: Shape, name: str) -> Shape:
    if shape is None or json_type(shape) != "object":
        return None
    properties: Mapping[str, Any] = shape.get("properties", {})
    if name in properties:
        found: Shape = properties[name]
        return found
    extra = shape.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _name(node: Any) -> str:
    """The name ``node`` is when it reduces to a bare identifier (a loop variable, ``params``),
    else ""."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    is_ident = isinstance(node, lark.Tree) and node.data == "ident"
    return str(node.children[0]) if is_ident else ""


def _arguments(node: Any) -> list[Any]:
    """The expressions of a call's, list's or map's ``exprlist`` (or ``mapinits``)."""
    for child in node.children:
        if isinstance(child, lark.Tree) and child.data in {"exprlist", "mapinits"}:
            return list(child.children)
    return []


def _position(node: Any) -> tuple[int, int]:
    meta = getattr(node, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return 0, 0
    return int(meta.line), int(meta.column)


# What a call costs beyond its arguments' own, by function: from the sizes of its arguments
# (receiver first) and its pattern when known at load, the units, the result's shape and why.
_Price = tuple[int, Shape, str]
_Pricing = Callable[[list[int], str | None], _Price]


def _items(sizes: list[int], _: str | None) -> _Price:
    return _per(sizes[0], ITEMS_PER_UNIT), _NUMBER, f"{sizes[0]} numbers"


def _scan(sizes: list[int], _: str | None) -> _Price:
    return _per(sizes[0], CHARS_PER_UNIT), _BOOL, f"{sizes[0]} characters scanned"


def _lower(sizes: list[int], _: str | None) -> _Price:
    grown = LOWER_GROWTH * sizes[0]
    return _per(grown, CHARS_PER_UNIT), _text(grown), f"{sizes[0]} characters lowered"


def _contains_any(sizes: list[int], _: str | None) -> _Price:
    text, needles = sizes[0], sizes[1] if len(sizes) > 1 else 1
    folded = CASEFOLD_GROWTH * text
    scans = (needles + 1) * _per(folded, CHARS_PER_UNIT)
    return scans, _BOOL, f"{needles} phrases in {text} characters"


def _matches(sizes: list[int], pattern: str | None) -> _Price:
    steps = _match_steps(sizes[0], pattern)
    return _per(steps, STEPS_PER_UNIT), _BOOL, f"up to {steps} RE2 steps"


def _converted(shape: Shape) -> _Pricing:
    def price(sizes: list[int], _: str | None) -> _Price:
        return _per(sizes[0], CHARS_PER_UNIT), shape, f"{sizes[0]} characters converted"

    return price


def _constant(shape: Shape) -> _Pricing:
    return lambda _sizes, _pattern: (0, shape, "")


_PRICES: dict[str, _Pricing] = {
    **dict.fromkeys(
        ("mean", "stdev", "sum", "minimum", "maximum", "count_below", "count_above"), _items
    ),
    **dict.fromkeys(("contains", "startsWith", "endsWith"), _scan),
    "lower": _lower,
    "contains_any": _contains_any,
    "matches": _matches,
    **dict.fromkeys(("string", "bytes"), _converted({"type": "string"})),
    **dict.fromkeys(("int", "uint", "double", "duration", "timestamp"), _converted(_NUMBER)),
    "has": _constant(_BOOL),
}


def _function_price(name: str, args: list[_Priced], pattern: str | None) -> _Price:
    """The work of calling ``name`` beyond its arguments' own: units, result shape, why;
    ``pattern`` is the last argument's text when it is known at load (for ``matches``)."""
    sizes = [size_of(a.shape) for a in args] or [1]
    pricing = _PRICES.get(name)
    if pricing is not None:
        units, shape, why = pricing(sizes, pattern)
        if name in {"string", "bytes"}:
            shape = _text(sizes[0])
        return units, shape, why
    # size(), abs(), the time accessors: constant work on a number; dyn(), type(): any value
    known = name in ENGINE_FUNCTIONS or name == "size" or name.startswith("get")
    return 0, _NUMBER if known else None, ""


def _match_steps(chars: int, pattern: str | None) -> int:
    """RE2's worst case as ``_patterns`` prices it: bytes searched times the program's size;
    never more than MAX_MATCH_STEPS, above which the search is refused unrun."""
    program = program_size(pattern) if pattern is not None else None
    if program is None:  # a pattern known only at run time: the limit
        return MAX_MATCH_STEPS
    return min((_UTF8_BYTES_PER_CHAR * chars + 1) * program, MAX_MATCH_STEPS)
