"""The ``prunewarden`` command: ``main()`` parses and exits, ``run()`` does the work.

``run(argv, stdout, stderr) -> int`` is what tests call in-process.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

from prunewarden import auditcli, calibrate, policycli, replaycli, resources
from prunewarden.__about__ import __version__
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import InputError, PolicyError, Problem, PrunewardenError
from prunewarden.planner import Plan
from prunewarden.policy import load_policy
from prunewarden.source import parse_json

_T = TypeVar("_T")

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_INPUT = 2
EXIT_POLICY = 3
EXIT_INTERNAL = 70

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}   allowed, or every policy valid (a refusal in audit mode also exits 0)
  {EXIT_REFUSED}   refused: deny or halt by an enforcing guard (policy diff: the policies differ)
  {EXIT_INPUT}   usage error, or a malformed input document
  {EXIT_POLICY}   invalid policy, or a policy version reused for different content
  {auditcli.EXIT_UNVERIFIED}   audit verify: a log failed verification
  {EXIT_INTERNAL}  internal error (a bug: please report it)
"""


class _UsageError(PrunewardenError):
    exit_code = EXIT_INPUT


class _Parser(argparse.ArgumentParser):
    """argparse writing to the streams ``run`` was given, raising instead of exiting."""

    stdout: IO[str] = sys.stdout

    def _print_message(self, message: str, file: object = None) -> None:  # noqa: ARG002
        if message:
            self.stdout.write(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self.stdout.write(message)
        raise _ExitError(status)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}")


