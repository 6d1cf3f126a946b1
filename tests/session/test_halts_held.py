"""A halt holds whatever refusing reason the collapse guard gave, a restored state is validated
before it is used, and a store never reuses a connection inherited through fork
(docs/sessions.md)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from prunewarden import Engine, SessionStateError
from prunewarden.session import SqliteSessionStore

FLAT = {f"t{i}": 0.5 for i in range(5)}  # population sd 0: far below the default floor
SEGMENT = {"id": "t1", "kind": "turn", "tombstone_written": True}


def halting_cycles(reason: str) -> list[tuple[dict[str, float], list[str]]]:
    """Three cycles after which the default policy's collapse guard halts with ``reason``."""
    if reason == "no_canary":
        return [(FLAT, [])] * 3
    if reason == "canary_missing":
        with_canary = {**FLAT, "task": 0.52}  # a healthy canary, spread still low
        return [(with_canary, ["task"]), (with_canary, ["task"]), (FLAT, ["task"])]
    inverted = {**FLAT, "task": 0.45}  # below the median of the others: inverted
    wide = {**FLAT, "t0": 0.0, "t4": 1.0, "task": 0.9}
    return [(wide, ["task"]), (inverted, ["task"]), (inverted, ["task"])]


REASONS = ["no_canary", "canary_missing", "collapse_detected"]


class TestEveryRefusingReasonHalts:
    @pytest.mark.parametrize("reason", REASONS)
    def test_the_session_holds_the_halt(self, engine: Engine, reason: str) -> None:
        """Whichever refusing reason the guard gives, the session is halted and refuses its
        next eviction with pruning_halted."""
        session = engine.session(f"s-{reason}")
        decisions = [session.observe_cycle(s, p) for s, p in halting_cycles(reason)]
        assert decisions[-1].outcome == "halt"
        assert decisions[-1].codes[0] == reason
        assert session.halted
        assert session.halt is not None
        assert session.halt.code == reason
        refused = session.authorize(SEGMENT, 0.125, 0.125)
        assert refused.outcome == "deny"
        assert refused.codes[0] == "pruning_halted"

    @pytest.mark.parametrize("reason", REASONS)
    def test_a_stateless_call_for_the_session_is_refused(self, engine: Engine, reason: str) -> None:
        """The engine's stateless call naming the halted session is refused too."""
        session = engine.session("s")
        for scores, pinned in halting_cycles(reason):
            session.observe_cycle(scores, pinned)
        decision = engine.authorize_eviction(SEGMENT, 0.125, 0.125, session_id="s")
        assert decision.codes[0] == "pruning_halted"

    def test_a_passing_cycle_lifts_the_halt(self, engine: Engine) -> None:
        """A later cycle the guard passes lifts the halt (the control of the cases above)."""
        session = engine.session("s")
        for scores, pinned in halting_cycles("no_canary"):
            session.observe_cycle(scores, pinned)
        wide = {**FLAT, "t0": 0.0, "t4": 1.0}
        assert session.observe_cycle(wide, []).outcome == "allow"
        assert not session.halted
        assert session.authorize(SEGMENT, 0.125, 0.125).codes == ("authorized",)


def state_with_cycles(engine: Engine, cycles: list[int]) -> dict[str, Any]:
    session = engine.session("restored")
    for number in range(1, 4):
        session.observe_cycle({**FLAT, "t0": 0.1 * number}, [], cycle=number)
    state = session.state()
    for snapshot, number in zip(state["snapshots"], cycles, strict=True):
        snapshot["cycle"] = number
    return state


class TestRestoredStateIsValidated:
    @pytest.mark.parametrize("cycles", [[1, 2, 2], [1, 1, 2], [2, 1, 3]], ids=str)
    def test_cycle_numbers_that_do_not_increase_are_refused(
        self, engine: Engine, cycles: list[int]
    ) -> None:
        """A state whose snapshots repeat or reorder a cycle number is refused, located."""
        state = state_with_cycles(engine, cycles)
        with pytest.raises(SessionStateError) as raised:
            engine.session("restored", state=state)
        paths = [problem.path for problem in raised.value.problems]
        assert any(path.startswith("$.snapshots[") and path.endswith(".cycle") for path in paths)

    def test_increasing_cycle_numbers_are_restored(self, engine: Engine) -> None:
        """The same state with increasing numbers restores (the control)."""
        session = engine.session("restored", state=state_with_cycles(engine, [4, 7, 9]))
        assert [s["cycle"] for s in session.state()["snapshots"]] == [4, 7, 9]


def _save_in_child(store: SqliteSessionStore, answer: int) -> None:
    """In a forked child: save through the inherited store, say whether it used a connection
    of its own, and exit without running the parent's cleanup."""
    code = 1
    try:
        inherited = store._connection
        store.save("child", {"from": "child"})
        own = store._connection is not None and store._connection is not inherited
        os.write(answer, b"own" if own else b"inherited")
        code = 0
    finally:
        os._exit(code)


class TestForkSafety:
    @pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
    def test_a_forked_child_opens_its_own_connection(self, tmp_path: Path) -> None:
        """A store used in a process forked after it connected does not reuse the parent's
        SQLite connection (sharing one across processes corrupts its state); the parent's
        connection keeps working."""
        store = SqliteSessionStore(tmp_path / "sessions.sqlite3")
        store.save("parent", {"from": "parent"})
        read, write = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12 warns when other tests left threads running; the child here only
            # saves and exits, touching no lock those threads hold.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(read)
            _save_in_child(store, write)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            said = answer.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert said == b"own"
        assert store.load("child") == {"from": "child"}
        store.save("parent", {"from": "parent", "again": True})
        assert store.load("parent") == {"from": "parent", "again": True}
        store.close()
