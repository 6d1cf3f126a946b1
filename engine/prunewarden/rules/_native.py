"""The native CEL backend: cel-cpp, through ``cel-expr-python`` (the ``cel-native`` extra).

An expression is still parsed, checked and tried by the project's own compiler when the policy
loads, so both backends refuse exactly the same policies; the native backend then compiles the
checked source once more with cel-cpp (without cel-cpp's type checker: the variables are dynamic,
as in the JSON they come from) and evaluates it in C++.

Where the backends would differ the contract is the policy's semantics, and this module makes
cel-cpp agree with the project's evaluator:

- the engine functions (``mean``, ``contains_any``, ...) are the very same Python functions,
  called from cel-cpp with their arguments converted, so they price and check the budget alike;
- ``string(double)`` is formatted by cel-python's side the way cel-cpp does (see ``_functions``);
- a result that is not a bool (or a string, for a message) is refused the same way.

The budget cannot be checked between nodes of a C++ evaluation, so it is enforced around it
(docs/rules.md, "Backends"): before the evaluation the operations no check can interrupt
(``matches``, ``+``, ``string``, ``bytes``, ``duration``, ``timestamp``) are priced at their worst
case on the size of the values the expression reads, and the evaluation is refused unrun when
the price is over the budget; the deadline is read before and after it, and a result that arrives
late is thrown away; the engine functions check it in their loops as on the other backend.

``cel_expr_python`` is imported when a native backend is first built, never with this package.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy.celtypes as ct
import lark
from celpy.evaluation import CELEvalError

from prunewarden.limits import MAX_MATCH_STEPS, MAX_RULE_ALLOCATION
from prunewarden.rules._backend import cel_module
from prunewarden.rules._budget import BudgetExceededError, Deadline, Meter, current
from prunewarden.rules._evaluation import EvaluationError
from prunewarden.rules._expression import Expression
from prunewarden.rules._functions import ENGINE_FUNCTIONS
from prunewarden.rules._patterns import program_size
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


def _plain(value: Any) -> Any:
    """A CEL value of the project's evaluator as the plain value cel-cpp takes."""
    if value is None or isinstance(value, bool | str):
        return value if not isinstance(value, ct.BoolType | ct.StringType) else _scalar(value)
    if isinstance(value, ct.BoolType):
        return bool(value)
    if isinstance(value, float | int):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _scalar(value: Any) -> Any:
    return bool(value) if isinstance(value, ct.BoolType) else str(value)


def _bridge(function: Any) -> Any:
    """An engine function called from cel-cpp: its arguments as the project's CEL values, its
    error value raised (cel-cpp turns it into an error of the evaluation)."""

    def call(*args: Any) -> Any:
        result = function(*(to_cel(a) for a in args))
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
    for name, (function, arity, _) in ENGINE_FUNCTIONS.items():
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


# The price of a ``matches`` whose pattern comes from the input: its program is not known until
# the evaluation, inside C++, so it cannot be priced before it, and the rule fails closed.
_UNPRICED = -1

# Calls whose work runs in C++ to its end once started, priced before the evaluation.
_PRICED_CALLS = frozenset({"matches", "string", "bytes", "duration", "timestamp"})
_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})


@dataclass(frozen=True, slots=True)
class _Price:
    """The operations of an expression that no check can interrupt, counted at load."""

    sized: int  # +, string, bytes, duration, timestamp: each builds or reads one value
    match_program: int  # the sum of the compiled sizes of its constant patterns
    in_loop: bool  # one of them sits inside a comprehension (runs once per element)


@dataclass(frozen=True, slots=True)
class NativeExpression:
    expression: Expression
    program: Any
    price: _Price


_compile_lock = threading.Lock()


def compile_native(expression: Expression, constants: Mapping[str, Any]) -> NativeExpression:
    """``expression`` (already checked by the project's compiler) compiled by cel-cpp."""
    with _compile_lock:
        program = _environment().compile(expression.source, disable_check=True)
    return NativeExpression(expression, program, _price(expression.tree, constants))


