"""What a hook run reads and writes besides the audit log: its input, the project's
``.prunewarden.yaml``, the policy, the state file beside the audit log, and the preview of a
transcript's last compaction (``prunewarden hook AGENT --preview TRANSCRIPT``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import IO, Any

import yaml

from prunewarden.engine import Engine
from prunewarden.errors import ExitCode, InputError, Problem, PrunewardenError
from prunewarden.inputs import transition_document
from prunewarden.integrations import claude_code, codex
from prunewarden.integrations.claude_code import Transcript
from prunewarden.integrations.compaction_preview import parent_previews, render_previews
from prunewarden.policy import Policy, load_builtin_policy, load_policy

STATE_SUFFIX = ".compaction.json"
#: The project file naming the hook's policy, audit log and session store, in the hook's cwd.
PROJECT_FILE = ".prunewarden.yaml"
PROJECT_KEYS = {"policy", "audit_log", "session_store"}
#: How each agent's transcript is read, and what its compactions record as their editor.
READERS = {
    "claude-code": (claude_code.read_transcript, claude_code.APPLIED_BY),
    "codex": (codex.read_rollout, codex.APPLIED_BY),
}


class HookInputError(PrunewardenError):
    """The hook's input, or a file it names, is not what the hook reads."""


def hook_input(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"the hook input is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        raise HookInputError(message) from None
    if not isinstance(data, dict):
        raise HookInputError("the hook input is not a JSON object")
    for name in ("hook_event_name", "session_id"):
        if not isinstance(data.get(name), str):
            raise HookInputError(f"the hook input has no {name}")
    return data


def project(data: dict[str, Any]) -> dict[str, Path]:
    """What the project's ``.prunewarden.yaml`` (in the hook's ``cwd``) names: ``policy``,
    ``audit_log`` and ``session_store``, each a path relative to the file."""
    path = Path(str(data.get("cwd") or ".")) / PROJECT_FILE
    if not path.is_file():
        return {}
    found = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(found, dict) or not set(found) <= PROJECT_KEYS:
        raise HookInputError(f"{path}: expected a mapping of policy, audit_log and session_store")
    if not all(isinstance(value, str) for value in found.values()):
        raise HookInputError(f"{path}: policy, audit_log and session_store are paths")
    return {key: path.parent / value for key, value in found.items()}


class Settings:
    """Where a run's files are: the command line's options first, then the project file's."""

    def __init__(self, args: argparse.Namespace, from_project: dict[str, Path]) -> None:
        self.args, self.from_project = args, from_project

    def policy(self) -> Policy:
        if self.args.policy:
            return load_policy(self.args.policy)
        if "policy" in self.from_project:
            return load_policy(self.from_project["policy"])
        return load_builtin_policy()

    def audit_path(self, data: dict[str, Any]) -> Path:
        if self.args.audit_log:
            return Path(self.args.audit_log)
        if "audit_log" in self.from_project:
            return self.from_project["audit_log"]
        return Path(str(data.get("cwd") or ".")) / ".prunewarden" / "audit.jsonl"

    def state_path(self, data: dict[str, Any]) -> Path:
        audit = self.audit_path(data)
        return audit.with_name(audit.name + STATE_SUFFIX)

    def session_store(self) -> Path | None:
        option = getattr(self.args, "session_store", None)
        if option:
            return Path(option)
        return self.from_project.get("session_store")


def transcript_path(data: dict[str, Any]) -> str:
    path = data.get("transcript_path")
    if not isinstance(path, str):
        raise HookInputError("the hook input has no transcript_path")
    return path


def read_state(path: Path) -> dict[str, Any]:
    """The state file (none yet: empty); one that is no JSON object is a located error."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HookInputError(f"{path}: the state file is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HookInputError(f"{path}: the state file is not a JSON object")
    return data


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Written whole and renamed into place: a crash leaves the previous state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    partial.replace(path)


def preview(args: argparse.Namespace, policy: Policy, stdout: IO[str]) -> int:
    """Judge the last compaction of the transcript ``args.preview`` (the window its boundary
    ended against the summary after it) with nothing recorded, and show what it kept of each
    pinned parent."""
    read, applied_by = READERS[args.agent]
    try:
        transcript = read(args.preview)
    except OSError as exc:
        problem = Problem(args.preview, 0, 0, "$", f"cannot read: {exc.strerror or exc}")
        raise InputError([problem]) from None
    if transcript.summary is None:
        problem = Problem(args.preview, 0, 0, "$", "the transcript holds no compaction")
        raise InputError([problem])
    before = claude_code.transcript_window(Transcript(transcript.replaced, None), policy)
    after, tombstones = claude_code.compaction_transition(before, transcript.summary, policy)
    document = transition_document(
        before, after, tombstones=tombstones, applied_by=f"{applied_by}:preview"
    )
    decision = Engine(policy).evaluate(document)
    previews = parent_previews(before, after, policy)
    if args.format == "json":
        document = {"decision": decision.to_dict(), "parents": previews}
        stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        codes = ", ".join(decision.codes)
        stdout.write(f"{args.preview}: the last compaction: {decision.outcome} ({codes})\n")
        stdout.write(render_previews(previews))
    return ExitCode.REFUSED if decision.blocks else ExitCode.OK
