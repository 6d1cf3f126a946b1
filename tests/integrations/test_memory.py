"""The governed memory tool: Anthropic's memory commands (the SDK's own types) judged as
transitions before they touch disk; pins, tombstones, confinement and failures, offline."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from prunewarden import AuditError, Engine, parse_policy
from prunewarden.audit import AuditLog
from prunewarden.integrations._memory_files import MemoryDirectory
from prunewarden.integrations.memory import (
    GuardedMemoryTool,
    manifest_digest,
    memory_edits,
    memory_manifest,
)

RULES = "/memories/core/rules.md"
NOTES = "/memories/notes.md"
TOMBSTONE = "/memories/tombstones/rules.md"
KINDS = {"/memories/core/*": "constraint"}


def _policy(transition: str) -> Any:
    text = (
        "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: memory, version: 1.0.0}\n"
        f"spec: {{transition: {transition}}}\n"
    )
    return parse_policy(text, "memory.yaml")


def _tool(tmp_path: Path, *, policy: Any = None, **options: Any) -> GuardedMemoryTool:
    audit = AuditLog(tmp_path / "audit.jsonl")
    engine = Engine(policy if policy is not None else Engine.default().policy, audit=audit)
    return GuardedMemoryTool(tmp_path / "memories", engine, **{"kinds": KINDS, **options})


def _call(tool: GuardedMemoryTool, **command: Any) -> str:
    result = tool.call(command)
    assert isinstance(result, str)
    return result


def _refusal(tool: GuardedMemoryTool, **command: Any) -> str:
    with pytest.raises(ToolError) as caught:
        tool.call(command)
    return str(caught.value)


def _seed(tool: GuardedMemoryTool) -> None:
    _call(tool, command="create", path=RULES, file_text="Never book red-eye flights.\n")
    _call(tool, command="create", path=NOTES, file_text="ferry at 9\nhotel booked\n")


def _tombstone(tool: GuardedMemoryTool, *paths: str) -> None:
    front = f"---\ntombstone_for: [{', '.join(paths)}]\n---\nRetired rules.\n"
    _call(tool, command="create", path=TOMBSTONE, file_text=front)


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    log = tmp_path / "audit.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    records = [json.loads(line) for line in lines]
    return [r for r in records if r.get("kind") == "decision"]


class _FailingStream(io.StringIO):
    """An audit stream that fails once told to, as a full disk does."""

    failing = False

    def write(self, text: str) -> int:
        if self.failing:
            raise OSError(28, "No space left on device")
        return super().write(text)


class TestCommands:
    def test_the_tool_is_the_sdks_memory_tool(self, tmp_path: Path) -> None:
        """The backend is a BetaAbstractMemoryTool declaring the memory_20250818 tool."""
        tool = _tool(tmp_path)
        assert isinstance(tool, BetaAbstractMemoryTool)
        assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}

    def test_edits_write_what_the_commands_say(self, tmp_path: Path) -> None:
        """create, str_replace, insert and rename leave the files the commands describe."""
        tool = _tool(tmp_path)
        _seed(tool)
        _call(tool, command="str_replace", path=NOTES, old_str="ferry at 9", new_str="ferry at 10")
        _call(tool, command="insert", path=NOTES, insert_line=1, insert_text="bring passports\n")
        _call(tool, command="rename", old_path=NOTES, new_path="/memories/trip/notes.md")
        assert memory_manifest(tmp_path / "memories").keys() == {RULES, "/memories/trip/notes.md"}
        text = (tmp_path / "memories" / "trip" / "notes.md").read_text(encoding="utf-8")
        assert text == "ferry at 10\nbring passports\nhotel booked\n"

    def test_typed_commands_run_through_execute(self, tmp_path: Path) -> None:
        """The SDK's command models are executed as its runner executes them."""
        tool = _tool(tmp_path)
        tool.execute(
            BetaMemoryTool20250818CreateCommand(command="create", path=NOTES, file_text="a\n")
        )
        shown = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path=NOTES))
        assert shown == f"Here's the content of {NOTES} with line numbers:\n     1\ta\n     2\t"
        listing = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories"))
        assert isinstance(listing, str)
        assert listing.splitlines()[1:] == ["-\t/memories", f"2B\t{NOTES}"]

    def test_view_range_selects_lines(self, tmp_path: Path) -> None:
        """view_range [2, -1] shows the second line to the end."""
        tool = _tool(tmp_path)
        _seed(tool)
        shown = _call(tool, command="view", path=NOTES, view_range=[2, -1])
        assert shown.splitlines()[1:] == ["     2\thotel booked", "     3\t"]

    def test_a_command_the_directory_cannot_take_is_a_tool_error(self, tmp_path: Path) -> None:
        """A missing file, an old_str not found once, an occupied destination: tool errors."""
        tool = _tool(tmp_path)
        _seed(tool)
        assert "does not exist" in _refusal(tool, command="view", path="/memories/none.md")
        assert "exactly once" in _refusal(
            tool, command="str_replace", path=NOTES, old_str="zzz", new_str="y"
        )
        assert "rename does not replace" in _refusal(
            tool, command="rename", old_path=NOTES, new_path=RULES
        )
        assert "is inside /memories/notes.md, which is a file" in _refusal(
            tool, command="create", path=NOTES + "/x.md", file_text="x"
        )
        assert "outside [0, 2]" in _refusal(
            tool, command="insert", path=NOTES, insert_line=7, insert_text="x"
        )
        assert len(_records(tmp_path)) == 2  # none of them is an edit: nothing judged


