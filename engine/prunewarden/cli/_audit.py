"""``prunewarden audit``: verify, query and report on decision audit logs.

Where ``evaluate`` writes its records is :mod:`prunewarden.cli._evaluate_audit`; a command
here reads the files it is given, else ``$PRUNEWARDEN_AUDIT_LOG`` and its rotated files.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml

from prunewarden.audit import (
    EPISODE_COLUMNS,
    REPORT_COLUMNS,
    RecordFilter,
    Skipped,
    authorization_header,
    describe,
    find_authorization,
    halt_episodes,
    parse_time,
    query,
    report,
    rotated_files,
    verify_files,
)
from prunewarden.cli._collect import add_collect, run_collect
from prunewarden.cli._common import add_format_option, stdin_as_file, write_json
from prunewarden.cli._evaluate_audit import ENV_KEY, ENV_LOG
from prunewarden.cli._export import add_export, exported_folders, run_export, sql_over_folders
from prunewarden.cli._printable import printable
from prunewarden.errors import AuditError, ExitCode
from prunewarden.plots import count_daily, figure_class, prepare_file, write_audit_plot
from prunewarden.review import json_value, sql

#: Adds a subcommand of ``audit``: its name, and the line its help and description say.
Subcommand = Callable[[str, str], argparse.ArgumentParser]

AUDIT_EXIT_CODES = """\
exit codes:
  0   done (verify: every chain intact)
  2   usage error, unreadable log, unknown decision id, duckdb not installed
  5   verify: a log failed verification (the first broken record is named)

FILE... defaults to $PRUNEWARDEN_AUDIT_LOG and its rotated files (NAME.000001 ...).
"""


def add_audit_command(commands: Any) -> None:
    """``prunewarden audit {verify,query,report,show-policy,sql,export,collect}``."""
    raw = argparse.RawDescriptionHelpFormatter
    audit = commands.add_parser(
        "audit",
        help="verify, query and report on decision audit logs",
        epilog=AUDIT_EXIT_CODES,
        formatter_class=raw,
    )
    sub = audit.add_subparsers(
        dest="audit_command", required=True, metavar="COMMAND", parser_class=type(audit)
    )

    def command(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, help=text, description=text, epilog=AUDIT_EXIT_CODES, formatter_class=raw
        )
        return parser

    _add_verify(command)
    _add_query(command)
    _add_report(command)
    _add_show_policy(command)
    _add_sql(command)
    add_export(command, ENV_KEY)
    add_collect(command, ENV_KEY)


def _add_verify(command: Subcommand) -> None:
    """``audit verify``: the files, the key's variable, the head hashes expected."""
    verify = command("verify", "check the hash chain of audit logs; exit 5 if broken")
    verify.add_argument("files", nargs="*", metavar="FILE", help="log files (rotation order)")
    verify.add_argument(
        "--key-env",
        metavar="NAME",
        default=ENV_KEY,
        help=f"environment variable holding the HMAC key of keyed logs (default: {ENV_KEY})",
    )
    verify.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="HASH",
        help="a head hash kept elsewhere that must occur in the chain (detects a cut-off end)",
    )
    add_format_option(verify, "each file's records and head, and every finding")


def _add_query(command: Subcommand) -> None:
    """``audit query``: the files, the filters, the format and a limit."""
    query = command("query", "list decisions matching every filter given")
    query.add_argument("files", nargs="*", metavar="FILE")
    _add_filters(query)
    query.add_argument("--format", choices=["table", "json"], default="table")
    query.add_argument("--limit", type=int, metavar="N", help="stop after N decisions")


def _add_report(command: Subcommand) -> None:
    """``audit report``: the files, the filters, the format and a plot."""
    report = command(
        "report",
        "count decisions per policy version, check, outcome and primary reason, "
        "with first and last time seen",
    )
    report.add_argument("files", nargs="*", metavar="FILE")
    _add_filters(report)
    report.add_argument("--format", choices=["table", "json"], default="table")
    report.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw the decisions per day by outcome and policy version as a PNG "
        "(needs: pip install 'prunewarden[plot]')",
    )


def _add_show_policy(command: Subcommand) -> None:
    """``audit show-policy DECISION_ID``."""
    show = command(
        "show-policy", "print the full policy that authorized a decision, as logged with it"
    )
    show.add_argument("decision_id", metavar="DECISION_ID")
    show.add_argument("files", nargs="*", metavar="FILE")
    show.add_argument("--format", choices=["yaml", "json"], default="yaml")


