"""Engine, ReloadingEngine and AsyncEngine offer the same calls, argument for argument."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from prunewarden import Engine, ReloadingEngine, Session
from prunewarden.aio import AsyncEngine, AsyncSession
from prunewarden.engine import DecidingCalls
from prunewarden.engine._calls import DECIDING_CALLS

#: The calls that decide, as ``DecidingCalls`` declares them, and ``session``: every front offers
#: them. Engine's other public methods build one (``default``, ``from_file``), let a front open
#: sessions on it (``open_session``) or record a stored session state that failed its seal
#: (``report_rejected_state``, for a session server).
DECLARED = tuple(
    name
    for name, value in vars(DecidingCalls).items()
    if inspect.isfunction(value) and not name.startswith("_")
)
CALLS = (*DECLARED, "session")
ENGINE_ONLY = {"default", "from_file", "open_session", "report_rejected_state"}
FRONTS = (ReloadingEngine, AsyncEngine)


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and callable(value) and not isinstance(value, type)
    }


def parameters(method: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """Each parameter after ``self``: name, kind, default and annotation (as evaluated)."""
    signature = inspect.signature(method, eval_str=True)
    return [
        (p.name, p.kind, p.default, p.annotation) for p in list(signature.parameters.values())[1:]
    ]


def returns(method: Callable[..., Any]) -> Any:
    return inspect.signature(method, eval_str=True).return_annotation


class TestMethodSets:
    def test_engine_calls_are_the_listed_ones(self) -> None:
        """Engine's public methods are the deciding calls and its builders: a new call is listed
        here, so that the fronts are made to offer it too."""
        assert public_methods(Engine) == {*CALLS, *ENGINE_ONLY}

    def test_the_protocol_declares_every_deciding_call(self) -> None:
        """The calls ``DecidingCalls`` declares are the engine's deciding calls, in the order
        ``DECIDING_CALLS`` names them."""
        assert DECLARED == DECIDING_CALLS
        assert set(DECLARED) == public_methods(Engine) - ENGINE_ONLY - {"session"}

    @pytest.mark.parametrize("call", DECLARED)
    def test_the_engine_takes_the_declared_arguments(self, call: str) -> None:
        """Engine's calls are what the protocol declares: names, kinds, defaults, types."""
        declared = getattr(DecidingCalls, call)
        assert parameters(getattr(Engine, call)) == parameters(declared)
        assert returns(getattr(Engine, call)) == returns(declared)

    @pytest.mark.parametrize("front", FRONTS, ids=lambda cls: cls.__name__)
    def test_every_front_offers_every_call(self, front: type) -> None:
        """ReloadingEngine and AsyncEngine offer each of Engine's deciding calls."""
        assert set(CALLS) <= public_methods(front)


class TestSignatures:
    @pytest.mark.parametrize("front", FRONTS, ids=lambda cls: cls.__name__)
    @pytest.mark.parametrize("call", CALLS)
    def test_a_front_takes_the_engines_arguments(self, front: type, call: str) -> None:
        """Each call takes the same parameters as Engine's: names, kinds, defaults, types (no
        ``*args: Any`` a type checker cannot check)."""
        assert parameters(getattr(front, call)) == parameters(getattr(Engine, call))

    @pytest.mark.parametrize("front", FRONTS, ids=lambda cls: cls.__name__)
    @pytest.mark.parametrize("call", [c for c in CALLS if c != "session"])
    def test_a_front_returns_what_the_engine_returns(self, front: type, call: str) -> None:
        """Each deciding call returns Engine's type (AsyncEngine's once awaited)."""
        method = getattr(front, call)
        assert returns(method) == returns(getattr(Engine, call))
        assert inspect.iscoroutinefunction(method) == (front is AsyncEngine)

    def test_sessions_are_the_engines_sessions_or_awaitable_ones(self) -> None:
        """A reloading engine opens a Session; an async engine an AsyncSession."""
        assert returns(ReloadingEngine.session) is Session
        assert returns(AsyncEngine.session) is AsyncSession

    @pytest.mark.parametrize(
        "call",
        ["authorize", "enforce", "evaluate", "observe_cycle", "observe_turn", "plan", "prune"],
    )
    def test_an_async_session_takes_the_sessions_arguments(self, call: str) -> None:
        """AsyncSession's awaitable calls take Session's parameters and return its types."""
        method = getattr(AsyncSession, call)
        assert parameters(method) == parameters(getattr(Session, call))
        assert returns(method) == returns(getattr(Session, call))
        assert inspect.iscoroutinefunction(method)
