"""The ``prunewarden`` command: ``main()`` parses and exits, ``run()`` does the work.

``run(argv, stdout, stderr) -> int`` is what tests call in-process. Every command is one row of
:data:`COMMANDS`: the module defining it, its one-line help, and the names of the function that
adds its parser and the one that runs it.

A command's module is imported only when that command runs: between them they import plots,
Dask, the server and the suites, and ``prunewarden --version`` or ``--help`` needs none of them
(docs/architecture.md, "Import cost"). So the command line is parsed twice: first with every
command a stub carrying only its help (enough for ``--version``, ``--help`` and an unknown
command), then with the chosen command's real parser.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple, NoReturn

from prunewarden.__about__ import __version__
from prunewarden._optional import MissingExtraError
from prunewarden.cli._common import (
    EXIT_CODES,
    ExitError,
    Parser,
    UsageError,
    add_base_dir_option,
    add_embedder_option,
    report,
)
from prunewarden.errors import ExitCode, InputError, PolicyError, PrunewardenError
from prunewarden.rules import BACKENDS, BackendUnavailableError, check_backend

AddParser = Callable[[Any], None]
Run = Callable[[argparse.Namespace, IO[str], IO[str]], int]


class Command(NamedTuple):
    """Where a command lives (a module of this package) and what ``--help`` says of it (the
    same line its parser gives: a test holds them equal)."""

    module: str
    help: str
    add: str  # the function adding its parser
    run: str  # the function running it

    def functions(self) -> tuple[AddParser, Run]:
        """Its functions, importing its module (only now: see the module's docstring)."""
        module = importlib.import_module(f"prunewarden.cli.{self.module}")
        add: AddParser = getattr(module, self.add)
        run: Run = getattr(module, self.run)
        return add, run


# The commands, in the order --help lists them.
COMMANDS: dict[str, Command] = {
    "validate": Command(
        "_decide", "check policy files against the schema", "add_validate", "run_validate"
    ),
    "evaluate": Command(
        "_decide",
        "decide on one input document; prints the decision as JSON",
        "add_evaluate",
        "run_evaluate",
    ),
    "explain": Command(
        "_decide",
        "decide on one input document and say what would have allowed each refusal",
        "add_explain",
        "run_explain",
    ),
    "classify": Command(
        "_classify",
        "print the kind the policy's classifier (spec.classify) gives each segment, and why",
        "add_classify",
        "run_classify",
    ),
    "hook": Command(
        "_hook_run",
        "run as a coding agent's compaction hook (claude-code, codex): record, judge, restore",
        "add_hook",
        "run_hook",
    ),
    "hooks": Command(
        "_hook",
        "install the compaction hooks into a coding agent's settings (install claude-code|codex)",
        "add_hooks",
        "run_hooks",
    ),
    "audit": Command(
        "_audit",
        "verify, query and report on decision audit logs",
        "add_audit_command",
        "run_audit",
    ),
    "policy": Command(
        "_policy",
        "show, compare, check and lock resolved policies (extends, guardrails, versions)",
        "add_policy_command",
        "run_policy",
    ),
    "schema": Command("_decide", "print a bundled JSON Schema", "add_schema", "run_schema"),
    "bundle": Command(
        "_bundle",
        "build, sign and verify signed policy bundles (docs/fleet.md)",
        "add_bundle_command",
        "run_bundle",
    ),
    "test": Command("_suites", "run policy test suites (*_test.yaml)", "add_test", "run_test"),
    "plan": Command(
        "_decide",
        "plan one pruning pass over a window; prints the plan as JSON",
        "add_plan",
        "run_plan",
    ),
    "replay": Command(
        "_replay",
        "run recorded sessions (traces) through a policy; summarize what it decided",
        "add_replay",
        "run_replay",
    ),
    "diff": Command(
        "_diff",
        "replay traces under two policies; list every decision that changes (exit 1)",
        "add_diff",
        "run_diff",
    ),
    "calibrate": Command(
        "_calibrate",
        "fit a policy's score scale and spread floor to healthy traces of your scorer, or its "
        "fidelity floor to faithful summaries",
        "add_command",
        "run_calibrate",
    ),
    "serve": Command(
        "_serve",
        "run the policy decision point over HTTP (API v1; docs/server.md)",
        "add_serve",
        "run_serve",
    ),
    "mcp": Command(
        "_mcp",
        "serve evaluate, explain, plan and verify_transition to MCP hosts (docs/mcp.md)",
        "add_mcp",
        "run_mcp",
    ),
    "status": Command(
        "_status",
        "print the status of each server of a fleet (tenants, bundle, decisions, shipping, errors)",
        "add_status",
        "run_status",
    ),
    "doctor": Command(
        "_doctor",
        "check a deployment (policy, lock, audit log, extras); one line, non-zero if sick",
        "add_doctor",
        "run_doctor",
    ),
}


def _parser(stdout: IO[str], chosen: str | None = None, add: AddParser | None = None) -> Parser:
    """The command line's parser: the ``chosen`` command's parser added by ``add``, every other
    command a stub with its help line, so that usage and errors list them all alike."""
    Parser.stdout = stdout
    parser = Parser(
        prog="prunewarden",
        description="Policy-as-config guards for self-editing context windows.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"prunewarden {__version__}")
    add_base_dir_option(parser)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for name, command in COMMANDS.items():
        if name == chosen and add is not None:
            add(commands)
            if name in ENGINE_COMMANDS:
                _add_cel_option(commands.choices[name])
            if name in EMBEDDER_COMMANDS:
                add_embedder_option(commands.choices[name])
        else:
            commands.add_parser(name, help=command.help, add_help=False)
    return parser


def _add_cel_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cel",
        choices=BACKENDS,
        help=(
            "the CEL backend of the policy's rules: python (cel-python) or native "
            "(cel-cpp, pip install 'prunewarden[cel-native]'); default: the environment "
            "variable PRUNEWARDEN_CEL, else python"
        ),
    )


# The commands that build engines, and so take --cel.
ENGINE_COMMANDS = (
    "evaluate",
    "explain",
    "test",
    "plan",
    "replay",
    "diff",
    "calibrate",
    "serve",
    "mcp",
)
_CEL_VARIABLE = "PRUNEWARDEN_CEL"
# The commands that decide transitions on an engine they build, and so take --embedder.
EMBEDDER_COMMANDS = ("evaluate", "explain", "serve", "mcp")


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


def run(argv: list[str] | None, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: PLR0911 - an exit code per failure
    """Run the command line ``argv``; return the exit code."""
    try:
        # First which command (--version, --help and usage errors end here), then its arguments.
        chosen, _ = _parser(stdout).parse_known_args(argv)
        add, run_command = COMMANDS[chosen.command].functions()
        args = _parser(stdout, chosen.command, add).parse_args(argv)
        with _cel_backend(getattr(args, "cel", None)):
            return int(run_command(args, stdout, stderr))
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
    except BackendUnavailableError as exc:  # PRUNEWARDEN_CEL=native, or a half-installed extra
        stderr.write(f"prunewarden: {exc}\n")
        return ExitCode.USAGE
    except MissingExtraError as exc:  # an extra the command needs is not installed
        stderr.write(f"prunewarden: {exc.strerror}\n")
        return ExitCode.USAGE
    except Exception as exc:  # noqa: BLE001 - never a traceback to the user
        stderr.write(f"prunewarden: internal error: {type(exc).__name__}: {exc}\n")
        return ExitCode.INTERNAL


def main() -> NoReturn:
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))
