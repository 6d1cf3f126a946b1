"""The governed memory tool's audit trail: each edit chained with the directory's manifest before
and after, a snapshot found in the log, and a scripted model driving the SDK's tool runner."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.memory_loop import run_script, run_script_async
from prunewarden import AuditError, Engine
from prunewarden.audit import AuditLog, verify_files
from prunewarden.integrations.memory import (
    LABEL_AFTER,
    LABEL_BEFORE,
    AsyncGuardedMemoryTool,
    GuardedMemoryTool,
    locate_memory_state,
    manifest_digest,
    memory_edits,
    memory_manifest,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
RULES = "/memories/core/rules.md"
NOTES = "/memories/notes.md"
TOMBSTONE = "/memories/tombstones/rules.md"
SCRIPT: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": RULES, "file_text": "Never book red-eye flights.\n"},
    {"command": "create", "path": NOTES, "file_text": "ferry at 9\n"},
    {"command": "str_replace", "path": NOTES, "old_str": "9", "new_str": "10"},
    {"command": "delete", "path": RULES},
    {
        "command": "create",
        "path": TOMBSTONE,
        "file_text": f"---\ntombstone_for: [{RULES}]\n---\nThe trip is over.\n",
    },
    {"command": "delete", "path": RULES},
]


def _tool(tmp_path: Path) -> GuardedMemoryTool:
    engine = Engine(Engine.default().policy, audit=AuditLog(tmp_path / "audit.jsonl"))
    kinds = {"/memories/core/*": "constraint"}
    return GuardedMemoryTool(tmp_path / "memories", engine, kinds=kinds, session_id="trip")


def _close(tool: GuardedMemoryTool) -> None:
    assert tool.engine.audit is not None
    tool.engine.audit.close()


class TestScriptedModel:
    def test_the_sdk_runner_reads_refusals_and_results(self, tmp_path: Path) -> None:
        """Through the SDK's tool runner, the pinned delete comes back as an error naming the
        tombstone, and after the model writes one the delete is made."""
        tool = _tool(tmp_path)
        model = run_script(tool, SCRIPT)
        results = model.tool_results()
        assert [bool(r.get("is_error")) for r in results] == [
            False,
            False,
            False,
            False,
            True,
            False,
            False,
        ]
        refused = results[4]["content"]
        refused_text = refused if isinstance(refused, str) else refused[0]["text"]
        assert "pinned_removed" in refused_text
        assert f"tombstone_for: [{RULES}]" in refused_text
        assert results[6]["content"] == f"Successfully deleted {RULES}"
        assert memory_manifest(tmp_path / "memories").keys() == {NOTES, TOMBSTONE}

    def test_every_edit_is_one_chained_record(self, tmp_path: Path) -> None:
        """Six edits, six records (the view is none), and the log verifies."""
        tool = _tool(tmp_path)
        run_script(tool, SCRIPT)
        _close(tool)
        edits = memory_edits([tmp_path / "audit.jsonl"])
        assert [(e.command, e.outcome, e.made) for e in edits] == [
            ("create", "allow", True),
            ("create", "allow", True),
            ("str_replace", "allow", True),
            ("delete", "deny", False),
            ("create", "allow", True),
            ("delete", "allow", True),
        ]
        assert verify_files([tmp_path / "audit.jsonl"]).findings == []


class TestAsyncTool:
    def test_the_async_runner_judges_the_same_edits(self, tmp_path: Path) -> None:
        """AsyncGuardedMemoryTool under the SDK's async tool runner: the same refusal, the same
        records, and the directory found after the last edit."""
        engine = Engine(Engine.default().policy, audit=AuditLog(tmp_path / "audit.jsonl"))
        kinds = {"/memories/core/*": "constraint"}
        tool = AsyncGuardedMemoryTool(tmp_path / "memories", engine, kinds=kinds)
        model = asyncio.run(run_script_async(tool, SCRIPT))
        assert [bool(r.get("is_error")) for r in model.tool_results()].count(True) == 1
        assert tool.tool.last_decision is not None
        assert tool.tool.last_decision.outcome == "allow"
        assert engine.audit is not None
        engine.audit.close()
        state = locate_memory_state(tmp_path / "memories", [tmp_path / "audit.jsonl"])
        assert [edit.index for edit in state.after] == [5]


class TestManifests:
    def test_each_edit_starts_where_the_last_one_left(self, tmp_path: Path) -> None:
        """An edit's manifest_before is the state after the edit before it: a refused edit
        leaves the directory at its manifest_before."""
        tool = _tool(tmp_path)
        run_script(tool, SCRIPT)
        _close(tool)
        edits = memory_edits([tmp_path / "audit.jsonl"])
        assert edits[0].manifest_before == manifest_digest({})
        for previous, edit in itertools.pairwise(edits):
            assert edit.manifest_before == previous.state
        assert edits[-1].state == manifest_digest(memory_manifest(tmp_path / "memories"))

    def test_the_manifest_is_in_each_record_labels(self, tmp_path: Path) -> None:
        """The digests are the record's labels, sha256 over the sorted path -> hash manifest."""
        tool = _tool(tmp_path)
        run_script(tool, SCRIPT[:3])
        _close(tool)
        lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
        last = [json.loads(line) for line in lines][-1]
        assert last["session_id"] == "trip"
        assert last["labels"][LABEL_AFTER] == manifest_digest(
            memory_manifest(tmp_path / "memories")
        )
        assert last["labels"][LABEL_BEFORE].startswith("sha256:")


