"""``prunewarden hook codex`` on recorded Codex rollouts (JSON lines as Codex writes them, our
reading where unconfirmed: docs/compaction.md): a lossy compaction refused and its constraint
put back verbatim at SessionStart(compact), a faithful one allowed, one chained record each; and
``hooks install codex`` merging into a real hooks.json."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.coding_agents import CODEX_TASK as TASK
from _support.coding_agents import rollout_line as _line
from _support.coding_agents import rollout_message as _message
from _support.coding_agents import write_rollout
from prunewarden import load_builtin_policy
from prunewarden.cli._main import run
from prunewarden.errors import ExitCode, InputError
from prunewarden.integrations.claude_code import transcript_window
from prunewarden.integrations.codex import read_rollout

POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: compaction, version: 1.0.0}
spec:
  fidelity: {mode: enforce}
"""


def compact(path: Path, summary: str) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write(_line("compacted", {"message": summary}) + "\n")


def hook(
    monkeypatch: pytest.MonkeyPatch, payload: dict[str, Any], *options: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(payload)))
    out, err = io.StringIO(), io.StringIO()
    return run(["hook", "codex", *options], out, err), out.getvalue(), err.getvalue()


def compaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, summary: str) -> tuple[str, Path]:
    rollout, audit, policy = (
        tmp_path / "rollout.jsonl",
        tmp_path / "audit.jsonl",
        tmp_path / "p.yaml",
    )
    policy.write_text(POLICY, encoding="utf-8")
    write_rollout(rollout)
    options = ("--policy", str(policy), "--audit-log", str(audit))
    base = {
        "session_id": "c-1",
        "turn_id": "t-9",
        "transcript_path": str(rollout),
        "cwd": str(tmp_path),
        "model": "gpt-5",
    }
    assert hook(
        monkeypatch, {**base, "hook_event_name": "PreCompact", "trigger": "auto"}, *options
    ) == (0, "", "")
    compact(rollout, summary)
    # PostCompact judges; its output may not carry context, so it prints nothing.
    assert hook(
        monkeypatch, {**base, "hook_event_name": "PostCompact", "trigger": "auto"}, *options
    ) == (0, "", "")
    code, out, err = hook(
        monkeypatch, {**base, "hook_event_name": "SessionStart", "source": "compact"}, *options
    )
    assert (code, err) == (0, "")
    return out, audit


def decisions(audit: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    return [record for record in lines if record["kind"] == "decision"]


def judged(audit: Path) -> dict[str, Any]:
    """The compaction's decision: one record per hook run (PreCompact recorded the window,
    PostCompact judged, SessionStart gave the repair again)."""
    recorded, decision, again = decisions(audit)
    assert recorded["reasons"][0]["code"] == "compaction_recorded"
    assert again["reasons"][0]["code"] == "compaction_restored"
    assert again["reasons"][0]["detail"]["decision"] == decision["decision_id"]
    return decision


class TestRollout:
    def test_the_window_reads_the_history_items(self, tmp_path: Path) -> None:
        """The developer message and the task pinned, the environment message left out, a call
        and its output one group."""
        rollout = tmp_path / "r.jsonl"
        write_rollout(rollout)
        segments = transcript_window(read_rollout(rollout), load_builtin_policy())
        assert [s["non_recoverable"] for s in segments] == [True, True, False, False, False]
        assert segments[1]["text"] == TASK
        assert segments[1]["kind"] == "constraint"  # by the default classifier
        assert segments[2]["group"] == segments[3]["group"] == "tool_use:call_1"

    def test_a_compacted_line_starts_the_window_again(self, tmp_path: Path) -> None:
        rollout = tmp_path / "r.jsonl"
        write_rollout(rollout)
        compact(rollout, "summary")
        transcript = read_rollout(rollout)
        assert (transcript.records, transcript.summary) == ([], "summary")

    def test_a_bad_line_names_the_file_and_line(self, tmp_path: Path) -> None:
        rollout = tmp_path / "r.jsonl"
        rollout.write_text(_message("user", "x") + "\n{oops\n", encoding="utf-8")
        with pytest.raises(InputError) as raised:
            read_rollout(rollout)
        assert raised.value.problems[0].line == 2


class TestCodexHook:
    def test_a_lossy_compaction_is_refused_and_the_constraint_put_back(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        lossy = (
            "Fixing the CSV exporter; timestamps are UTC, emit local time. Never commit to main."
        )
        out, audit = compaction(tmp_path, monkeypatch, lossy)
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        decision = judged(audit)
        assert decision["outcome"] == "deny"
        assert decision["decision_id"] in context.split("\n\n")[0]
        assert context.split("\n\n")[1:] == [TASK]
        assert run(["audit", "verify", str(audit)], io.StringIO(), io.StringIO()) == ExitCode.OK

    def test_a_faithful_compaction_is_allowed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        faithful = (
            "Fixing the CSV exporter. All timestamps must be UTC; never emit local time. "
            "Never commit to main."
        )
        out, audit = compaction(tmp_path, monkeypatch, faithful)
        assert out == ""
        decision = judged(audit)
        assert decision["outcome"] == "allow"


class TestInstall:
    def test_install_is_idempotent_and_keeps_other_hooks(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        hooks = tmp_path / ".codex" / "hooks.json"
        hooks.parent.mkdir()
        other = {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "shell", "hooks": [{"type": "command", "command": "guard.sh"}]}
                ]
            }
        }
        hooks.write_text(json.dumps(other), encoding="utf-8")
        out = io.StringIO()
        assert run(["hooks", "install", "codex"], out, io.StringIO()) == 0
        once = hooks.read_text(encoding="utf-8")
        assert run(["hooks", "install", "codex", "--project"], io.StringIO(), io.StringIO()) == 0
        assert hooks.read_text(encoding="utf-8") == once
        merged = json.loads(once)["hooks"]
        assert merged["PreToolUse"] == other["hooks"]["PreToolUse"]
        assert merged["PreCompact"][0]["hooks"][0]["command"] == "prunewarden hook codex"
        assert "features.hooks = true" in out.getvalue()
