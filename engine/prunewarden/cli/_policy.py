"""``prunewarden policy show|diff|lock`` and the options of ``evaluate`` for deployments.

Registered by :mod:`prunewarden.cli`; each command takes the parsed arguments and the two streams
and returns its exit code, as every command of the CLI does.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from pathlib import Path
from typing import IO, Any

from prunewarden.cli._common import (
    STDIN_NAME,
    UsageError,
    add_format_option,
    exit_codes_epilog,
    problem_document,
    write_json,
)
from prunewarden.errors import ExitCode, PolicyError, Problem
from prunewarden.limits import MAX_POLICY_BYTES
from prunewarden.policy import (
    LOCK_FILENAME,
    LockOption,
    Policy,
    Resolution,
    load_builtin_policy,
    load_policy,
)
from prunewarden.policy import _overlay as overlay
from prunewarden.policy import _provenance as provenance
from prunewarden.policy._diff import diff as diff_policies
from prunewarden.policy._diff import render_text
from prunewarden.policy._lock import update as update_lock

POLICY_EXIT_CODES = exit_codes_epilog(
    {
        ExitCode.OK: "done (diff: the policies are the same; check: no finding at error severity)",
        ExitCode.REFUSED: "diff: the policies differ; check: a finding at error severity",
        ExitCode.USAGE: "usage error (check: z3-solver missing, pip install "
        "'prunewarden[analyze]')",
        ExitCode.POLICY: "invalid policy, or a version reused for different content",
        ExitCode.FAILED: "check: no error, but a check was not reached within --timeout (a "
        "not-reached finding)",
    }
)


def add_policy_command(commands: Any) -> None:
    """``prunewarden policy ...``: inspect resolved policies, compare them, lock versions."""
    policy = commands.add_parser(
        "policy",
        help="show, compare, check and lock resolved policies (extends, guardrails, versions)",
        epilog=POLICY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = policy.add_subparsers(
        dest="policy_command", required=True, metavar="VERB", parser_class=type(policy)
    )
    _add_show(verbs)
    _add_diff(verbs)
    add_check(verbs)
    _add_lock(verbs)


def _add_show(verbs: Any) -> None:
    """``policy show [--resolved] [--format yaml|json] FILE``."""
    show = verbs.add_parser(
        "show",
        help="print a policy, each value annotated with the file and line that set it",
        epilog=POLICY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument(
        "file", metavar="FILE", help="policy YAML, builtin:NAME, or - for standard input"
    )
    show.add_argument(
        "--resolved",
        action="store_true",
        help="the complete policy the guards run, defaults included (else: what files set)",
    )
    show.add_argument(
        "--format",
        choices=["yaml", "json"],
        default="yaml",
        help="yaml: commented YAML (default); json: document, sources and provenance",
    )


def _add_diff(verbs: Any) -> None:
    """``policy diff [--format text|json] A B``."""
    diff = verbs.add_parser(
        "diff",
        help="compare two resolved policies by meaning; exit 1 when they differ",
        epilog=POLICY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("a", metavar="A", help="policy YAML, builtin:NAME, or - (standard input)")
    diff.add_argument("b", metavar="B", help="policy YAML, or builtin:NAME")
    diff.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text: one line per difference (default); json: every change with both origins",
    )


def _add_lock(verbs: Any) -> None:
    """``policy lock FILE...``: record the digests of policies in a lock file."""
    lock = verbs.add_parser(
        "lock",
        help="record name@version -> digest of policies (and what they extend) in a lock file",
        epilog=POLICY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lock.add_argument("files", nargs="+", metavar="FILE", help="policy YAML files")
    add_lock_option(lock, help_text="lock file to update (default: policy.lock next to each FILE)")
    add_format_option(lock, "each entry recorded or kept, and the problems")


def add_check(verbs: Any) -> None:
    """``policy check [--against BASE] [--format text|json|sarif] FILE...``."""
    check = verbs.add_parser(
        "check",
        help="prove things about policies before they ship: rules that never or always "
        "match, overlays looser than their base, production guards off (docs/policy-check.md)",
        epilog=POLICY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="policy YAML, or builtin:NAME")
    check.add_argument(
        "--against",
        metavar="BASE",
        help="compare each FILE with BASE (default: with the policy FILE extends, if any)",
    )
    check.add_argument(
        "--format",
        choices=["text", "json", "sarif"],
        default="text",
        help="text: one line per finding (default); json: the report; sarif: SARIF 2.1.0",
    )
    check.add_argument(
        "--witnesses",
        metavar="DIR",
        help="also write each witness as an input document DIR/<n>-<code>.json, for evaluate",
    )
    check.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="the time every check of one policy may take together (default 60; each solver "
        "query also stops at 5 s); a check not reached is reported as not-reached, exit 4",
    )


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse reports the error as a usage error)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        msg = f"a positive number of seconds, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_lock_option(parser: Any, help_text: str | None = None) -> None:
    parser.add_argument(
        "--lock",
        metavar="FILE",
        help=help_text
        or "lock file holding name@version -> digest (default: policy.lock next to the policy)",
    )


def add_evaluate_options(evaluate: Any) -> None:
    """``evaluate --shadow FILE --lock FILE``."""
    evaluate.add_argument(
        "--shadow",
        metavar="FILE",
        help="candidate policy decided beside the active one; its verdict goes to the record",
    )
    add_lock_option(evaluate)


BASE_DIRS_VARIABLE = "PRUNEWARDEN_BASE_DIRS"


def base_dirs(args: argparse.Namespace) -> tuple[str, ...]:
    """The allowed base folders: ``--base-dir`` options, then ``$PRUNEWARDEN_BASE_DIRS``."""
    given: list[str] = list(getattr(args, "base_dirs", None) or [])
    variable = os.environ.get(BASE_DIRS_VARIABLE, "")
    return (*given, *(folder for folder in variable.split(os.pathsep) if folder))


def lock_option(args: argparse.Namespace) -> LockOption:
    found: str | None = getattr(args, "lock", None)
    return found


def evaluation_policies(args: argparse.Namespace) -> tuple[Policy, Policy | None]:
    """The active policy (``--policy``, else the bundled default) and the ``--shadow`` one."""
    lock, bases = lock_option(args), base_dirs(args)
    active = (
        load_policy(args.policy, lock=lock, base_dirs=bases)
        if args.policy
        else load_builtin_policy()
    )
    shadow = load_policy(args.shadow, lock=lock, base_dirs=bases) if args.shadow else None
    return active, shadow


def run_policy(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    return int(_VERBS[args.policy_command](args, stdout, stderr))


def _show(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    resolution = resolved(args.file, base_dirs(args))
    if args.format == "json":
        stdout.write(json.dumps(provenance.render_json(resolution), indent=2) + "\n")
    else:
        stdout.write(provenance.render_yaml(resolution, defaults=args.resolved))
    return 0


def _diff(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    bases = base_dirs(args)
    a, b = resolved(args.a, bases), resolved(args.b, bases)
    changes = diff_policies(a, b)
    if args.format == "json":
        out = {
            "a": _described(args.a, a.policy),
            "b": _described(args.b, b.policy),
            "same": not changes,
            "changes": [change.to_dict() for change in changes],
        }
        stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    else:
        stdout.write(render_text(args.a, args.b, a, b, changes))
    return ExitCode.REFUSED if changes else ExitCode.OK


def _described(name: str, policy: Policy) -> dict[str, Any]:
    return {
        "file": name,
        **policy.identity.to_dict(),
        "sources": [source.to_dict() for source in policy.sources],
    }


def _lock(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Lock every policy that resolves; report the others (exit 3) without losing the rest."""
    status = 0
    groups: dict[str, list[Resolution]] = {}
    problems: list[Problem] = []
    recorded: list[dict[str, Any]] = []
    for name in args.files:
        target = args.lock or str(Path(name).parent / LOCK_FILENAME)
        try:
            groups.setdefault(target, []).append(overlay.resolve_file(name, base_dirs(args)))
        except PolicyError as exc:
            problems += exc.problems if args.format == "json" else _report(exc, stderr)
            status = ExitCode.POLICY
    for target, resolutions in groups.items():
        try:
            entries = update_lock(target, resolutions)
        except PolicyError as exc:
            problems += exc.problems if args.format == "json" else _report(exc, stderr)
            status = ExitCode.POLICY
            continue
        for entry in entries:
            state = "added" if entry.added else "unchanged"
            recorded.append({"lock": target, "policy": entry.key, "digest": entry.digest})
            recorded[-1]["state"] = state
            if args.format == "text":
                stdout.write(f"{target}: {entry.key} {entry.digest} ({state})\n")
    if args.format == "json":
        found = [problem_document(problem) for problem in problems]
        write_json({"locked": status == 0, "entries": recorded, "problems": found}, stdout)
    return status


