"""What the engine offers its observers: public calls as units, and what a record says of its
making (how long deciding took, and the caller's trace).

A decision hook sees decisions one by one; a trace wants one span per call of the library (an
eviction pass of 200 segments is one call, not 200). The engine's and the session's public methods
are marked with :func:`public_call`: the outermost marked method running in a context opens a
:class:`Call` in a context variable, the engine adds each decision it makes to it
(:func:`join_call`), and when the method returns the call hooks of the engine that decided get the
whole call: its name, when it began and ended, its session and every decision made in it. The
records are not kept: a pass's records would all stay alive until it ends, and the collector
would pay for walking them. Nested public
calls (``enforce`` calling ``evaluate``, a session's ``evaluate`` observing cycles) belong to the
outermost one. Without call hooks a call costs a context variable set and reset.

A record keeps ``duration_ns``, the time spent deciding, and, when the engine was given a
``trace_context`` (:func:`prunewarden.tracing.current_trace_context`), the caller's current
``trace_id`` and ``span_id``: :func:`stamp_record`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from prunewarden.decision import Decision

_diagnostics = logging.getLogger("prunewarden")

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(slots=True)
class Call:
    """One public call: its name (``prunewarden.evaluate``, ``prunewarden.plan``, ...), its
    start and end (nanoseconds since the epoch), the session id its records name (None for none),
    and each decision made in it, in order."""

    name: str
    started_ns: int
    ended_ns: int = 0
    session_id: str | None = None
    decisions: list[Decision] = field(default_factory=list)
    hooks: tuple[CallHook, ...] = ()
    # The caller's (trace id, span id), asked once per call: the caller's span cannot change
    # while the call runs. _UNASKED until the first record needs it.
    trace: Any = None


# Called once per public call in which the engine decided; what it returns is ignored.
CallHook = Callable[[Call], object]

# Called as each record is built: the caller's current (trace id, span id), or None outside a
# trace.
TraceContext = Callable[[], tuple[str, str] | None]

_UNASKED = object()
_current: ContextVar[Call | None] = ContextVar("prunewarden_call", default=None)


def public_call(name: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Mark a method as a public call named ``name`` (see the module's docstring)."""

    def mark(method: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(method)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if _current.get() is not None:
                return method(*args, **kwargs)
            scope = Call(name, time.time_ns(), trace=_UNASKED)
            token = _current.set(scope)
            try:
                return method(*args, **kwargs)
            finally:
                _current.reset(token)
                if scope.hooks:
                    scope.ended_ns = time.time_ns()
                    run_call_hooks(scope)

        return call

    return mark


def join_call(decision: Decision, record: Mapping[str, Any], hooks: tuple[CallHook, ...]) -> None:
    """Add a decision to the public call it is made in, for ``hooks``; a decision made outside
    any (a session's ``decide`` called directly) is a call of its own, ``prunewarden.decide``."""
    scope = _current.get()
    if scope is None:
        now = time.time_ns()
        scope = Call("prunewarden.decide", now, now, hooks=hooks)
        _enter(scope, decision, record)
        run_call_hooks(scope)
        return
    _enter(scope, decision, record)
    scope.hooks = hooks


def join_calls(
    decisions: Sequence[Decision], record: Mapping[str, Any], hooks: tuple[CallHook, ...]
) -> None:
    """:func:`join_call` for the decisions of one pass, which share ``record``: added to the
    public call at once (outside any, each is still a call of its own)."""
    scope = _current.get()
    if scope is None:
        for decision in decisions:
            join_call(decision, record, hooks)
        return
    if not decisions:
        return
    _enter(scope, decisions[0], record)
    scope.decisions.extend(decisions[1:])
    scope.hooks = hooks


def _enter(scope: Call, decision: Decision, record: Mapping[str, Any]) -> None:
    if not scope.decisions:
        session_id = record.get("session_id")
        scope.session_id = session_id if isinstance(session_id, str) else None
    scope.decisions.append(decision)


def run_call_hooks(call: Call) -> None:
    """Each hook gets the call; one that raises is reported and changes nothing."""
    for hook in call.hooks:
        try:
            hook(call)
        except Exception:  # noqa: BLE001 - a hook never changes a decision
            with contextlib.suppress(Exception):
                _diagnostics.exception("on_call hook %r raised", hook)


def call_hooks(on_call: CallHook | Iterable[CallHook] | None) -> tuple[CallHook, ...]:
    """``on_call`` as a tuple: one callable, several, or none."""
    if on_call is None:
        return ()
    if callable(on_call):
        return (on_call,)
    hooks = tuple(on_call)
    if not all(callable(hook) for hook in hooks):
        msg = "on_call takes a callable or an iterable of callables"
        raise TypeError(msg)
    return hooks


def stamp_record(
    record: dict[str, Any], started: int | None, trace_context: TraceContext | None
) -> None:
    """What a record says of its making: how long deciding took since ``started`` (a
    ``perf_counter_ns``: guards, rules, shadow and the record itself; not parsing, not the
    write), and the caller's trace and span. A ``trace_context`` that fails is reported and
    leaves them out: a trace id is worth less than the decision."""
    if started is not None:
        record["duration_ns"] = time.perf_counter_ns() - started
    if trace_context is None:
        return
    scope = _current.get()
    current: Any = scope.trace if scope is not None else _UNASKED
    if current is _UNASKED:
        current = _ask(trace_context)
        if scope is not None:
            scope.trace = current
    if current is not None:
        record["trace_id"], record["span_id"] = current


def _ask(trace_context: TraceContext) -> tuple[str, str] | None:
    """The caller's trace and span ids, or None (a failing ``trace_context`` is reported)."""
    try:
        current = trace_context()
        if current is None:
            return None
        trace_id, span_id = current
        if not (isinstance(trace_id, str) and isinstance(span_id, str)):
            raise TypeError(f"not a (trace id, span id) pair of strings: {current!r}")  # noqa: TRY301
    except Exception:  # noqa: BLE001 - a trace id is worth less than the decision
        with contextlib.suppress(Exception):
            _diagnostics.exception("trace_context %r failed", trace_context)
        return None
    return trace_id, span_id
