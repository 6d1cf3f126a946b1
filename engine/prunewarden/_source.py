"""Text to data, remembering where every value came from.

Policies are YAML and input documents are JSON; both reach the validators as plain JSON-like data
plus an index from JSON path to ``(line, column)``, so every problem can point at its culprit.
YAML is composed with the safe loader and built by hand, which lets us refuse what PyYAML would
silently accept: duplicate keys, non-string keys, merge keys, non-finite numbers, and alias
expansions or nesting deep enough to exhaust memory or the stack. Nodes are counted while the
document is composed, so a document of too many values stops there, not after all of them were
held in memory.

Both refuse, as located problems, what Python cannot carry through: an integer of more than
:data:`~prunewarden.limits.MAX_INTEGER_DIGITS` digits (it cannot be printed) and a string holding
a lone surrogate (``"\\ud800"``: it is not Unicode text, and cannot be written as UTF-8).
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
from prunewarden.limits import (
    INTEGER_CEILING,
    MAX_INPUT_CHARS,
    MAX_INTEGER_DIGITS,
    MAX_POLICY_BYTES,
    MAX_PROBLEMS,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
)

_SURROGATE = re.compile(r"[\ud800-\udfff]")
# A lone surrogate spelled in JSON or YAML text, or one already in the text (decoded with
# surrogateescape); a surrogate pair spelled out also matches, and is then found to be whole.
_SURROGATE_IN_TEXT = re.compile(r"[\ud800-\udfff]|\\(?:u|U0000)[dD][89a-fA-F]")
_LONG_INTEGER = re.compile(rf"-?[0-9]{{{MAX_INTEGER_DIGITS + 1},}}")
SURROGATE_MESSAGE = "holds a lone surrogate (not Unicode text)"
LONG_INTEGER_MESSAGE = f"an integer of more than {MAX_INTEGER_DIGITS} digits"


def json_path(path: JsonPath) -> str:
    """Render a path as JSONPath: ``$.spec.rules[0].when``."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


