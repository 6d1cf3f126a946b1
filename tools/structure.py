"""The package's structure in numbers: modules over 450 lines and functions over 50.

    python tools/structure.py            # both lists, longest first
    python tools/structure.py --core     # only the core and the runtime

A function's length is the lines of its code, from its first statement after the docstring to
its last (a signature and a docstring explain, they do not make a function harder to hold in
mind). ``tests/test_structure.py`` holds the counts to their ceilings. Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "engine" / "prunewarden"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 50

#: The packages above the property line (docs/architecture.md); every other module is core.
RINGS = (
    "server", "mcp", "client", "shipping", "metrics", "tracing", "cli", "replay", "suites",
    "analysis", "plots", "health", "review", "integrations",
)  # fmt: skip


class Long(NamedTuple):
    lines: int
    path: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} ({self.lines} lines)"


def modules(package: Path = PACKAGE) -> Iterator[Path]:
    yield from sorted(package.rglob("*.py"))


def is_core(path: Path, package: Path = PACKAGE) -> bool:
    """Whether a module is below the property line."""
    first = path.relative_to(package).parts[0].removesuffix(".py")
    return first not in RINGS


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        body = body[1:]
    if not body:
        return 0
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def long_functions(package: Path = PACKAGE, limit: int = MAX_FUNCTION_LINES) -> list[Long]:
    """Every function and method whose code is longer than ``limit`` lines, longest first."""
    found = []
    for path in modules(package):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = _code_lines(node)
                if lines > limit:
                    where = str(path.relative_to(package.parent))
                    found.append(Long(lines, where, node.lineno, node.name))
    return sorted(found, key=lambda long: (-long.lines, long.path, long.line))


def long_modules(package: Path = PACKAGE, limit: int = MAX_MODULE_LINES) -> list[Long]:
    """Every module longer than ``limit`` lines, longest first."""
    found = []
    for path in modules(package):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(Long(lines, str(path.relative_to(package.parent)), 1, path.stem))
    return sorted(found, key=lambda long: (-long.lines, long.path))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", action="store_true", help="only the core and the runtime")
    args = parser.parse_args(argv)
    for title, found in (("modules", long_modules()), ("functions", long_functions())):
        shown = [long for long in found if not args.core or is_core(ROOT / "engine" / long.path)]
        sys.stdout.write(f"{len(shown)} {title} over their limit\n")
        sys.stdout.writelines(f"  {long}\n" for long in shown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