class TestLocatingAState:
    def test_a_snapshot_is_found_after_the_edit_that_made_it(self, tmp_path: Path) -> None:
        """A copy of the directory taken after each edit is found after that edit."""
        tool = _tool(tmp_path)
        snapshots = []
        for number, call in enumerate(SCRIPT[1:4]):
            run_script(tool, [call])
            snapshot = tmp_path / f"snapshot-{number}"
            shutil.copytree(tmp_path / "memories", snapshot)
            snapshots.append(snapshot)
        _close(tool)
        logs = [tmp_path / "audit.jsonl"]
        for number, snapshot in enumerate(snapshots):
            state = locate_memory_state(snapshot, logs)
            assert state.found
            assert [edit.index for edit in state.after] == [number]

    def test_the_empty_directory_is_the_initial_state(self, tmp_path: Path) -> None:
        """Before the first edit the directory was empty: an empty folder is found there."""
        tool = _tool(tmp_path)
        run_script(tool, SCRIPT[1:3])
        _close(tool)
        empty = tmp_path / "empty"
        empty.mkdir()
        state = locate_memory_state(empty, [tmp_path / "audit.jsonl"])
        assert state.initial
        assert state.after == ()

    def test_a_directory_never_recorded_is_not_found(self, tmp_path: Path) -> None:
        """A memory the log never saw written leaves the state unfound."""
        tool = _tool(tmp_path)
        run_script(tool, SCRIPT[1:3])
        _close(tool)
        (tmp_path / "memories" / "notes.md").write_text("edited by hand\n", encoding="utf-8")
        state = locate_memory_state(tmp_path / "memories", [tmp_path / "audit.jsonl"])
        assert not state.found
        assert len(state.edits) == 2

    def test_a_tampered_log_proves_nothing(self, tmp_path: Path) -> None:
        """A log whose chain is broken raises AuditError instead of answering."""
        tool = _tool(tmp_path)
        run_script(tool, SCRIPT[1:3])
        _close(tool)
        log = tmp_path / "audit.jsonl"
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        del lines[-2]
        log.write_text("".join(lines), encoding="utf-8")
        with pytest.raises(AuditError, match="does not verify"):
            locate_memory_state(tmp_path / "memories", [log])


class TestExample:
    def test_the_demo_refuses_then_allows_and_its_log_verifies(self, tmp_path: Path) -> None:
        """examples/agents/memory_tool.py: the pinned delete refused, the tombstoned one made,
        the final directory found after the last edit, and its log a valid chain."""
        done = subprocess.run(
            [sys.executable, "memory_tool.py", str(tmp_path)],
            cwd=EXAMPLES,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        tools = [line.strip() for line in done.stdout.splitlines() if "tool (" in line]
        assert [line.split(":")[0] for line in tools] == [
            "tool (ok)",
            "tool (ok)",
            "tool (ok)",
            "tool (refused)",
            "tool (ok)",
            "tool (ok)",
        ]
        assert "audit: 6 edits judged, 5 made, log audit.jsonl" in done.stdout
        assert verify_files([tmp_path / "audit.jsonl"]).findings == []
        assert done.stderr == ""
