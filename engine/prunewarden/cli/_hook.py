"""``prunewarden hook claude-code|codex`` and ``prunewarden hooks install claude-code|codex``.

One command for every hook event the agent runs it for, its JSON on standard input
(docs/compaction.md): ``PreCompact`` records the window about to be compacted in a state file
beside the audit log, keyed by session; ``PostCompact`` (whose input holds ``compact_summary``)
or ``SessionStart`` with ``source: compact`` (the summary read from the transcript) judges the
compaction as a transition, one chained record, and a refusal is repaired by ``SessionStart``'s
``additionalContext``: the lost pinned text, verbatim, after a notice naming the decision. An
error is one line on stderr, never a traceback; ``--on-error block`` exits 2 (which blocks a
``PreCompact``), ``warn`` exits 0; the default blocks a manual compaction and warns on an
automatic one.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import IO, Any

import yaml

from prunewarden.audit import AuditLog
from prunewarden.cli._common import EXIT_CODES
from prunewarden.engine import Engine
from prunewarden.errors import ExitCode, PrunewardenError
from prunewarden.integrations import claude_code, codex
from prunewarden.policy import Policy, load_builtin_policy, load_policy

HOOK_HELP = "run as a coding agent's compaction hook (claude-code, codex): record, judge, restore"
HOOKS_HELP = (
    "install the compaction hooks into a coding agent's settings (install claude-code|codex)"
)
#: The events the installed entries run for, and each one's matcher.
EVENTS = (("PreCompact", ""), ("PostCompact", ""), ("SessionStart", "compact"))
STATE_SUFFIX = ".compaction.json"
#: The project file naming the hook's policy and audit log, in the hook's ``cwd``.
PROJECT_FILE = ".prunewarden.yaml"
#: Where each agent keeps its hooks, under the project or the home folder.
SETTINGS = {
    "claude-code": Path(".claude") / "settings.json",
    "codex": Path(".codex") / "hooks.json",
}
#: How each agent's transcript is read, and what its compactions record as their editor.
READERS = {
    "claude-code": (claude_code.read_transcript, claude_code.APPLIED_BY),
    "codex": (codex.read_rollout, codex.APPLIED_BY),
}


class HookError(PrunewardenError):
    """Something a hook run could not do: reported on one line, decided by ``--on-error``."""


def add_hook(commands: Any) -> None:
    hook = commands.add_parser(
        "hook",
        help=HOOK_HELP,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agents = hook.add_subparsers(dest="agent", required=True, metavar="AGENT")
    for agent, events in (
        ("claude-code", "Claude Code's PreCompact, PostCompact, SessionStart"),
        ("codex", "Codex's PreCompact, PostCompact, SessionStart"),
    ):
        parser = agents.add_parser(agent, help=events)
        parser.add_argument(
            "--policy", metavar="FILE", help="policy YAML (default: the bundled one)"
        )
        parser.add_argument(
            "--audit-log",
            metavar="FILE",
            help="the audit log (default: .prunewarden/audit.jsonl under the hook's cwd)",
        )
        parser.add_argument(
            "--on-error",
            choices=["block", "warn"],
            help="after an error: exit 2 (block) or 0 (warn); default block for a manual "
            "compaction, warn for an automatic one",
        )


def add_hooks(commands: Any) -> None:
    hooks = commands.add_parser("hooks", help=HOOKS_HELP)
    actions = hooks.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = actions.add_parser("install", help="merge the hook entries into the settings")
    install.add_argument("agent", choices=sorted(SETTINGS), help="the coding agent")
    where = install.add_mutually_exclusive_group()
    where.add_argument(
        "--project",
        action="store_true",
        help="./.claude/settings.json, ./.codex/hooks.json (default)",
    )
    where.add_argument(
        "--user", action="store_true", help="~/.claude/settings.json, ~/.codex/hooks.json"
    )
    install.add_argument("--print", action="store_true", help="print the entries instead")
    install.add_argument("--policy", metavar="FILE", help="the policy the hook runs with")
    install.add_argument("--audit-log", metavar="FILE", help="the audit log the hook writes")


def run_hook(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    data: dict[str, Any] = {}
    try:
        data = _hook_input(sys.stdin.read())
        return _run_agent(args, data, stdout)
    except (PrunewardenError, OSError, ValueError, KeyError, TypeError) as exc:
        return _failed(args, data, stderr, str(exc) or type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - a hook never shows a traceback; fail as told
        return _failed(args, data, stderr, f"internal error: {type(exc).__name__}: {exc}")


def _failed(args: argparse.Namespace, data: dict[str, Any], stderr: IO[str], message: str) -> int:
    event = data.get("hook_event_name", "hook")
    mode = args.on_error or ("block" if data.get("trigger") == "manual" else "warn")
    stderr.write(f"prunewarden hook {args.agent}: {event}: {message} (on error: {mode})\n")
    return ExitCode.USAGE if mode == "block" else ExitCode.OK


def _hook_input(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"the hook input is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        raise HookError(message) from None
    if not isinstance(data, dict):
        raise HookError("the hook input is not a JSON object")
    for name in ("hook_event_name", "session_id"):
        if not isinstance(data.get(name), str):
            raise HookError(f"the hook input has no {name}")
    return data


def _project(data: dict[str, Any]) -> dict[str, Path]:
    """What the project's ``.prunewarden.yaml`` (in the hook's ``cwd``) names: ``policy`` and
    ``audit_log``, each a path relative to the file."""
    path = Path(str(data.get("cwd") or ".")) / PROJECT_FILE
    if not path.is_file():
        return {}
    found = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(found, dict) or not set(found) <= {"policy", "audit_log"}:
        raise HookError(f"{path}: expected a mapping of policy and audit_log")
    if not all(isinstance(value, str) for value in found.values()):
        raise HookError(f"{path}: policy and audit_log are paths")
    return {key: path.parent / value for key, value in found.items()}


def _policy(args: argparse.Namespace, project: dict[str, Path]) -> Policy:
    if args.policy:
        return load_policy(args.policy)
    return load_policy(project["policy"]) if "policy" in project else load_builtin_policy()


def _audit_path(args: argparse.Namespace, data: dict[str, Any], project: dict[str, Path]) -> Path:
    if args.audit_log:
        return Path(args.audit_log)
    if "audit_log" in project:
        return project["audit_log"]
    return Path(str(data.get("cwd") or ".")) / ".prunewarden" / "audit.jsonl"


def _run_agent(args: argparse.Namespace, data: dict[str, Any], stdout: IO[str]) -> int:
    event, session = data["hook_event_name"], data["session_id"]
    if event not in {"PreCompact", "PostCompact", "SessionStart"}:
        return ExitCode.OK
    if event == "SessionStart" and data.get("source") != "compact":
        return ExitCode.OK
    project = _project(data)
    policy = _policy(args, project)
    audit_path = _audit_path(args, data, project)
    state_path = audit_path.with_name(audit_path.name + STATE_SUFFIX)
    state = _read_state(state_path)
    read, applied_by = READERS[args.agent]
    if event == "PreCompact":
        transcript = read(_transcript(data))
        window = claude_code.transcript_window(transcript, policy)
        state[session] = {
            "trigger": data.get("trigger", "auto"),
            "window": claude_code.recorded_window(window, policy),
            "judged": None,
        }
        _write_state(state_path, state)
        return ExitCode.OK
    entry = state.get(session)
    if not isinstance(entry, dict):
        raise HookError(f"no window was recorded at PreCompact for session {session}")
    if entry.get("judged") is None:
        summary = data.get("compact_summary")
        if not isinstance(summary, str):
            summary = read(_transcript(data)).summary
        if summary is None:
            raise HookError(
                "no compaction summary: neither compact_summary nor one in the transcript"
            )
        entry["judged"] = _judge(
            data,
            entry,
            summary=summary,
            policy=policy,
            audit_path=audit_path,
            applied_by=applied_by,
        )
        _write_state(state_path, state)
    context = str(entry["judged"]["context"])
    if event == "SessionStart" and context:
        output = {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}
        }
        stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
    return ExitCode.OK


def _transcript(data: dict[str, Any]) -> str:
    path = data.get("transcript_path")
    if not isinstance(path, str):
        raise HookError("the hook input has no transcript_path")
    return path


def _judge(  # noqa: PLR0913 - the hook's input, its recorded window and where to record
    data: dict[str, Any],
    entry: dict[str, Any],
    *,
    summary: str,
    policy: Policy,
    audit_path: Path,
    applied_by: str,
) -> dict[str, Any]:
    """The compaction judged (one record) and the context its repair adds."""
    before = entry["window"]
    after, tombstones = claude_code.compaction_transition(before, summary, policy)
    audit_path.parent.mkdir(parents=True, exist_ok=True)
    audit = AuditLog(audit_path)
    audit.open()
    try:
        session = Engine(policy, audit=audit).session(data["session_id"])
        decision = session.verify(
            before,
            after,
            tombstones=tombstones,
            applied_by=f"{applied_by}:{entry.get('trigger', 'auto')}",
        )
    finally:
        audit.close()
    context = claude_code.restoration(decision, before) if decision.blocks else ""
    return {"decision": decision.decision_id, "outcome": decision.outcome, "context": context}


def _read_state(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise HookError(f"{path}: the state file is not a JSON object")
    return data


def _write_state(path: Path, state: dict[str, Any]) -> None:
    """Written whole and renamed into place: a crash leaves the previous state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    partial.replace(path)