def resolved(name: str, bases: tuple[str, ...]) -> Resolution:
    """The policy file ``name`` resolved, or with ``-`` the policy on standard input (located
    as ``<stdin>``, its ``extends`` read from the working directory)."""
    if name != "-":
        return overlay.resolve_file(name, bases)
    return overlay.resolve_text(sys.stdin.read(MAX_POLICY_BYTES + 1), STDIN_NAME, bases)


def _report(error: PolicyError, stderr: IO[str]) -> tuple[Problem, ...]:
    """Write ``error``'s problems; none are left to collect."""
    for problem in error.problems:
        stderr.write(f"{problem}\n")
    return ()


def _check(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """``policy check``: its module imports z3 (the ``analyze`` extra), which ``show``, ``diff``
    and ``lock`` do not need, so it is imported only when ``check`` runs (the same reason
    ``cli._main.COMMANDS`` imports each command's module when it runs)."""
    try:
        module = importlib.import_module("prunewarden.cli._policy_check")
    except ImportError as exc:
        msg = (
            f"prunewarden policy check: {exc.name or 'z3'} is missing: "
            "pip install 'prunewarden[analyze]'"
        )
        raise UsageError(msg) from None
    return int(module.run_check(args, stdout, stderr))


_VERBS: dict[str, Any] = {"show": _show, "diff": _diff, "check": _check, "lock": _lock}
