"""A relative spread floor is relative to the session's first cycles, even once they have left
the window the guard sees."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from prunewarden import Engine

EngineFactory = Callable[..., Engine]
RELATIVE = {
    "spread_floor": 0.5,
    "spread_floor_mode": "relative",
    "relative_to": {"first_cycles": 1},
}
WIDE = {"a": 0.25, "b": 0.75, "c": 0.5}
NARROWER = {"a": 0.375, "b": 0.625, "c": 0.5}


class TestTheSessionsEarlySpread:
    def test_the_kept_early_spread_is_used_after_the_window_moves_on(
        self, engine_with: EngineFactory
    ) -> None:
        """A session's early spread is the spread of its own first cycle, kept by the session:
        after that cycle has left the window, the floor is still relative to it, not to the
        oldest cycle the window holds."""
        session = engine_with(collapse=RELATIVE).session("s")
        session.observe_cycle(WIDE)
        decision = session.observe_cycle(NARROWER)
        for _ in range(4):
            decision = session.observe_cycle(NARROWER)
        assert 1 not in [s["cycle"] for s in session.state()["snapshots"]]
        detail = decision.reasons[0].detail
        assert math.isclose(detail["early_spread"], statistics.pstdev(WIDE.values()))
        assert detail["early_cycles"] == 1

    def test_without_a_session_the_history_gives_the_early_spread(
        self, engine_with: EngineFactory
    ) -> None:
        """Without a session, the early spread is that of the history's first cycles."""
        history: list[dict[str, Any]] = [
            {"cycle": n, "scores": WIDE if n == 1 else NARROWER, "pinned": []} for n in (1, 2, 3)
        ]
        decision = engine_with(collapse=RELATIVE).detect_collapse(history)
        detail = decision.reasons[0].detail
        assert math.isclose(detail["early_spread"], statistics.pstdev(WIDE.values()))
