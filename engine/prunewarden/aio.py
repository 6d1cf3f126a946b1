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
from prunewarden.pipeline import PassResult
from prunewarden.planner import Plan
from prunewarden.reload import ReloadingEngine
from prunewarden.session import Session, SessionStore


class AsyncEngine:
    """Awaitable :class:`~prunewarden.Engine` (or :class:`~prunewarden.ReloadingEngine`) calls;
    each method takes the arguments of the engine's method of the same name, spelled out so
    that a type checker checks its callers."""

    def __init__(self, engine: Engine | ReloadingEngine) -> None:
        self.engine = engine

    @classmethod
    def default(cls, **kwargs: Any) -> AsyncEngine:
        """On the bundled default policy (building it reads files: do it before the loop runs,
        or await :func:`asyncio.to_thread` on it)."""
        return cls(Engine.default(**kwargs))

    async def evaluate(  # noqa: PLR0913 - Engine.evaluate's keyword-only options
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Decision:
        call = functools.partial(
            self.engine.evaluate,
            document,
            filename=filename,
            text=text,
            session_id=session_id,
            labels=labels,
            explain=explain,
        )
        return await asyncio.to_thread(call)

    async def enforce(
        self,
        document: Mapping[str, Any],
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Raises as :meth:`Engine.enforce` does when an enforced guard refuses."""
        call = functools.partial(
            self.engine.enforce, document, session_id=session_id, labels=labels
        )
        return await asyncio.to_thread(call)

    async def detect_collapse(
        self,
        history: Iterable[Mapping[str, Any]],
        baseline: Mapping[str, float] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        call = functools.partial(
            self.engine.detect_collapse, history, baseline, session_id=session_id, labels=labels
        )
        return await asyncio.to_thread(call)

    async def authorize_eviction(  # noqa: PLR0913 - mirrors Engine.authorize_eviction
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        call = functools.partial(
            self.engine.authorize_eviction,
            segment,
            score,
            perturbed_score,
            eviction_candidates,
            session_id=session_id,
            labels=labels,
        )
        return await asyncio.to_thread(call)

    async def authorize_evictions(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[Decision, ...]:
        call = functools.partial(
            self.engine.authorize_evictions,
            evictions,
            eviction_candidates,
            session_id=session_id,
            labels=labels,
        )
        return await asyncio.to_thread(call)

    async def authorize_pass(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PassResult:
        """:meth:`Engine.authorize_pass`, awaited; its decisions are built where they are
        read."""
        call = functools.partial(
            self.engine.authorize_pass,
            evictions,
            eviction_candidates,
            session_id=session_id,
            labels=labels,
        )
        return await asyncio.to_thread(call)

    async def prune(  # noqa: PLR0913 - mirrors Engine.prune
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        turns: Iterable[Mapping[str, Any]] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        call = functools.partial(
            self.engine.prune,
            spans,
            keep_top_k,
            turn=turn,
            turns=turns,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
            session_id=session_id,
            labels=labels,
        )
        return await asyncio.to_thread(call)

    async def plan(  # noqa: PLR0913 - Engine.plan's keyword-only options
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Plan:
        call = functools.partial(
            self.engine.plan,
            document,
            filename=filename,
            text=text,
            session_id=session_id,
            labels=labels,
            explain=explain,
        )
        return await asyncio.to_thread(call)

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
        self,
        scores: Mapping[str, float],
        pinned: Iterable[str] = (),
        *,
        cycle: int | None = None,
        explain: bool = False,
    ) -> Decision:
        call = functools.partial(
            self.session.observe_cycle, scores, pinned, cycle=cycle, explain=explain
        )
        return await asyncio.to_thread(call)

    async def observe_turn(
        self, mean_relevance: float, tokens: int, *, turn: int | None = None
    ) -> None:
        await asyncio.to_thread(self.session.observe_turn, mean_relevance, tokens, turn=turn)

    async def authorize(
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        explain: bool = False,
    ) -> Decision:
        call = functools.partial(
            self.session.authorize,
            segment,
            score,
            perturbed_score,
            eviction_candidates,
            explain=explain,
        )
        return await asyncio.to_thread(call)

    async def prune(  # noqa: PLR0913 - mirrors Session.prune
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        explain: bool = False,
    ) -> Decision:
        call = functools.partial(
            self.session.prune,
            spans,
            keep_top_k,
            turn=turn,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
            explain=explain,
        )
        return await asyncio.to_thread(call)

    async def plan(  # noqa: PLR0913 - mirrors Session.plan
        self,
        segments: Iterable[Mapping[str, Any]],
        *,
        free_tokens: int | None = None,
        keep_top_k: int | None = None,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        explain: bool = False,
    ) -> Plan:
        call = functools.partial(
            self.session.plan,
            segments,
            free_tokens=free_tokens,
            keep_top_k=keep_top_k,
            turn=turn,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
            explain=explain,
        )
        return await asyncio.to_thread(call)

    async def verify(self, *args: Any, **kwargs: Any) -> Decision:
        """:meth:`Session.verify`: an edit of the window, judged from before and after (its
        keywords too, ``explain`` among them)."""
        return await asyncio.to_thread(self.session.verify, *args, **kwargs)

    async def evaluate(self, document: Mapping[str, Any], *, explain: bool = False) -> Decision:
        call = functools.partial(self.session.evaluate, document, explain=explain)
        return await asyncio.to_thread(call)

    async def enforce(self, document: Mapping[str, Any], *, explain: bool = False) -> Decision:
        """Raises as :meth:`Session.enforce` does when an enforced guard refuses."""
        call = functools.partial(self.session.enforce, document, explain=explain)
        return await asyncio.to_thread(call)

    async def save(self) -> None:
        await asyncio.to_thread(self.session.save)


__all__ = ["AsyncEngine", "AsyncSession"]
