"""The native CEL backend: cel-cpp, through ``cel-expr-python`` (the ``cel-native`` extra).

An expression is still parsed, checked and tried by the project's own compiler when the policy
loads, so both backends refuse exactly the same policies; the native backend then compiles the
checked source once more with cel-cpp (without cel-cpp's type checker: the variables are dynamic,
as in the JSON they come from) and evaluates it in C++.

Where the backends would differ the contract is the policy's semantics, and this module makes
cel-cpp agree with the project's evaluator:

- the engine functions (``mean``, ``contains_any``, ...) are the very same Python functions,
  called from cel-cpp with their arguments converted, so they price and check the budget alike;
- ``matches`` is the project's own, called from cel-cpp (the source is rewritten to call it by
  another name), so a pattern is compiled once, with the same options, and priced before each
  search exactly as on the other backend;
- ``string(double)`` is formatted by cel-python's side the way cel-cpp does (see ``_functions``),
  and cel-python's division by zero follows IEEE 754 as cel-cpp's does;
- a result that is not a bool (or a string, for a message) is refused the same way.

The budget cannot be checked between nodes of a C++ evaluation, so it is enforced around it
(docs/rules.md, "Backends"): before the evaluation the operations no check can interrupt
(``+``, ``string``, ``bytes``, ``duration``, ``timestamp``) are priced at their worst
case on the size of the values the expression reads, and the evaluation is refused unrun when
the price is over the budget; the deadline is read before and after it, and a result that arrives
late is thrown away; the engine functions check it in their loops as on the other backend.

``cel_expr_python`` is imported when a native backend is first built, never with this package.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy.celtypes as ct
import lark
from celpy.evaluation import CELEvalError

from prunewarden.limits import MAX_RULE_ALLOCATION
from prunewarden.rules._backend import cel_module
from prunewarden.rules._budget import BudgetExceededError, Deadline, Meter, current
from prunewarden.rules._evaluation import EvaluationError
from prunewarden.rules._expression import Expression
from prunewarden.rules._functions import ENGINE_FUNCTIONS
from prunewarden.rules._patterns import matches
from prunewarden.rules._values import to_cel


def native_type_name(value: Any) -> str:
    """The CEL type of a value cel-cpp gave, for messages (never the value itself)."""
    kinds: tuple[tuple[type, str], ...] = (
        (bool, "bool"),
        (float, "double"),
        (int, "int"),
        (str, "string"),
        (bytes, "bytes"),
        (list, "list"),
        (dict, "map"),
    )
    if value is None:
        return "null"
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


# cel-expr-python 0.1.3 passes a string variable to cel-cpp as a C string: it ends at its first
# U+0000 (``size("a\0b")`` is 1). Such an input cannot be evaluated faithfully, so it is not
# evaluated: the rule fails closed, where cel-python would have read the whole text.
_NUL_MESSAGE = "an input string holds U+0000, which the native CEL backend cannot pass to cel-cpp"


def _plain(value: Any) -> Any:
    """A CEL value of the project's evaluator as the plain value cel-cpp takes."""
    return _convert(value)[0]


def _text(value: str) -> tuple[str, int]:
    if "\x00" in value:
        raise EvaluationError(_NUL_MESSAGE)
    return str(value), len(value)


# The scalars by exact type (the project's CEL types and Python's own): one dict lookup each.
_SCALARS: dict[type, Any] = {
    ct.StringType: _text,
    str: _text,
    ct.DoubleType: lambda v: (float(v), 1),
    float: lambda v: (float(v), 1),
    ct.BoolType: lambda v: (bool(v), 1),
    bool: lambda v: (bool(v), 1),
    type(None): lambda _: (None, 1),
    ct.IntType: lambda v: (int(v), 1),  # an int a function gave (size(), ...), not an input
    int: lambda v: (int(v), 1),
}


