"""``prunewarden hook claude-code`` on recorded Claude Code transcripts (JSON lines as Claude Code
writes them): a lossy compaction refused and its constraint put back verbatim, a faithful one
allowed, one chained record each; and ``hooks install`` merging into real settings files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.coding_agents import TASK, compact, records, write_transcript
from prunewarden.cli._main import run
from prunewarden.errors import ExitCode

LOSSY = (
    "The user wants the CSV exporter fixed; timestamps are UTC, emit local time. "
    "Line 88 reads the clock. Project rule: never commit to main."
)
FAITHFUL = (
    "The user wants the CSV exporter in src/report/export.py fixed. All timestamps must be UTC; "
    "never emit local time. Line 88 reads the clock. Project rule: never commit to main."
)
POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: compaction, version: 1.0.0}
spec:
  fidelity: {mode: enforce}
"""


def hook(monkeypatch: pytest.MonkeyPatch, payload: Any, *options: str) -> tuple[int, str, str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    out, err = io.StringIO(), io.StringIO()
    code = run(["hook", "claude-code", *options], out, err)
    return code, out.getvalue(), err.getvalue()


def session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, summary: str, *options: str
) -> tuple[str, Path]:
    """PreCompact, the compaction, then SessionStart(compact): what the hook printed last."""
    transcript = tmp_path / "s-1.jsonl"
    write_transcript(transcript)
    audit = tmp_path / "audit.jsonl"
    base = {"session_id": "s-1", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    pre = {**base, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": ""}
    assert hook(monkeypatch, pre, "--audit-log", str(audit), *options) == (ExitCode.OK, "", "")
    compact(transcript, summary)
    start = {**base, "hook_event_name": "SessionStart", "source": "compact"}
    code, out, err = hook(monkeypatch, start, "--audit-log", str(audit), *options)
    assert (code, err) == (ExitCode.OK, "")
    return out, audit


def judged(audit: Path) -> dict[str, Any]:
    """The compaction's decision: one record per hook run, PreCompact's first."""
    recorded, decision = records(audit)
    assert recorded["reasons"][0]["code"] == "compaction_recorded"
    assert recorded["outcome"] == "allow"
    return decision


def verify(audit: Path) -> int:
    return run(["audit", "verify", str(audit)], io.StringIO(), io.StringIO())


class TestClaudeCodeHook:
    def test_a_lossy_compaction_is_refused_and_the_constraint_put_back(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Fidelity on: the summary drops "never emit local time"; SessionStart's
        additionalContext holds the task verbatim after a notice naming the decision."""
        policy = tmp_path / "policy.yaml"
        policy.write_text(POLICY, encoding="utf-8")
        out, audit = session(tmp_path, monkeypatch, LOSSY, "--policy", str(policy))
        output = json.loads(out)["hookSpecificOutput"]
        assert output["hookEventName"] == "SessionStart"
        decision = judged(audit)
        assert decision["outcome"] == "deny"
        assert "negation_lost" in [r["code"] for r in decision["reasons"]]
        notice, restored = output["additionalContext"].split("\n\n", 1)
        assert decision["decision_id"] in notice
        assert restored == TASK
        assert verify(audit) == ExitCode.OK

    def test_a_faithful_compaction_is_allowed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(POLICY, encoding="utf-8")
        out, audit = session(tmp_path, monkeypatch, FAITHFUL, "--policy", str(policy))
        assert out == ""
        record = judged(audit)
        assert record["outcome"] == "allow"
        assert verify(audit) == ExitCode.OK

    def test_without_fidelity_the_pinned_segments_come_back(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Under the default policy (no spec.fidelity) nothing reads the summary, so what is
        pinned (the task, CLAUDE.md's rule) is refused its loss and put back verbatim."""
        out, audit = session(tmp_path, monkeypatch, FAITHFUL)
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert context.split("\n\n")[1:] == ["Project rule: never commit to main.", TASK]
        record = judged(audit)
        assert next(r["code"] for r in record["reasons"]) == "pinned_removed"

    def test_the_project_file_names_the_policy_and_the_log(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without --policy and --audit-log, .prunewarden.yaml in the hook's cwd names them."""
        (tmp_path / "guard").mkdir()
        (tmp_path / "guard" / "policy.yaml").write_text(POLICY, encoding="utf-8")
        (tmp_path / ".prunewarden.yaml").write_text(
            "policy: guard/policy.yaml\naudit_log: logs/audit.jsonl\n", encoding="utf-8"
        )
        transcript = tmp_path / "s-1.jsonl"
        write_transcript(transcript)
        base = {"session_id": "s-1", "transcript_path": str(transcript), "cwd": str(tmp_path)}
        assert (
            hook(monkeypatch, {**base, "hook_event_name": "PreCompact", "trigger": "auto"})[0] == 0
        )
        compact(transcript, LOSSY)
        code, out, _ = hook(
            monkeypatch, {**base, "hook_event_name": "SessionStart", "source": "compact"}
        )
        assert code == ExitCode.OK
        assert TASK in json.loads(out)["hookSpecificOutput"]["additionalContext"]
        decision = judged(tmp_path / "logs" / "audit.jsonl")
        assert "negation_lost" in [r["code"] for r in decision["reasons"]]

    def test_an_error_is_one_line_and_follows_on_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Garbage input: no traceback; an automatic compaction warns (exit 0), a manual one
        (or --on-error block) blocks (exit 2)."""
        monkeypatch.chdir(tmp_path)  # input that is no JSON names no cwd: the log goes here
        code, out, err = hook(monkeypatch, "{not json")
        assert (code, out) == (ExitCode.OK, "")
        assert err.startswith("prunewarden hook claude-code: hook: the hook input is not JSON")
        assert err.count("\n") == 1
        missing = {
            "hook_event_name": "PreCompact",
            "session_id": "s",
            "trigger": "manual",
            "transcript_path": str(tmp_path / "absent.jsonl"),
            "cwd": str(tmp_path),
        }
        code, _, err = hook(monkeypatch, missing)
        assert code == ExitCode.USAGE
        assert "(on error: block)" in err
        assert "Traceback" not in err


class TestInstall:
    def test_install_is_idempotent_and_keeps_every_other_setting(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        settings = tmp_path / ".claude" / "settings.json"
        settings.parent.mkdir()
        before: dict[str, Any] = {
            "model": "opus",
            "permissions": {"allow": ["Bash(npm test)"]},
            "hooks": {
                "PreCompact": [
                    {"matcher": "", "hooks": [{"type": "command", "command": "backup.sh"}]}
                ],
                "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
            },
        }
        settings.write_text(json.dumps(before), encoding="utf-8")
        assert (
            run(["hooks", "install", "claude-code", "--project"], io.StringIO(), io.StringIO()) == 0
        )
        once = settings.read_text(encoding="utf-8")
        assert run(["hooks", "install", "claude-code"], io.StringIO(), io.StringIO()) == 0
        assert settings.read_text(encoding="utf-8") == once
        merged = json.loads(once)
        assert (merged["model"], merged["permissions"]) == ("opus", before["permissions"])
        assert merged["hooks"]["Stop"] == before["hooks"]["Stop"]
        pre = merged["hooks"]["PreCompact"]
        assert pre[0] == before["hooks"]["PreCompact"][0]
        assert pre[1]["hooks"] == [{"type": "command", "command": "prunewarden hook claude-code"}]
        assert merged["hooks"]["SessionStart"][0]["matcher"] == "compact"

    def test_print_shows_the_snippet_and_writes_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        out = io.StringIO()
        assert run(["hooks", "install", "claude-code", "--print"], out, io.StringIO()) == 0
        assert sorted(json.loads(out.getvalue())["hooks"]) == [
            "PostCompact",
            "PreCompact",
            "SessionStart",
        ]
        assert not (tmp_path / ".claude").exists()


class TestExample:
    def test_the_demo_refuses_the_lossy_compaction_and_allows_the_faithful_one(
        self, tmp_path: Path
    ) -> None:
        """examples/agents/claude_code_compaction.py (make demo-agents), then audit verify."""
        script = Path(__file__).resolve().parents[2] / "examples" / "agents"
        done = subprocess.run(
            [sys.executable, str(script / "claude_code_compaction.py"), str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert done.stdout.splitlines() == [
            line
            for agent in ("claude-code", "codex")
            for line in (
                f"{agent}: lossy compaction: refused; the next context starts with",
                "  [prunewarden: the compaction lost what must stay (negation_lost)]",
                f"  {TASK}",
                f"{agent}: faithful compaction: allowed, nothing added",
            )
        ]
        assert done.stderr == ""
        assert verify(tmp_path / "audit.jsonl") == ExitCode.OK
