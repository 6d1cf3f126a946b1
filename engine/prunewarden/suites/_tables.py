"""Table-driven cases: one case written once, expanded for each row of its ``table``.

A row's values replace the ``${name}`` parameters of the case. A parameter that is a whole string
takes the row's value with its type, so that a row can vary numbers, lists or null and not only
text; a value that came from a row is then located at the row, where it was written, rather than
at the template.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prunewarden._json import JsonPath
from prunewarden.errors import Problem
from prunewarden.suites._locators import Within

_PARAMETER = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
_WHOLE_PARAMETER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")


@dataclass(frozen=True, slots=True)
class Row:
    """An expanded table case: a value that came from a ``${name}`` is located at the row."""

    template: Within
    body: Any
    row: Within

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        node = self.body
        for depth in range(len(path) + 1):
            if isinstance(node, str) and (whole := _WHOLE_PARAMETER.fullmatch(node)):
                return self.row.problem((whole[1], *path[depth:]), message, at_key=at_key)
            if depth == len(path) or not _has(node, path[depth]):
                break
            node = node[path[depth]]
        return self.template.problem(path, message, at_key=at_key)


def _has(node: Any, part: str | int) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def parameters_used(value: Any, path: JsonPath = ()) -> dict[str, JsonPath]:
    """Every ``${name}`` used in string values, with the path of its first use."""
    found: dict[str, JsonPath] = {}
    if isinstance(value, str):
        for match in _PARAMETER.finditer(value):
            if not match[1]:
                found.setdefault(match[2], path)
    elif isinstance(value, dict):
        for key, item in value.items():
            for name, where in parameters_used(item, (*path, key)).items():
                found.setdefault(name, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for name, where in parameters_used(item, (*path, i)).items():
                found.setdefault(name, where)
    return found


def substitute(value: Any, row: Mapping[str, Any]) -> Any:
    """``"${name}"`` becomes the row's value with its type; ``${name}`` inside a longer string
    becomes its text; ``$${`` is a literal ``${``."""
    if isinstance(value, str):
        if whole := _WHOLE_PARAMETER.fullmatch(value):
            return copy.deepcopy(row[whole[1]])
        return _PARAMETER.sub(
            lambda m: "${" + m[2] + "}" if m[1] else _text(row[m[2]]),
            value,
        )
    if isinstance(value, dict):
        return {key: substitute(item, row) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, row) for item in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def row_label(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={_text(value)}" for name, value in row.items())
