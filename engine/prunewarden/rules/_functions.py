"""The functions a rule may call, kept apart from the evaluator because the checker needs their
names and arities to refuse any other call when the policy loads.

The engine's own functions (aggregates over scores, counts against a threshold, case-insensitive
phrase matching) return an error value naming the function and what it takes, rather than raise,
so a wrong argument fails the expression with a message a policy author can act on. cel-python's
comparison operators are replaced because they refuse comparisons CEL allows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError, base_functions

from prunewarden.rules import _budget as budget
from prunewarden.rules._patterns import matches
from prunewarden.rules._times import TIME_FUNCTIONS
from prunewarden.rules._values import format_double, type_name

# Engine functions' loops look at the clock every this many elements.
_CHECK_EVERY = 4096


def _is_number(value: Any) -> bool:
    # cel-python's double arithmetic returns plain floats, so those count too.
    return isinstance(value, int | float) and not isinstance(value, bool | ct.BoolType)


def _plain(value: Any) -> int | float:
    """The Python number, so comparisons are exact and skip the CEL types' own checks."""
    return float(value) if isinstance(value, float) else int(value)


def _heterogeneous(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """CEL's numeric comparison across int, uint and double (cel-python refuses ``1 == 1.0``
    and ``size(x) < 2.0``), and null equality; other operands go to cel-python's operator."""
    original = base_functions[name]
    equality = name in {"_==_", "_!=_"}

    def operator(left: Any, right: Any) -> Any:
        if isinstance(left, CELEvalError):
            return left
        if isinstance(right, CELEvalError):
            return right
        if _is_number(left) and _is_number(right):
            return ct.BoolType(compare(_plain(left), _plain(right)))
        if equality and (left is None or right is None):
            return ct.BoolType(compare(left is None, right is None))
        return original(left, right)

    return operator


def _one_numeric_type(
    symbol: str, operator: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """``operator`` refusing an int and a double (or a uint) together, as CEL specifies and
    cel-cpp does: cel-python computed ``score + 0`` and ``score * 2`` (and refused ``1 + score``
    and ``/``). The TypeError is what cel-python's evaluator makes a located type error of."""

    def checked(left: Any, right: Any) -> Any:
        if _is_number(left) and _is_number(right) and type_name(left) != type_name(right):
            message = f"{symbol} of {type_name(left)} and {type_name(right)}"
            raise TypeError(message)
        return operator(left, right)

    checked.__name__ = operator.__name__
    return checked


# What 0.0 / 0.0 gives in C on this machine (x86: a NaN with its sign bit set, which printf and
# so cel-cpp's string() write "-nan"): the same NaN on both backends.
_DEFAULT_NAN = math.inf - math.inf


def _divide(left: Any, right: Any) -> Any:
    """IEEE 754 division of doubles, as CEL specifies and cel-cpp does: cel-python gives +inf
    for every division by zero (``-1.0 / 0.0``, ``0.0 / 0.0``), where the sign and NaN count.
    A double computed by arithmetic is a plain float, an input's a DoubleType: both count."""
    both = isinstance(left, float) and isinstance(right, float)
    if both and float(right) == 0.0:
        numerator = float(left)
        if math.isnan(numerator):
            return ct.DoubleType(numerator)
        if numerator == 0:
            return ct.DoubleType(_DEFAULT_NAN)
        return ct.DoubleType(math.copysign(math.inf, numerator) * math.copysign(1.0, right))
    return base_functions["_/_"](left, right)


def _numbers(values: Any, function: str) -> list[float] | CELEvalError:
    if isinstance(values, ct.MapType):
        values = list(values.values())
    if not isinstance(values, ct.ListType | list):
        return CELEvalError(f"{function}() takes a list or a map of numbers", TypeError, None)
    out = []
    for index, value in enumerate(values):
        if index % _CHECK_EVERY == 0:
            budget.check()
        if not _is_number(value):
            message = f"{function}() takes numbers, found {type_name(value)}"
            return CELEvalError(message, TypeError, None)
        out.append(float(_plain(value)))
    return out


def _aggregate(
    name: str, reduce: Callable[[list[float]], float], *, empty: float | None = None
) -> Callable[[Any], Any]:
    def function(values: Any) -> Any:
        numbers = _numbers(values, name)
        if isinstance(numbers, CELEvalError):
            return numbers
        if not numbers:
            if empty is None:
                return CELEvalError(f"{name}() of an empty list", ValueError, None)
            return ct.DoubleType(empty)
        return ct.DoubleType(reduce(numbers))

    function.__name__ = name
    return function


def _pstdev(numbers: list[float]) -> float:
    mean = math.fsum(numbers) / len(numbers)
    return math.sqrt(math.fsum((x - mean) * (x - mean) for x in numbers) / len(numbers))


def _counter(name: str, hit: Callable[[float, float], bool]) -> Callable[[Any, Any], Any]:
    def function(values: Any, threshold: Any) -> Any:
        numbers = _numbers(values, name)
        if isinstance(numbers, CELEvalError):
            return numbers
        if not _is_number(threshold):
            return CELEvalError(f"{name}() takes a number threshold", TypeError, None)
        limit = float(threshold)
        return ct.DoubleType(sum(1 for x in numbers if hit(x, limit)))

    function.__name__ = name
    return function


def _abs(value: Any) -> Any:
    if not _is_number(value):
        return CELEvalError(f"abs() takes a number, not {type_name(value)}", TypeError, None)
    return ct.DoubleType(abs(float(value)))


# The most characters one character becomes in Python's case mappings (İ -> i̇, ΐ -> ΐ, ﬃ ->
# ffi): what a text may grow to, charged here and priced by the static estimate (``_cost``).
LOWER_GROWTH = 2
CASEFOLD_GROWTH = 3


def _lower(text: Any) -> Any:
    if not isinstance(text, ct.StringType):
        return CELEvalError(f"lower() takes a string, not {type_name(text)}", TypeError, None)
    budget.allocate(_grown(text, LOWER_GROWTH))
    return ct.StringType(text.lower())


def _grown(text: str, factor: int) -> int:
    """An upper bound of a text's length after case mapping: ASCII keeps its length."""
    return len(text) if text.isascii() else factor * len(text)


def _contains_any(text: Any, needles: Any) -> Any:
    if not isinstance(text, ct.StringType) or not isinstance(needles, ct.ListType):
        return CELEvalError("contains_any() takes a string and a list of strings", TypeError, None)
    if not all(isinstance(n, ct.StringType) for n in needles):
        return CELEvalError("contains_any() takes a list of strings", TypeError, None)
    budget.allocate(_grown(text, CASEFOLD_GROWTH))
    folded = text.casefold()
    for needle in needles:
        budget.check()  # each needle scans the whole text: the loop is where the time goes
        if str(needle).casefold() in folded:
            return ct.BoolType(True)
    budget.check()
    return ct.BoolType(False)


def _sized(name: str) -> Callable[..., Any]:
    """cel-python's ``name`` (``+``, ``string``, ``bytes``), its result's size charged to the
    allocation budget: before it is built when the operands tell (a concatenation), else after
    (a conversion builds no more than its operand's own text)."""
    original = base_functions[name]

    def function(*args: Any) -> Any:
        result: Any
        if len(args) == 1 and args[0] is None:
            # CEL has no string(null) or bytes(null), and cel-cpp refuses them; cel-python
            # would give the text "None".
            return CELEvalError(f"{name}() takes no null", TypeError, None)
        if len(args) == 2 and all(isinstance(a, str | bytes | list) for a in args):
            budget.allocate(len(args[0]) + len(args[1]))
        if name == "string" and len(args) == 1 and isinstance(args[0], float):
            # cel-cpp's spelling (``"1"``, not ``"1.0"``), so both backends give the same text;
            # arithmetic gives a plain float, not a DoubleType, so both are spelled so.
            result = ct.StringType(format_double(float(args[0])))
        else:
            result = original(*args)
        if len(args) == 1 and isinstance(result, str | bytes):
            budget.allocate(len(result))
        return _as_cel(result)

    function.__name__ = name
    return function


def _as_cel(value: Any) -> Any:
    """A concatenation's plain ``str``, ``bytes`` or ``list`` as the CEL type it is: cel-python's
    methods (``(a + b).contains(c)``) take only the CEL types, where cel-cpp takes any string."""
    kind = type(value)
    if kind is str:
        return ct.StringType(value)
    if kind is bytes:
        return ct.BytesType(value)
    return ct.ListType(value) if kind is list else value


ENGINE_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, str]] = {
    "mean": (_aggregate("mean", lambda xs: math.fsum(xs) / len(xs)), 1, "arithmetic mean"),
    "stdev": (_aggregate("stdev", _pstdev, empty=0.0), 1, "population standard deviation"),
    "sum": (_aggregate("sum", math.fsum, empty=0.0), 1, "sum"),
    "minimum": (_aggregate("minimum", min), 1, "smallest value"),
    "maximum": (_aggregate("maximum", max), 1, "largest value"),
    "count_below": (_counter("count_below", lambda x, t: x < t), 2, "how many are < t"),
    "count_above": (_counter("count_above", lambda x, t: x > t), 2, "how many are > t"),
    "abs": (_abs, 1, "absolute value"),
    "lower": (_lower, 1, "lower-cased string"),
    "contains_any": (_contains_any, 2, "case-insensitive: the text contains one of the phrases"),
}
ARITY = {name: arity for name, (_, arity, _) in ENGINE_FUNCTIONS.items()}

