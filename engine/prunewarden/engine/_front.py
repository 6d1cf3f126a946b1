"""The decision calls of an :class:`Engine`, with its signatures, forwarded to the engine in force.

A front that holds an engine it may replace (``ReloadingEngine`` swaps in a new snapshot on
every reload) offers the same calls as the engine, argument for argument, so that a type checker
checks its callers as it checks an engine's. Each call is made from its declaration in
:class:`~prunewarden.engine._calls.DecidingCalls` (its parameters, types and return, read by
``inspect`` and by the type checker alike), asks :meth:`EngineCalls._in_force` once, when it
begins, and runs to its end on that engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from prunewarden.engine._calls import DecidingCalls
from prunewarden.engine._engine import Engine

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _forwarded(
    declared: Callable[Concatenate[Any, _P], _R],
) -> Callable[Concatenate[EngineCalls, _P], _R]:
    """The call ``declared`` in :class:`DecidingCalls`, made on the engine in force."""
    name = declared.__name__

    @functools.wraps(declared)
    def call(front: EngineCalls, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        in_force = front._in_force()  # noqa: SLF001 - the front's own engine
        return getattr(in_force, name)(*args, **kwargs)  # type: ignore[no-any-return]

    call.__doc__ = f":meth:`Engine.{name}` on the engine in force when the call begins."
    return call


class EngineCalls:
    """:class:`Engine`'s decision calls on the engine :meth:`_in_force` returns."""

    def _in_force(self) -> Engine:
        raise NotImplementedError

    evaluate = _forwarded(DecidingCalls.evaluate)
    enforce = _forwarded(DecidingCalls.enforce)
    detect_collapse = _forwarded(DecidingCalls.detect_collapse)
    authorize_eviction = _forwarded(DecidingCalls.authorize_eviction)
    authorize_evictions = _forwarded(DecidingCalls.authorize_evictions)
    authorize_pass = _forwarded(DecidingCalls.authorize_pass)
    prune = _forwarded(DecidingCalls.prune)
    plan = _forwarded(DecidingCalls.plan)


if TYPE_CHECKING:
    # The engine and every front of one offer the deciding calls as declared.
    _ENGINE: type[DecidingCalls] = Engine
    _FRONT: type[DecidingCalls] = EngineCalls
