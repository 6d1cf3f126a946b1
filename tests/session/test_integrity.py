"""Stored session states are sealed: an edit of the store refuses the session (and is
recorded) instead of lifting its halt; a halt decided here is never lifted by reading an older
state; a change the store could not take is not made."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _support.session_faults import fill, small_filesystem
from prunewarden import (
    AuditLog,
    Engine,
    SessionIntegrityError,
    SessionStoreError,
    SqliteSessionStore,
)
from prunewarden.session import SESSION_KEY_ENV

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
KEY = "k" * 32


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Seed 000: spread narrows to the midpoint; the canary drifts 0.9 -> 0.6."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def halt(session: Any) -> Any:
    for cycle in range(1, 6):
        session.observe_cycle(narrowing(cycle), ["task"])
    assert session.halted
    return session


def edit(path: Path, sql: str, *params: Any) -> None:
    """Change the sessions table as someone with write access to the file would."""
    with sqlite3.connect(path) as connection:
        connection.execute(sql, params)


def row(path: Path) -> tuple[Any, ...]:
    with sqlite3.connect(path) as connection:
        found: tuple[Any, ...] = connection.execute("SELECT * FROM sessions").fetchone()
    return found


def records(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


class TestTamperedState:
    @pytest.mark.parametrize(
        "sql",
        [
            "UPDATE sessions SET state = json_set(state, '$.halt', json('null'))",
            "UPDATE sessions SET state = 'null'",
            "UPDATE sessions SET seal = NULL",
        ],
        ids=["halt-null", "state-null", "seal-removed"],
    )
    def test_an_edited_state_refuses_and_is_recorded(self, tmp_path: Path, sql: str) -> None:
        """A halted session's row edited by hand: opening it raises SessionIntegrityError
        located at the stored state, a session_state_rejected record is written, a stateless
        eviction is refused, and the row is left as it was found."""
        db, log = tmp_path / "s.db", tmp_path / "audit.jsonl"
        with SqliteSessionStore(db) as store:
            halt(Engine.default(store=store).session("s"))
        edit(db, sql)
        found = row(db)
        with SqliteSessionStore(db) as store, AuditLog(log) as audit:
            engine = Engine.default(store=store, audit=audit)
            with pytest.raises(SessionIntegrityError) as raised:
                engine.session("s")
            refused = engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s")
        (problem,) = raised.value.problems
        assert (problem.file, problem.path) == ("<session-store>", "$")
        assert "session 's' is refused" in problem.message
        assert refused.codes == ("session_state_unavailable",)
        assert refused.reasons[0].detail == {"error": "SessionIntegrityError"}
        (record,) = records(log, "session_state_rejected")
        assert (record["session_id"], record["deleted"]) == ("s", False)
        assert record["problems"] == [str(problem)]
        assert row(db) == found

    def test_a_state_copied_from_another_session_is_refused(self, tmp_path: Path) -> None:
        """The seal covers the session id: a row copied under another id does not open."""
        db = tmp_path / "s.db"
        with SqliteSessionStore(db) as store:
            engine = Engine.default(store=store)
            engine.session("open")
            halt(engine.session("halted"))
        edit(
            db,
            "UPDATE sessions SET (state, seal) = (SELECT state, seal FROM sessions "
            "WHERE session_id = 'open') WHERE session_id = 'halted'",
        )
        with SqliteSessionStore(db) as store, pytest.raises(SessionIntegrityError):
            store.load("halted")

    def test_a_keyed_store_refuses_a_recomputed_digest(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With a key, a forger who rewrites the state and its SHA-256 digest is refused; so
        is a store opened with another key, and a key shorter than 32 bytes."""
        monkeypatch.setenv(SESSION_KEY_ENV, KEY)
        db = tmp_path / "s.db"
        with SqliteSessionStore(db, hmac_key_env=SESSION_KEY_ENV) as store:
            halt(Engine.default(store=store).session("s"))
            (text,) = store._connect().execute("SELECT state FROM sessions").fetchone()
            assert store.load("s")["halt"] is not None  # type: ignore[index]
        forged = json.dumps({**json.loads(text), "halt": None}, separators=(",", ":"))
        from prunewarden.session._seal import seal_state  # noqa: PLC0415 - the forger's tool

        edit(db, "UPDATE sessions SET state = ?, seal = ?", forged, seal_state("s", forged, None))
        with (
            SqliteSessionStore(db, hmac_key_env=SESSION_KEY_ENV) as store,
            pytest.raises(SessionIntegrityError, match="not sealed with the key"),
        ):
            store.load("s")
        monkeypatch.setenv(SESSION_KEY_ENV, "x" * 32)
        edit(db, "UPDATE sessions SET seal = ?", seal_state("s", forged, KEY.encode()))
        with (
            SqliteSessionStore(db, hmac_key_env=SESSION_KEY_ENV) as store,
            pytest.raises(SessionIntegrityError, match="does not match"),
        ):
            store.load("s")
        monkeypatch.setenv(SESSION_KEY_ENV, "short")
        with pytest.raises(ValueError, match="at least 32"):
            SqliteSessionStore(db, hmac_key_env=SESSION_KEY_ENV)

    def test_a_database_from_before_seals_is_sealed_once(self, tmp_path: Path) -> None:
        """Rows written before states were sealed are sealed as they are when the store first
        opens the file; a row that loses its seal later is refused."""
        db = tmp_path / "old.db"
        with SqliteSessionStore(tmp_path / "new.db") as store:
            state = halt(Engine.default(store=store).session("s")).state()
        with sqlite3.connect(db) as connection:
            connection.execute(
                "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, state TEXT NOT NULL, "
                "updated_at TEXT NOT NULL)"
            )
            connection.execute(
                "INSERT INTO sessions VALUES ('s', ?, '2026-01-01T00:00:00Z')", (json.dumps(state),)
            )
        with SqliteSessionStore(db) as store:
            assert Engine.default(store=store).session("s").halted
        edit(db, "UPDATE sessions SET seal = NULL")
        with SqliteSessionStore(db) as store, pytest.raises(SessionIntegrityError):
            store.load("s")


