"""The ``prunewarden`` command: ``main()`` parses and exits, ``run()`` does the work.

``run(argv, stdout, stderr) -> int`` is what tests call in-process. Every command is one row of
:data:`COMMANDS`: the function that adds its parser, and the function that runs it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import IO, Any, NoReturn

from prunewarden.__about__ import __version__
from prunewarden.cli import (
    _audit,
    _calibrate,
    _decide,
    _diff,
    _doctor,
    _policy,
    _replay,
    _serve,
    _suites,
)
from prunewarden.cli._common import EXIT_CODES, ExitError, Parser, report
from prunewarden.errors import ExitCode, InputError, PolicyError, PrunewardenError

AddParser = Callable[[Any], None]
Run = Callable[[argparse.Namespace, IO[str], IO[str]], int]

# The commands, in the order --help lists them: how each adds its parser, and what runs it.
COMMANDS: dict[str, tuple[AddParser, Run]] = {
    "validate": (_decide.add_validate, _decide.run_validate),
    "evaluate": (_decide.add_evaluate, _decide.run_evaluate),
    "audit": (_audit.add_audit_command, _audit.run_audit),
    "policy": (_policy.add_policy_command, _policy.run_policy),
    "schema": (_decide.add_schema, _decide.run_schema),
    "test": (_suites.add_test, _suites.run_test),
    "plan": (_decide.add_plan, _decide.run_plan),
    "replay": (_replay.add_replay, _replay.run_replay),
    "diff": (_diff.add_diff, _diff.run_diff),
    "calibrate": (_calibrate.add_command, _calibrate.run_calibrate),
    "serve": (_serve.add_serve, _serve.run_serve),
    "doctor": (_doctor.add_doctor, _doctor.run_doctor),
}


def _parser(stdout: IO[str]) -> Parser:
    Parser.stdout = stdout
    parser = Parser(
        prog="prunewarden",
        description="Policy-as-config guards for self-editing context windows.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"prunewarden {__version__}")
    _policy.add_base_dir_option(parser)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for add, _ in COMMANDS.values():
        add(commands)
    return parser


def run(argv: list[str] | None, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the command line ``argv``; return the exit code."""
    try:
        args = _parser(stdout).parse_args(argv)
        return int(COMMANDS[args.command][1](args, stdout, stderr))
    except ExitError as done:
        return done.status
    except PolicyError as exc:
        report(exc.problems, stderr)
        return ExitCode.POLICY
    except InputError as exc:
        report(exc.problems, stderr)
        return ExitCode.USAGE
    except PrunewardenError as exc:
        stderr.write(f"{exc}\n")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - never a traceback to the user
        stderr.write(f"prunewarden: internal error: {type(exc).__name__}: {exc}\n")
        return ExitCode.INTERNAL


def main() -> NoReturn:
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))