class _Loader(yaml.SafeLoader):
    """The safe loader, closer to JSON and YAML 1.2: dates stay strings; only true and false are
    booleans (YAML 1.1 reads ``mode: off`` as false, and ``off`` is a mode); and ``1e-3`` is a
    number (the YAML 1.1 float pattern wants a dot in the mantissa). It counts the nodes it
    composes and stops past :data:`~prunewarden.limits.MAX_YAML_NODES`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composed = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.composed += 1
        if self.composed > MAX_YAML_NODES:
            raise _TooLargeError(_TOO_MANY_NODES)
        return super().compose_node(parent, index)


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


_TOO_MANY_NODES = f"more than {MAX_YAML_NODES} values (after alias expansion)"
_COUNTED_EVENTS = (yaml.ScalarEvent, yaml.CollectionStartEvent)


def _count_nodes(text: str) -> None:
    """Raise :class:`_TooLargeError` when ``text`` holds more nodes than the limit, counted on
    the events of libyaml's parser (when PyYAML has it): a few hundred milliseconds for a
    megabyte, against tens of seconds to compose it in Python first. A text libyaml cannot
    parse is left to the loader, which says where it is wrong."""
    if not getattr(yaml, "__with_libyaml__", False):
        return  # the loader counts while it composes
    parser = yaml.CSafeLoader(text)
    count = 0
    try:
        while parser.check_event():
            if isinstance(parser.get_event(), _COUNTED_EVENTS):
                count += 1
                if count > MAX_YAML_NODES:
                    raise _TooLargeError(_TOO_MANY_NODES)
    except yaml.YAMLError:
        return
    finally:
        parser.dispose()


class _Builder:
    def __init__(self, loader: _Loader, parsed: Parsed) -> None:
        self.loader = loader
        self.parsed = parsed
        self.nodes = 0
        self.problems: list[Problem] = []

    def build(self, node: yaml.Node, path: JsonPath) -> Any:
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            raise _TooLargeError(_TOO_MANY_NODES)
        if len(path) > MAX_YAML_DEPTH:
            msg = f"nested deeper than {MAX_YAML_DEPTH} levels"
            raise _TooLargeError(msg)
        self.parsed.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        unreadable = _unreadable_integer(node, self.loader)
        if unreadable is not None:
            self._add(path, unreadable)
            return None
        value = self._construct(node, path)
        if isinstance(value, str) and _lone_surrogate(value):
            value = _paired(value)
            if value is None:
                self._add(path, SURROGATE_MESSAGE)
        elif isinstance(value, float) and not math.isfinite(value):
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
            key_at = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            unreadable = _unreadable_integer(key_node, self.loader)
            known = len(self.problems)
            key = None if unreadable else self._construct(key_node, path)
            if len(self.problems) > known:  # a tag that cannot read the key: said once
                continue
            if isinstance(key, str) and _lone_surrogate(key):
                key = _paired(key)
                unreadable = None if key is not None else f"a mapping key {SURROGATE_MESSAGE}"
            if unreadable:
                self.problems.append(
                    Problem(self.parsed.filename, *key_at, json_path(path), unreadable)
                )
                continue
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

    def _construct(self, node: yaml.Node, path: JsonPath) -> Any:
        """A scalar's value, or None with a located problem when its tag cannot read it.

        An explicit tag asks PyYAML's constructor to read any text: ``!!int abc``,
        ``!!float 1:59:59:...`` (base 60, past a float's range), ``!!bool maybe``,
        ``!!timestamp 2020-13-45`` raised from the constructor and exited 70; ``!!map abc``
        read as an empty mapping.
        """
        tag = _short_tag(node.tag)
        try:
            value = self.loader.construct_object(node)
        except (ValueError, OverflowError, KeyError, TypeError):
            self._add_at(node, path, f"{describe_value(node.value)} is not a valid {tag}")
            return None
        if isinstance(value, dict | list | set):
            self._add_at(node, path, f"{describe_value(node.value)} is not a valid {tag}")
            return None
        return value

    def _add_at(self, node: yaml.Node, path: JsonPath, message: str) -> None:
        at = (node.start_mark.line + 1, node.start_mark.column + 1)
        self.problems.append(Problem(self.parsed.filename, *at, json_path(path), message))

    def _add(self, path: JsonPath, message: str) -> None:
        self.problems.append(self.parsed.problem(path, message))


def _short_tag(tag: str) -> str:
    """``tag:yaml.org,2002:int`` as a YAML file spells it: ``!!int``."""
    prefix = "tag:yaml.org,2002:"
    return "!!" + tag[len(prefix) :] if tag.startswith(prefix) else tag


class _TooLargeError(Exception):
    pass


def _unreadable_integer(node: yaml.Node, loader: yaml.SafeLoader) -> str | None:
    """Why an integer scalar cannot be carried, or None: more than MAX_INTEGER_DIGITS decimal
    digits, however it is spelled.

    Decimal digits are counted before the constructor runs (``int()`` of such a text raises
    deep inside it). YAML 1.1 also spells integers in hex, octal, binary and base 60, which
    ``int()`` reads at any length: ``0x`` and 5,000 hex digits loaded, then every message that
    printed the value exited 70. Those are read when their text is short enough to read
    quickly (a 4300-digit number takes at most 14,300 binary digits) and refused by value.
    """
    if node.tag != "tag:yaml.org,2002:int" or not isinstance(node.value, str):
        return None
    text = node.value
    if len(text) <= _SHORT_INTEGER_TEXT:
        return None
    if _DECIMAL_INTEGER.fullmatch(text):
        digits = sum(character.isdigit() for character in text)
        return LONG_INTEGER_MESSAGE if digits > MAX_INTEGER_DIGITS else None
    spelled = f"{LONG_INTEGER_MESSAGE}: {describe_value(text)}"
    if len(text) > _LONGEST_INTEGER_TEXT:
        return spelled
    try:
        value = loader.construct_object(node)
    except ValueError:
        return spelled
    return spelled if abs(value) >= INTEGER_CEILING else None


# An integer text this short holds fewer than MAX_INTEGER_DIGITS decimal digits in any base
# YAML 1.1 spells (16**3000 < 10**3613); a longer one in any base but 10 is read to be checked,
# up to the length binary needs for MAX_INTEGER_DIGITS digits (log2(10) = 3.33 bits a digit).
_SHORT_INTEGER_TEXT = 3000
_LONGEST_INTEGER_TEXT = 4 * MAX_INTEGER_DIGITS
_DECIMAL_INTEGER = re.compile(r"[-+]?(?:0|[1-9][0-9_]*)")


def _lone_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _paired(text: str) -> str | None:
    """``text`` with its surrogate pairs made characters (YAML spells a character beyond the
    Basic Multilingual Plane as a pair and PyYAML keeps both halves); None if one is alone."""
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return None


def parse_yaml(text: str, filename: str) -> tuple[Parsed, list[Problem]]:
    """Parse one YAML document; return the data and every problem found while building it."""
    parsed = Parsed(None, filename)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        size_msg = f"file is larger than the limit of {MAX_POLICY_BYTES} bytes"
        return parsed, [Problem(filename, 0, 0, "$", size_msg)]
    loader: _Loader | None = None
    try:
        _count_nodes(text)
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
    result = dict(pairs)
    if len(result) == len(pairs):  # no key twice: the common case, built in one C call
        return result
    result = {}
    for key, value in pairs:
        if key in result:
            msg = f"duplicate key {key!r}"
            raise ValueError(msg)
        result[key] = value
    return result


def _may_hold_surrogate(text: str) -> bool:
    return not text.isascii() or "\\u" in text or "\\U" in text


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
        return _refused_json(text, filename, parsed, exc)
    except RecursionError:
        return parsed, [Problem(filename, 0, 0, "$", "invalid JSON: nested too deeply")]
    # A surrogate is either non-ASCII or written as a \u or \U escape: most documents are
    # ASCII without either, and need no regular-expression scan.
    if _may_hold_surrogate(text) and _SURROGATE_IN_TEXT.search(text) is not None:
        return parsed, _surrogate_problems(parsed.data, text, filename)
    return parsed, []


def _refused_json(
    text: str, filename: str, parsed: Parsed, exc: ValueError
) -> tuple[Parsed, list[Problem]]:
    """A duplicate key or an integer too long to read, located (by reading the text as YAML
    when it is small enough, else by finding the digits)."""
    located, problems = (
        parse_yaml(text, filename) if len(text) <= MAX_POLICY_BYTES else (parsed, [])
    )
    kept = [
        p for p in problems if "duplicate key" in p.message or p.message == LONG_INTEGER_MESSAGE
    ]
    if kept:
        return located, kept
    digits = _LONG_INTEGER.search(text)
    if digits is not None:
        line = text.count("\n", 0, digits.start()) + 1
        column = digits.start() - text.rfind("\n", 0, digits.start())
        return parsed, [Problem(filename, line, column, "$", LONG_INTEGER_MESSAGE)]
    return located, [Problem(filename, 0, 0, "$", f"invalid JSON: {exc}")]


def _surrogate_problems(data: Any, text: str, filename: str) -> list[Problem]:
    """A problem for each string (or key) of ``data`` that holds a lone surrogate, located in
    ``text``; none when every surrogate escape was half of a pair."""
    found: list[JsonPath] = []
    stack: list[tuple[Any, JsonPath]] = [(data, ())]
    while stack and len(found) < MAX_PROBLEMS:
        value, path = stack.pop()
        if isinstance(value, str):
            if _lone_surrogate(value):
                found.append(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                if _lone_surrogate(key):
                    found.append(path)
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, i)) for i, item in enumerate(value))
    if not found:
        return []
    located = locate(text, filename)
    return [located.problem(path, SURROGATE_MESSAGE) for path in sorted(found, key=str)]


def locate(text: str, filename: str) -> Parsed:
    """Positions of every value in a JSON or YAML text, for error messages; empty if unparsable."""
    if len(text) > MAX_POLICY_BYTES:
        return Parsed(None, filename)
    return parse_yaml(text, filename)[0]
