"""``spec.compaction`` at a coding agent's PreCompact, and one chained record for every hook run:
a compaction blocked as each agent reads a block, a manual one blocked while the session's
collapse guard halts, and errors (a broken transcript, an unreadable state file, an audit log
that cannot be written) recorded and reported on one line, never a traceback."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.coding_agents import (
    TASK,
    compact,
    halt,
    records,
    write_rollout,
    write_transcript,
)
from prunewarden import Engine, SqliteSessionStore, load_builtin_policy
from prunewarden.cli._main import run
from prunewarden.errors import ExitCode

BLOCK_PATHS = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: gates, version: 1.0.0}
spec:
  compaction:
    block_when: 'compaction.trigger == "manual" && window.exists(s, s.pinned && "path" in s.facts)'
    block_message: a pinned file path would be summarized away
"""
BLOCK_MANUAL = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: gates, version: 1.0.0}
spec:
  compaction: {block_manual: true}
"""


def hook(
    monkeypatch: pytest.MonkeyPatch, agent: str, payload: Any, *options: str
) -> tuple[int, str, str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    out, err = io.StringIO(), io.StringIO()
    return run(["hook", agent, *options], out, err), out.getvalue(), err.getvalue()


def verify(audit: Path) -> int:
    return run(["audit", "verify", str(audit)], io.StringIO(), io.StringIO())


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Any]:
    """A transcript (its task names src/report/export.py), a log, and the hook's input."""
    transcript = tmp_path / "s-1.jsonl"
    write_transcript(transcript)
    base = {"session_id": "s-1", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    return {"base": base, "audit": tmp_path / "audit.jsonl", "transcript": transcript}


def pre(project: dict[str, Any], trigger: str) -> dict[str, Any]:
    return {**project["base"], "hook_event_name": "PreCompact", "trigger": trigger}


def policy_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


class TestBlocking:
    def test_block_when_blocks_a_manual_compaction_with_exit_2(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Claude Code: exit 2, the reason on stderr; one deny record; no window recorded."""
        options = (
            "--policy",
            policy_file(tmp_path, BLOCK_PATHS),
            "--audit-log",
            str(project["audit"]),
        )
        code, out, err = hook(monkeypatch, "claude-code", pre(project, "manual"), *options)
        assert (code, out) == (ExitCode.USAGE, "")
        assert err == (
            "prunewarden hook claude-code: PreCompact: "
            "a pinned file path would be summarized away\n"
        )
        (record,) = records(project["audit"])
        assert (record["outcome"], record["enforced"]) == ("deny", True)
        assert record["reasons"][0]["code"] == "compaction_blocked"
        assert record["reasons"][0]["detail"] == {"by": "block_when", "trigger": "manual"}
        assert record["subject"]["transition"]["applied_by"] == "claude-code.compact:manual"
        assert not (tmp_path / "audit.jsonl.compaction.json").exists()
        assert verify(project["audit"]) == ExitCode.OK

    def test_an_automatic_compaction_the_condition_leaves_alone_is_recorded(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        options = (
            "--policy",
            policy_file(tmp_path, BLOCK_PATHS),
            "--audit-log",
            str(project["audit"]),
        )
        assert hook(monkeypatch, "claude-code", pre(project, "auto"), *options) == (0, "", "")
        (record,) = records(project["audit"])
        reason = record["reasons"][0]
        assert (record["outcome"], reason["code"]) == ("allow", "compaction_recorded")
        assert reason["detail"] == {"segments": 5, "pinned": 2, "trigger": "auto"}

    def test_codex_is_stopped_through_its_output_not_its_exit_code(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Codex's PreCompact stops on ``continue: false`` with exit 0 (a non-zero exit is a
        failed hook it goes past)."""
        rollout = tmp_path / "rollout.jsonl"
        write_rollout(rollout)
        payload = {**pre(project, "manual"), "transcript_path": str(rollout), "turn_id": "t"}
        policy = policy_file(tmp_path, BLOCK_PATHS.replace('"path" in s.facts', "s.pinned"))
        options = ("--policy", policy, "--audit-log", str(project["audit"]))
        code, out, err = hook(monkeypatch, "codex", payload, *options)
        assert code == ExitCode.OK
        assert json.loads(out) == {
            "continue": False,
            "stopReason": "prunewarden: a pinned file path would be summarized away",
        }
        assert err.count("\n") == 1
        (record,) = records(project["audit"])
        assert record["reasons"][0]["code"] == "compaction_blocked"

    def test_block_manual_blocks_while_the_session_store_holds_a_halt(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A halted collapse guard in the store blocks a manual compaction, not an automatic
        one (blocking that would leave the window at its limit)."""
        policy = policy_file(tmp_path, BLOCK_MANUAL)
        store_path = tmp_path / "sessions.db"
        with SqliteSessionStore(store_path) as store:
            engine = Engine.from_file(policy, store=store)
            halted = halt(engine.session("s-1"))
            halting = halted.halt.decision_id
        options = (
            "--policy",
            policy,
            "--audit-log",
            str(project["audit"]),
            "--session-store",
            str(store_path),
        )
        code, _, err = hook(monkeypatch, "claude-code", pre(project, "manual"), *options)
        assert code == ExitCode.USAGE
        assert halting in err
        assert hook(monkeypatch, "claude-code", pre(project, "auto"), *options)[0] == 0
        blocked, recorded = records(project["audit"])
        assert blocked["reasons"][0]["detail"]["collapse_decision"] == halting
        assert recorded["reasons"][0]["code"] == "compaction_recorded"


class TestErrorsAreRecorded:
    def _error_record(self, audit: Path) -> dict[str, Any]:
        (record,) = records(audit)
        assert record["reasons"][0]["code"] == "internal_error"
        assert record["outcome"] == "deny"
        assert verify(audit) == ExitCode.OK
        return record

    def test_a_broken_transcript_warns_on_an_automatic_compaction(
        self, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with project["transcript"].open("a", encoding="utf-8") as stream:
            stream.write("{torn\n")
        options = ("--audit-log", str(project["audit"]))
        code, out, err = hook(monkeypatch, "claude-code", pre(project, "auto"), *options)
        assert (code, out) == (ExitCode.OK, "")
        assert err.count("\n") == 1
        assert "s-1.jsonl:6:2: $: not JSON" in err
        assert err.endswith("(on error: warn)\n")
        record = self._error_record(project["audit"])
        assert record["enforced"] is False  # recorded as a refusal that did not bind
        assert record["reasons"][0]["detail"]["on_error"] == "warn"

    def test_a_condition_that_fails_is_an_error_not_an_allow(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """block_when failing at run time (an index past the window) is recorded as the hook's
        error; a manual compaction's error blocks."""
        failing = BLOCK_MANUAL.replace(
            "{block_manual: true}", "{block_when: 'window[1000].pinned'}"
        )
        options = ("--policy", policy_file(tmp_path, failing), "--audit-log", str(project["audit"]))
        code, _, err = hook(monkeypatch, "claude-code", pre(project, "manual"), *options)
        assert code == ExitCode.USAGE
        assert "compaction.block_when failed" in err
        record = self._error_record(project["audit"])
        assert record["enforced"] is True

    def test_the_policy_may_block_on_an_automatic_compaction_s_error(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        project["transcript"].write_text("[1]\n", encoding="utf-8")
        policy = policy_file(
            tmp_path, BLOCK_MANUAL.replace("{block_manual: true}", "{on_error: {auto: block}}")
        )
        options = ("--policy", policy, "--audit-log", str(project["audit"]))
        code, _, err = hook(monkeypatch, "claude-code", pre(project, "auto"), *options)
        assert code == ExitCode.USAGE
        assert "(on error: block)" in err
        assert self._error_record(project["audit"])["enforced"] is True

    def test_an_unreadable_state_file_is_recorded(
        self, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """PostCompact with a torn state file: a manual compaction's error blocks (exit 2)."""
        state = project["audit"].with_name("audit.jsonl.compaction.json")
        state.write_text('{"s-1": ', encoding="utf-8")
        payload = {
            **project["base"],
            "hook_event_name": "PostCompact",
            "trigger": "manual",
            "compact_summary": TASK,
        }
        code, _, err = hook(
            monkeypatch, "claude-code", payload, "--audit-log", str(project["audit"])
        )
        assert code == ExitCode.USAGE
        assert "the state file is not JSON" in err
        assert "Traceback" not in err
        assert (
            self._error_record(project["audit"])["reasons"][0]["detail"]["event"] == "PostCompact"
        )

    def test_an_audit_log_that_cannot_be_written_fails_closed(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Nothing can be recorded: one stderr line and exit 2, though on_error says warn."""
        blocked = tmp_path / "not-a-folder"
        blocked.write_text("", encoding="utf-8")
        options = ("--audit-log", str(blocked / "audit.jsonl"), "--on-error", "warn")
        code, out, err = hook(monkeypatch, "claude-code", pre(project, "auto"), *options)
        assert (code, out) == (ExitCode.USAGE, "")
        assert err.count("\n") == 1
        assert err.endswith("(not recorded: failing closed)\n")
        assert "Traceback" not in err

    def test_the_second_run_after_a_judged_compaction_is_recorded_too(
        self, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """PostCompact judges, SessionStart gives the repair again: three runs, three records."""
        options = ("--audit-log", str(project["audit"]))
        assert hook(monkeypatch, "claude-code", pre(project, "auto"), *options)[0] == 0
        compact(project["transcript"], "The exporter is being fixed.")
        post = {
            **project["base"],
            "hook_event_name": "PostCompact",
            "trigger": "auto",
            "compact_summary": "The exporter is being fixed.",
        }
        assert hook(monkeypatch, "claude-code", post, *options) == (0, "", "")
        start = {**project["base"], "hook_event_name": "SessionStart", "source": "compact"}
        code, out, _ = hook(monkeypatch, "claude-code", start, *options)
        assert code == 0
        assert TASK in json.loads(out)["hookSpecificOutput"]["additionalContext"]
        recorded, judged, again = records(project["audit"])
        assert judged["outcome"] == "deny"
        assert again["reasons"][0]["code"] == "compaction_restored"
        assert again["reasons"][0]["detail"]["decision"] == judged["decision_id"]
        assert again["reasons"][0]["detail"]["restored"] != []
        assert load_builtin_policy().digest == recorded["policy"]["digest"]


class TestWhereTheStoreIs:
    def test_the_project_file_names_the_session_store(
        self, tmp_path: Path, project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``session_store:`` in .prunewarden.yaml, as ``--session-store`` would."""
        (tmp_path / "state").mkdir()
        with SqliteSessionStore(tmp_path / "state" / "sessions.db") as store:
            engine = Engine.from_file(policy_file(tmp_path, BLOCK_MANUAL), store=store)
            halt(engine.session("s-1"))
        (tmp_path / ".prunewarden.yaml").write_text(
            "policy: policy.yaml\naudit_log: audit.jsonl\nsession_store: state/sessions.db\n",
            encoding="utf-8",
        )
        assert hook(monkeypatch, "claude-code", pre(project, "manual"))[0] == ExitCode.USAGE
        (record,) = records(project["audit"])
        assert record["reasons"][0]["detail"]["by"] == "block_manual"

    def test_install_passes_the_session_store_on(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        out = io.StringIO()
        argv = ["hooks", "install", "claude-code", "--print", "--session-store", "s.db"]
        assert run(argv, out, io.StringIO()) == ExitCode.OK
        (entry,) = json.loads(out.getvalue())["hooks"]["PreCompact"]
        command = entry["hooks"][0]["command"]
        assert command == f"prunewarden hook claude-code --session-store {tmp_path / 's.db'}"