def _convert(value: Any) -> tuple[Any, int]:
    """:func:`_plain` of ``value`` and its size in characters and items, the measure of what an
    expression may read (one walk: it runs before every evaluation); :class:`EvaluationError`
    for a string the binding would truncate."""
    scalar = _SCALARS.get(type(value))
    if scalar is not None:
        converted: tuple[Any, int] = scalar(value)
        return converted
    size = len(value) if isinstance(value, Mapping | list) else 1
    if isinstance(value, Mapping):
        plain = {}
        for key, item in value.items():
            text, length = _text(str(key))
            plain[text], grown = _convert(item)
            size += grown + length
        return plain, size
    if isinstance(value, list):
        items = []
        for item in value:
            converted, grown = _convert(item)
            items.append(converted)
            size += grown
        return items, size
    return value, 1


def _bridge(function: Any) -> Any:
    """An engine function called from cel-cpp: its arguments as the project's CEL values, its
    error value raised (cel-cpp turns it into an error of the evaluation)."""

    def call(*args: Any) -> Any:
        try:
            result = function(*(to_cel(a) for a in args))
        except BudgetExceededError as exc:  # cel-cpp would make it an error value: keep it
            _refusal.set(exc)
            raise
        if isinstance(result, CELEvalError):
            raise ValueError(str(result.args[0]) if result.args else "error")  # noqa: TRY004 - cel-cpp reports any exception as the error of the call
        return _plain(result)

    return call


@cache
def _environment() -> Any:
    cel = cel_module()
    # Every argument may be of any type: the engine function itself says what it takes (as an
    # error of the evaluation), as on the other backend. cel-cpp dispatches on the runtime types
    # of the arguments, and its ``dyn`` parameter matches no list or map, so each combination
    # is declared, as a function and as a method.
    kinds = (
        cel.Type.List(cel.Type.DYN),
        cel.Type.Map(cel.Type.DYN, cel.Type.DYN),
        cel.Type.STRING,
        cel.Type.DOUBLE,
        cel.Type.INT,
        cel.Type.UINT,
        cel.Type.BOOL,
        cel.Type.NULL,
    )
    declarations = []
    functions = {**{name: (f, arity) for name, (f, arity, _) in ENGINE_FUNCTIONS.items()}}
    functions[_MATCHES] = (matches, 2)
    for name, (function, arity) in functions.items():
        impl = _bridge(function)
        overloads = [
            cel.Overload(
                f"pw_{name}_{'_'.join(map(str, signature))}_{'m' if member else 'g'}",
                cel.Type.DYN,
                [kinds[i] for i in signature],
                is_member=member,
                impl=impl,
            )
            for signature in itertools.product(range(len(kinds)), repeat=arity)
            for member in (False, True)
        ]
        declarations.append(cel.FunctionDecl(name, overloads))
    return cel.NewEnv(functions=declarations)


# ``matches`` is the project's own (the same RE2 options, pattern cache and price before each
# search as on the other backend), called under this name: cel-cpp's cannot be replaced, and it
# compiles a pattern at every call and cannot be priced. The source is rewritten to call it.
_MATCHES = "pw_matches"
# A budget an engine function refused, which cel-cpp returns as an error value like any other.
_refusal: ContextVar[BudgetExceededError | None] = ContextVar("pw_native_refusal", default=None)

# Calls whose work runs in C++ to its end once started, priced before the evaluation.
_PRICED_CALLS = frozenset({"string", "bytes", "duration", "timestamp"})
_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})


@dataclass(frozen=True, slots=True)
class _Price:
    """The operations of an expression that no check can interrupt, counted at load."""

    sized: int  # +, string, bytes, duration, timestamp: each builds or reads one value
    in_loop: bool  # one of them sits inside a comprehension (runs once per element)


@dataclass(frozen=True, slots=True)
class NativeExpression:
    expression: Expression
    program: Any
    price: _Price


_compile_lock = threading.Lock()