class TestPinnedMemories:
    def test_deleting_a_pinned_memory_is_refused_and_names_the_tombstone(
        self, tmp_path: Path
    ) -> None:
        """A pinned memory's delete is refused before disk; the error says how to record it."""
        tool = _tool(tmp_path)
        _seed(tool)
        before = memory_manifest(tmp_path / "memories")
        message = _refusal(tool, command="delete", path=RULES)
        assert memory_manifest(tmp_path / "memories") == before
        assert tool.last_decision is not None
        assert tool.last_decision.codes == ("pinned_removed", "no_tombstone")
        assert tool.last_decision.restore == (RULES,)
        assert "nothing was changed" in message
        assert f"tombstone_for: [{RULES}]" in message
        assert "/memories/tombstones/" in message

    def test_a_tombstoned_pinned_memory_is_deleted(self, tmp_path: Path) -> None:
        """With a tombstone naming it written first, the delete is allowed and made."""
        tool = _tool(tmp_path)
        _seed(tool)
        _tombstone(tool, RULES)
        assert _call(tool, command="delete", path=RULES) == f"Successfully deleted {RULES}"
        assert RULES not in memory_manifest(tmp_path / "memories")
        subject = _records(tmp_path)[-1]["subject"]["transition"]
        assert subject["removed"] == [RULES]
        assert subject["tombstoned"] == [RULES]
        assert subject["applied_by"] == "anthropic.memory.delete"

    def test_rewriting_a_pinned_memory_is_a_derived_segment(self, tmp_path: Path) -> None:
        """str_replace on a pinned memory folds it into a derived segment: refused without a
        tombstone (pinned_removed), allowed with one."""
        tool = _tool(tmp_path)
        _seed(tool)
        _refusal(tool, command="str_replace", path=RULES, old_str="Never", new_str="Always")
        assert tool.last_decision is not None
        assert tool.last_decision.codes == ("pinned_removed",)
        _tombstone(tool, RULES)
        _call(tool, command="str_replace", path=RULES, old_str="Never", new_str="Always")
        subject = _records(tmp_path)[-1]["subject"]["transition"]
        assert subject["folded"] == [RULES]
        assert len(subject["summaries"]) == 1
        assert subject["summaries"][0].startswith(RULES + "@")

    def test_overwriting_and_renaming_a_pinned_memory_are_refused(self, tmp_path: Path) -> None:
        """create over a pinned memory and a rename of it need a tombstone too."""
        tool = _tool(tmp_path)
        _seed(tool)
        _refusal(tool, command="create", path=RULES, file_text="anything goes\n")
        _refusal(tool, command="rename", old_path=RULES, new_path="/memories/old.md")
        assert [r["outcome"] for r in _records(tmp_path)[-2:]] == ["deny", "deny"]
        assert (tmp_path / "memories" / "core" / "rules.md").exists()

    def test_front_matter_kind_pins_a_memory(self, tmp_path: Path) -> None:
        """A memory whose front matter says kind: negation is pinned by the default policy."""
        tool = _tool(tmp_path)
        path = "/memories/allergies.md"
        _call(tool, command="create", path=path, file_text="---\nkind: negation\n---\nno nuts\n")
        _refusal(tool, command="str_replace", path=path, old_str="no nuts", new_str="nuts ok")
        assert tool.last_decision is not None
        assert tool.last_decision.codes == ("pinned_removed",)

    def test_a_path_pattern_outranks_front_matter(self, tmp_path: Path) -> None:
        """Front matter cannot unpin a memory under a pinned path pattern."""
        tool = _tool(tmp_path)
        _call(tool, command="create", path=RULES, file_text="---\nkind: note\n---\nno red-eye\n")
        _refusal(tool, command="delete", path=RULES)
        assert tool.last_decision is not None
        assert "pinned_removed" in tool.last_decision.codes

    def test_unpinned_edits_follow_the_policy(self, tmp_path: Path) -> None:
        """An unpinned delete needs a tombstone only where the policy requires tombstones."""
        strict = _tool(tmp_path / "strict")
        _seed(strict)
        _refusal(strict, command="delete", path=NOTES)
        assert strict.last_decision is not None
        assert strict.last_decision.codes == ("no_tombstone",)
        lenient = _tool(tmp_path / "lenient", policy=_policy("{require_tombstones: false}"))
        _seed(lenient)
        _call(lenient, command="delete", path=NOTES)
        _refusal(lenient, command="delete", path=RULES)  # pinned all the same

    def test_a_tombstone_without_tombstone_for_is_refused(self, tmp_path: Path) -> None:
        """A file under tombstones/ must name what it records, in front matter."""
        tool = _tool(tmp_path)
        message = _refusal(tool, command="create", path=TOMBSTONE, file_text="gone\n")
        assert "tombstone_for" in message
        assert not (tmp_path / "memories" / "tombstones").exists()

    def test_a_folder_delete_removes_every_memory_in_it(self, tmp_path: Path) -> None:
        """Deleting a folder removes each memory under it, each judged (a pinned one refuses)."""
        tool = _tool(tmp_path, policy=_policy("{require_tombstones: false}"))
        _seed(tool)
        _refusal(tool, command="delete", path="/memories/core")
        _tombstone(tool, RULES)
        _call(tool, command="delete", path="/memories/core")
        assert not (tmp_path / "memories" / "core").exists()


