"""Session stores: SQLite by default, written on every change, halts that survive a kill -9."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from prunewarden import Engine, SessionStoreError, SqliteSessionStore
from prunewarden._schemas import validator

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}

# Seed 000 as a script: the spread narrows and the canary drifts until the guard halts.
NARROWING = """
def narrowing(cycle, total=5):
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores
"""

# Halts a stored session, says so, then waits to be killed (never returns on its own).
HALT_AND_WAIT = (
    NARROWING
    + """
import sys, time
import prunewarden
store = prunewarden.SqliteSessionStore(sys.argv[1])
session = prunewarden.Engine.default().session("agent-1", {"team": "core"}, store=store)
for cycle in range(1, 6):
    decision = session.observe_cycle(narrowing(cycle), ["task"])
print(decision.outcome, decision.codes[0], flush=True)
while True:
    time.sleep(60)
"""
)

# The restarted agent: the same session from the store, then one eviction.
RESTART = """
import json, sys
import prunewarden
store = prunewarden.SqliteSessionStore(sys.argv[1])
session = prunewarden.Engine.default().session("agent-1", store=store)
segment = {"id": "t3", "kind": "turn", "tombstone_written": True}
decision = session.authorize(segment, 0.1, 0.1)
print(json.dumps({"state": session.state(), "outcome": decision.outcome, "codes": decision.codes}))
"""


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    namespace: dict[str, Any] = {}
    exec(NARROWING, namespace)  # noqa: S102 - the same function the scripts run
    scores: dict[str, float] = namespace["narrowing"](cycle, total)
    return scores


class FailingStore:
    """A store whose saves fail while ``failing`` is set."""

    def __init__(self) -> None:
        self.failing = False
        self.saved: dict[str, Any] = {}

    def load(self, session_id: str) -> dict[str, Any] | None:
        return self.saved.get(session_id)

    def save(self, session_id: str, state: Any) -> None:
        if self.failing:
            msg = "disk full"
            raise OSError(msg)
        self.saved[session_id] = dict(state)


class TestSqliteStore:
    def test_one_row_per_session_in_wal_mode(self, tmp_path: Path) -> None:
        """Each session is one row holding its latest state; the database is in WAL mode."""
        path = tmp_path / "sessions.db"
        with SqliteSessionStore(path) as store:
            engine = Engine.default()
            first = engine.session("a", store=store)
            engine.session("b", store=store)
            for cycle in range(1, 4):
                first.observe_cycle(narrowing(cycle), ["task"])
            assert list(store.session_ids()) == ["a", "b"]
            assert store.load("a") == first.state()
        with sqlite3.connect(path) as connection:
            (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
            (rows,) = connection.execute("SELECT count(*) FROM sessions").fetchone()
        assert (mode, rows) == ("wal", 2)

    def test_every_change_is_saved_before_the_call_returns(self, tmp_path: Path) -> None:
        """After each cycle and turn, the store holds the state that call produced."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            session = Engine.default().session("s", store=store)
            for cycle in range(1, 6):
                session.observe_cycle(narrowing(cycle), ["task"])
                assert store.load("s") == session.state()
            session.observe_turn(0.5, 100)
            assert store.load("s") == session.state()
            halt = store.load("s")["halt"]  # type: ignore[index]
        assert halt["code"] == "collapse_detected"

    def test_a_new_engine_loads_the_session(self, tmp_path: Path) -> None:
        """engine.session(id, store=...) restores what the store holds, labels included."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            session = Engine.default().session("s", {"team": "core"}, store=store)
            for cycle in range(1, 6):
                session.observe_cycle(narrowing(cycle), ["task"])
            again = Engine.default().session("s", store=store)
        assert again.halted
        assert again.labels == {"team": "core"}
        assert again.authorize(SEGMENT, 0.1, 0.1).codes == ("pruning_halted",)

    def test_normal_synchronous_is_a_choice(self, tmp_path: Path) -> None:
        """synchronous="NORMAL" is applied to the connection; anything else is refused."""
        with SqliteSessionStore(tmp_path / "s.db", synchronous="NORMAL") as store:
            Engine.default().session("s", store=store)
            (level,) = store._connect().execute("PRAGMA synchronous").fetchone()
        assert level == 1  # NORMAL
        with pytest.raises(ValueError, match="synchronous"):
            SqliteSessionStore(tmp_path / "t.db", synchronous="OFF")  # type: ignore[arg-type]

    def test_delete_forgets_a_session(self, tmp_path: Path) -> None:
        """A deleted session starts afresh."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            session = Engine.default().session("s", store=store)
            session.observe_cycle(narrowing(1), ["task"])
            store.delete("s")
            assert store.load("s") is None


class TestUnsavedState:
    def test_pruning_is_refused_while_the_state_cannot_be_saved(self) -> None:
        """A change that cannot be saved raises SessionStoreError and is not made; evictions
        are refused with session_state_unavailable until a save succeeds, and the cycle can
        then be sent again."""
        store = FailingStore()
        session = Engine.default().session("s", store=store)
        store.failing = True
        with pytest.raises(SessionStoreError) as raised:
            session.observe_cycle(narrowing(1), ["task"])
        assert (raised.value.session_id, raised.value.error) == ("s", "OSError: disk full")
        assert len(raised.value.decision_ids) == 1
        assert session.state()["cycles_seen"] == 0
        refused = session.authorize(SEGMENT, 0.1, 0.1)
        assert (refused.outcome, refused.codes) == ("deny", ("session_state_unavailable",))
        assert refused.reasons[0].detail == {"error": "OSError"}
        store.failing = False
        assert session.authorize(SEGMENT, 0.1, 0.1).codes == ("authorized",)
        session.observe_cycle(narrowing(1), ["task"])  # the retry is the next cycle again
        assert store.saved["s"]["cycles_seen"] == 1


@pytest.mark.spawns
class TestKilledProcess:
    def test_a_halt_survives_kill_9(self, tmp_path: Path) -> None:
        """A process holding a halted session is killed with SIGKILL right after reporting
        the halt; the restarted process's first eviction is refused with pruning_halted, and
        the restored state is valid session-state.v4."""
        database = str(tmp_path / "sessions.db")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        agent = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(HALT_AND_WAIT), database],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert agent.stdout is not None
            reported = agent.stdout.readline().split()
        finally:
            agent.send_signal(signal.SIGKILL)
            agent.communicate()
        assert reported == ["halt", "collapse_detected"]
        assert agent.returncode == -signal.SIGKILL

        restarted = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(RESTART), database],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        result = json.loads(restarted.stdout)
        assert (result["outcome"], result["codes"]) == ("deny", ["pruning_halted"])
        assert list(validator("session-state").iter_errors(result["state"])) == []
        assert result["state"]["halt"]["code"] == "collapse_detected"
        assert result["state"]["labels"] == {"team": "core"}
        assert restarted.stderr == ""