class _ExitError(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


def _parser(stdout: IO[str]) -> _Parser:
    _Parser.stdout = stdout
    parser = _Parser(
        prog="prunewarden",
        description="Policy-as-config guards for self-editing context windows.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"prunewarden {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    validate = commands.add_parser(
        "validate",
        help="check policy files against the schema",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="policy YAML files")
    policycli.add_lock_option(validate)

    evaluate = commands.add_parser(
        "evaluate",
        help="decide on one input document; prints the decision as JSON",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_options(
        evaluate,
        document="input JSON document",
        json_output="the decision document",
    )

    auditcli.add_audit_command(commands)
    policycli.add_policy_command(commands)

    schema = commands.add_parser("schema", help="print a bundled JSON Schema")
    schema.add_argument(
        "name",
        choices=[
            "policy",
            "input",
            "decision",
            "rule-variables",
            "test-suite",
            "audit-record",
            "policy-lock",
            "trace",
        ],
    )
    _add_test_command(commands)
    _add_plan_command(commands)
    replaycli.add_commands(commands)
    calibrate.add_command(commands)
    return parser


def run(argv: list[str] | None, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the command line ``argv``; return the exit code."""
    try:
        args = _parser(stdout).parse_args(argv)
        return int(_COMMANDS[args.command](args, stdout, stderr))
    except _ExitError as done:
        return done.status
    except PolicyError as exc:
        _report(exc.problems, stderr)
        return EXIT_POLICY
    except InputError as exc:
        _report(exc.problems, stderr)
        return EXIT_INPUT
    except PrunewardenError as exc:
        stderr.write(f"{exc}\n")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - never a traceback to the user
        stderr.write(f"prunewarden: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_INTERNAL


def main() -> NoReturn:
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))


def _report(problems: tuple[Problem, ...], stderr: IO[str]) -> None:
    for problem in problems:
        stderr.write(f"{problem}\n")


def _validate(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    status = EXIT_OK
    for name in args.files:
        try:
            policy = load_policy(name, lock=policycli.lock_option(args))
        except PolicyError as exc:
            _report(exc.problems, stderr)
            status = EXIT_POLICY
            continue
        stdout.write(f"{name}: valid ({policy.name}@{policy.version} {policy.digest})\n")
    return status


def _evaluate(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    decision, out = _on_input(args, stdout, stderr, Engine.evaluate)
    _emit(out, args.format, render_text(decision), decision.to_dict())
    return EXIT_REFUSED if decision.blocks else EXIT_OK


def _add_input_options(parser: argparse.ArgumentParser, *, document: str, json_output: str) -> None:
    """What a command deciding on one JSON document takes: the document, the policy, the output
    format, and the audit and policy options."""
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="INPUT",
        help=f"{document}, or - for standard input (the default)",
    )
    parser.add_argument(
        "--policy", metavar="FILE", help="policy YAML (default: the bundled default policy)"
    )
    parser.add_argument(
        "--format",
        choices=["json", "text"],
        default="json",
        help=f"json: {json_output} (default); text: a short summary",
    )
    auditcli.add_evaluate_options(parser)
    policycli.add_evaluate_options(parser)


def _on_input(
    args: argparse.Namespace,
    stdout: IO[str],
    stderr: IO[str],
    act: Callable[..., _T],
) -> tuple[_T, IO[str]]:
    """Load the policy, read the JSON input, and run ``act`` (``Engine.evaluate`` or
    ``Engine.plan``) on an engine logging to the audit sink the options chose, with the caller's
    session id and labels; return its result and the stream results go to."""
    policy, shadow = policycli.evaluation_policies(args)
    text, filename = _read_input(args.input)
    parsed, problems = parse_json(text, filename)
    if problems:
        raise InputError(problems)
    caller = auditcli.caller_fields(args)
    with auditcli.evaluation_audit(args, stdout, stderr) as (audit, out):
        engine = Engine(policy, audit=audit, shadow=shadow)
        return act(engine, parsed.data, filename=filename, text=text, **caller), out


def _emit(out: IO[str], output_format: str, text: str, document: dict[str, Any]) -> None:
    if output_format == "text":
        out.write(text)
    else:
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def render_text(decision: Decision) -> str:
    """A few readable lines: the verdict, each reason, the remediations, the policy."""
    binding = "enforced" if decision.enforced else "not enforced"
    lines = [f"{decision.check}: {decision.outcome.upper()} ({binding})"]
    lines += [f"  {reason.code}: {reason.message}" for reason in decision.reasons]
    for action in decision.actions:
        ids = f" {', '.join(action.ids)}" if action.ids else ""
        lines.append(f"  -> {action.action}{ids}")
    if decision.kept is not None and not decision.refused:
        lines.append(f"  kept: {', '.join(decision.kept) or '-'}")
        lines.append(f"  evicted: {', '.join(decision.evicted or ()) or '-'}")
    policy = decision.policy
    lines.append(f"  policy: {policy.name}@{policy.version} {policy.digest[:19]}")
    if decision.shadow is not None:
        lines.append(f"  {decision.shadow.summary(decision)}")
    return "\n".join(lines) + "\n"


def _schema(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    stdout.write(json.dumps(resources.schema(args.name), indent=2) + "\n")
    return EXIT_OK


_COMMANDS: dict[str, Any] = {"validate": _validate, "evaluate": _evaluate, "schema": _schema}
_COMMANDS["audit"] = auditcli.run_audit
_COMMANDS["policy"] = policycli.run_policy


def _read_input(name: str) -> tuple[str, str]:
    if name == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(name).read_text(encoding="utf-8"), name
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InputError([Problem(name, 0, 0, "$", f"cannot read: {reason}")]) from None


# --- prunewarden test: policy test suites (prunewarden.suites) ---------------------------------

EXIT_TEST_FAILED = 4  # prunewarden.suite_report.EXIT_FAILED: a case failed, or coverage fell short

TEST_EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}   every selected case passed (and coverage met --coverage-threshold)
  {EXIT_INPUT}   usage error: a PATH does not exist, no suite found, no case selected
  {EXIT_POLICY}   a suite file or the policy it names is invalid (the other suites still run)
  {EXIT_TEST_FAILED}   a case failed or broke, or a policy's coverage is below the threshold
"""


def _add_test_command(commands: Any) -> None:
    test = commands.add_parser(
        "test",
        help="run policy test suites (*_test.yaml)",
        description="Run the cases of policy test suites; report what each decision got wrong,\n"
        "and which reason codes and rules each policy's cases exercised.",
        epilog=TEST_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    test.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="suite files, or directories searched recursively for *_test.yaml (default: .)",
    )
    test.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only cases whose SUITE/CASE name contains PATTERN, or matches it as a glob "
        "(*, ?, [...]) against the suite name, the case name or SUITE/CASE; case-insensitive; "
        "repeat to add patterns",
    )
    test.add_argument(
        "--format",
        choices=["pretty", "json", "junit"],
        default="pretty",
        help="pretty: a readable tree (default); json: the whole report; junit: JUnit XML",
    )
    test.add_argument(
        "--junit-xml",
        metavar="FILE",
        help="also write the JUnit XML report to FILE (for CI), whatever --format says",
    )
    test.add_argument(
        "--coverage-threshold",
        type=_percent,
        metavar="N",
        help="fail (exit 4) when a policy's cases exercise less than N%% of the reason codes "
        "and rules it can produce",
    )


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        msg = f"{text!r} is not a percentage between 0 and 100"
        raise argparse.ArgumentTypeError(msg)
    return value


def _test(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    from prunewarden import suite_report, suites  # noqa: PLC0415 - loaded when the verb runs

    paths = args.paths or ["."]
    try:
        files = suites.discover_suites(paths)
    except FileNotFoundError as exc:
        raise _UsageError(f"prunewarden test: no such file or directory: {exc}") from None
    if not files:
        where = ", ".join(paths)
        raise _UsageError(f"prunewarden test: no *{suites.SUITE_SUFFIX} suite under {where}")
    report = suite_report.run_files(
        files, patterns=args.filter, coverage_threshold=args.coverage_threshold
    )
    for invalid in report.invalid:
        _report(invalid.problems, stderr)
    if not report.invalid and not report.cases:
        patterns = ", ".join(repr(p) for p in args.filter)
        raise _UsageError(f"prunewarden test: no case matches --filter {patterns}")
    render = {
        "pretty": suite_report.render_pretty,
        "json": suite_report.render_json,
        "junit": suite_report.render_junit,
    }[args.format]
    stdout.write(render(report))
    if args.junit_xml:
        try:
            Path(args.junit_xml).write_text(suite_report.render_junit(report), encoding="utf-8")
        except OSError as exc:
            raise _UsageError(f"cannot write {args.junit_xml}: {exc.strerror}") from None
    return suite_report.exit_status(report)


_COMMANDS["test"] = _test


# --- plan ----------------------------------------------------------------------------------------


def _add_plan_command(commands: Any) -> None:
    plan = commands.add_parser(
        "plan",
        help="plan one pruning pass over a window; prints the plan as JSON",
        description="Gate on collapse and staleness, then pick the lowest-scored segments the "
        "eviction guard authorizes until the target (free_tokens or keep_top_k) is met. Exits 1 "
        "when a gate freezes the pass.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_options(
        plan,
        document="plan JSON document ($defs/plan of the input schema)",
        json_output="the plan with its decisions",
    )


def _plan(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    plan, out = _on_input(args, stdout, stderr, Engine.plan)
    _emit(out, args.format, render_plan(plan), plan.to_dict())
    return EXIT_REFUSED if plan.frozen else EXIT_OK


def render_plan(plan: Plan) -> str:
    """The plan in a few lines: what to evict, what to keep, and the gates' verdicts."""
    state = "FROZEN" if plan.frozen else ("target met" if plan.target_met else "target NOT met")
    lines = [f"plan: {state}, {len(plan.evict)} to evict, {plan.freed_tokens} tokens freed"]
    for label, ids in (
        ("evict", plan.evict),
        ("write tombstones for", plan.tombstones),
        ("pinned", plan.pinned),
        ("unscoreable", plan.unscoreable),
        ("recompute", plan.recompute),
    ):
        if ids:
            lines.append(f"  {label}: {', '.join(ids)}")
    refusals = [d for d in plan.decisions if d.refused]
    lines += [f"  {d.check} {d.outcome}: {', '.join(d.codes)}" for d in refusals]
    lines.append(f"  decisions: {len(plan.decisions)} ({len(refusals)} refused)")
    return "\n".join(lines) + "\n"


_COMMANDS["plan"] = _plan
_COMMANDS.update(replay=replaycli.run_replay, diff=replaycli.run_diff)
_COMMANDS["calibrate"] = calibrate.run_calibrate
