"""The governed memory tool trusts no claim inside the data: a front matter saying ``kind:
tombstone`` outside ``/memories/tombstones/`` is the model's word, a pinned memory's rewrite is
fidelity-checked whatever it claims to be, and a folder swapped for a link after an edit was
judged leads no write outside the directory (a real swap, made between judgment and write)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from prunewarden import Engine, parse_policy
from prunewarden.audit import AuditLog
from prunewarden.integrations._memory_edits import Change
from prunewarden.integrations.memory import GuardedMemoryTool

ALLERGY = "/memories/allergy.md"
NEGATION = "---\nkind: negation\n---\nThe user must never eat nuts.\n"
LIFTED = "---\nkind: {kind}\n---\nThe user may eat nuts.\n"


def _policy(spec: str) -> Any:
    text = (
        "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: memory, version: 1.0.0}\n"
        f"spec: {spec}\n"
    )
    return parse_policy(text, "memory.yaml")


def _tool(tmp_path: Path, spec: str, **options: Any) -> GuardedMemoryTool:
    engine = Engine(_policy(spec), audit=AuditLog(tmp_path / "audit.jsonl"))
    return GuardedMemoryTool(tmp_path / "memories", engine, **options)


def _call(tool: GuardedMemoryTool, **command: Any) -> str:
    result = tool.call(command)
    assert isinstance(result, str)
    return result


def _refusal(tool: GuardedMemoryTool, **command: Any) -> str:
    with pytest.raises(ToolError) as caught:
        tool.call(command)
    return str(caught.value)


def _age(tmp_path: Path, memory_path: str, seconds: int) -> None:
    """Set a memory's mtime ``seconds`` before now: tombstone order without racing the clock."""
    place = tmp_path / "memories" / memory_path.removeprefix("/memories/")
    stamp = time.time_ns() - seconds * 1_000_000_000
    os.utime(place, ns=(stamp, stamp))


def _tombstone(tool: GuardedMemoryTool, name: str, *paths: str) -> None:
    text = f"---\ntombstone_for: [{', '.join(paths)}]\n---\nWhat they held.\n"
    _call(tool, command="create", path=f"/memories/tombstones/{name}", file_text=text)


class TestTombstoneClaims:
    @pytest.mark.parametrize("kind", ["tombstone", "memory"])
    def test_a_rewrite_claiming_to_be_a_tombstone_is_fidelity_checked(
        self, tmp_path: Path, kind: str
    ) -> None:
        """A pinned memory rewritten (with a tombstone recording it) to text that drops its
        negation is refused by the fidelity check, whether the new text claims ``kind:
        tombstone`` or not: outside tombstones/ that claim is no tombstone."""
        tool = _tool(tmp_path, "{fidelity: {mode: enforce}}")
        _call(tool, command="create", path=ALLERGY, file_text=NEGATION)
        _age(tmp_path, ALLERGY, 60)
        _tombstone(tool, "allergy.md", ALLERGY)
        lifted = LIFTED.format(kind=kind)
        _refusal(tool, command="create", path=ALLERGY, file_text=lifted)
        assert tool.last_decision is not None
        assert "negation_lost" in tool.last_decision.codes
        text = (tmp_path / "memories" / "allergy.md").read_text(encoding="utf-8")
        assert text == NEGATION

    def test_a_memory_claiming_to_be_a_tombstone_is_a_memory(self, tmp_path: Path) -> None:
        """A memory outside tombstones/ whose front matter says ``kind: tombstone`` is judged as
        a memory: its rewrite is an ordinary one, never a fold of a tombstone."""
        tool = _tool(tmp_path, "{fidelity: {mode: enforce}}")
        claim = "---\nkind: tombstone\ntombstone_for: [/memories/allergy.md]\n---\nnote\n"
        _call(tool, command="create", path="/memories/claim.md", file_text=claim)
        transition = tool._transition(
            "create", tool.directory.snapshot(), _noop_change({"/memories/claim.md": claim})
        )
        assert [s["kind"] for s in transition["after"]] == ["memory"]
        assert transition["tombstones"] == []

    def test_kinds_cannot_name_tombstones(self, tmp_path: Path) -> None:
        """A path pattern mapped to ``tombstone`` is refused: tombstones are a folder, not a
        kind the harness hands out."""
        engine = Engine(_policy("{}"), audit=AuditLog(tmp_path / "audit.jsonl"))
        with pytest.raises(ValueError, match="tombstone"):
            GuardedMemoryTool(tmp_path / "memories", engine, kinds={"/memories/x/*": "tombstone"})
        assert not (tmp_path / "memories").exists()

    def test_a_pinned_tombstone_rewritten_is_fidelity_checked(self, tmp_path: Path) -> None:
        """Under a policy that pins tombstones, rewriting one (recorded by another) is judged
        as a derived memory, so the fidelity check sees the negation it drops."""
        spec = "{transition: {pinned_kinds: [tombstone]}, fidelity: {mode: enforce}}"
        tool = _tool(tmp_path, spec)
        rule = "/memories/tombstones/rule.md"
        text = "---\ntombstone_for: [/memories/old.md]\n---\nNever book red-eye flights.\n"
        _call(tool, command="create", path="/memories/old.md", file_text="old\n")
        _age(tmp_path, "/memories/old.md", 120)
        _call(tool, command="create", path=rule, file_text=text)
        _age(tmp_path, rule, 60)
        _tombstone(tool, "of-rule.md", rule)
        rewritten = text.replace("Never book", "Book")
        _refusal(tool, command="create", path=rule, file_text=rewritten)
        assert tool.last_decision is not None
        assert "negation_lost" in tool.last_decision.codes


