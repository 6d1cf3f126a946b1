"""Rule terms (:mod:`prunewarden.rules._symbolic`) as z3 formulas, with CEL's error semantics.

A rule that errors counts as matched (fail closed), so every value carries, beside its formula,
the condition under which evaluating it errors: a comparison with null, a field of a null, a
type CEL has no overload for. ``&&`` and ``||`` absorb an error on one side when the other side
decides (CEL's commutative logic). Anything the translation cannot model exactly raises
:class:`~prunewarden.rules._symbolic.NotTranslated`: a rule is analysed exactly or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import z3

from prunewarden.rules._symbolic import NotTranslated, Term


@dataclass(frozen=True, slots=True)
class Value:
    """A CEL value: its type (``double``, ``int``, ``bool``, ``string``, ``list``, ``null``),
    its formula, when evaluating it errors, and when it is null (optional variables)."""

    kind: str
    formula: Any
    error: Any
    null: Any

    @classmethod
    def of(cls, kind: str, formula: Any, null: Any = None) -> Value:
        return cls(kind, formula, z3.BoolVal(False), z3.BoolVal(False) if null is None else null)


@dataclass(frozen=True, slots=True)
class Strings:
    """Strings as indices into the finite set that can tell them apart: every string a policy
    or rule names, plus one that none of them names."""

    names: tuple[str, ...]

    def index(self, text: str) -> int:
        return self.names.index(text)

    def value(self, text: str) -> Any:
        return z3.IntVal(self.index(text))


# A variable's value, looked up by its path (``("segment", "kind")``).
Lookup = Callable[[tuple[str, ...]], Value]


def constant(value: Any, strings: Strings) -> Value:
    """A literal, or a policy param, as a value."""
    if isinstance(value, bool):
        return Value.of("bool", z3.BoolVal(value))
    if isinstance(value, int):
        return Value.of("int", z3.IntVal(value))
    if isinstance(value, float):
        # The double itself, exactly: 0.35 is the binary fraction the runtime compares.
        return Value.of("double", z3.RealVal(Fraction(value)))
    if isinstance(value, str) and value in strings.names:
        return Value.of("string", strings.value(value))
    if value is None:
        return Value.of("null", z3.BoolVal(False), z3.BoolVal(True))
    if isinstance(value, list):
        return Value("list", [constant(item, strings) for item in value], z3.BoolVal(False), None)
    msg = f"the value {value!r}"
    raise NotTranslated(msg)


class Translator:
    """Terms to values over the variables ``lookup`` gives and the policy's ``params``."""

    def __init__(
        self,
        lookup: Lookup,
        params: Mapping[str, Any],
        strings: Strings,
        *,
        rounded: bool = False,
    ) -> None:
        """``rounded``: two policies are compared on the doubles the engine computes, where a
        sum or product rounds; the reals here do not, so arithmetic on doubles is then not
        translated (a claim over every double could rest on it)."""
        self.lookup = lookup
        self.params = params
        self.strings = strings
        self.rounded = rounded

    def matched(self, term: Term) -> Any:
        """When a rule with this ``when`` matches: true, or an error (fail closed)."""
        value = self.value(term)
        if value.kind != "bool":
            msg = f"a condition of type {value.kind}"
            raise NotTranslated(msg)
        return z3.Or(value.error, value.formula)

    def value(self, term: Term) -> Value:  # noqa: C901, PLR0911 - one return per kind of term
        tag = term[0]
        if tag == "lit":
            return constant(term[1], self.strings)
        if tag == "var":
            return self._variable(term[1])
        if tag == "list":
            return Value("list", [self.value(item) for item in term[1]], z3.BoolVal(False), None)
        if tag == "size":
            return self._size(self.value(term[1]))
        name, operands = term[1], term[2]
        if name in {"&&", "||"}:
            return _logic(name, self.value(operands[0]), self.value(operands[1]))
        if name == "!":
            inner = _expect(self.value(operands[0]), "bool")
            return Value("bool", z3.Not(inner.formula), inner.error, z3.BoolVal(False))
        if name == "?:":
            return self._conditional(*(self.value(operand) for operand in operands))
        if name == "in":
            return self._member(self.value(operands[0]), self.value(operands[1]))
        if name == "neg":
            inner = self.value(operands[0])
            if inner.kind not in {"int", "double"}:
                raise NotTranslated(f"negating a {inner.kind}")
            return Value(inner.kind, -inner.formula, _failing(inner), z3.BoolVal(False))
        result = _binary(name, self.value(operands[0]), self.value(operands[1]))
        if self.rounded and name in _ARITHMETIC and result.kind == "double":
            msg = f"`{name}` on doubles, which round as the reals compared here do not"
            raise NotTranslated(msg)
        return result

    def _variable(self, path: tuple[str, ...]) -> Value:
        if path[0] == "params":
            if len(path) != 2 or path[1] not in self.params:
                raise NotTranslated(".".join(path))
            return constant(self.params[path[1]], self.strings)
        return self.lookup(path)

    def _size(self, value: Value) -> Value:
        if value.kind == "list" and isinstance(value.formula, list):
            return Value.of("int", z3.IntVal(len(value.formula)))
        if value.kind == "list":
            return Value("int", value.formula, _failing(value), z3.BoolVal(False))
        raise NotTranslated(f"size() of a {value.kind}")

    def _conditional(self, condition: Value, then: Value, otherwise: Value) -> Value:
        _expect(condition, "bool")
        if then.kind != otherwise.kind or then.kind in {"list", "null"}:
            raise NotTranslated("a conditional of mixed types")
        c = condition.formula
        return Value(
            then.kind,
            z3.If(c, then.formula, otherwise.formula),
            z3.Or(condition.error, z3.If(c, _failing(then), _failing(otherwise))),
            z3.If(c, then.null, otherwise.null),
        )

    def _member(self, item: Value, collection: Value) -> Value:
        if collection.kind != "list" or not isinstance(collection.formula, list):
            raise NotTranslated("`in` over a list that is not a literal or a param")
        if any(element.kind != item.kind for element in collection.formula):
            raise NotTranslated("`in` over a list of another type")
        if item.kind not in {"int", "double", "string", "bool"}:
            raise NotTranslated(f"`in` of a {item.kind}")
        found = [item.formula == element.formula for element in collection.formula]
        return Value("bool", z3.Or(*found) if found else z3.BoolVal(False), _failing(item), _no())


