"""The engine for asyncio agents: the same calls, awaited, never blocking the event loop.

A decision can wait: on an audit log's file lock (another process is appending), on its fsync,
on a session store's commit. Each of those blocks the thread that makes it, and on the event
loop's thread it would stall every other task of the agent. Here each call runs in a worker
thread (:func:`asyncio.to_thread`, the loop's default executor) and is awaited; the engine and
its sessions are thread-safe, so concurrent tasks may share them. Calls on one session are
serialized by the session itself, in the order they reach it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.planner import Plan
from prunewarden.reload import ReloadingEngine
from prunewarden.session import Session, SessionStore


class AsyncEngine:
    """Awaitable :class:`~prunewarden.Engine` (or :class:`~prunewarden.ReloadingEngine`) calls;
    each method takes the arguments of the method of the same name."""

    def __init__(self, engine: Engine | ReloadingEngine) -> None:
        self.engine = engine

    @classmethod
    def default(cls, **kwargs: Any) -> AsyncEngine:
        """On the bundled default policy (building it reads files: do it before the loop runs,
        or await :func:`asyncio.to_thread` on it)."""
        return cls(Engine.default(**kwargs))

    async def evaluate(self, document: Mapping[str, Any], **options: Any) -> Decision:
        return await asyncio.to_thread(functools.partial(self.engine.evaluate, document, **options))

    async def enforce(self, document: Mapping[str, Any], **options: Any) -> Decision:
        """Raises as :meth:`Engine.enforce` does when an enforced guard refuses."""
        return await asyncio.to_thread(functools.partial(self.engine.enforce, document, **options))

    async def detect_collapse(self, *args: Any, **kwargs: Any) -> Decision:
        return await asyncio.to_thread(self.engine.detect_collapse, *args, **kwargs)

    async def authorize_eviction(self, *args: Any, **kwargs: Any) -> Decision:
        return await asyncio.to_thread(self.engine.authorize_eviction, *args, **kwargs)

    async def authorize_evictions(self, *args: Any, **kwargs: Any) -> tuple[Decision, ...]:
        return await asyncio.to_thread(self.engine.authorize_evictions, *args, **kwargs)

    async def prune(self, *args: Any, **kwargs: Any) -> Decision:
        return await asyncio.to_thread(self.engine.prune, *args, **kwargs)

    async def plan(self, document: Mapping[str, Any], **options: Any) -> Plan:
        return await asyncio.to_thread(functools.partial(self.engine.plan, document, **options))

    async def session(
        self,
        session_id: str,
        labels: Mapping[str, str] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> AsyncSession:
        """:meth:`Engine.session`, awaited: opening a session may read and write its store."""
        session = await asyncio.to_thread(
            self.engine.session, session_id, labels, state=state, store=store
        )
        return AsyncSession(session)


class AsyncSession:
    """Awaitable :class:`~prunewarden.Session` calls; ``session`` is the session itself."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def session_id(self) -> str | None:
        return self.session.session_id

    @property
    def halted(self) -> bool:
        return self.session.halted

    def state(self) -> dict[str, Any]:
        """:meth:`Session.state` (in memory: nothing to wait for)."""
        return self.session.state()

    async def observe_cycle(
        self, scores: Mapping[str, float], pinned: Iterable[str] = (), *, cycle: int | None = None
    ) -> Decision:
        return await asyncio.to_thread(self.session.observe_cycle, scores, pinned, cycle=cycle)

    async def observe_turn(
        self, mean_relevance: float, tokens: int, *, turn: int | None = None
    ) -> None:
        await asyncio.to_thread(self.session.observe_turn, mean_relevance, tokens, turn=turn)

    async def authorize(self, *args: Any, **kwargs: Any) -> Decision:
        return await asyncio.to_thread(self.session.authorize, *args, **kwargs)

    async def prune(self, *args: Any, **kwargs: Any) -> Decision:
        return await asyncio.to_thread(self.session.prune, *args, **kwargs)

    async def plan(self, *args: Any, **kwargs: Any) -> Plan:
        return await asyncio.to_thread(self.session.plan, *args, **kwargs)

    async def verify(self, *args: Any, **kwargs: Any) -> Decision:
        """:meth:`Session.verify`: an edit of the window, judged from before and after."""
        return await asyncio.to_thread(self.session.verify, *args, **kwargs)

    async def evaluate(self, document: Mapping[str, Any]) -> Decision:
        return await asyncio.to_thread(self.session.evaluate, document)

    async def enforce(self, document: Mapping[str, Any]) -> Decision:
        """Raises as :meth:`Session.enforce` does when an enforced guard refuses."""
        return await asyncio.to_thread(self.session.enforce, document)

    async def save(self) -> None:
        await asyncio.to_thread(self.session.save)