def _add_sql(command: Subcommand) -> None:
    """``audit sql SQL``."""
    sql = command(
        "sql",
        "run SQL (DuckDB) over views records, decisions and policies of the logs "
        "(needs: pip install 'prunewarden[sql]')",
    )
    sql.add_argument("statement", metavar="SQL")
    sql.add_argument("files", nargs="*", metavar="FILE")
    sql.add_argument("--format", choices=["table", "json"], default="table")


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", dest="policy_name", metavar="NAME", help="policy name")
    parser.add_argument("--policy-version", metavar="V")
    parser.add_argument("--digest", dest="policy_digest", metavar="D", help="policy digest")
    parser.add_argument("--check", choices=["collapse", "eviction", "staleness", "transition"])
    parser.add_argument("--outcome", choices=["allow", "deny", "halt"])
    parser.add_argument("--reason", metavar="R", help="a reason code (primary or not)")
    parser.add_argument("--session", dest="session_id", metavar="S", help="session id")
    parser.add_argument(
        "--subject", metavar="ID", help="a segment id, span id or cycle the decision is about"
    )
    parser.add_argument("--decision", dest="decision_id", metavar="ID", help="decision id")
    parser.add_argument(
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label the decision was recorded with (repeatable: every one must match)",
    )
    parser.add_argument(
        "--since",
        metavar="T",
        help="from this time (RFC 3339, a date, or a time ago: 7d, 12h, 30m), inclusive",
    )
    parser.add_argument(
        "--until", metavar="T", help="to this time (same forms as --since), exclusive"
    )


def run_audit(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    given = getattr(args, "files", [])
    with stdin_as_file(given, stdout, stderr) as (names, out, err):
        files = _files(names) if args.audit_command != "collect" else []
        try:
            return int(_AUDIT_COMMANDS[args.audit_command](args, files, out, err))
        except OSError as exc:
            name = exc.filename or "audit log"
            raise AuditError(f"cannot read {name}: {exc.strerror}") from None


def _files(given: list[str]) -> list[Path]:
    if given:
        return [Path(name) for name in given]
    path = os.environ.get(ENV_LOG)
    if not path:
        msg = f"no audit log given: name FILE... or set {ENV_LOG}"
        raise AuditError(msg)
    files = rotated_files(path)
    if not files:
        msg = f"cannot read {path}: no such file (from {ENV_LOG})"
        raise AuditError(msg)
    return files


def _verify(args: argparse.Namespace, files: list[Path], stdout: IO[str], stderr: IO[str]) -> int:
    key_text = os.environ.get(args.key_env, "")
    key = key_text.encode("utf-8") if key_text else None
    result = verify_files(files, key=key, expect=args.expect)
    if args.format == "json":
        write_json(result.to_dict(), stdout)
        return ExitCode.OK if result.ok else ExitCode.UNVERIFIED
    for finding in result.findings:
        (stderr if finding.fatal else stdout).write(f"{printable(str(finding))}\n")
    for summary in result.files:
        stdout.write(f"{printable(str(summary))}\n")
    return ExitCode.OK if result.ok else ExitCode.UNVERIFIED


def _filter(args: argparse.Namespace) -> RecordFilter:
    return RecordFilter(
        policy_name=args.policy_name,
        policy_version=args.policy_version,
        policy_digest=args.policy_digest,
        check=args.check,
        outcome=args.outcome,
        reason=args.reason,
        session_id=args.session_id,
        subject=args.subject,
        decision_id=args.decision_id,
        since=parse_time(args.since) if args.since else None,
        until=parse_time(args.until) if args.until else None,
        labels=tuple(_label(text) for text in args.labels),
    )


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        msg = f"audit: --label {text!r} is not KEY=VALUE"
        raise AuditError(msg)
    return key, value


_QUERY_COLUMNS = (
    ("ts", 27),
    ("decision_id", 32),
    ("check", 9),
    ("outcome", 7),
    ("enforced", 8),
    ("policy", 20),
    ("session_id", 12),
    ("reasons", 24),
    ("subject", 0),
)


def _query(args: argparse.Namespace, files: list[Path], stdout: IO[str], stderr: IO[str]) -> int:
    skipped = Skipped()
    matches = query(files, _filter(args), skipped)
    if args.limit is not None:
        matches = itertools.islice(matches, max(args.limit, 0))
    if args.format == "json":
        # A decision record as written; a decision of a pass as its row (the pass is one line).
        for line, record in matches:
            text = line.decode("utf-8") if "pass_id" not in record else json.dumps(record)
            stdout.write(text + "\n")
    else:
        stdout.write(_row([name for name, _ in _QUERY_COLUMNS]))
        for _, record in matches:
            described = describe(record)
            stdout.write(_row([_cell(described[name]) for name, _ in _QUERY_COLUMNS]))
    _warn(skipped, stderr)
    return ExitCode.OK


def _row(cells: list[str]) -> str:
    widths = [width for _, width in _QUERY_COLUMNS]
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=True)]
    return "  ".join(padded).rstrip() + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return printable(str(value))


