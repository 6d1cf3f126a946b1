"""CEL for custom rules: the only module that imports celpy.

cel-python has no type checker and no cost limits, so everything a type checker or a cost model
would refuse is refused here, when the policy loads:

- the expression's length, its nesting depth (parentheses, brackets and calls), the depth of its
  parse tree and the nesting of comprehensions are bounded, because the evaluator recurses about
  45 Python frames per level of parentheses and nested comprehensions multiply their cost;
- every variable, field and function is checked against the documented variable schema;
- the expression is evaluated on schema-shaped samples, which catches a ``when`` that gives
  something other than a bool and operators applied to the wrong types.

At run time :func:`evaluate` turns every failure (an error value, a timeout, an exhausted stack,
a bug in the evaluator) into an :class:`EvaluationError` with a short message that never quotes
the activation, which cel-python embeds in some of its own messages.

``celpy.Environment()`` raises the process-wide recursion limit; this module never creates one.
It parses with :class:`~celpy.celparser.CELParser` and evaluates with the tree-walking
:class:`~celpy.evaluation.Evaluator` (what ``InterpretedRunner`` wraps), subclassed only to check
a deadline between nodes.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import celpy.celtypes as ct
import lark
from celpy.celparser import CELParseError, CELParser
from celpy.evaluation import Activation, CELEvalError, Evaluator, base_functions

MAX_EXPRESSION_CHARS = 2048
MAX_NESTING = 8
MAX_TREE_DEPTH = 128
MAX_COMPREHENSION_NESTING = 1
MAX_VALUE_DEPTH = 32

# A variable's shape is its JSON Schema (with references resolved); None means "anything".
Shape = Mapping[str, Any] | None
Result = Literal["bool", "string"]

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Type names CEL lets an expression mention as values (``type(x) == double``).
_TYPE_NAMES = frozenset({"bool", "bytes", "double", "int", "list", "map", "string", "uint"})
# Nodes a reader counts as one level of nesting.
_NESTING_NODES = frozenset(
    {"paren_expr", "list_lit", "map_lit", "ident_arg", "member_dot_arg", "member_index"}
)
_OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}


# --- errors ------------------------------------------------------------------------------------


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


class ExpressionError(Exception):
    """An expression was refused when it was compiled; ``problems`` says every reason."""

    def __init__(self, problems: Sequence[ExpressionProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(p.message for p in self.problems))


class EvaluationError(Exception):
    """An expression failed while it was evaluated; the message is safe to show and log."""


class _DeadlineExceededError(BaseException):
    """Derives from BaseException so that no ``except Exception`` inside cel-python swallows it:
    it is control flow, not an error of the expression."""


# --- compiled expressions ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed and checked expression, ready to evaluate any number of times.

    ``reads`` maps each variable the expression reads to the fields it reads of it, or to None
    when it uses the variable as a whole; only those need to be built and converted.
    """

    source: str
    tree: Any = field(repr=False, compare=False)
    reads: Mapping[str, frozenset[str] | None]


_compile_lock = threading.Lock()


def compile_expression(
    source: str,
    variables: Mapping[str, Shape],
    *,
    result: Result = "bool",
    constants: Mapping[str, Any] | None = None,
) -> Expression:
    """Parse and check ``source``; raise :class:`ExpressionError` listing what is wrong.

    ``variables`` are the names the expression may read, with their schema. ``constants`` are
    variables whose values are known now (the policy's params); the others are sampled from their
    schema for the trial evaluation.
    """
    if len(source) > MAX_EXPRESSION_CHARS:
        message = (
            f"expression is {len(source)} characters long; the limit is {MAX_EXPRESSION_CHARS}"
        )
        raise ExpressionError([ExpressionProblem(message)])
    tree = _parse(source)
    problems = _depth_problems(tree, source)
    if problems:
        raise ExpressionError(problems)
    checker = _Checker(variables, source)
    checker.visit(tree, {}, 0)
    if checker.problems:
        raise ExpressionError(checker.problems)
    expression = Expression(source, tree, checker.frozen_reads())
    problem = _trial(expression, variables, result, constants or {})
    if problem is not None:
        raise ExpressionError([problem])
    return expression