def _price(tree: Any, constants: Mapping[str, Any]) -> _Price:
    sized, program, in_loop = 0, 0, False

    def visit(node: Any, loop: bool) -> None:
        nonlocal sized, program, in_loop
        if not isinstance(node, lark.Tree):
            return
        name = _called(node)
        inside = loop or name in _COMPREHENSIONS
        if node.data == "addition_add" or name in _PRICED_CALLS:
            sized += 1
            in_loop = in_loop or loop
            if name == "matches":
                size = _pattern_size(node, constants)
                program = _UNPRICED if _UNPRICED in (size, program) else program + size
        for child in node.children:
            visit(child, inside)

    visit(tree, loop=False)
    return _Price(sized, program, in_loop)


def _called(node: Any) -> str:
    """The name a ``member_dot_arg`` or ``ident_arg`` node calls, else ""."""
    if node.data not in {"member_dot_arg", "ident_arg"}:
        return ""
    for child in node.children:
        if isinstance(child, lark.Token) and child.type == "IDENT":
            return str(child)
    return ""


def _pattern_size(node: Any, constants: Mapping[str, Any]) -> int:
    """The compiled size of a constant pattern (a literal, or a ``params`` string), the largest
    of them when there are several; :data:`_UNPRICED` for a pattern read from the input."""
    arguments = node.children[-1]
    if node.data == "ident_arg" and isinstance(arguments, lark.Tree):
        arguments = lark.Tree(arguments.data, arguments.children[1:])  # after the text
    names = {str(token) for ident in arguments.find_data("ident") for token in ident.children}
    if names - {"params"}:
        return _UNPRICED
    patterns = [str(v) for v in _strings(constants)]
    literals = [t.strip("'\"") for t in node.scan_values(lambda t: t.type == "STRING_LIT")]
    sizes = [program_size(p) for p in [*literals, *patterns]]
    return max([s for s in sizes if s is not None] or [MAX_MATCH_STEPS])


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


# cel-expr-python 0.1.3 passes a string variable to cel-cpp as a C string: it ends at its first
# U+0000 (``size("a\0b")`` is 1). Such an input cannot be evaluated faithfully, so it is not
# evaluated: the rule fails closed, where cel-python would have read the whole text.
_NUL_MESSAGE = "an input string holds U+0000, which the native CEL backend cannot pass to cel-cpp"


def _size(value: Any) -> int:
    """Characters (UTF-8 bytes) and items of a plain value, the measure of what may be read;
    :class:`EvaluationError` for a string the binding would truncate."""
    if isinstance(value, str):
        if "\x00" in value:
            raise EvaluationError(_NUL_MESSAGE)
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, Mapping):
        return len(value) + sum(_size(k) + _size(v) for k, v in value.items())
    if isinstance(value, list):
        return len(value) + sum(_size(v) for v in value)
    return 1


def _check_price(price: _Price, size: int) -> None:
    """Refuse, before it starts, an evaluation whose uninterruptible work may exceed the budget."""
    if price.match_program == _UNPRICED:
        message = (
            "matches() with a pattern read from the input cannot be priced before it runs on "
            "the native CEL backend (use the python backend)"
        )
        raise BudgetExceededError(message)
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
    if price.match_program and price.match_program * size * repeat > MAX_MATCH_STEPS:
        message = (
            f"its matches() on inputs of this size may take more than {MAX_MATCH_STEPS} steps "
            "(MAX_MATCH_STEPS; native backend, priced before it runs)"
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
    data = {name: _plain(value) for name, value in variables.items()}
    _check_price(native.price, sum(_size(v) for v in data.values()))
    token = current.set(meter)
    try:
        result = native.program.eval(data=data)
    finally:
        current.reset(token)
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
