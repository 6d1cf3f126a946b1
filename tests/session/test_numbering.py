"""Cycle and turn numbers given to a session must increase (docs/sessions.md): a repeated or
earlier number is an input error, and the session is left as it was."""

from __future__ import annotations

import pytest
from prunewarden import Engine, InputError

SCORES = {f"t{i}": 0.25 * (i % 3) for i in range(5)}


class TestNumbering:
    def test_a_repeated_turn_number_is_refused(self) -> None:
        """The same turn number twice: the second is refused at $.turn."""
        session = Engine.default().session("s")
        session.observe_turn(0.5, 100, turn=3)
        with pytest.raises(InputError) as raised:
            session.observe_turn(0.5, 90, turn=3)
        assert [p.path for p in raised.value.problems] == ["$.turn"]
        assert [t["turn"] for t in session.state()["turns"]] == [3]

    def test_a_repeated_cycle_number_is_refused(self) -> None:
        """The same cycle number twice: the second is refused, the history kept."""
        session = Engine.default().session("s")
        session.observe_cycle(SCORES, [], cycle=2)
        with pytest.raises(InputError):
            session.observe_cycle(SCORES, [], cycle=2)
        assert [s["cycle"] for s in session.state()["snapshots"]] == [2]

    def test_numbers_left_out_follow_the_last(self) -> None:
        """Numbers left out follow the previous one (the first is 1)."""
        session = Engine.default().session("s")
        session.observe_turn(0.5, 100)
        session.observe_turn(0.5, 90, turn=7)
        session.observe_turn(0.5, 80)
        assert [t["turn"] for t in session.state()["turns"]][-2:] == [7, 8]