def _no() -> Any:
    return z3.BoolVal(False)


def _failing(value: Value) -> Any:
    """When using ``value`` as an operand errors: its own error, or its being null."""
    return z3.Or(value.error, value.null)


def _expect(value: Value, kind: str) -> Value:
    if value.kind != kind:
        msg = f"a {value.kind} where CEL needs a {kind}"
        raise NotTranslated(msg)
    return value


def _logic(name: str, left: Value, right: Value) -> Value:
    _expect(left, "bool")
    _expect(right, "bool")
    a, b = left.formula, right.formula
    a_ok, b_ok = z3.Not(_failing(left)), z3.Not(_failing(right))
    if name == "&&":
        decided = z3.Or(z3.And(a_ok, z3.Not(a)), z3.And(b_ok, z3.Not(b)))
        formula = z3.And(a, b)
    else:
        decided = z3.Or(z3.And(a_ok, a), z3.And(b_ok, b))
        formula = z3.Or(a, b)
    error = z3.And(z3.Or(_failing(left), _failing(right)), z3.Not(decided))
    return Value("bool", formula, error, _no())


_ORDER = {"<", "<=", ">", ">="}
_ARITHMETIC = {"+", "-", "*", "/", "%"}


_NUMBERS = {"int", "double"}


def _numeric(left: Value, right: Value) -> tuple[Any, Any]:
    """Both operands as reals when their kinds differ: the engine compares int and double by
    value (rules._functions), where plain CEL has no overload."""
    a, b = left.formula, right.formula
    if left.kind != right.kind:
        a = z3.ToReal(a) if left.kind == "int" else a
        b = z3.ToReal(b) if right.kind == "int" else b
    return a, b


def _binary(name: str, left: Value, right: Value) -> Value:
    if name in {"==", "!="}:
        return _equality(name == "==", left, right)
    if name in _ORDER and left.kind in _NUMBERS and right.kind in _NUMBERS:
        a, b = _numeric(left, right)
        formula = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[name]
        return Value("bool", formula, z3.Or(_failing(left), _failing(right)), _no())
    if name in _ARITHMETIC and left.kind == right.kind and left.kind in _NUMBERS:
        error = z3.Or(_failing(left), _failing(right))
        return _arithmetic(name, left.kind, left.formula, right.formula, error)
    msg = f"`{name}` between a {left.kind} and a {right.kind}"
    raise NotTranslated(msg)


def _equality(equal: bool, left: Value, right: Value) -> Value:
    """``==`` (or ``!=``): null equals only null, numbers compare by value (rules._functions)."""
    error = z3.Or(left.error, right.error)
    either, both = z3.Or(left.null, right.null), z3.And(left.null, right.null)
    if "null" in {left.kind, right.kind}:
        formula = both
    elif left.kind in _NUMBERS and right.kind in _NUMBERS:
        a, b = _numeric(left, right)
        formula = z3.If(either, both, a == b)
    elif left.kind == right.kind and left.kind in {"bool", "string"}:
        formula = z3.If(either, both, left.formula == right.formula)
    else:
        msg = f"`{'==' if equal else '!='}` between a {left.kind} and a {right.kind}"
        raise NotTranslated(msg)
    return Value("bool", formula if equal else z3.Not(formula), error, _no())


def _arithmetic(name: str, kind: str, a: Any, b: Any, error: Any) -> Value:
    if name in {"+", "-", "*"}:
        formula = {"+": a + b, "-": a - b, "*": a * b}[name]
        return Value(kind, formula, error, _no())
    # Integer division and modulo truncate toward zero in CEL and floor in z3; a double divided
    # by zero is infinite: only a double divided by a non-zero constant is exact here.
    if name == "/" and kind == "double" and z3.is_rational_value(b) and not z3.is_true(b == 0):
        return Value(kind, a / b, error, _no())
    msg = f"`{name}` on {kind}s"
    raise NotTranslated(msg)
