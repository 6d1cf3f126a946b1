"""``prunewarden hooks install claude-code|codex``: the compaction hooks merged into a coding
agent's settings (``prunewarden hook`` itself is :mod:`._hook_run`'s)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import IO, Any

from prunewarden.errors import ExitCode, PrunewardenError

HOOKS_HELP = (
    "install the compaction hooks into a coding agent's settings (install claude-code|codex)"
)
#: The events the installed entries run for, and each one's matcher.
EVENTS = (("PreCompact", ""), ("PostCompact", ""), ("SessionStart", "compact"))
#: Where each agent keeps its hooks, under the project or the home folder.
SETTINGS = {
    "claude-code": Path(".claude") / "settings.json",
    "codex": Path(".codex") / "hooks.json",
}


class HookError(PrunewardenError):
    """The settings could not be merged."""


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
    install.add_argument(
        "--session-store", metavar="FILE", help="the session store compaction.block_manual reads"
    )


def run_hooks(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    del stderr
    command = f"prunewarden hook {args.agent}"
    if args.policy:
        command += f" --policy {shlex.quote(str(Path(args.policy).resolve()))}"
    if args.audit_log:
        command += f" --audit-log {shlex.quote(str(Path(args.audit_log).resolve()))}"
    if args.session_store:
        command += f" --session-store {shlex.quote(str(Path(args.session_store).resolve()))}"
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
