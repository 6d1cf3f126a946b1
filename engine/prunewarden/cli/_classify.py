"""``prunewarden classify FILE``: what each segment of a window becomes under the policy's
classifier (``spec.classify``), and why.

The file is JSON: a list of segments or messages, or an object holding one under ``segments``,
``messages``, ``window``, ``before`` or ``after`` (a transition document: both). Each item has a
``role`` (``system``, ``user``, ``assistant``, ``tool``) or a ``kind``, its text as ``text`` or
``content`` (a string, or a list of blocks whose ``text`` is read), and optionally ``id`` and
``tool``. An item whose ``kind`` is not a role arrived with its kind, which the classifier
leaves alone; every other item is classified.
"""

from __future__ import annotations

import argparse
import json
from typing import IO, Any

from prunewarden._source import Parsed, locate, parse_json
from prunewarden.cli import _policy
from prunewarden.cli._common import EXIT_CODES
from prunewarden.cli._decide import _read_input
from prunewarden.errors import ExitCode, InputError, Problem
from prunewarden.policy import classifier, load_builtin_policy, load_policy
from prunewarden.rules import SegmentClassifier
from prunewarden.rules._classify import ROLES

_WINDOWS = ("segments", "messages", "window", "before", "after")
HELP = "print the kind the policy's classifier (spec.classify) gives each segment, and why"


def add_classify(commands: Any) -> None:
    command = commands.add_parser(
        "classify",
        help=HELP,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="FILE",
        help="a JSON window (segments or messages), or - for standard input (the default)",
    )
    command.add_argument(
        "--policy", metavar="FILE", help="policy YAML (default: the bundled default policy)"
    )
    command.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text: one line a segment (default); json: a list of {id, role, kind, rule}",
    )
    _policy.add_lock_option(command)


def run_classify(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    del stderr
    lock = _policy.lock_option(args)
    policy = load_policy(args.policy, lock=lock) if args.policy else load_builtin_policy()
    text, filename = _read_input(args.input)
    parsed, problems = parse_json(text, filename)
    if problems:
        raise InputError(problems)
    rules = classifier(policy)
    try:
        rows = _classified(parsed, rules)
    except InputError:
        # Positions are computed only when something is wrong: the same error, located.
        rows = _classified(locate(text, filename), rules)
    if args.format == "json":
        stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    else:
        stdout.writelines(_line(row) + "\n" for row in rows)
    return ExitCode.OK


def _classified(parsed: Parsed, rules: SegmentClassifier) -> list[dict[str, Any]]:
    rows = []
    for path, item in _items(parsed):
        role = _role(parsed, path, item)
        given_kind = item.get("kind")
        segment_id = str(item.get("id", _readable(path)))
        if isinstance(given_kind, str) and given_kind not in ROLES:
            rows.append({"id": segment_id, "role": role, "kind": given_kind, "rule": None})
            continue
        found = rules.classify(role or "", _text(parsed, path, item), _tool(item))
        rows.append(
            {
                "id": segment_id,
                "role": role,
                "kind": found.kind if found is not None else role,
                "rule": found.rule if found is not None else "",
            }
        )
    return rows


def _line(row: dict[str, Any]) -> str:
    if row["rule"] is None:
        return f"{row['id']}: {row['kind']} (arrived with its kind; not classified)"
    if not row["rule"]:
        return f"{row['id']}: {row['role']} -> {row['kind']} (no rule matched: its role's kind)"
    return f"{row['id']}: {row['role']} -> {row['kind']} ({row['rule']})"


def _items(parsed: Parsed) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    data = parsed.data
    if isinstance(data, list):
        windows: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    elif isinstance(data, dict) and any(key in data for key in _WINDOWS):
        windows = [((key,), data[key]) for key in _WINDOWS if key in data]
    else:
        message = f"expected a list of segments, or an object with one of {', '.join(_WINDOWS)}"
        raise InputError([parsed.problem((), message)])
    found = []
    for where, window in windows:
        if not isinstance(window, list):
            raise InputError([parsed.problem(where, "expected a list of segments")])
        for i, item in enumerate(window):
            if not isinstance(item, dict):
                raise InputError([parsed.problem((*where, i), "expected an object")])
            found.append(((*where, i), item))
    return found


def _role(parsed: Parsed, path: tuple[str | int, ...], item: dict[str, Any]) -> str | None:
    role = item.get("role", item.get("kind") if item.get("kind") in ROLES else None)
    if role is None and "kind" not in item:
        raise InputError([_problem(parsed, (*path, "role"), "a segment needs a role or a kind")])
    if role is not None and role not in ROLES:
        message = f"{role!r} is not a role ({', '.join(ROLES)})"
        raise InputError([_problem(parsed, (*path, "role"), message)])
    return role if isinstance(role, str) else None


def _text(parsed: Parsed, path: tuple[str | int, ...], item: dict[str, Any]) -> str:
    value = item.get("text", item.get("content", ""))
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(b.get("text", "")) for b in value if isinstance(b, dict))
    message = "expected the text as a string, or a list of blocks"
    raise InputError([_problem(parsed, (*path, "text" if "text" in item else "content"), message)])


def _tool(item: dict[str, Any]) -> str | None:
    tool = item.get("tool", item.get("name"))
    return tool if isinstance(tool, str) else None


def _problem(parsed: Parsed, path: tuple[str | int, ...], message: str) -> Problem:
    return parsed.problem(path, message)


def _readable(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f"{p}" for p in path) or "$"
