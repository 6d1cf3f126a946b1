"""Type checking a rule at load with cel-cpp's checker, where ``cel-expr-python`` is installed.

The project's own checks find unknown names and fields, and the trial evaluation finds operators
applied to the wrong types on the samples it draws; cel-cpp's checker proves the types on every
branch, including those no sample reaches (``score < 0.5 || segment.kind < 3``). Each variable
is declared with the type its schema gives: an object with properties is a protobuf message built
from the schema (so ``segment.text`` is a string and ``segment.tokens`` a nullable double), a map
of numbers a ``map(string, double)``, a list a ``list`` of its items, free-form metadata a
``google.protobuf.Struct``; every number of the input is a double.

The project's semantics are the contract, so the checker is given the expression as the
evaluators see it: numbers compare across int and double (``size(x) > 2.0``) and anything
compares to null, so numeric literals, ``null`` and the calls that give an int (``size``,
``int``, ``uint``) are checked as ``dyn``. What remains refused is a real type error: a string
compared to a number or a bool, a method of strings called on a number, a list where a string
belongs.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import lark

from prunewarden.rules._backend import BackendUnavailableError, cel_module, runtime_module
from prunewarden.rules._expression import Expression, ExpressionProblem, Shape, json_type
from prunewarden.rules._functions import ENGINE_FUNCTIONS

_PACKAGE = "prunewarden.rules.variables"
_DYNAMIC_LITERALS = frozenset({"INT_LIT", "UINT_LIT", "FLOAT_LIT", "NULL_LIT"})
_INT_CALLS = frozenset({"size", "int", "uint"})
_ERROR = re.compile(r"ERROR: <input>:(\d+):(\d+): ([^\n]*)")
# What the engine functions give, for the checker (their arguments are checked at run time).
_RESULTS = {"lower": "STRING", "contains_any": "BOOL"}
_ENVIRONMENTS = 32
_check_lock = threading.Lock()


def type_problems(
    expression: Expression, variables: Mapping[str, Shape]
) -> list[ExpressionProblem]:
    """cel-cpp's type errors of ``expression``, located in its source; none when it checks."""
    shapes = {name: variables[name] for name in sorted(expression.reads)}
    # CEL indexes a map, never a message: an expression that indexes (``params["floor"]``)
    # is checked with its objects as maps of dyn, their fields unchecked.
    indexes = any(node.data == "member_index" for node in expression.tree.iter_subtrees())
    environment = _environment(json.dumps(shapes, sort_keys=True, default=str), not indexes)
    checked, origin = _as_checked(expression)
    try:
        with _check_lock:  # as _native compiles: one compilation at a time
            environment.compile(checked)
    except RuntimeError as exc:  # cel-expr-python raises its status as a RuntimeError
        found = []
        for line, column, message in _ERROR.findall(str(exc)):
            where = _position(expression.source, origin[_offset(checked, int(line), int(column))])
            found.append(ExpressionProblem(f"type error: {message}", *where, expression.source))
        return found or [ExpressionProblem(f"type error: {str(exc).splitlines()[0]}")]
    return []


def _as_checked(expression: Expression) -> tuple[str, list[int]]:
    """The source with numeric literals, null and int-giving calls wrapped in ``dyn()``, and
    for each of its characters (and its end) the offset in the source it comes from."""
    inserts: list[tuple[int, int, str]] = []  # offset, order at one offset, text
    for node in expression.tree.iter_subtrees():
        span = _dynamic_span(node)
        if span is not None:
            inserts += [(span[0], 1, "dyn("), (span[1], 0, ")")]
    source, pieces, origin, last = expression.source, [], [], 0
    for offset, _, piece in sorted(inserts):
        pieces += [source[last:offset], piece]
        origin += [*range(last, offset), *[offset] * len(piece)]
        last = offset
    pieces.append(source[last:])
    origin += [*range(last, len(source) + 1)]
    return "".join(pieces), origin


def _offset(text: str, line: int, column: int) -> int:
    """The offset of a 1-based line and column (cel-cpp's) in ``text``."""
    lines = text.split("\n")
    before = sum(len(t) + 1 for t in lines[: max(line - 1, 0)])
    return min(before + max(column - 1, 0), len(text))


