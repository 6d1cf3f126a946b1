"""Where a problem in a built case was written.

A case's input is assembled from pieces (the case itself, a fixture, a patch over it, an input
file, a table row), and a problem found in the result must point at the piece that holds the
value, not at the assembled document, which exists in no file. Each locator here covers one way
of assembling and passes a problem's path on to the piece it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prunewarden._json import JsonPath
from prunewarden._source import Parsed, locate
from prunewarden.errors import Problem
from prunewarden.suites._expectations import Locator


@dataclass(frozen=True, slots=True)
class Within:
    """A part of a parsed file, at ``prefix``."""

    parsed: Parsed
    prefix: JsonPath

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.parsed.problem((*self.prefix, *path), message, at_key=at_key)


@dataclass(slots=True)
class LazyFile:
    """A file whose positions are only computed when a problem needs them."""

    text: str
    filename: str
    _parsed: Parsed | None = None

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        if self._parsed is None:
            self._parsed = locate(self.text, self.filename)
        return self._parsed.problem(path, message, at_key=at_key)


@dataclass(frozen=True, slots=True)
class Patched:
    """A fixture with a patch merged over it: a path the patch sets is located in the patch."""

    patch: Any
    in_patch: Locator
    in_fixture: Locator

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        node = self.patch
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return self.in_fixture.problem(path, message, at_key=at_key)
            node = node[part]
        return self.in_patch.problem(path, message, at_key=at_key)


class Mapped(Parsed):
    """A document built from pieces of a suite file (an expanded table case), given to the schema
    validator with its problems located where each piece was written."""

    def __init__(self, data: Any, filename: str, where: Locator) -> None:
        super().__init__(data, filename, built=True)
        self.where = where

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.where.problem(path, message, at_key=at_key)


@dataclass(frozen=True, slots=True)
class Part:
    """A locator for a part of what another locator covers."""

    outer: Locator
    prefix: JsonPath

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.outer.problem((*self.prefix, *path), message, at_key=at_key)


@dataclass(frozen=True, slots=True)
class Noted:
    """Adds a note to each problem's message (which case a shared input was used by)."""

    outer: Locator
    note: str

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.outer.problem(path, f"{message} ({self.note})", at_key=at_key)


@dataclass(frozen=True, slots=True)
class Expanded:
    """Locates a one-case suite document: the case through its own locator, the rest in the
    suite file."""

    suite: Locator
    case: Locator

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        if path[:2] == ("cases", 0):
            return self.case.problem(path[2:], message, at_key=at_key)
        return self.suite.problem(path, message, at_key=at_key)
