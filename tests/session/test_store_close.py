"""Closing a SQLite session store: its connection is closed, by `close()` or a `with` block."""

from __future__ import annotations

from pathlib import Path

from prunewarden import Engine, SqliteSessionStore


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