def _age(tmp_path: Path, memory_path: str, seconds: int) -> None:
    """Set a memory's mtime ``seconds`` before now: tombstone order without racing the clock."""
    place = tmp_path / "memories" / memory_path.removeprefix("/memories/")
    stamp = time.time_ns() - seconds * 1_000_000_000
    os.utime(place, ns=(stamp, stamp))


class TestTombstones:
    def test_a_tombstone_does_not_stand_for_a_later_memory(self, tmp_path: Path) -> None:
        """A memory written at a tombstoned path after the tombstone needs a new one."""
        tool = _tool(tmp_path)
        _seed(tool)
        _tombstone(tool, RULES)
        _call(tool, command="delete", path=RULES)
        _call(tool, command="create", path=RULES, file_text="Window seats only.\n")
        _age(tmp_path, TOMBSTONE, 60)
        _refusal(tool, command="delete", path=RULES)
        assert tool.last_decision is not None
        assert "pinned_removed" in tool.last_decision.codes

    def test_each_rewrite_of_a_pinned_memory_needs_a_fresh_tombstone(self, tmp_path: Path) -> None:
        """A tombstone allows one rewrite: the rewritten memory is newer than it."""
        tool = _tool(tmp_path)
        _seed(tool)
        _age(tmp_path, RULES, 120)
        _tombstone(tool, RULES)
        _age(tmp_path, TOMBSTONE, 60)
        _call(tool, command="str_replace", path=RULES, old_str="Never", new_str="Rarely")
        _refusal(tool, command="str_replace", path=RULES, old_str="Rarely", new_str="Always")
        assert tool.last_decision is not None
        assert tool.last_decision.codes == ("pinned_removed",)

    def test_a_memory_renamed_onto_a_tombstoned_path_is_not_recorded(self, tmp_path: Path) -> None:
        """A rename brings a memory to its path now: an older tombstone there does not count."""
        tool = _tool(tmp_path, policy=_policy("{require_tombstones: false}"))
        _seed(tool)
        _tombstone(tool, RULES)
        _call(tool, command="delete", path=RULES)
        _age(tmp_path, NOTES, 120)  # written before the tombstone, moved after it
        _age(tmp_path, TOMBSTONE, 60)
        _call(tool, command="rename", old_path=NOTES, new_path=RULES)
        _refusal(tool, command="delete", path=RULES)
        assert tool.last_decision is not None
        assert tool.last_decision.codes == ("pinned_removed",)

    def test_a_tombstone_naming_a_folder_records_each_memory_in_it(self, tmp_path: Path) -> None:
        """tombstone_for: [/memories/core] records every memory under /memories/core."""
        tool = _tool(tmp_path)
        _seed(tool)
        _call(tool, command="create", path="/memories/core/more.md", file_text="Aisle seats.\n")
        _tombstone(tool, "/memories/core")
        _call(tool, command="delete", path="/memories/core")
        subject = _records(tmp_path)[-1]["subject"]["transition"]
        assert subject["tombstoned"] == ["/memories/core/more.md", RULES]