def compile_native(expression: Expression) -> NativeExpression:
    """``expression`` (already checked by the project's compiler) compiled by cel-cpp."""
    source = _with_priced_matches(expression.source, expression.tree)
    with _compile_lock:
        program = _environment().compile(source, disable_check=True)
    return NativeExpression(expression, program, _price(expression.tree))


def _with_priced_matches(source: str, tree: Any) -> str:
    """``source`` calling :data:`_MATCHES` where it calls ``matches``: the positions come from
    the parse tree, so a ``matches`` inside a string literal or a field name is left alone."""
    starts = sorted(
        (ident.start_pos, ident.end_pos)
        for node in tree.iter_subtrees()
        if _called(node) == "matches"
        for ident in node.children
        if isinstance(ident, lark.Token) and ident.type == "IDENT" and str(ident) == "matches"
    )
    for start, end in reversed(starts):
        source = source[:start] + _MATCHES + source[end:]
    return source


def _price(tree: Any) -> _Price:
    sized, in_loop = 0, False

    def visit(node: Any, loop: bool) -> None:
        nonlocal sized, in_loop
        if not isinstance(node, lark.Tree):
            return
        name = _called(node)
        inside = loop or name in _COMPREHENSIONS
        if node.data == "addition_add" or name in _PRICED_CALLS:
            sized += 1
            in_loop = in_loop or loop
        for child in node.children:
            visit(child, inside)

    visit(tree, loop=False)
    return _Price(sized, in_loop)


def _called(node: Any) -> str:
    """The name a ``member_dot_arg`` or ``ident_arg`` node calls, else ""."""
    if node.data not in {"member_dot_arg", "ident_arg"}:
        return ""
    for child in node.children:
        if isinstance(child, lark.Token) and child.type == "IDENT":
            return str(child)
    return ""


def _check_price(price: _Price, size: int) -> None:
    """Refuse, before it starts, an evaluation whose uninterruptible work may exceed the budget."""
    if not price.sized:
        return
    repeat = size if price.in_loop else 1
    if price.sized * size * repeat * 2 > MAX_RULE_ALLOCATION:
        message = (
            f"its operations on inputs of this size may create more than {MAX_RULE_ALLOCATION} "
            "characters and list items (MAX_RULE_ALLOCATION; native backend, priced before "
            "it runs)"
        )
        raise BudgetExceededError(message)


def evaluate_native(
    native: NativeExpression, variables: Mapping[str, Any], *, deadline: Deadline
) -> Any:
    """The plain value of ``native`` on CEL ``variables``; raises :class:`EvaluationError`."""
    try:
        result = _run(native, variables, deadline)
    except BudgetExceededError as exc:
        raise EvaluationError(str(exc)) from None
    except EvaluationError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug in the binding must not escape as a traceback
        raise EvaluationError(f"the evaluator failed ({type(exc).__name__})") from None
    if result.type() == cel_module().Type.ERROR:
        raise EvaluationError(_clean(str(result.value())))
    return result.value()


def _run(native: NativeExpression, variables: Mapping[str, Any], deadline: Deadline) -> Any:
    meter = Meter(deadline)
    meter.check()
    data, size = {}, 0
    for name, value in variables.items():
        data[name], grown = _convert(value)
        size += grown
    _check_price(native.price, size)
    token = current.set(meter)
    refusal = _refusal.set(None)
    try:
        result = native.program.eval(data=data)
        refused = _refusal.get()
    finally:
        current.reset(token)
        _refusal.reset(refusal)
    if refused is not None:
        raise refused
    # A C++ evaluation cannot be stopped: a late result is not used. A budget an engine
    # function ran out of came back as an error value; it is raised as the budget's error.
    meter.check()
    meter.allocate(0)
    return result


def _clean(text: str) -> str:
    """cel-cpp's message without the status code, shortened (values are not quoted in it, but
    a map key may be: it is cut after the first colon-separated part that names the problem)."""
    text = text.split(": ", 1)[-1] if text[:1].isupper() and ": " in text else text
    text = text.split(" : ", 1)[0]
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."
