"""The mutants of one source file: small semantic edits, each a plausible regression.

Each operator names one node of the module's AST and the text that replaces it; the edit is
applied to the source text at that node's span, so the rest of the file (its comments, its
layout) is untouched and a mutant reads as a one-line patch.

The operators are the classic curated set: comparison flips (``==``/``!=``, ``in``/``not in``,
``is``/``is not``), boundary shifts (``<``/``<=``, ``>``/``>=``), ``and``/``or`` swaps, removal of
``not``, ``True``/``False`` swaps, number changes (``n`` to ``n + 1``), ``+``/``-`` swaps, a
returned value replaced by ``None``, and deletion of a ``raise``, a ``return`` or a call
statement. What cannot change behaviour is skipped: docstrings, annotations, ``assert`` lines,
log calls, ``__repr__``, and the bodies under ``if TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

_FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
}
_BOUNDARIES: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
_ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_LOGGERS = frozenset({"_diagnostics", "_log", "log", "logger", "_logger", "warnings"})
_SKIPPED_FUNCTIONS = frozenset({"__repr__", "__str__"})
# A statement's fields that are not its own expressions (nested statements, annotations).
_NOT_EXPRESSIONS = frozenset(
    {"body", "orelse", "finalbody", "handlers", "cases", "annotation", "returns", "decorator_list"}
)
_Edit = tuple[ast.expr | ast.stmt, str, str]


@dataclass(frozen=True, slots=True)
class Mutant:
    """One edit of one file: the span it replaces (1-based lines, 0-based columns, end
    exclusive, as the AST gives them), the replacement text, and the operator's name."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    replacement: str
    operator: str
    original: str

    @property
    def key(self) -> str:
        """A stable name: file, place and operator (what a survivor list cites)."""
        return f"{self.path}:{self.line}:{self.column}:{self.operator}"

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.original} -> {self.replacement} ({self.operator})"

    def apply(self, source: str) -> str:
        """``source`` with this mutant's span replaced."""
        lines = source.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line.encode("utf-8")))
        data = source.encode("utf-8")
        start = offsets[self.line - 1] + self.column
        end = offsets[self.end_line - 1] + self.end_column
        return (data[:start] + self.replacement.encode("utf-8") + data[end:]).decode("utf-8")


def mutants(path: str, source: str) -> list[Mutant]:
    """Every mutant of ``source`` (the file at ``path``), in source order; each, applied alone,
    still compiles."""
    tree = ast.parse(source)
    found = []
    for node, replacement, operator in _Visitor().edits(tree):
        original = ast.get_source_segment(source, node) or ast.unparse(node)
        mutant = Mutant(
            path,
            node.lineno,
            node.col_offset,
            node.end_lineno or node.lineno,
            node.end_col_offset or node.col_offset,
            replacement,
            operator,
            " ".join(original.split()),
        )
        try:
            compile(mutant.apply(source), path, "exec")
        except SyntaxError:
            continue
        found.append(mutant)
    found.sort(key=lambda m: (m.line, m.column, m.operator))
    return found


class _Visitor:
    """Walks a module, yielding (node, replacement text, operator) for each edit."""

    def edits(self, tree: ast.Module) -> Iterator[_Edit]:
        yield from self._body(tree.body)

    def _body(self, body: list[ast.stmt]) -> Iterator[_Edit]:
        for index, statement in enumerate(body):
            if index == 0 and _is_docstring(statement):
                continue
            yield from self._statement(statement)

    def _statement(self, node: ast.stmt) -> Iterator[_Edit]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name not in _SKIPPED_FUNCTIONS:
                yield from self._body(node.body)
            return
        if isinstance(node, ast.ClassDef):
            yield from self._body(node.body)
            return
        if isinstance(node, ast.If) and _names_type_checking(node.test):
            return
        if isinstance(node, ast.Assert | ast.Import | ast.ImportFrom | ast.Pass):
            return
        if isinstance(node, ast.Expr) and _is_log_call(node.value):
            return
        yield from self._deletion(node)
        yield from self._expressions(node)
        for field in ("body", "orelse", "finalbody"):
            yield from self._body(getattr(node, field, []))
        for handler in getattr(node, "handlers", []):
            yield from self._body(handler.body)
        for case in getattr(node, "cases", []):
            yield from self._body(case.body)

    def _deletion(self, node: ast.stmt) -> Iterator[_Edit]:
        if isinstance(node, ast.Raise):
            yield node, "pass", "delete-raise"
        elif isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                yield node, "return None", "return-none"
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
            yield node, "pass", "delete-call"

    def _expressions(self, node: ast.stmt) -> Iterator[_Edit]:
        """The expression edits inside one statement (not inside its nested statements)."""
        roots: list[ast.AST] = []
        for field, value in ast.iter_fields(node):
            if field in _NOT_EXPRESSIONS:
                continue
            roots.extend(v for v in (value if isinstance(value, list) else [value]) if v)
        for root in roots:
            if isinstance(root, ast.AST):
                yield from self._expression_tree(root)

    def _expression_tree(self, root: ast.AST) -> Iterator[_Edit]:
        stack = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Call) and _is_log(node)):
                continue  # messages and log lines: text, not behaviour
            if isinstance(node, ast.expr):
                yield from _expression_edits(node)
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _expression_edits(node: ast.expr) -> Iterator[_Edit]:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op = type(node.ops[0])
        for table, name in ((_FLIPS, "flip"), (_BOUNDARIES, "boundary")):
            if op in table:
                flipped = ast.Compare(node.left, [table[op]()], node.comparators)
                yield node, ast.unparse(flipped), f"{name}-compare"
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield node, f"({ast.unparse(ast.BoolOp(other, node.values))})", "swap-and-or"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, f"({ast.unparse(node.operand)})", "remove-not"
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        changed = ast.BinOp(node.left, _ARITHMETIC[type(node.op)](), node.right)
        yield node, f"({ast.unparse(changed)})", "swap-add-sub"
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield node, repr(not value), "swap-bool"
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield node, repr(value + 1), "number-plus-one"


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _names_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _is_log_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _is_log(node)


def _is_log(node: ast.Call) -> bool:
    """``_diagnostics.warning(...)`` (the package's loggers), ``logger.info(...)``,
    ``warnings.warn(...)``."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in _LOGGERS
    )
