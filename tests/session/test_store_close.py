"""A SQLite session store's life: closing it (by `close()` or a `with` block), the call
deadlines its saves obey, and its settings."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prunewarden import Engine, SessionStoreError, SqliteSessionStore
from prunewarden.session import _store, save_deadline
from prunewarden.session._store import DeadlinePassedError, call_deadline, check_deadline


def write_one(store: SqliteSessionStore) -> None:
    engine = Engine.default()
    session = engine.session("a", store=store)
    session.observe_cycle({"task": 0.9, "other": 0.2}, ["task"])


class TestClosing:
    def test_a_with_block_closes_the_database(self, tmp_path: Path) -> None:
        """Leaving a `with` block closes the store's connection: the last connection to a WAL
        database closing checkpoints it and removes its write-ahead log."""
        path = tmp_path / "sessions.db"
        with SqliteSessionStore(path) as store:
            write_one(store)
            assert Path(f"{path}-wal").exists()
        assert not Path(f"{path}-wal").exists()

    def test_close_closes_the_database(self, tmp_path: Path) -> None:
        """`close()` closes the connection the same way."""
        path = tmp_path / "sessions.db"
        store = SqliteSessionStore(path)
        write_one(store)
        store.close()
        assert not Path(f"{path}-wal").exists()

    def test_a_closed_store_reopens_on_its_next_call(self, tmp_path: Path) -> None:
        """A store used after `close()` opens the file again and finds what it saved."""
        path = tmp_path / "sessions.db"
        store = SqliteSessionStore(path)
        write_one(store)
        saved = store.load("a")
        store.close()
        store.close()
        assert saved is not None
        assert store.load("a") == saved
        store.close()


class TestSaveDeadlines:
    def test_a_save_past_the_calls_deadline_is_not_made(self, tmp_path: Path) -> None:
        """Inside `save_deadline` with a deadline passed, a session's change is refused and the
        store keeps the state saved before."""
        store = SqliteSessionStore(tmp_path / "sessions.db")
        session = Engine.default().session("a", store=store)
        session.observe_cycle({"task": 0.9, "other": 0.2}, ["task"])
        saved = store.load("a")
        with save_deadline(time.monotonic() - 1), pytest.raises(SessionStoreError):
            session.observe_cycle({"task": 0.9, "other": 0.3}, ["task"])
        assert store.load("a") == saved
        assert session.unsaved is not None
        assert session.unsaved.startswith("DeadlinePassedError")
        store.close()

    def test_before_the_deadline_and_after_the_block_saves_are_made(self, tmp_path: Path) -> None:
        """A deadline still ahead lets the save through, and leaving the block lifts it."""
        store = SqliteSessionStore(tmp_path / "sessions.db")
        session = Engine.default().session("a", store=store)
        with save_deadline(time.monotonic() + 3600):
            session.observe_cycle({"task": 0.9, "other": 0.2}, ["task"])
        with save_deadline(time.monotonic() - 1):
            pass
        session.observe_cycle({"task": 0.9, "other": 0.3}, ["task"])
        state = store.load("a")
        assert state is not None
        assert state["cycles_seen"] == 2
        assert session.unsaved is None
        store.close()

    def test_the_deadline_itself_is_not_past(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Saves are refused once the clock passes the deadline: at the deadline, not yet."""
        monkeypatch.setattr(_store, "time", SimpleNamespace(monotonic=lambda: 500.0))
        with save_deadline(500.0):
            check_deadline()
        with save_deadline(499.5), pytest.raises(DeadlinePassedError):
            check_deadline()

    def test_blocks_nest(self) -> None:
        """An inner block's deadline holds inside it; the outer one is back after it."""
        with save_deadline(5.0):
            with save_deadline(7.0):
                assert call_deadline() == 7.0
            assert call_deadline() == 5.0
        assert call_deadline() is None

    def test_a_store_refuses_an_unknown_synchronous_mode(self, tmp_path: Path) -> None:
        """`synchronous` is FULL or NORMAL; anything else is refused before a file is made."""
        with pytest.raises(ValueError, match="synchronous must be FULL or NORMAL, not 'OFF'"):
            SqliteSessionStore(tmp_path / "sessions.db", synchronous="OFF")  # type: ignore[arg-type]
        assert not (tmp_path / "sessions.db").exists()

    def test_a_store_creates_its_file_when_made(self, tmp_path: Path) -> None:
        """The database file is created (with its table) when the store is made, not at its
        first save: a path that cannot hold one fails there."""
        path = tmp_path / "sessions.db"
        store = SqliteSessionStore(path)
        with sqlite3.connect(path) as connection:
            tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
        store.close()
        assert ("sessions",) in tables
        with pytest.raises(sqlite3.OperationalError):
            SqliteSessionStore(tmp_path / "missing" / "sessions.db")


class TestThreads:
    def test_a_store_made_in_one_thread_serves_another(self, tmp_path: Path) -> None:
        """A store is shared by the threads of its process: one made in this thread saves and
        loads from another."""
        store = SqliteSessionStore(tmp_path / "sessions.db")
        errors: list[BaseException] = []

        def work() -> None:
            try:
                store.save("a", {"anything": 1})
                assert store.load("a") == {"anything": 1}
            except BaseException as exc:  # noqa: BLE001 - reported to the test's thread
                errors.append(exc)

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        store.close()
        assert errors == []


def old_database(path: Path, session_id: str | None) -> None:
    """A database written before states were sealed, with one row."""
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, state TEXT NOT NULL, "
            "updated_at TEXT NOT NULL)"
        )
        connection.execute(
            "INSERT INTO sessions VALUES (?, '{}', '2026-01-01T00:00:00Z')", (session_id,)
        )
    connection.close()


def seal_columns(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as connection:
        names = [row[1] for row in connection.execute("PRAGMA table_info(sessions)")]
        rows = connection.execute("SELECT * FROM sessions").fetchall() if "seal" in names else []
    connection.close()
    return [tuple(names), *rows]


class TestSealingAnOldDatabase:
    def test_the_seals_are_committed_when_the_store_opens_it(self, tmp_path: Path) -> None:
        """A store opening a database from before seals seals its rows and commits at once:
        another connection sees them while the store is still open."""
        path = tmp_path / "old.db"
        old_database(path, "s")
        store = SqliteSessionStore(path)
        names, *rows = seal_columns(path)
        store.close()
        assert "seal" in names
        ((_, _, _, seal),) = rows
        assert str(seal).startswith("sha256:")

    def test_a_failed_sealing_changes_nothing(self, tmp_path: Path) -> None:
        """When a row cannot be sealed the store is not made, and the file keeps its old form
        (no half-sealed database)."""
        path = tmp_path / "old.db"
        old_database(path, None)
        with pytest.raises(AttributeError):
            SqliteSessionStore(path)
        (names,) = seal_columns(path)
        assert "seal" not in names

    def test_opening_a_sealed_database_does_not_wait_for_a_writer(self, tmp_path: Path) -> None:
        """A store opening a database that is already sealed only reads it: another process's
        open write transaction does not hold it up."""
        path = tmp_path / "sessions.db"
        SqliteSessionStore(path).close()
        writer = sqlite3.connect(path, timeout=0, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        try:
            store = SqliteSessionStore(path)
            assert store.load("a") is None
            store.close()
        finally:
            writer.rollback()
            writer.close()