def _report(args: argparse.Namespace, files: list[Path], stdout: IO[str], stderr: IO[str]) -> int:
    skipped = Skipped()
    if args.plot is not None:  # before reading: a missing extra fails fast
        figure_class()
        prepare_file(args.plot)
    where = _filter(args)
    rows = report(files, where, skipped)
    halted = any(row["check"] == "collapse" and row["outcome"] == "halt" for row in rows)
    episodes = halt_episodes(files, where, Skipped()) if halted else []
    if args.format == "json":
        for row in [*rows, *episodes]:
            stdout.write(json.dumps(row) + "\n")
    else:
        stdout.write(
            _table(list(REPORT_COLUMNS), [[_cell(row[c]) for c in REPORT_COLUMNS] for row in rows])
        )
        if episodes:
            stdout.write("\ncollapse halts by session (an episode: consecutive halts)\n")
            cells = [[_cell(row[c]) for c in EPISODE_COLUMNS] for row in episodes]
            stdout.write(_table(list(EPISODE_COLUMNS), cells))
    _warn(skipped, stderr)
    if args.plot is not None:
        daily = count_daily(files, where)
        write_audit_plot(daily, [str(f) for f in files], args.plot)
        stderr.write(f"plot: written to {args.plot}\n")
    return ExitCode.OK


def _show_policy(
    args: argparse.Namespace, files: list[Path], stdout: IO[str], stderr: IO[str]
) -> int:
    skipped = Skipped()
    found = find_authorization(files, args.decision_id, skipped)
    if args.format == "json":
        stdout.write(json.dumps(found.document, indent=2, ensure_ascii=False) + "\n")
    else:
        header = authorization_header(found.decision, found.activation)
        header[1] += f", {found.file}:{found.line}"
        header.insert(2, f"activated at {found.file}:{found.activation_line}")
        stdout.write("".join(f"# {printable(line)}\n" for line in header))
        stdout.write(yaml.safe_dump(found.document, sort_keys=False, allow_unicode=True))
    _warn(skipped, stderr)
    return ExitCode.OK


def _sql(args: argparse.Namespace, files: list[Path], stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    if exported_folders(files):
        names, types, rows = sql_over_folders(args.statement, files)
    else:
        names, types, rows = sql(args.statement, files)
    if args.format == "json":
        for row in rows:
            values = [json_value(v, t) for v, t in zip(row, types, strict=True)]
            stdout.write(json.dumps(dict(zip(names, values, strict=True)), default=str) + "\n")
    elif names:
        cells = [[_sql_cell(v, t) for v, t in zip(row, types, strict=True)] for row in rows]
        stdout.write(_table(names, cells))
    return ExitCode.OK


def _sql_cell(value: Any, sql_type: str) -> str:
    if value is None:
        return "-"
    value = json_value(value, sql_type)
    if isinstance(value, dict | list):
        return printable(json.dumps(value, ensure_ascii=False))
    return _cell(value)


def _table(names: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(name), *(len(row[i]) for row in rows)]) for i, name in enumerate(names)]
    lines = [names, ["-" * width for width in widths], *rows]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        + "\n"
        for line in lines
    )


def _warn(skipped: Skipped, stderr: IO[str]) -> None:
    for message in skipped.messages():
        stderr.write(f"{printable(message)}\n")


_AUDIT_COMMANDS: dict[str, Any] = {
    "verify": _verify,
    "query": _query,
    "report": _report,
    "show-policy": _show_policy,
    "sql": _sql,
    "export": run_export,
    "collect": run_collect,
}