# cel-python's standard functions, methods and conversions (operators are not callable by name).
STANDARD_FUNCTIONS = frozenset(
    name for name in base_functions if name.isidentifier() and not name.startswith("_")
)

FUNCTIONS: dict[str, Any] = {
    "_==_": _heterogeneous("_==_", lambda a, b: a == b),
    "_!=_": _heterogeneous("_!=_", lambda a, b: a != b),
    "_<_": _heterogeneous("_<_", lambda a, b: a < b),
    "_<=_": _heterogeneous("_<=_", lambda a, b: a <= b),
    "_>_": _heterogeneous("_>_", lambda a, b: a > b),
    "_>=_": _heterogeneous("_>=_", lambda a, b: a >= b),
    "_+_": _one_numeric_type("+", _sized("_+_")),
    "_-_": _one_numeric_type("-", base_functions["_-_"]),
    "_*_": _one_numeric_type("*", base_functions["_*_"]),
    "_/_": _one_numeric_type("/", _divide),
    "_%_": _one_numeric_type("%", base_functions["_%_"]),
    "string": _sized("string"),
    "bytes": _sized("bytes"),
    "matches": matches,
    **TIME_FUNCTIONS,
    **{name: function for name, (function, _, _) in ENGINE_FUNCTIONS.items()},
}
