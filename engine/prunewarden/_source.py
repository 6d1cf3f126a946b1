"""Text to data, remembering where every value came from.

Policies are YAML and input documents are JSON; both reach the validators as plain JSON-like data
plus an index from JSON path to ``(line, column)``, so every problem can point at its culprit.
YAML is composed with the safe loader and built by hand, which lets us refuse what PyYAML would
silently accept: duplicate keys, non-string keys, merge keys, non-finite numbers, and alias
expansions or nesting deep enough to exhaust memory or the stack.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from prunewarden._json import JsonPath
from prunewarden.errors import Problem, describe_value
from prunewarden.limits import MAX_INPUT_CHARS, MAX_POLICY_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES


def json_path(path: JsonPath) -> str:
    """Render a path as JSONPath: ``$.spec.rules[0].when``."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


class _Loader(yaml.SafeLoader):
    """The safe loader, closer to JSON and YAML 1.2: dates stay strings; only true and false are
    booleans (YAML 1.1 reads ``mode: off`` as false, and ``off`` is a mode); and ``1e-3`` is a
    number (the YAML 1.1 float pattern wants a dot in the mantissa)."""


_YAML_1_1_ONLY = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool")
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_1_1_ONLY]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a value was set: a file, a line and a column, and the file's place in an
    ``extends`` chain (0 is the root policy; see prunewarden.policy._overlay)."""

    file: str
    line: int
    column: int
    layer: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Parsed:
    """Data parsed from a source, with the position of each value and of each mapping key."""

    data: Any
    filename: str
    built: bool = False
    values: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        """A problem located at ``path`` (at its key, when asked and known)."""
        line, column = (self.keys.get(path) if at_key else None) or self._nearest(path)
        return Problem(self.filename, line, column, json_path(path), message)

    def _nearest(self, path: JsonPath) -> tuple[int, int]:
        for end in range(len(path), -1, -1):
            if (found := self.values.get(path[:end])) is not None:
                return found
        return (0, 0)


class _Builder:
    def __init__(self, loader: _Loader, parsed: Parsed) -> None:
        self.loader = loader
        self.parsed = parsed
        self.nodes = 0
        self.problems: list[Problem] = []

    def build(self, node: yaml.Node, path: JsonPath) -> Any:
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            msg = f"more than {MAX_YAML_NODES} values (after alias expansion)"
            raise _TooLargeError(msg)
        if len(path) > MAX_YAML_DEPTH:
            msg = f"nested deeper than {MAX_YAML_DEPTH} levels"
            raise _TooLargeError(msg)
        self.parsed.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        value = self.loader.construct_object(node)
        if isinstance(value, float) and not math.isfinite(value):
            self._add(path, f"{describe_value(value)} is not a finite number")
        elif isinstance(value, bytes):
            self._add(path, "binary values are not accepted")
        return value

    def _mapping(self, node: yaml.MappingNode, path: JsonPath) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._add(path, "YAML merge keys ('<<') are not supported; write the values out")
                continue
            key = self.loader.construct_object(key_node)
            key_at = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if not isinstance(key, str):
                self.problems.append(
                    Problem(
                        self.parsed.filename,
                        *key_at,
                        json_path(path),
                        f"mapping key {describe_value(key)} is not a string",
                    )
                )
                continue
            child = (*path, key)
            if key in result:
                first = self.parsed.keys[child]
                self.problems.append(
                    Problem(
                        self.parsed.filename,
                        *key_at,
                        json_path(child),
                        f"duplicate key {key!r} (first defined at line {first[0]})",
                    )
                )
                continue
            self.parsed.keys[child] = key_at
            result[key] = self.build(value_node, child)
        return result

    def _add(self, path: JsonPath, message: str) -> None:
        self.problems.append(self.parsed.problem(path, message))


class _TooLargeError(Exception):
    pass


def parse_yaml(text: str, filename: str) -> tuple[Parsed, list[Problem]]:
    """Parse one YAML document; return the data and every problem found while building it."""
    parsed = Parsed(None, filename)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        size_msg = f"file is larger than the limit of {MAX_POLICY_BYTES} bytes"
        return parsed, [Problem(filename, 0, 0, "$", size_msg)]
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return parsed, [Problem(filename, 1, 1, "$", "the document is empty")]
        builder = _Builder(loader, parsed)
        parsed.data = builder.build(node, ())
        parsed.built = True
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        reason = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        return parsed, [Problem(filename, line, column, "$", f"invalid YAML: {reason}")]
    except yaml.YAMLError as exc:
        return parsed, [Problem(filename, 0, 0, "$", f"invalid YAML: {exc}")]
    except (_TooLargeError, RecursionError) as exc:
        reason = str(exc) or "nested too deeply"
        return parsed, [Problem(filename, 0, 0, "$", f"document refused: {reason}")]
    finally:
        if loader is not None:
            loader.dispose()
    return parsed, builder.problems


def _reject_constant(token: str) -> float:
    msg = f"{token} is not a valid JSON number"
    raise ValueError(msg)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            msg = f"duplicate key {key!r}"
            raise ValueError(msg)
        result[key] = value
    return result


def parse_json(text: str, filename: str) -> tuple[Parsed, list[Problem]]:
    """Parse strict JSON: no NaN or Infinity tokens, no duplicate keys.

    Positions are only computed when something is wrong (see :func:`locate`), so the common path
    costs what ``json.loads`` costs.
    """
    parsed = Parsed(None, filename)
    if len(text) > MAX_INPUT_CHARS:
        size_msg = f"document is larger than the limit of {MAX_INPUT_CHARS} characters"
        return parsed, [Problem(filename, 0, 0, "$", size_msg)]
    try:
        parsed.data = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_unique_object
        )
        parsed.built = True
    except json.JSONDecodeError as exc:
        return parsed, [Problem(filename, exc.lineno, exc.colno, "$", f"invalid JSON: {exc.msg}")]
    except ValueError as exc:
        located, problems = (
            parse_yaml(text, filename) if len(text) <= MAX_POLICY_BYTES else (parsed, [])
        )
        duplicates = [p for p in problems if "duplicate key" in p.message]
        return located, duplicates or [Problem(filename, 0, 0, "$", f"invalid JSON: {exc}")]
    except RecursionError:
        return parsed, [Problem(filename, 0, 0, "$", "invalid JSON: nested too deeply")]
    return parsed, []


def locate(text: str, filename: str) -> Parsed:
    """Positions of every value in a JSON or YAML text, for error messages; empty if unparsable."""
    if len(text) > MAX_POLICY_BYTES:
        return Parsed(None, filename)
    return parse_yaml(text, filename)[0]