class TestConfinement:
    @pytest.mark.parametrize(
        ("path", "reason"),
        [
            ("/memories/../secrets.md", "'..' component"),
            ("/etc/passwd", "outside /memories"),
            ("/memories/.hidden", "hidden"),
            ("/memories/a\\b", "not a memory path"),
            ("/memories/" + "x" * 240, "over 240 characters"),
        ],
        ids=["traversal", "outside", "hidden", "backslash", "long"],
    )
    def test_paths_outside_the_directory_are_refused(
        self, tmp_path: Path, path: str, reason: str
    ) -> None:
        """Traversal, other roots, hidden names and overlong paths are refused, never written."""
        tool = _tool(tmp_path)
        assert reason in _refusal(tool, command="create", path=path, file_text="x")
        assert _records(tmp_path) == []

    def test_a_symlink_out_of_the_directory_is_refused(self, tmp_path: Path) -> None:
        """A path through a link is refused, and a directory holding one takes no edit."""
        outside = tmp_path / "outside"
        outside.mkdir()
        tool = _tool(tmp_path)
        (tmp_path / "memories" / "escape").symlink_to(outside)
        message = _refusal(tool, command="create", path="/memories/escape/x.md", file_text="x")
        assert "symbolic link" in message
        assert "symbolic link" in _refusal(tool, command="create", path=NOTES, file_text="x")
        assert list(outside.iterdir()) == []
        assert "symbolic link" in _refusal(tool, command="view", path="/memories")

    def test_oversized_files_are_refused(self, tmp_path: Path) -> None:
        """A write over max_file_bytes, and a file over it on disk, are refused."""
        tool = _tool(tmp_path, max_file_bytes=16)
        assert "max_file_bytes" in _refusal(tool, command="create", path=NOTES, file_text="x" * 17)
        _call(tool, command="create", path=NOTES, file_text="x" * 16)
        message = _refusal(tool, command="insert", path=NOTES, insert_line=0, insert_text="y")
        assert "max_file_bytes" in message
        (tmp_path / "memories" / "big.md").write_text("z" * 17, encoding="utf-8")
        assert "big.md" in _refusal(tool, command="create", path=RULES, file_text="x")

    def test_too_many_files_are_refused(self, tmp_path: Path) -> None:
        """A directory over max_files takes no edit (each edit reads every memory)."""
        tool = _tool(tmp_path, max_files=2)
        _seed(tool)
        message = _refusal(tool, command="create", path="/memories/third.md", file_text="x")
        assert message == "/memories/third.md would make more than 2 files; the limit is max_files"
        (tmp_path / "memories" / "third.md").write_text("x", encoding="utf-8")
        message = _refusal(tool, command="delete", path=NOTES)
        assert message == "/memories holds more than 2 files; the limit is max_files"

    def test_text_that_is_not_utf8_is_refused(self, tmp_path: Path) -> None:
        """A memory that is not UTF-8 stops every edit: the directory cannot be judged."""
        tool = _tool(tmp_path)
        (tmp_path / "memories" / "binary.md").write_bytes(b"\xff\xfe")
        assert "not UTF-8" in _refusal(tool, command="create", path=NOTES, file_text="x")


