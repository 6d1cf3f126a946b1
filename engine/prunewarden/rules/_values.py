"""CEL values: what the JSON-like values of a request become, and what they are called in
messages. A message names a value's type, never the value: a segment's text must not leak into
decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import celpy.celtypes as ct

MAX_VALUE_DEPTH = 32


def to_cel(value: Any, _depth: int = 0) -> Any:
    """A JSON-like Python value as a CEL value. Every number becomes a double: JSON's ``0`` is
    an int, and CEL would refuse ``score < 0.2`` on it."""
    if _depth > MAX_VALUE_DEPTH:
        msg = f"value nested deeper than {MAX_VALUE_DEPTH} levels"
        raise ValueError(msg)
    if value is None:
        return None
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int | float):
        return ct.DoubleType(value)
    if isinstance(value, str):
        return ct.StringType(value)
    if isinstance(value, Mapping):
        return ct.MapType(
            {ct.StringType(key): to_cel(item, _depth + 1) for key, item in value.items()}
        )
    if isinstance(value, list | tuple):
        return ct.ListType([to_cel(item, _depth + 1) for item in value])
    msg = f"{type(value).__name__} has no CEL value"
    raise TypeError(msg)


def format_double(value: float) -> str:
    """``string(double)`` as cel-cpp writes it, the one spelling both backends give: the
    shortest digits that read back as the same double, in fixed notation when the decimal
    exponent is in [-4, 6) and in exponent notation (two digits at least) otherwise —
    ``1.0`` is ``"1"``, ``1e6`` is ``"1e+06"``, ``-0.0`` is ``"-0"``, ``1e21`` is ``"1e+21"``."""
    if math.isnan(value):  # its sign bit shows, as printf shows it
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)  # noqa: S101 - a finite Decimal has an int exponent
    text = "".join(map(str, digits))
    magnitude = len(text) - 1 + exponent  # the decimal exponent of the first digit
    if -4 <= magnitude < 6:  # printf's %g rule, with the shortest digits
        fixed = format(Decimal(repr(abs(value))).normalize(), "f")
        return ("-" if sign else "") + fixed
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'-' if magnitude < 0 else '+'}{abs(magnitude):02d}"


def type_name(value: Any) -> str:
    """The CEL type of a value, for messages (never the value itself)."""
    if value is None:
        return "null"
    for cel_type, name in (
        (ct.BoolType, "bool"),
        (ct.DoubleType, "double"),
        (ct.UintType, "uint"),
        (ct.IntType, "int"),
        (ct.StringType, "string"),
        (ct.ListType, "list"),
        (ct.MapType, "map"),
        (float, "double"),
        (int, "int"),
        (str, "string"),
    ):
        if isinstance(value, cel_type):
            return name
    return type(value).__name__


def is_bool(value: Any) -> bool:
    return isinstance(value, ct.BoolType | bool)