def _noop_change(after: dict[str, str]) -> Change:
    return Change(after, lambda: None, "")


# --- a folder swapped for a link between judgment and write ---------------------------------


@pytest.fixture
def swapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[GuardedMemoryTool, Path, Callable[[str], None]]:
    """A tool over ``memories/`` holding ``notes/a.md`` and ``b.md``; ``arm(folder)`` makes the
    next judgment, once made, swap ``memories/<folder>`` for a link to ``outside/`` (which holds
    files of the same names), as another process could."""
    tool = _tool(tmp_path, "{transition: {require_tombstones: false}}")
    _call(tool, command="create", path="/memories/notes/a.md", file_text="ferry at 9\n")
    _call(tool, command="create", path="/memories/b.md", file_text="hotel\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("outside: ferry at 9\n", encoding="utf-8")
    judge = Engine.evaluate

    def arm(folder: str) -> None:
        def judged_then_swapped(engine: Engine, *args: Any, **kwargs: Any) -> Any:
            decision = judge(engine, *args, **kwargs)
            place = tmp_path / "memories" / folder
            place.rename(tmp_path / "moved-away")
            place.symlink_to(outside, target_is_directory=True)
            return decision

        monkeypatch.setattr(Engine, "evaluate", judged_then_swapped)

    return tool, outside, arm


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}


class TestSwappedForALink:
    @pytest.mark.parametrize(
        "command",
        [
            {"command": "create", "path": "/memories/notes/a.md", "file_text": "x\n"},
            {"command": "create", "path": "/memories/notes/new.md", "file_text": "x\n"},
            {
                "command": "str_replace",
                "path": "/memories/notes/a.md",
                "old_str": "9",
                "new_str": "8",
            },
            {
                "command": "insert",
                "path": "/memories/notes/a.md",
                "insert_line": 0,
                "insert_text": "x",
            },
            {"command": "delete", "path": "/memories/notes/a.md"},
            {"command": "rename", "old_path": "/memories/notes/a.md", "new_path": "/memories/c.md"},
            {"command": "rename", "old_path": "/memories/b.md", "new_path": "/memories/notes/b.md"},
        ],
        ids=["overwrite", "create", "str_replace", "insert", "delete", "rename-out", "rename-in"],
    )
    def test_no_write_goes_through_the_link(
        self, swapped: tuple[GuardedMemoryTool, Path, Callable[[str], None]], command: Any
    ) -> None:
        """The edit was allowed on the directory as it was; the write then meets the link and
        is refused (a tool error naming it), and nothing outside the directory changes."""
        tool, outside, arm = swapped
        before = _contents(outside)
        arm("notes")
        message = _refusal(tool, **command)
        assert tool.last_decision is not None
        assert tool.last_decision.outcome == "allow"
        assert "symbolic link" in message
        assert _contents(outside) == before
