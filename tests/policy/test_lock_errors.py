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