def _position(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def _dynamic_span(node: Any) -> tuple[int, int] | None:
    if node.data == "literal":
        token = node.children[0]
        if isinstance(token, lark.Token) and token.type in _DYNAMIC_LITERALS:
            return int(token.start_pos or 0), int(token.end_pos or 0)
        return None
    if node.data in {"ident_arg", "member_dot_arg"}:
        names = [c for c in node.children if isinstance(c, lark.Token) and c.type == "IDENT"]
        if names and str(names[0]) in _INT_CALLS and not node.meta.empty:
            return int(node.meta.start_pos), int(node.meta.end_pos)
    return None


@lru_cache(maxsize=_ENVIRONMENTS)
def _environment(shapes_json: str, messages: bool) -> Any:
    """A checking environment declaring ``shapes_json``'s variables, built once per set;
    objects with properties as messages, or (``messages`` false) as maps of dyn."""
    cel = cel_module()
    shapes: dict[str, Shape] = json.loads(shapes_json)
    builder = _Messages(messages=messages)
    types = {name: builder.cel_type(shape, name) for name, shape in shapes.items()}
    return cel.NewEnv(
        descriptor_pool=builder.pool(), variables=types, functions=_engine_declarations()
    )


@lru_cache(maxsize=1)
def _engine_declarations() -> list[Any]:
    cel = cel_module()
    declarations = []
    for name, (_, arity, _) in ENGINE_FUNCTIONS.items():
        result = getattr(cel.Type, _RESULTS.get(name, "DOUBLE"))
        overloads = [
            cel.Overload(
                f"pw_check_{name}_{kind}", result, [cel.Type.DYN] * arity, is_member=member
            )
            for kind, member in (("g", False), ("m", True))
        ]
        declarations.append(cel.FunctionDecl(name, overloads))
    return declarations


class _Messages:
    """Protobuf messages for the schema's objects, and each shape's CEL type."""

    def __init__(self, *, messages: bool) -> None:
        self.messages = messages
        self._pb = _protobuf("descriptor_pb2")
        self.file = self._pb.FileDescriptorProto(
            name="prunewarden_rule_variables.proto", package=_PACKAGE, syntax="proto3"
        )
        self.file.dependency.extend(
            ["google/protobuf/wrappers.proto", "google/protobuf/struct.proto"]
        )

    def pool(self) -> Any:
        pool = _protobuf("descriptor_pool").DescriptorPool()
        for dependency in ("wrappers_pb2", "struct_pb2"):
            pool.AddSerializedFile(_protobuf(dependency).DESCRIPTOR.serialized_pb)
        pool.Add(self.file)
        return pool

    def cel_type(self, shape: Shape, name: str) -> Any:
        cel = cel_module()
        kind, nullable = json_type(shape), _nullable(shape)
        scalars = {"number": cel.Type.DOUBLE, "string": cel.Type.STRING, "boolean": cel.Type.BOOL}
        if shape is None or not kind or (nullable and kind in scalars):
            return cel.Type.DYN
        if kind in scalars:
            return scalars[kind]
        if kind == "array":
            return cel.Type.List(self.cel_type(shape.get("items"), name))
        if shape.get("properties") and self.messages:
            return cel.Type(f"{_PACKAGE}.{self._message(shape, name)}")
        extra = shape.get("additionalProperties")
        values = self.cel_type(extra, name) if isinstance(extra, Mapping) else cel.Type.DYN
        return cel.Type.Map(cel.Type.STRING, values)

    def _message(self, shape: Mapping[str, Any], name: str) -> str:
        message_name = "".join(part.title() for part in name.split("_")) or "Value"
        while any(m.name == message_name for m in self.file.message_type):
            message_name += "_"
        message = self.file.message_type.add(name=message_name)
        for number, (field, sub) in enumerate(shape["properties"].items(), start=1):
            self._field(message, number, field, sub)
        return message_name

    def _field(self, message: Any, number: int, name: str, shape: Shape) -> None:
        field = self._pb.FieldDescriptorProto
        label = field.LABEL_OPTIONAL
        kind = json_type(shape)
        if kind == "array" and shape is not None:
            label, shape = field.LABEL_REPEATED, shape.get("items")
            kind = json_type(shape)
        nullable = _nullable(shape)
        wrappers = {"number": "DoubleValue", "string": "StringValue", "boolean": "BoolValue"}
        scalars = {
            "number": field.TYPE_DOUBLE,
            "string": field.TYPE_STRING,
            "boolean": field.TYPE_BOOL,
        }
        added = message.field.add(name=name, number=number, label=label)
        if kind in scalars and not (nullable and label == field.LABEL_OPTIONAL):
            added.type = scalars[kind]
        elif kind in scalars:
            added.type, added.type_name = field.TYPE_MESSAGE, f".google.protobuf.{wrappers[kind]}"
        elif kind == "object" and shape is not None and shape.get("properties"):
            added.type = field.TYPE_MESSAGE
            added.type_name = f".{_PACKAGE}.{self._message(shape, name)}"
        elif kind == "object":  # free-form: metadata
            added.type, added.type_name = field.TYPE_MESSAGE, ".google.protobuf.Struct"
        else:  # a value of any type
            added.type, added.type_name = field.TYPE_MESSAGE, ".google.protobuf.Value"


def checker_available() -> bool:
    """Whether cel-cpp's checker is here (the ``cel-native`` extra is installed)."""
    try:
        cel_module()
    except BackendUnavailableError:
        return False
    return True


def _protobuf(name: str) -> Any:
    """``google.protobuf.<name>``, which the ``cel-native`` extra brings: imported with the
    backend (``cel_module``), the first time a checking environment is built, never with the
    package."""
    return runtime_module(f"google.protobuf.{name}")


def _nullable(shape: Shape) -> bool:
    declared = shape.get("type") if shape is not None else None
    return declared == "null" or (isinstance(declared, list) and "null" in declared)