def _parse(source: str) -> Any:
    with _compile_lock:
        try:
            return CELParser().parse(source)
        except CELParseError as exc:
            cause = exc.__context__
            line, column = exc.line or 0, exc.column or 0
            token = getattr(cause, "token", None)
            char = getattr(cause, "char", None)
            if token is not None and token.type == "$END":
                what = "unexpected end of expression"
                line, column = _end_of(source)
            elif token is not None:
                what = f"unexpected {str(token)!r}"
            elif char is not None:
                what = f"unexpected character {char!r}"
            else:
                what = "invalid expression"
            problem = ExpressionProblem(f"syntax error: {what}", line, column, source)
            raise ExpressionError([problem]) from None


def _end_of(source: str) -> tuple[int, int]:
    lines = source.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


# --- static checks -----------------------------------------------------------------------------


def _depth_problems(tree: Any, source: str) -> list[ExpressionProblem]:
    """Nesting and tree depth, measured without recursion (the tree may be arbitrarily deep)."""
    deepest_nesting: tuple[int, Any] = (0, None)
    deepest_tree = 0
    stack: list[tuple[Any, int, int]] = [(tree, 1, 0)]
    while stack:
        node, depth, nesting = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if node.data in _NESTING_NODES:
            nesting += 1
            if nesting > deepest_nesting[0]:
                deepest_nesting = (nesting, node)
        deepest_tree = max(deepest_tree, depth)
        stack.extend((child, depth + 1, nesting) for child in node.children)
    problems = []
    nesting, culprit = deepest_nesting
    if nesting > MAX_NESTING and culprit is not None:
        line, column = _position(culprit)
        problems.append(
            ExpressionProblem(
                f"nested {nesting} levels deep (parentheses, brackets and calls); "
                f"the limit is {MAX_NESTING}",
                line,
                column,
                source,
            )
        )
    elif deepest_tree > MAX_TREE_DEPTH:
        problems.append(
            ExpressionProblem(
                f"too complex: its parse tree is {deepest_tree} levels deep and the limit is "
                f"{MAX_TREE_DEPTH}; split it into shorter conditions or several rules"
            )
        )
    return problems


