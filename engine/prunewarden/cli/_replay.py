"""``prunewarden replay`` on the command line, and what ``diff`` shares with it.

``replay`` runs recorded sessions (traces) through a policy and prints what it decided per trace.
``diff`` (:mod:`prunewarden.cli._diff`) runs traces the same way under two policies, so the options
for running, the policy loading, the problem report and the exit status are written here once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from prunewarden._identity import PolicyIdentity
from prunewarden._parquet import pyarrow_modules
from prunewarden.audit import FSYNC_MODES, AuditLog
from prunewarden.cli._common import UsageError, stdin_as_file
from prunewarden.cli._jobs import Runner, progress_for
from prunewarden.cli._policy import base_dirs
from prunewarden.errors import AuditError, ExitCode, Problem
from prunewarden.plots import figure_class, prepare_folder, write_replay_plots
from prunewarden.policy import Policy, load_builtin_policy, load_policy
from prunewarden.replay import (
    AuditTarget,
    DaskCluster,
    ReplayJob,
    TraceDiff,
    TraceSummary,
    expand_traces,
    replay_in_worker,
    run_replay_job,
    write_decisions_parquet,
)

REPLAY_EXIT_CODES = """\
exit codes:
  0   every trace replayed (whatever was decided: the summary says)
  2   usage error, or a malformed trace (its events before the bad line still count)
  3   invalid policy
  70  internal error (a bug: please report it)
"""


def add_replay(commands: Any) -> None:
    """``prunewarden replay``."""
    replay = commands.add_parser(
        "replay",
        help="run recorded sessions (traces) through a policy; summarize what it decided",
        description="Run each trace through a session of the policy (one per trace: its "
        "header's session id and labels)\nand print, per trace, the decisions by outcome and "
        "reason and the first halt.",
        epilog=REPLAY_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="trace files (JSON Lines; .gz, .zst; URLs and globs fsspec reads)",
    )
    replay.add_argument(
        "--policy", metavar="FILE", help="policy YAML (default: the bundled default policy)"
    )
    replay.add_argument(
        "--decisions",
        metavar="OUT",
        help="write one JSON line per decided event to OUT (- for standard output; the "
        "summary then goes to standard error)",
    )
    replay.add_argument(
        "--audit-log",
        metavar="PATH",
        help="append chained decision records to PATH (with --jobs, every worker appends to it)",
    )
    replay.add_argument(
        "--audit-fsync",
        choices=FSYNC_MODES,
        default="batch",
        help="when records reach the disk (default: batch)",
    )
    add_run_options(replay, parquet=True)
    add_plot_option(
        replay,
        "draw one PNG per trace into DIR: spread and floor, canary and median, "
        "halts, turns and drift (needs: pip install 'prunewarden[plot]')",
    )


def add_plot_option(parser: argparse.ArgumentParser, text: str, metavar: str = "DIR") -> None:
    parser.add_argument("--plot", metavar=metavar, help=text)


def check_plot_target(folder: str | None) -> None:
    """Before any work: matplotlib is installed and the plots' folder can be made."""
    if folder is not None:
        figure_class()
        prepare_folder(folder)


def report_plots(paths: Sequence[Path], folder: str, stderr: IO[str]) -> None:
    stderr.write(f"plots: {quantity(len(paths), 'PNG')} written to {folder}\n")


