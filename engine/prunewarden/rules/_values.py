"""CEL values: what the JSON-like values of a request become, and what they are called in
messages. A message names a value's type, never the value: a segment's text must not leak into
decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
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
