"""How the per-decision values are changed: they are frozen ``msgspec.Struct``s, not dataclasses.

A pass builds a segment, a request, a decision and its actions for every item, so what one of
them costs to build is paid hundreds of times per pass. A frozen ``Struct`` is built in C (a
``Decision``: 0.16 us, against 1.8 us as a frozen dataclass, in one run; a pass's values:
``benchmarks/value_types.py``) and keeps the promises the values made: the same positional and
keyword constructor, attributes, equality, hashing of hashable fields, immutability and
pickling. It has no ``__dict__`` (nor had the slotted dataclasses) and ``dataclasses.replace``
does not take it: :func:`replace_value` does.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec.structs

__all__ = ["replace_value"]

_V = TypeVar("_V", bound=msgspec.Struct)


def replace_value(value: _V, /, **changes: Any) -> _V:
    """A copy of ``value`` with ``changes``, as ``dataclasses.replace`` makes one."""
    return msgspec.structs.replace(value, **changes)