class FlakyStore(SqliteSessionStore):
    """A SQLite store whose saves fail while ``failing`` is set (as a dropped connection)."""

    failing = False

    def save(self, session_id: str, state: Any) -> None:
        if self.failing:
            raise ConnectionError(errno.ECONNRESET, "connection reset")
        super().save(session_id, state)


class TestHaltNeverLost:
    def test_a_restore_does_not_lift_a_halt_whose_save_failed(self, tmp_path: Path) -> None:
        """The halting cycle's save fails: the call raises SessionStoreError with the
        decision's id; a session opened again from the (older) stored state is still halted,
        as is a stateless call; once the store works, the halt is saved."""
        with FlakyStore(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            session = engine.session("s")
            for cycle in range(1, 5):
                session.observe_cycle(narrowing(cycle), ["task"])
            store.failing = True
            with pytest.raises(SessionStoreError) as raised:
                session.observe_cycle(narrowing(5), ["task"])
            assert raised.value.decision_ids == (session.halt.decision_id,)  # type: ignore[union-attr]
            assert store.load("s")["halt"] is None  # type: ignore[index]
            again = engine.session("s")  # each call opens the session afresh (Redis)
            assert again.halted
            assert again.authorize(SEGMENT, 0.1, 0.1).codes == ("session_state_unavailable",)
            store.failing = False
            assert again.authorize(SEGMENT, 0.1, 0.1).codes == ("pruning_halted",)
            assert engine.authorize_eviction(SEGMENT, 0.1, 0.1, session_id="s").codes == (
                "pruning_halted",
            )
            assert store.load("s")["halt"] is not None  # type: ignore[index]

    def test_a_later_passing_cycle_stored_elsewhere_lifts_the_held_halt(
        self, tmp_path: Path
    ) -> None:
        """A halt held after its save failed gives way to a stored state in which a later
        cycle passed the guard (another replica went on), not to an older one."""
        with FlakyStore(tmp_path / "s.db") as store:
            engine = Engine.default(store=store)
            session = engine.session("s")
            for cycle in range(1, 5):
                session.observe_cycle(narrowing(cycle), ["task"])
            store.failing = True
            with pytest.raises(SessionStoreError):
                session.observe_cycle(narrowing(5), ["task"])
            store.failing = False
            elsewhere = Engine.default(store=store).session("s")
            for cycle in (5, 6):
                elsewhere.observe_cycle(narrowing(1), ["task"], cycle=cycle)
            assert not elsewhere.halted
            assert not engine.session("s").halted

    def test_a_halt_on_a_full_filesystem_is_not_answered_as_saved(self, tmp_path: Path) -> None:
        """SQLite on a real filesystem that fills up during the halting cycle: the cycle
        raises SessionStoreError, evictions are refused; once space is back the halt is
        saved, and a new process on the file is halted."""
        with small_filesystem(tmp_path / "small") as small:
            db = small / "s.db"
            with SqliteSessionStore(db) as store:
                engine = Engine.default(store=store)
                session = engine.session("s")
                for cycle in range(1, 5):
                    session.observe_cycle(narrowing(cycle), ["task"])
                filler = fill(small)
                with pytest.raises(SessionStoreError) as raised:
                    session.observe_cycle(narrowing(5), ["task"])
                assert "full" in raised.value.error
                refused = session.authorize(SEGMENT, 0.1, 0.1)
                assert refused.codes == ("session_state_unavailable",)
                filler.unlink()
                assert session.authorize(SEGMENT, 0.1, 0.1).codes == ("pruning_halted",)
            with SqliteSessionStore(db) as store:
                assert Engine.default(store=store).session("s").halted