def _position(node: Any) -> tuple[int, int]:
    meta = getattr(node, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return 0, 0
    return int(meta.line), int(meta.column)


def _types(shape: Shape) -> set[str]:
    if shape is None:
        return set()
    declared = shape.get("type")
    if declared is None:
        return set()
    return {declared} if isinstance(declared, str) else set(declared)


def _kind(shape: Shape) -> str:
    """The non-null JSON type of a shape, or "" when unknown."""
    types = _types(shape) - {"null"}
    return next(iter(types)) if len(types) == 1 else ""


_ARTICLE = {"number": "a number", "string": "a string", "boolean": "a bool", "array": "a list"}


class _Checker:
    """Walks the parse tree once: names, fields, functions, macros; records what is read.

    Recursion here is bounded by :data:`MAX_TREE_DEPTH`, checked before.
    """

    def __init__(self, variables: Mapping[str, Shape], source: str) -> None:
        self.variables = variables
        self.source = source
        self.problems: list[ExpressionProblem] = []
        self.reads: dict[str, set[str] | None] = {}

    def frozen_reads(self) -> dict[str, frozenset[str] | None]:
        return {
            name: None if fields is None else frozenset(fields)
            for name, fields in self.reads.items()
        }

    def fail(self, node: Any, message: str) -> None:
        line, column = _position(node)
        self.problems.append(ExpressionProblem(message, line, column, self.source))

    def read(self, name: str, field_name: str | None) -> None:
        if field_name is None:
            self.reads[name] = None
            return
        fields = self.reads.setdefault(name, set())
        if fields is not None:
            fields.add(field_name)

    def visit(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        """Check ``node``; return its shape when it is a value whose schema is known."""
        if not isinstance(node, lark.Tree):
            return None
        handler = getattr(self, f"_{node.data}", None)
        if handler is not None:
            shape: Shape = handler(node, scope, comprehensions)
            return shape
        if node.data == "member_object":
            self.fail(node, "message construction (Type{...}) is not supported")
            return None
        if node.data in {"dot_ident", "dot_ident_arg"}:
            self.fail(node, "names with a leading '.' are not supported")
            return None
        shapes = [self.visit(child, scope, comprehensions) for child in node.children]
        # A node with one child (expr, member, primary, paren_expr, ...) has the child's shape.
        return shapes[0] if len(node.children) == 1 else None

    def _ident(self, node: Any, scope: Mapping[str, Shape], _: int) -> Shape:
        name = str(node.children[0])
        if name in scope:
            return scope[name]
        if name in self.variables:
            self.read(name, None)
            return self.variables[name]
        if name not in _TYPE_NAMES:
            known = ", ".join(sorted({*self.variables, *scope}))
            self.fail(node, f"unknown variable {name!r} (known: {known})")
        return None

    def _bare_variable(self, node: Any, scope: Mapping[str, Shape]) -> str | None:
        """The variable's name when ``node`` is nothing but a root variable (``segment``)."""
        while isinstance(node, lark.Tree) and node.data in {"member", "primary"}:
            if len(node.children) != 1:
                return None
            node = node.children[0]
        if isinstance(node, lark.Tree) and node.data == "ident":
            name = str(node.children[0])
            if name in self.variables and name not in scope:
                return name
        return None

    def _member_dot(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        receiver, token = node.children
        name = str(token)
        variable = self._bare_variable(receiver, scope)
        if variable is not None:
            self.read(variable, name)
            shape = self.variables[variable]
        else:
            shape = self.visit(receiver, scope, comprehensions)
        return self._field(node, shape, name, variable)

    def _field(self, node: Any, shape: Shape, name: str, owner: str | None) -> Shape:
        kind = _kind(shape)
        what = repr(owner) if owner else "the value"
        if shape is None or not kind:
            return None
        if kind != "object":
            self.fail(node, f"{what} is {_ARTICLE.get(kind, kind)}: it has no field {name!r}")
            return None
        properties: Mapping[str, Any] = shape.get("properties", {})
        if name in properties:
            found: Shape = properties[name]
            return found
        extra = shape.get("additionalProperties", True)
        if extra is False:
            known = ", ".join(sorted(properties))
            self.fail(node, f"unknown field {name!r} of {what} (known: {known or 'none'})")
            return None
        return extra if isinstance(extra, Mapping) else None

    def _member_index(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        receiver, index = node.children
        shape = self.visit(receiver, scope, comprehensions)
        self.visit(index, scope, comprehensions)
        kind = _kind(shape)
        if shape is None or kind == "":
            return None
        if kind == "array":
            items: Shape = shape.get("items")
            return items
        if kind == "object":
            extra = shape.get("additionalProperties", True)
            return extra if isinstance(extra, Mapping) else None
        self.fail(node, f"{_ARTICLE.get(kind, kind)} cannot be indexed")
        return None

    def _member_dot_arg(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        receiver, token, *rest = node.children
        name = str(token)
        args = list(rest[0].children) if rest else []
        if name in MACROS:
            return self._macro(
                node, name, receiver=receiver, args=args, scope=scope, depth=comprehensions
            )
        self._function(node, name, len(args) + 1)
        self.visit(receiver, scope, comprehensions)
        for arg in args:
            self.visit(arg, scope, comprehensions)
        return None

    def _ident_arg(self, node: Any, scope: Mapping[str, Shape], comprehensions: int) -> Shape:
        token, *rest = node.children
        name = str(token)
        args = list(rest[0].children) if rest else []
        if name in {"has", "dyn"}:
            if len(args) != 1:
                self.fail(node, f"{name}() takes exactly one argument")
            if name == "has" and args and not _is_field_selection(args[0]):
                self.fail(node, "has() takes a field selection, such as has(segment.metadata.key)")
        elif name in MACROS:
            self.fail(node, f"{name}() is a macro: write list.{name}(x, condition)")
        else:
            self._function(node, name, len(args))
        for arg in args:
            self.visit(arg, scope, comprehensions)
        return None

    def _function(self, node: Any, name: str, arity: int) -> None:
        if name not in ENGINE_FUNCTIONS and name not in STANDARD_FUNCTIONS:
            known = ", ".join(sorted({*ENGINE_FUNCTIONS, *STANDARD_FUNCTIONS}))
            self.fail(node, f"unknown function {name!r} (known: {known})")
            return
        expected = ARITY.get(name)
        if expected is not None and arity != expected:
            self.fail(node, f"{name}() takes {expected} argument(s), not {arity}")

    def _macro(  # noqa: PLR0913 - the parts of a macro call, taken apart once by the caller
        self,
        node: Any,
        name: str,
        *,
        receiver: Any,
        args: list[Any],
        scope: Mapping[str, Shape],
        depth: int,
    ) -> Shape:
        comprehensions = depth
        target = self.visit(receiver, scope, comprehensions)
        if len(args) != 2:  # a loop variable and a body
            self.fail(node, f"{name}() takes a loop variable and an expression")
            return None
        variable = _simple_ident(args[0])
        if variable is None:
            self.fail(args[0], f"the first argument of {name}() must be a plain name")
            return None
        if variable in self.variables or variable in scope:
            self.fail(args[0], f"loop variable {variable!r} hides a variable; choose another name")
        if comprehensions + 1 > MAX_COMPREHENSION_NESTING:
            self.fail(
                node,
                f"{name}() nested inside another comprehension: the cost multiplies; use an "
                "engine function or a per-item variable instead",
            )
            return None
        kind = _kind(target)
        if kind == "array":
            item: Shape = target.get("items") if target is not None else None
        elif kind == "object":
            item = {"type": "string"}  # a comprehension over a map visits its keys
        elif kind:
            self.fail(node, f"{name}() needs a list or a map, not {_ARTICLE.get(kind, kind)}")
            return None
        else:
            item = None
        self.visit(args[1], {**scope, variable: item}, comprehensions + 1)
        return None


def field_paths(expression: Expression) -> frozenset[tuple[str, ...]]:
    """The longest field selections the expression makes on its variables:
    ``spec.collapse.spread_floor <= 0.15`` gives ``{("spec", "collapse", "spread_floor")}``.

    A selection through an index or a call stops there; comprehension variables are not
    variables. What a guardrail uses to point at the value that failed it.
    """
    found: set[tuple[str, ...]] = set()
    stack: list[Any] = [expression.tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if node.data == "member_dot":
            chain = _selection(node)
            if chain is not None and chain[0] in expression.reads:
                found.add(chain)
        stack.extend(node.children)
    return frozenset(
        path
        for path in found
        if not any(len(o) > len(path) and o[: len(path)] == path for o in found)
    )


def _selection(node: Any) -> tuple[str, ...] | None:
    names: list[str] = []
    while isinstance(node, lark.Tree):
        if node.data == "member_dot":
            receiver, token = node.children
            names.append(str(token))
            node = receiver
        elif node.data in {"member", "primary"} and len(node.children) == 1:
            node = node.children[0]
        elif node.data == "ident":
            names.append(str(node.children[0]))
            return tuple(reversed(names))
        else:
            return None
    return None


def _simple_ident(node: Any) -> str | None:
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def _is_field_selection(node: Any) -> bool:
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "member_dot":
        node = node.children[0]
    return isinstance(node, lark.Tree) and node.data == "member_dot"


# --- trial evaluation --------------------------------------------------------------------------

_TRIAL_SECONDS = 2.0
_SAMPLES = 3


def _trial(
    expression: Expression,
    variables: Mapping[str, Shape],
    result: Result,
    constants: Mapping[str, Any],
) -> ExpressionProblem | None:
    """Evaluate on schema-shaped samples: a wrong result type or an operator applied to the
    wrong types is a problem of the expression. Errors that depend on the data (a missing map
    key, a division by zero, an empty list) are left to run time, where they fail closed."""
    for k in range(_SAMPLES):
        values = {
            name: constants[name] if name in constants else sample(variables[name], k)
            for name in expression.reads
        }
        try:
            cel_values = {n: to_cel(v) for n, v in values.items()}
            value = _run(expression, cel_values, Deadline(_TRIAL_SECONDS))
        except CELEvalError as exc:
            if len(exc.args) > 1 and exc.args[1] is TypeError:
                line, column = exc.line or 0, exc.column or 0
                message = f"type error: {clean_message(exc)}"
                return ExpressionProblem(message, line, column, expression.source)
            continue
        except _DeadlineExceededError:
            message = f"took longer than {_TRIAL_SECONDS:g} s on a sample input"
            return ExpressionProblem(message)
        except RecursionError:
            return ExpressionProblem("too deeply nested to evaluate")
        if not (_is_bool(value) if result == "bool" else isinstance(value, str)):
            noun = "a bool" if result == "bool" else "a string"
            return ExpressionProblem(
                f"must give {noun}, but gives {type_name(value)} on a sample input"
            )
    return None


def sample(shape: Shape, k: int) -> Any:
    """The ``k``-th sample value of a schema: a middle, a low and a high variant."""
    choices = shape.get("enum") if shape is not None else None
    kind = _kind(shape)
    if isinstance(choices, list) and choices:  # an enum needs no type to be sampled
        value = choices[k % len(choices)]
    elif shape is None or not kind:
        value = {}
    else:
        value = _sample_typed(shape, kind, k)
    return value


def _sample_typed(shape: Mapping[str, Any], kind: str, k: int) -> Any:
    if kind == "object":
        properties: Mapping[str, Any] = shape.get("properties", {})
        if properties:
            return {name: sample(sub, k) for name, sub in properties.items()}
        extra = shape.get("additionalProperties")
        if isinstance(extra, Mapping) and k != 1:
            return {"a": sample(extra, k), "b": sample(extra, k)}
        return {}
    if kind == "array":
        count = (2, 0, 1)[k % 3]
        return [sample(shape.get("items"), k) for _ in range(count)]
    samples: dict[str, tuple[Any, ...]] = {
        "number": (0.5, 0.0, 1.0),
        "string": ("sample text", "", "x"),
        "boolean": (True, False, True),
    }
    return samples.get(kind, (None,) * 3)[k % 3]


# --- evaluation --------------------------------------------------------------------------------


class _Evaluator(Evaluator):
    """cel-python's tree-walking evaluator with a deadline checked at every node.

    ``visit_children`` replaces Evaluator's own (same body, plus the check) rather than wrapping
    it, so the check costs no stack frame: the evaluator already spends about 45 per level of
    parentheses.
    """

    def __init__(self, ast: Any, activation: Any, deadline: Deadline) -> None:
        super().__init__(ast, activation)
        self._deadline = deadline

    def sub_evaluator(self, ast: Any) -> _Evaluator:
        return _Evaluator(ast, self.activation, self._deadline)

    def visit_children(self, tree: Any) -> list[Any]:
        if self._deadline.expired():
            raise _DeadlineExceededError
        self.level += 1
        values: list[Any] = lark.visitors.Interpreter.visit_children(self, tree)
        self.level -= 1
        return values


class Deadline:
    """A budget of the evaluating thread's own CPU time.

    Wall-clock time would make a rule's verdict depend on the machine's load: a thread waiting
    for the GIL or a core would time out and refuse for no fault of the rule. What a deadline
    must stop is a rule doing too much work, and that is CPU time. The cheap wall clock is read
    first; the thread's CPU clock (a system call) only once the wall-clock budget has run out.
    """

    __slots__ = ("_cpu_start", "_seconds", "_wall")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._wall = time.monotonic() + seconds
        self._cpu_start = time.thread_time()

    def expired(self) -> bool:
        if time.monotonic() <= self._wall:
            return False
        return time.thread_time() - self._cpu_start > self._seconds


def _run(expression: Expression, variables: Mapping[str, Any], deadline: Deadline) -> Any:
    if deadline.expired():
        raise _DeadlineExceededError
    activation = Activation(vars=dict(variables), functions=FUNCTIONS)
    return _Evaluator(expression.tree, activation, deadline).evaluate()


def evaluate(expression: Expression, variables: Mapping[str, Any], *, deadline: Deadline) -> Any:
    """Evaluate with CEL ``variables`` (see :func:`to_cel`), giving up when ``deadline``
    expires.

    Returns the CEL value; raises :class:`EvaluationError` with a clean message for every
    failure.
    """
    try:
        return _run(expression, variables, deadline)
    except CELEvalError as exc:
        where = f" at {exc.line}:{exc.column}" if exc.line else ""
        raise EvaluationError(f"{clean_message(exc)}{where}") from None
    except _DeadlineExceededError:
        raise EvaluationError("timed out") from None
    except RecursionError:
        raise EvaluationError("ran out of stack while evaluating") from None
    except Exception as exc:  # noqa: BLE001 - a bug in the evaluator must not escape as a traceback
        raise EvaluationError(f"the evaluator failed ({type(exc).__name__})") from None


def evaluate_bool(
    expression: Expression, variables: Mapping[str, Any], *, deadline: Deadline
) -> bool:
    value = evaluate(expression, variables, deadline=deadline)
    if not _is_bool(value):
        raise EvaluationError(f"gave {type_name(value)}, not a bool")
    return bool(value)


def evaluate_text(
    expression: Expression, variables: Mapping[str, Any], *, deadline: Deadline
) -> str:
    value = evaluate(expression, variables, deadline=deadline)
    if not isinstance(value, str):  # cel-python's string concatenation returns a plain str
        raise EvaluationError(f"gave {type_name(value)}, not a string")
    return str(value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, ct.BoolType | bool)


_TYPE_NAME_RE = re.compile(r"<class '(?:celpy\.celtypes\.)?(\w+?)(?:Type)?'>")
_VALUE_RE = re.compile(r"\b(\w+?)Type\((?:[^()]|\([^()]*\))*\)")
_TOKEN_RE = re.compile(r"Token\('RULE', '(\w+)'\)")


def clean_message(exc: BaseException) -> str:
    """cel-python's message without the activation it sometimes embeds or the values it quotes
    (a segment's text must not leak into decisions), shortened to one readable line."""
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    text = text.split(" (in activation", 1)[0]
    text = _TOKEN_RE.sub(lambda m: repr(_OPERATORS.get(m[1], m[1])), text)
    text = _TYPE_NAME_RE.sub(lambda m: _cel_type(m[1]), text)
    text = _VALUE_RE.sub(lambda m: _cel_type(m[1]), text)
    text = text.replace("found no matching overload", "no matching overload")
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _cel_type(name: str) -> str:
    return {"NoneType": "null", "Double": "double", "Int": "int", "String": "string"}.get(
        name, name.lower()
    )


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


# --- values ------------------------------------------------------------------------------------


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


# --- functions ---------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    # cel-python's double arithmetic returns plain floats, so those count too.
    return isinstance(value, int | float) and not isinstance(value, bool | ct.BoolType)


def _plain(value: Any) -> int | float:
    """The Python number, so comparisons are exact and skip the CEL types' own checks."""
    return float(value) if isinstance(value, float) else int(value)


def _heterogeneous(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """CEL's numeric comparison across int, uint and double (cel-python refuses ``1 == 1.0``
    and ``size(x) < 2.0``), and null equality; other operands go to cel-python's operator."""
    original = base_functions[name]
    equality = name in {"_==_", "_!=_"}

    def operator(left: Any, right: Any) -> Any:
        if isinstance(left, CELEvalError):
            return left
        if isinstance(right, CELEvalError):
            return right
        if _is_number(left) and _is_number(right):
            return ct.BoolType(compare(_plain(left), _plain(right)))
        if equality and (left is None or right is None):
            return ct.BoolType(compare(left is None, right is None))
        return original(left, right)

    return operator


def _numbers(values: Any, function: str) -> list[float] | CELEvalError:
    if isinstance(values, ct.MapType):
        values = list(values.values())
    if not isinstance(values, ct.ListType | list):
        return CELEvalError(f"{function}() takes a list or a map of numbers", TypeError, None)
    out = []
    for value in values:
        if not _is_number(value):
            message = f"{function}() takes numbers, found {type_name(value)}"
            return CELEvalError(message, TypeError, None)
        out.append(float(_plain(value)))
    return out


def _aggregate(
    name: str, reduce: Callable[[list[float]], float], *, empty: float | None = None
) -> Callable[[Any], Any]:
    def function(values: Any) -> Any:
        numbers = _numbers(values, name)
        if isinstance(numbers, CELEvalError):
            return numbers
        if not numbers:
            if empty is None:
                return CELEvalError(f"{name}() of an empty list", ValueError, None)
            return ct.DoubleType(empty)
        return ct.DoubleType(reduce(numbers))

    function.__name__ = name
    return function


def _pstdev(numbers: list[float]) -> float:
    mean = math.fsum(numbers) / len(numbers)
    return math.sqrt(math.fsum((x - mean) * (x - mean) for x in numbers) / len(numbers))


def _counter(name: str, hit: Callable[[float, float], bool]) -> Callable[[Any, Any], Any]:
    def function(values: Any, threshold: Any) -> Any:
        numbers = _numbers(values, name)
        if isinstance(numbers, CELEvalError):
            return numbers
        if not _is_number(threshold):
            return CELEvalError(f"{name}() takes a number threshold", TypeError, None)
        limit = float(threshold)
        return ct.DoubleType(sum(1 for x in numbers if hit(x, limit)))

    function.__name__ = name
    return function


def _abs(value: Any) -> Any:
    if not _is_number(value):
        return CELEvalError(f"abs() takes a number, not {type_name(value)}", TypeError, None)
    return ct.DoubleType(abs(float(value)))


def _lower(text: Any) -> Any:
    if not isinstance(text, ct.StringType):
        return CELEvalError(f"lower() takes a string, not {type_name(text)}", TypeError, None)
    return ct.StringType(text.lower())


def _contains_any(text: Any, needles: Any) -> Any:
    if not isinstance(text, ct.StringType) or not isinstance(needles, ct.ListType):
        return CELEvalError("contains_any() takes a string and a list of strings", TypeError, None)
    if not all(isinstance(n, ct.StringType) for n in needles):
        return CELEvalError("contains_any() takes a list of strings", TypeError, None)
    folded = str(text).casefold()
    return ct.BoolType(any(str(needle).casefold() in folded for needle in needles))


ENGINE_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, str]] = {
    "mean": (_aggregate("mean", lambda xs: math.fsum(xs) / len(xs)), 1, "arithmetic mean"),
    "stdev": (_aggregate("stdev", _pstdev, empty=0.0), 1, "population standard deviation"),
    "sum": (_aggregate("sum", math.fsum, empty=0.0), 1, "sum"),
    "minimum": (_aggregate("minimum", min), 1, "smallest value"),
    "maximum": (_aggregate("maximum", max), 1, "largest value"),
    "count_below": (_counter("count_below", lambda x, t: x < t), 2, "how many are < t"),
    "count_above": (_counter("count_above", lambda x, t: x > t), 2, "how many are > t"),
    "abs": (_abs, 1, "absolute value"),
    "lower": (_lower, 1, "lower-cased string"),
    "contains_any": (_contains_any, 2, "case-insensitive: the text contains one of the phrases"),
}
ARITY = {name: arity for name, (_, arity, _) in ENGINE_FUNCTIONS.items()}

# cel-python's standard functions, methods and conversions (operators are not callable by name).
STANDARD_FUNCTIONS = frozenset(
    name for name in base_functions if name.isidentifier() and not name.startswith("_")
)

FUNCTIONS: dict[str, Any] = {
    "_==_": _heterogeneous("_==_", lambda a, b: a == b),
    "_!=_": _heterogeneous("_!=_", lambda a, b: a != b),
    "_<_": _heterogeneous("_<_", lambda a, b: a < b),
    "_<=_": _heterogeneous("_<=_", lambda a, b: a <= b),
    "_>_": _heterogeneous("_>_", lambda a, b: a > b),
    "_>=_": _heterogeneous("_>=_", lambda a, b: a >= b),
    **{name: function for name, (function, _, _) in ENGINE_FUNCTIONS.items()},
}
