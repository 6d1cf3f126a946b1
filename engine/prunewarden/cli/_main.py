"""The ``prunewarden`` command: ``main()`` parses and exits, ``run()`` does the work.

``run(argv, stdout, stderr) -> int`` is what tests call in-process. Every command is one row of
:data:`COMMANDS`: the function that adds its parser, and the function that runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
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
from prunewarden.cli._common import EXIT_CODES, ExitError, Parser, UsageError, report
from prunewarden.errors import ExitCode, InputError, PolicyError, PrunewardenError
from prunewarden.rules import BACKENDS, BackendUnavailableError, check_backend

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
    for name in ENGINE_COMMANDS:
        commands.choices[name].add_argument(
            "--cel",
            choices=BACKENDS,
            help=(
                "the CEL backend of the policy's rules: python (cel-python) or native "
                "(cel-cpp, pip install 'prunewarden[cel-native]'); default: the environment "
                "variable PRUNEWARDEN_CEL, else python"
            ),
        )
    return parser


# The commands that build engines, and so take --cel.
ENGINE_COMMANDS = ("evaluate", "test", "plan", "replay", "diff", "calibrate", "serve")
_CEL_VARIABLE = "PRUNEWARDEN_CEL"


@contextlib.contextmanager
def _cel_backend(backend: str | None) -> Iterator[None]:
    """``--cel`` for every engine the command builds (in this process and in the worker
    processes it starts) through ``PRUNEWARDEN_CEL``, restored when the command ends. A backend
    that cannot run here is a usage error before anything runs."""
    if backend is None:
        yield
        return
    try:
        check_backend(backend)
    except BackendUnavailableError as exc:
        raise UsageError(f"prunewarden: --cel {backend}: {exc}") from None
    previous = os.environ.get(_CEL_VARIABLE)
    os.environ[_CEL_VARIABLE] = backend
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_CEL_VARIABLE, None)
        else:
            os.environ[_CEL_VARIABLE] = previous


def run(argv: list[str] | None, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the command line ``argv``; return the exit code."""
    try:
        args = _parser(stdout).parse_args(argv)
        with _cel_backend(getattr(args, "cel", None)):
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
