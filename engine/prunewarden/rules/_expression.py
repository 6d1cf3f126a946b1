"""A compiled CEL expression, as a value apart from the code that makes and runs it.

The compiler refuses expressions and the evaluator runs them; both need what an expression *is*
(and the rules hold it), so it lives below both of them. So does reading a variable's shape,
which the checker and the compiler's samples both need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# A variable's shape is its JSON Schema (with references resolved); None means "anything".
Shape = Mapping[str, Any] | None
Result = Literal["bool", "string"]


@dataclass(frozen=True, slots=True)
class ExpressionProblem:
    """One thing wrong with an expression, at a line and column of the expression's text."""

    message: str
    line: int = 0
    column: int = 0
    source: str = ""

    def describe(self) -> str:
        """The message with its position and a caret under the culprit."""
        if not self.line:
            return self.message
        lines = self.source.splitlines() or [""]
        text = lines[self.line - 1] if self.line <= len(lines) else ""
        caret = " " * max(self.column - 1, 0) + "^"
        return f"{self.message} (at {self.line}:{self.column})\n    | {text}\n    | {caret}"


@dataclass(frozen=True, slots=True)
class Cost:
    """The worst-case cost of an expression and the path that makes it expensive.

    ``path`` goes from the outermost expensive operation to the costliest one inside it, each
    step the source it prices and why (``candidates.exists(...) (100000 items)``); empty when
    the expression only does constant work per node. ``line`` and ``column`` point at the first.
    """

    units: int
    path: tuple[str, ...] = ()
    line: int = 0
    column: int = 0

    def describe(self) -> str:
        """The path as one line: ``a (why) > b (why)``; ``constant work`` without one."""
        return " > ".join(self.path) if self.path else "constant work per node"


class ExpressionError(Exception):
    """An expression was refused when it was compiled; ``problems`` says every reason."""

    def __init__(self, problems: Sequence[ExpressionProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(p.message for p in self.problems))


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed and checked expression, ready to evaluate any number of times.

    ``reads`` maps each variable the expression reads to the fields it reads of it, or to None
    when it uses the variable as a whole; only those need to be built and converted.
    """

    source: str
    tree: Any = field(repr=False, compare=False)
    reads: Mapping[str, frozenset[str] | None]


def _types(shape: Shape) -> set[str]:
    if shape is None:
        return set()
    declared = shape.get("type")
    if declared is None:
        return set()
    return {declared} if isinstance(declared, str) else set(declared)


def json_type(shape: Shape) -> str:
    """The non-null JSON type of a shape, or "" when unknown."""
    types = _types(shape) - {"null"}
    return next(iter(types)) if len(types) == 1 else ""
