"""A halt decided in this process and not yet saved stands over a state read since, unless that
state shows its own halt or a later cycle that passed the guard."""

from __future__ import annotations

from prunewarden.inputs import Snapshot
from prunewarden.session._registry import SessionRegistry
from prunewarden.session._state import Halt, History

HELD = Halt("d-held", "collapse_detected", 3, "sha256:p")


def history(last_cycle: int, halt: Halt | None = None) -> History:
    return History(snapshots=(Snapshot(last_cycle, {"a": 0.5}, ()),), halt=halt)


def registry() -> SessionRegistry:
    held = SessionRegistry()
    held.note("s", HELD)
    return held


class TestKeepHeldHalt:
    def test_a_state_read_at_the_halting_cycle_keeps_the_halt(self) -> None:
        """A state whose last cycle is the one that halted (no later cycle passed) gets the
        held halt."""
        assert registry().keep_held_halt("s", history(3)).halt == HELD

    def test_a_state_with_a_later_cycle_lifted_it(self) -> None:
        """A state in which a later cycle passed the guard keeps no halt."""
        assert registry().keep_held_halt("s", history(4)).halt is None

    def test_a_state_showing_its_own_halt_keeps_that_one(self) -> None:
        """A state that shows a halt keeps it: the held one does not replace it."""
        own = Halt("d-own", "canary_missing", 2, "sha256:p")
        assert registry().keep_held_halt("s", history(2, own)).halt == own

    def test_another_sessions_halt_is_not_taken(self) -> None:
        """Only the halt held for this session id stands over its state."""
        assert registry().keep_held_halt("t", history(3)).halt is None
        assert registry().keep_held_halt(None, history(3)).halt is None
