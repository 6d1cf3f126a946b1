"""A session's calls run one at a time, waited for on the event loop, and a call given up on at
its deadline keeps its session's turn until its thread has ended."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from _support.blocking import GUARD_SECONDS
from prometheus_client import CollectorRegistry, Gauge
from prunewarden.server._turns import SessionTurns


def waiting_gauge() -> tuple[Gauge, CollectorRegistry]:
    registry = CollectorRegistry()
    return Gauge("waiting", "calls waiting", registry=registry), registry


class TestSessionTurns:
    def test_a_call_given_up_on_keeps_the_turn_until_its_thread_ends(self) -> None:
        """The first call times out while its thread is blocked; the second call of the session
        waits (counted) until that thread ends, and only then runs."""
        release = threading.Event()
        order: list[str] = []
        waiting, registry = waiting_gauge()
        turns = SessionTurns(waiting)

        def blocked() -> str:
            release.wait(GUARD_SECONDS)
            order.append("first")
            return "first"

        def second() -> str:
            order.append("second")
            return "second"

        async def scenario() -> str:
            with ThreadPoolExecutor(2) as workers:
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.05):
                        await turns.run("s", workers, blocked)
                queued = asyncio.create_task(turns.run("s", workers, second))
                await asyncio.sleep(0)  # the task's first step: up to waiting for the turn
                assert registry.get_sample_value("waiting") == 1
                assert order == []
                release.set()
                return await asyncio.wait_for(queued, GUARD_SECONDS)

        assert asyncio.run(scenario()) == "second"
        assert order == ["first", "second"]
        assert registry.get_sample_value("waiting") == 0

    def test_other_sessions_do_not_wait(self) -> None:
        """A session busy in one thread holds back no other session."""
        release = threading.Event()
        turns = SessionTurns(waiting_gauge()[0])

        async def scenario() -> str:
            with ThreadPoolExecutor(2) as workers:
                busy = asyncio.create_task(turns.run("busy", workers, lambda: release.wait(5)))
                other = await asyncio.wait_for(
                    turns.run("other", workers, lambda: "other"), GUARD_SECONDS
                )
                release.set()
                await busy
                return other

        assert asyncio.run(scenario()) == "other"
