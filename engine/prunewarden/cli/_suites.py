"""``prunewarden test``: run policy test suites (:mod:`prunewarden.suites`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import IO, Any

from prunewarden import suites
from prunewarden.cli._common import UsageError, exit_codes_epilog, report
from prunewarden.cli._policy import base_dirs
from prunewarden.errors import ExitCode

TEST_EXIT_CODES = exit_codes_epilog(
    {
        ExitCode.OK: "every selected case passed (and coverage met --coverage-threshold)",
        ExitCode.USAGE: "usage error: a PATH does not exist, no suite found, no case selected",
        ExitCode.POLICY: "a suite file or the policy it names is invalid (the other suites still "
        "run)",
        ExitCode.FAILED: "a case failed or broke, or a policy's coverage is below the threshold",
    }
)


def add_test(commands: Any) -> None:
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


def run_test(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    paths = args.paths or ["."]
    try:
        files = suites.discover_suites(paths)
    except FileNotFoundError as exc:
        raise UsageError(f"prunewarden test: no such file or directory: {exc}") from None
    if not files:
        where = ", ".join(paths)
        raise UsageError(f"prunewarden test: no *{suites.SUITE_SUFFIX} suite under {where}")
    outcome = suites.run_files(
        files,
        patterns=args.filter,
        coverage_threshold=args.coverage_threshold,
        base_dirs=base_dirs(args),
    )
    for invalid in outcome.invalid:
        report(invalid.problems, stderr)
    if not outcome.invalid and not outcome.cases:
        patterns = ", ".join(repr(p) for p in args.filter)
        raise UsageError(f"prunewarden test: no case matches --filter {patterns}")
    render = {
        "pretty": suites.render_pretty,
        "json": suites.render_json,
        "junit": suites.render_junit,
    }[args.format]
    stdout.write(render(outcome))
    if args.junit_xml:
        try:
            Path(args.junit_xml).write_text(suites.render_junit(outcome), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.junit_xml}: {exc.strerror}") from None
    return suites.exit_status(outcome)