def run_hooks(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    del stderr
    command = f"prunewarden hook {args.agent}"
    if args.policy:
        command += f" --policy {shlex.quote(str(Path(args.policy).resolve()))}"
    if args.audit_log:
        command += f" --audit-log {shlex.quote(str(Path(args.audit_log).resolve()))}"
    if args.print:
        stdout.write(json.dumps(merged_settings({}, command), indent=2) + "\n")
        return ExitCode.OK
    path = (Path.home() if args.user else Path.cwd()) / SETTINGS[args.agent]
    settings = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if not isinstance(settings, dict):
        raise HookError(f"{path}: the settings are not a JSON object")
    merged = merged_settings(settings, command)
    if merged != settings or not path.exists():
        _write_settings(path, merged)
        stdout.write(f"{path}: the prunewarden compaction hooks installed\n")
    else:
        stdout.write(f"{path}: the prunewarden compaction hooks were already installed\n")
    if args.agent == "codex":
        stdout.write("Codex runs hooks with features.hooks = true in its config.toml\n")
    return ExitCode.OK


def merged_settings(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """``settings`` with an entry running ``command`` for each of :data:`EVENTS`, unless one
    is there already; every other setting and hook kept as it was."""
    merged: dict[str, Any] = json.loads(json.dumps(settings))
    hooks = merged.setdefault("hooks", {})
    for event, matcher in EVENTS:
        groups = hooks.setdefault(event, [])
        present = any(
            hook.get("command") == command
            for group in groups
            if isinstance(group, dict) and group.get("matcher", "") == matcher
            for hook in group.get("hooks", [])
            if isinstance(hook, dict)
        )
        if not present:
            groups.append({"matcher": matcher, "hooks": [{"type": "command", "command": command}]})
    return merged


def _write_settings(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
