"""A lock file that cannot be read or written is one located error, and nothing is half
written (docs/deployments.md)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from prunewarden import PolicyError
from prunewarden.policy._lock import LOCK_FILENAME, read, write


def messages(info: pytest.ExceptionInfo[PolicyError]) -> list[str]:
    return [str(problem) for problem in info.value.problems]


class TestReading:
    def test_a_lock_file_that_is_not_utf8_is_one_located_error(self, tmp_path: Path) -> None:
        """Bytes that are not UTF-8 are refused at the file, naming the byte."""
        path = tmp_path / LOCK_FILENAME
        path.write_bytes(b"base@1.0.0: sha256:\xff\n")
        with pytest.raises(PolicyError) as info:
            read(path)
        assert messages(info) == [f"{path}: $: not UTF-8 text (byte 19)"]

    def test_a_missing_lock_file_cannot_be_read(self, tmp_path: Path) -> None:
        """A lock file that is not there is refused at its name."""
        path = tmp_path / LOCK_FILENAME
        with pytest.raises(PolicyError) as info:
            read(path)
        assert messages(info) == [f"{path}: $: cannot read: No such file or directory"]


class TestWriting:
    def test_a_new_lock_file_is_readable_by_all(self, tmp_path: Path) -> None:
        """A lock file written for the first time has mode 644 (reviewers and servers read it)."""
        path = tmp_path / LOCK_FILENAME
        write(path, {"base@1.0.0": "sha256:" + "0" * 64})
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        assert read(path).entries == {"base@1.0.0": "sha256:" + "0" * 64}

    def test_a_folder_that_cannot_hold_it_is_one_located_error(self, tmp_path: Path) -> None:
        """Where no file can be created the write is refused at the lock file's name."""
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("", encoding="utf-8")
        path = blocker / LOCK_FILENAME
        with pytest.raises(PolicyError) as info:
            write(path, {"base@1.0.0": "sha256:" + "0" * 64})
        assert messages(info) == [f"{path}: $: cannot write: Not a directory"]

    def test_a_failed_replace_leaves_no_temporary_file(self, tmp_path: Path) -> None:
        """When the finished file cannot take the lock file's place (a folder is there), the
        write is refused and its temporary file removed."""
        path = tmp_path / LOCK_FILENAME
        path.mkdir()
        (path / "keep").write_text("", encoding="utf-8")
        with pytest.raises(PolicyError) as info:
            write(path, {"base@1.0.0": "sha256:" + "0" * 64})
        assert messages(info)[0].startswith(f"{path}: $: cannot write: ")
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILENAME]


class TestWholeFileProblems:
    """A lock file's read or write error is about the whole file: it carries no line or column
    (0, 0), so an editor does not jump to a line that has nothing to do with it."""

    def test_an_unreadable_lock_file_has_no_location_inside_it(self, tmp_path: Path) -> None:
        """cannot read: file, line 0, column 0, path $."""
        path = tmp_path / LOCK_FILENAME
        with pytest.raises(PolicyError) as info:
            read(path)
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.column, problem.path) == (str(path), 0, 0, "$")

    def test_a_lock_file_not_utf8_has_no_location_inside_it(self, tmp_path: Path) -> None:
        """not UTF-8: file, line 0, column 0, path $."""
        path = tmp_path / LOCK_FILENAME
        path.write_bytes(b"\xff\n")
        with pytest.raises(PolicyError) as info:
            read(path)
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.column, problem.path) == (str(path), 0, 0, "$")

    def test_a_lock_file_that_cannot_be_created_has_no_location(self, tmp_path: Path) -> None:
        """cannot write (no temporary file): file, line 0, column 0, path $."""
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("", encoding="utf-8")
        path = blocker / LOCK_FILENAME
        with pytest.raises(PolicyError) as info:
            write(path, {"base@1.0.0": "sha256:" + "0" * 64})
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.column, problem.path) == (str(path), 0, 0, "$")

    def test_a_lock_file_that_cannot_be_replaced_has_no_location(self, tmp_path: Path) -> None:
        """cannot write (replacing it failed): file, line 0, column 0, path $."""
        path = tmp_path / LOCK_FILENAME
        path.mkdir()
        (path / "keep").write_text("", encoding="utf-8")
        with pytest.raises(PolicyError) as info:
            write(path, {"base@1.0.0": "sha256:" + "0" * 64})
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.column, problem.path) == (str(path), 0, 0, "$")


class TestInterruptedWrite:
    def test_an_interrupt_while_writing_propagates_and_keeps_the_old_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Ctrl-C while the new file is prepared is not swallowed: it propagates, the old lock
        file is unchanged and no temporary file is left."""
        path = tmp_path / LOCK_FILENAME
        write(path, {"base@1.0.0": "sha256:" + "0" * 64})
        before = path.read_bytes()

        def interrupted(self: Path, mode: int) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(Path, "chmod", interrupted)
        with pytest.raises(KeyboardInterrupt):
            write(path, {"base@1.0.0": "sha256:" + "0" * 64, "base@1.0.1": "sha256:" + "1" * 64})
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILENAME]
