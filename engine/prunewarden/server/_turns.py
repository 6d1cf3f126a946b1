"""Where a request's engine call runs: in a worker thread, and for a session, in its turn.

Nothing that can wait runs on the event loop: every engine call appends to the audit log (a
file lock another process may hold, a write a full disk may stall), and a session's call waits
for the one before it. So every call runs in a worker thread under the request deadline.

The calls of one session run one at a time (its history is one sequence). Waiting for that turn
in a worker thread would let a flood of calls on one busy session (say, behind a pass over 60,000
segments) take every thread, and the server with them; so a call waits for its session's turn
on the event loop, on an ``asyncio.Lock`` per session id, where waiting costs nothing, and only
then takes a thread. A turn is handed on when the call's thread has finished, not when its
caller stopped waiting (a deadline): the next call of the session never runs beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

from prometheus_client import Gauge

_T = TypeVar("_T")


async def run_in_thread(
    executor: Executor, call: Callable[[], _T], finished: Callable[[], None] | None = None
) -> _T:
    """``call()`` in ``executor``, awaited; ``finished`` runs on the event loop once the call
    has ended, whether its caller waited for it or gave up (a call not started yet is
    cancelled)."""
    loop = asyncio.get_running_loop()
    try:
        future = executor.submit(call)
    except BaseException:
        if finished is not None:
            finished()
        raise

    try:
        return await asyncio.wrap_future(future)
    finally:
        if finished is not None:
            if future.done():  # the common case: no need to wake the loop from a thread
                finished()
            else:  # given up on (a deadline) while the thread still runs
                future.add_done_callback(_on_loop(loop, finished))


def _on_loop(loop: asyncio.AbstractEventLoop, then: Callable[[], None]) -> Callable[[object], None]:
    """A done-callback, called in the worker's thread, that runs ``then`` on ``loop``."""

    def done(_future: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(then)

    return done


class _Turn:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # calls holding or waiting for the turn: at 0 the entry goes


class SessionTurns:
    """One call at a time per session id; ``waiting`` counts the calls waiting for their turn.
    Used from the event loop only (no thread lock needed)."""

    def __init__(self, waiting: Gauge) -> None:
        self._turns: dict[str, _Turn] = {}
        self._waiting = waiting

    async def run(self, session_id: str, executor: Executor, call: Callable[[], _T]) -> _T:
        """``call()`` in a worker thread, once every earlier call of ``session_id`` ended."""
        turn = self._turns.get(session_id)
        if turn is None:
            turn = self._turns[session_id] = _Turn()
        turn.users += 1
        try:
            if turn.lock.locked():
                self._waiting.inc()
                try:
                    await turn.lock.acquire()
                finally:
                    self._waiting.dec()
            else:
                await turn.lock.acquire()  # free: taken without yielding
        except BaseException:
            self._leave(session_id, turn)
            raise

        def finished() -> None:
            turn.lock.release()
            self._leave(session_id, turn)

        return await run_in_thread(executor, call, finished)

    def _leave(self, session_id: str, turn: _Turn) -> None:
        turn.users -= 1
        if turn.users == 0:
            del self._turns[session_id]
