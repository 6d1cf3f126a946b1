"""What the command line reads: regular files and a bounded standard input, allowed base
folders, and located errors for what Python cannot carry."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from _support.blocking import call_guarded, make_fifo, run_bounded
from prunewarden.cli._main import run
from prunewarden.limits import MAX_INPUT_CHARS

ROOT = Path(__file__).resolve().parents[2]
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class _EndlessInput(io.TextIOBase):
    """Standard input that never ends: reading it all would never return."""

    def read(self, size: int | None = -1) -> str:
        if size is None or size < 0:
            msg = "read to the end of an endless stream"
            raise MemoryError(msg)
        return "[" * size

    def readable(self) -> bool:
        return True


class TestInputFiles:
    def test_a_device_is_refused_unread(self) -> None:
        """evaluate /dev/zero exits 2 with one located line, at once (run in a child whose
        memory is capped: reading the device would never end)."""
        code = "import sys; from prunewarden.cli import main; sys.argv[0] = 'p'; main()"
        done = run_bounded(code, "evaluate", "/dev/zero")
        assert (done.returncode, done.stdout) == (2, "")
        reason = "cannot read: a character device, not a regular file: only regular files are read"
        assert done.stderr == f"/dev/zero: $: {reason}\n"

    def test_a_fifo_is_refused_without_blocking(self, tmp_path: Path) -> None:
        """A FIFO as the input document exits 2 instead of waiting for a writer."""
        fifo = make_fifo(tmp_path / "input.json")
        code, _, err = call_guarded(lambda: cli("evaluate", str(fifo)), fifo)
        assert code == 2
        assert "a FIFO, not a regular file" in err

    def test_endless_standard_input_is_read_to_the_limit(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Standard input is read one character past the limit, then refused."""
        monkeypatch.setattr("sys.stdin", _EndlessInput())
        code, out, err = cli("evaluate", "-")
        assert (code, out) == (2, "")
        assert err == (
            f"<stdin>: $: document is larger than the limit of {MAX_INPUT_CHARS} characters\n"
        )

    def test_a_fifo_policy_exits_3(self, tmp_path: Path) -> None:
        """validate on a FIFO reports it as an unreadable policy."""
        fifo = make_fifo(tmp_path / "policy.yaml")
        code, _, err = call_guarded(lambda: cli("validate", str(fifo)), fifo)
        assert code == 3
        assert "a FIFO, not a regular file" in err


class TestLocatedInputErrors:
    def test_an_integer_too_long_to_read_is_located(self, tmp_path: Path) -> None:
        """An input integer of more than 4300 digits is a located usage error, not exit 70."""
        path = tmp_path / "input.json"
        path.write_text('{"x": ' + "9" * 5000 + ', "check": "eviction"}', encoding="utf-8")
        code, _, err = cli("evaluate", str(path))
        assert code == 2
        assert err == f"{path}:1:7: $.x: an integer of more than 4300 digits\n"

    def test_a_lone_surrogate_id_is_refused_before_a_decision(self, tmp_path: Path) -> None:
        """An id with a lone surrogate is a located error; nothing is decided or logged."""
        document = {**EVICTION, "segment": {**EVICTION["segment"], "id": "s\ud800"}}
        path = tmp_path / "input.json"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        log = tmp_path / "audit.jsonl"
        code, out, err = cli("evaluate", "--audit-log", str(log), str(path))
        assert (code, out) == (2, "")
        assert err == f"{path}:4:11: $.segment.id: holds a lone surrogate (not Unicode text)\n"
        assert not log.exists() or '"kind":"decision"' not in log.read_text(encoding="utf-8")


class TestBaseFolders:
    @pytest.fixture
    def overlay(self, tmp_path: Path) -> Path:
        shared = tmp_path / "shared"
        shared.mkdir()
        (shared / "org.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: org, version: 1.0.0}\n"
        )
        team = tmp_path / "team"
        team.mkdir()
        path = team / "top.yaml"
        path.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nextends: ../shared/org.yaml\n"
            "metadata: {name: top, version: 1.0.0}\n"
        )
        return path

    def test_a_shared_base_needs_to_be_allowed(self, overlay: Path) -> None:
        """Without --base-dir the shared base is refused at the extends line (exit 3)."""
        code, _, err = cli("validate", str(overlay))
        assert code == 3
        assert err.startswith(f"{overlay}:3:10: $.extends: ../shared/org.yaml: outside the folder")

    def test_base_dir_allows_it(self, overlay: Path) -> None:
        """--base-dir (before the command) names a folder of shared bases."""
        shared = overlay.parent.parent / "shared"
        code, out, _ = cli("--base-dir", str(shared), "validate", str(overlay))
        assert code == 0
        assert out.startswith(f"{overlay}: valid (top@1.0.0")

    def test_the_environment_allows_it(self, overlay: Path, monkeypatch: Any) -> None:
        """PRUNEWARDEN_BASE_DIRS names folders of shared bases, separated like PATH."""
        shared = overlay.parent.parent / "shared"
        monkeypatch.setenv("PRUNEWARDEN_BASE_DIRS", f"/nonexistent:{shared}")
        code, _, _ = cli("policy", "show", str(overlay))
        assert code == 0

    def test_base_dir_reaches_policy_test_suites(self, overlay: Path) -> None:
        """prunewarden --base-dir DIR test: a suite's policy may extend a shared base."""
        suite = overlay.parent / "top_test.yaml"
        document = json.dumps({**EVICTION, "segment": {**EVICTION["segment"]}})
        suite.write_text(
            "apiVersion: prunewarden/v1\nkind: TestSuite\nname: top\npolicy: top.yaml\n"
            f"cases:\n  - name: allowed\n    input: {document}\n    expect: {{outcome: allow}}\n"
        )
        assert cli("test", str(suite))[0] != 0
        shared = overlay.parent.parent / "shared"
        code, _, err = cli("--base-dir", str(shared), "test", str(suite))
        assert code == 0, err