def add_run_options(parser: argparse.ArgumentParser, *, parquet: bool = False) -> None:
    """--jobs, --executor, --scheduler, --format (with ``parquet``: a choice for the decisions),
    --progress."""
    add_executor_options(parser)
    parser.add_argument(
        "--format",
        choices=["table", "json", *(["parquet"] if parquet else [])],
        default="table",
        help="table: readable (default); json: the whole report"
        + ("; parquet: --decisions DIR gets partitioned Parquet, the table is printed" * parquet),
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show progress on standard error (default: when it is a terminal)",
    )


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Where traces run: --jobs, --executor, --scheduler."""
    parser.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        metavar="N",
        help="replay up to N traces at once, in worker processes (default: 1)",
    )
    parser.add_argument(
        "--executor",
        choices=["process", "dask"],
        default="process",
        help="process: a pool of --jobs worker processes here (default); dask: one task per "
        "trace on a Dask cluster (pip install 'prunewarden[dask]')",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --executor dask: the scheduler of an existing cluster (tcp://host:8786); "
        "without it, a local cluster of --jobs worker processes runs for the command",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"{text!r} is not a positive whole number"
        raise argparse.ArgumentTypeError(msg)
    return value


def run_replay(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """``replay``; a trace named ``-`` is read from standard input (named ``<stdin>``)."""
    with stdin_as_file(args.traces, stdout, stderr) as (args.traces, out, err):
        return _replay(args, out, err)


def _replay(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    parquet = args.format == "parquet"
    if parquet and (args.decisions is None or args.decisions == "-"):
        raise UsageError("--format parquet writes the decisions to a folder: give --decisions DIR")
    if parquet:
        _check_parquet_target(args.decisions)
    traces = expand_traces(args.traces)
    cluster = cluster_for(args)
    policy = policy_or_default(args.policy, base_dirs(args))
    identity = policy.identity
    check_plot_target(args.plot)
    audit = _audit_target(args)
    report_to = stderr if args.decisions == "-" else stdout
    progress = progress_for(args, stderr, "replay", traces)
    with _decisions_stream(None if parquet else args.decisions, stdout, parquet) as out:
        jobs = [ReplayJob(i, trace, policy, audit=audit) for i, trace in enumerate(traces)]
        summaries = Runner(args.jobs, out, progress, cluster).run(
            jobs,
            serial=lambda job: run_replay_job(job, out, progress.callback(job.index)),
            parallel=replay_in_worker,
        )
        if parquet and out is not None:
            out.seek(0)
            try:
                write_decisions_parquet(out, args.decisions)
            except OSError as exc:  # the folder went away or filled up during the run
                raise UsageError(f"{args.decisions}: {exc.strerror}") from None
    progress.close()
    report_problems(summaries, stderr)
    if args.format == "json":
        report_to.write(json.dumps(replay_report(identity, summaries), indent=2) + "\n")
    else:
        report_to.write(render_replay(identity, summaries))
    if args.plot is not None:
        report_plots(write_replay_plots(policy, traces, args.plot), args.plot, stderr)
    return exit_status(summaries, changed=False)


def _check_parquet_target(folder: str) -> None:
    """Before any trace is replayed: pyarrow is there, and ``folder`` can be a folder (a file
    there made the write fail after the whole run, exit 70)."""
    try:
        pyarrow_modules()
    except OSError as exc:
        raise UsageError(str(exc.strerror)) from None
    target = Path(folder)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{folder}: --decisions with --format parquet takes a folder, not a file")


def policy_or_default(path: str | None, bases: tuple[str, ...] = ()) -> Policy:
    """The policy file at ``path`` (and a ``policy.lock`` beside it, as :func:`load_policy`
    checks by default), else the bundled default; ``bases``: the allowed base folders."""
    if path is None:
        return load_builtin_policy("default")
    return load_policy(path, base_dirs=bases)


def _audit_target(args: argparse.Namespace) -> AuditTarget | None:
    if not args.audit_log:
        return None
    try:
        with AuditLog(args.audit_log, fsync=args.audit_fsync) as audit:
            audit.open()
    except AuditError as exc:
        raise AuditError(str(exc).replace("cannot write", "cannot open")) from None
    return AuditTarget(args.audit_log, args.audit_fsync)


def cluster_for(args: argparse.Namespace) -> DaskCluster | None:
    """The Dask cluster ``--executor dask`` asks for; None for the process pool."""
    if args.executor != "dask":
        if args.scheduler is not None:
            raise UsageError("--scheduler needs --executor dask")
        return None
    return DaskCluster(args.scheduler, args.jobs)


@contextlib.contextmanager
def _decisions_stream(
    target: str | None, stdout: IO[str], staged: bool = False
) -> Iterator[IO[str] | None]:
    """Where the decision lines go: nowhere, standard output, the file ``target``, or (when
    ``staged``, for Parquet) a temporary file that is converted once the run is over."""
    if staged:
        with tempfile.TemporaryFile("w+", encoding="utf-8") as scratch:
            yield scratch
    elif target is None:
        yield None
    elif target == "-":
        yield stdout
    else:
        try:
            stream = Path(target).open("w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {exc.strerror}") from None
        with stream:
            yield stream


def exit_status(results: Sequence[TraceSummary | TraceDiff], *, changed: bool) -> int:
    if any(result.failure for result in results):
        return ExitCode.INTERNAL
    if any(result.problems for result in results):
        return ExitCode.USAGE
    return ExitCode.REFUSED if changed else ExitCode.OK


def replay_report(policy: PolicyIdentity, summaries: Sequence[TraceSummary]) -> dict[str, Any]:
    """The JSON report of ``replay --format json``."""
    return {
        "policy": policy.to_dict(),
        "traces": [summary.to_dict() for summary in summaries],
        "totals": {
            "traces": len(summaries),
            "events": sum(s.events for s in summaries),
            "decisions": sum(s.decisions for s in summaries),
            "outcomes": {o: sum(s.count(o) for s in summaries) for o in ("allow", "deny", "halt")},
            "halted": sum(1 for s in summaries if s.first_halt is not None),
        },
    }


def render_replay(policy: PolicyIdentity, summaries: Sequence[TraceSummary]) -> str:
    """Per trace: decisions by check, outcome and reason, and the first halt."""
    lines = [f"policy {short_identity(policy)}"]
    for summary in summaries:
        session = f"session {summary.session_id}: " if summary.session_id else ""
        counts = f"{quantity(summary.events, 'event')}, {quantity(summary.decisions, 'decision')}"
        lines += ["", f"{summary.trace}  {session}{counts}"]
        rows: list[list[str]] = []
        for check, by_outcome in sorted(summary.outcomes.items()):
            for outcome in ("allow", "deny", "halt"):
                if outcome in by_outcome:
                    reasons = summary.reasons[check][outcome]
                    named = ", ".join(f"{code} {n}" for code, n in sorted(reasons.items()))
                    shown = "" if any(row[0] == check for row in rows) else check
                    rows.append([shown, outcome, str(by_outcome[outcome]), named])
        lines += ["  " + row for row in _table(rows, right={2})]
        lines += ["  " + line for line in _trace_end(summary)]
    totals = replay_report(policy, summaries)["totals"]
    outcomes = ", ".join(f"{o} {n}" for o, n in totals["outcomes"].items())
    counts = ", ".join(
        quantity(totals[name], name.removesuffix("s")) for name in ("traces", "events", "decisions")
    )
    lines += ["", f"{counts} ({outcomes}); {totals['halted']} halted"]
    return "\n".join(lines) + "\n"


def _trace_end(summary: TraceSummary) -> list[str]:
    """The first halt, or why the trace stopped early."""
    if summary.problems:
        return [f"STOPPED at line {summary.problems[0].line}: malformed trace (see stderr)"]
    if summary.failure:
        return ["STOPPED: internal error (see stderr)"]
    halt = summary.first_halt
    if halt is None:
        return ["no halt"]
    at = f"cycle {halt.cycle}" if halt.cycle is not None else f"event {halt.event}"
    binding = "" if halt.enforced else " (not enforced)"
    return [f"first halt: {at} (line {halt.line}), {halt.reason}{binding}"]


def quantity(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def short_identity(policy: PolicyIdentity) -> str:
    return f"{policy.name}@{policy.version} {policy.digest[:19]}"


def _table(rows: list[list[str]], *, right: set[int], header: bool = False) -> list[str]:
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        cells = [
            cell.rjust(width) if i in right and not (header and n == 0) else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return out


class _Reported(Protocol):
    @property
    def problems(self) -> tuple[Problem, ...]: ...
    @property
    def failure(self) -> str: ...


def report_problems(results: Iterable[_Reported], stderr: IO[str]) -> None:
    """Each trace's located problems, then why it stopped, if it did."""
    for result in results:
        for problem in result.problems:
            stderr.write(f"{problem}\n")
        if result.failure:
            stderr.write(f"{result.failure}\n")