class TestFailingClosed:
    def test_an_audit_log_that_fails_refuses_the_edit(self, tmp_path: Path) -> None:
        """An edit whose record cannot be written is refused and not made."""
        stream = _FailingStream()
        engine = Engine(Engine.default().policy, audit=AuditLog(stream))
        tool = GuardedMemoryTool(tmp_path / "memories", engine)
        _call(tool, command="create", path=NOTES, file_text="ferry at 9\n")
        stream.failing = True
        message = _refusal(tool, command="str_replace", path=NOTES, old_str="9", new_str="8")
        assert tool.last_decision is not None
        assert tool.last_decision.codes == ("audit_unavailable",)
        assert "could not be judged or recorded" in message
        assert "ferry at 9" in (tmp_path / "memories" / "notes.md").read_text(encoding="utf-8")

    def test_an_engine_that_fails_writes_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An exception where the decision should be is a tool error, and no write."""
        tool = _tool(tmp_path)

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("store unreachable")

        monkeypatch.setattr(tool.engine, "evaluate", broken)
        message = _refusal(tool, command="create", path=NOTES, file_text="x\n")
        assert message.startswith("The memory command failed (RuntimeError: store unreachable)")
        assert not (tmp_path / "memories" / "notes.md").exists()

    def test_audit_mode_makes_a_refused_edit_and_records_it(self, tmp_path: Path) -> None:
        """Under transition mode audit the refusal binds nothing: the delete is made, and its
        record says deny, made."""
        tool = _tool(tmp_path, policy=_policy("{mode: audit}"))
        _seed(tool)
        _call(tool, command="delete", path=RULES)
        assert tool.engine.audit is not None
        tool.engine.audit.close()
        (edit,) = [e for e in memory_edits([tmp_path / "audit.jsonl"]) if e.command == "delete"]
        assert (edit.outcome, edit.made) == ("deny", True)
        assert edit.state == manifest_digest(memory_manifest(tmp_path / "memories"))

    def test_a_failed_write_is_a_tool_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An allowed edit whose write fails answers a tool error, the old memory intact."""
        tool = _tool(tmp_path)
        _seed(tool)

        def full(self: MemoryDirectory, place: Path, text: str) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(MemoryDirectory, "write", full)
        message = _refusal(tool, command="str_replace", path=NOTES, old_str="9", new_str="8")
        assert "OSError" in message
        assert "ferry at 9" in (tmp_path / "memories" / "notes.md").read_text(encoding="utf-8")

    def test_no_temporary_file_is_left_behind(self, tmp_path: Path) -> None:
        """Atomic writes leave only the memories in the directory."""
        tool = _tool(tmp_path)
        _seed(tool)
        _call(tool, command="str_replace", path=NOTES, old_str="9", new_str="10")
        names = sorted(p.name for p in (tmp_path / "memories").iterdir())
        assert names == ["core", "notes.md"]

    def test_an_engine_without_an_audit_log_is_refused(self, tmp_path: Path) -> None:
        """The tool proves each edit from the log, so it needs one."""
        with pytest.raises(AuditError, match="needs an engine with an audit log"):
            GuardedMemoryTool(tmp_path, Engine.default())

    def test_typed_delete_and_rename_commands(self, tmp_path: Path) -> None:
        """The SDK's delete and rename models are judged like their dict forms."""
        tool = _tool(tmp_path, policy=_policy("{require_tombstones: false}"))
        _seed(tool)
        rename = BetaMemoryTool20250818RenameCommand(
            command="rename", old_path=NOTES, new_path="/memories/n.md"
        )
        tool.execute(rename)
        tool.execute(BetaMemoryTool20250818DeleteCommand(command="delete", path="/memories/n.md"))
        with pytest.raises(ToolError):
            tool.execute(
                BetaMemoryTool20250818StrReplaceCommand(
                    command="str_replace", path=RULES, old_str="Never", new_str="Always"
                )
            )
        assert memory_manifest(tmp_path / "memories").keys() == {RULES}
