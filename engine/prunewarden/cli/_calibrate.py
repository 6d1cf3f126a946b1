"""``prunewarden calibrate``: fit a policy's score scale and spread floor to healthy traces, or
(``--fidelity PAIRS``) the fidelity meaning method's floor to faithful summaries.

The fit runs here; what the base and the fitted policy decide on every trace (the table that
closes the report, and whether each known-collapsed trace halts) runs where ``--jobs``,
``--executor`` and ``--scheduler`` say, as ``replay`` and ``diff`` do.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from prunewarden.cli import _calibrate_args as option
from prunewarden.cli._calibrate_fidelity import calibrate_fidelity, check_fidelity_arguments
from prunewarden.cli._calibrate_report import Stages, add_report_options, fit_document, render
from prunewarden.cli._common import write_json
from prunewarden.cli._jobs import Runner, progress_for
from prunewarden.cli._policy import base_dirs
from prunewarden.cli._replay import add_executor_options, cluster_for
from prunewarden.errors import ExitCode
from prunewarden.plots import (
    figure_class,
    prepare_file,
    write_calibration_plot,
    write_power_plot,
)
from prunewarden.policy import Policy, load_policy
from prunewarden.replay import (
    DEFAULT_CUSUM_MARGIN,
    DEFAULT_HEADROOM,
    DEFAULT_RATE,
    CalibrationError,
    DiffJob,
    Fit,
    TraceData,
    TraceDiff,
    base_outside,
    canary_only_traces,
    degenerate,
    diff_in_worker,
    extends_reference,
    fit,
    power,
    read_cycles,
    read_trace,
    render_power,
    run_diff_job,
)


class DegenerateFitError(CalibrationError):
    """A fit that would disable a signal silently: nothing is written (exit 3)."""

    exit_code = ExitCode.POLICY


CALIBRATE_EXIT_CODES = """\
exit codes:
  0   fitted and written; every known-collapsed trace halts under the fitted policy
  1   fitted and written, but some known-collapsed trace does not halt (named on stderr)
  2   usage error, or a malformed or unreadable trace or pairs file (nothing written)
  3   invalid base policy, or a fitted policy the base refuses (a locked field), or a
      degenerate fit (a signal disabled) without --accept-degenerate (nothing written)
"""


def add_command(commands: Any) -> None:
    """``prunewarden calibrate``."""
    parser = commands.add_parser(
        "calibrate",
        help="fit a policy's score scale and spread floor to healthy traces of your scorer, or "
        "its fidelity floor to faithful summaries",
        description="Fit spec.scores.calibration (5th percentile -> 0, 95th -> 1) and the "
        "collapse guard's spread floor\nto healthy traces, write the result as a new version of "
        "the base policy, and print what\nthe base and the fitted policy decide on every trace. "
        "With --fidelity, fit spec.fidelity.embedding_floor\nto faithful (parents, summary) "
        "pairs instead.",
        epilog=CALIBRATE_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_traces(parser)
    _add_fit_options(parser)
    _add_power_options(parser)
    _add_policy_files(parser)
    add_executor_options(parser)
    add_report_options(parser)
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the healthy and collapsed traces' spreads, the fitted floor and the headroom "
        "as a PNG (needs: pip install 'prunewarden[plot]')",
    )


def _add_traces(parser: argparse.ArgumentParser) -> None:
    """What is fitted to: healthy traces or faithful pairs, and the known-collapsed traces."""
    parser.add_argument(
        "--healthy",
        nargs="+",
        metavar="TRACE",
        help="traces of sessions that did not collapse (JSON Lines)",
    )
    parser.add_argument(
        "--fidelity",
        metavar="PAIRS",
        help="instead of --healthy: fit spec.fidelity.embedding_floor to the faithful "
        "(parents, summary) pairs of PAIRS (JSON Lines; docs/fidelity.md), with MiniLM (needs "
        "the embed extra)",
    )
    parser.add_argument(
        "--collapsed",
        nargs="+",
        default=[],
        metavar="TRACE",
        help="traces of sessions known to have collapsed: the fitted policy must halt on them",
    )


def _add_fit_options(parser: argparse.ArgumentParser) -> None:
    """How signal A is fitted, and whether a degenerate fit is written."""
    parser.add_argument(
        "--target-false-positive-rate",
        type=option.rate,
        default=DEFAULT_RATE,
        metavar="R",
        help="largest share of healthy traces the collapse guard may halt on (default 0.05)",
    )
    parser.add_argument(
        "--headroom",
        type=option.fraction,
        default=DEFAULT_HEADROOM,
        metavar="F",
        help="the floor is F times the largest floor the healthy traces tolerate (default 0.5)",
    )
    parser.add_argument(
        "--floor-from",
        choices=("halts", "spread"),
        default="halts",
        help="what the absolute floor is fitted on: the healthy traces the guard halts on "
        "(default), or those whose spread alone raises signal A, whatever their canary",
    )
    parser.add_argument(
        "--spread-test",
        choices=("absolute", "cusum"),
        help="what signal A is fitted as: the absolute floor, or the cusum spread test's prior "
        "and threshold (default: the base's spread_floor_mode; absolute for relative)",
    )
    parser.add_argument(
        "--cusum-margin",
        type=option.margin,
        default=DEFAULT_CUSUM_MARGIN,
        metavar="H",
        help="the cusum threshold is the largest at which a healthy trace raises signal A, "
        "plus H (ln units; default 0.5)",
    )
    parser.add_argument(
        "--horizon",
        type=option.cycles,
        metavar="N",
        help="with the cusum spread test: fit the threshold on each healthy trace's first N "
        "cycles, the session length the false-halt bound is for (traces must reach N)",
    )
    parser.add_argument(
        "--accept-degenerate",
        action="store_true",
        help="write a fit that disables a signal (a floor at or above every healthy spread, "
        "a threshold below every healthy trace's peak sum) instead of refusing it",
    )


def _add_power_options(parser: argparse.ArgumentParser) -> None:
    """``--power``: detection power, and its plot."""
    parser.add_argument(
        "--power",
        action="store_true",
        help="also report detection power: leave-one-out over the healthy traces, held-out "
        "copies squeezed by 0.2/0.35/0.5/0.7 (synthetic), recall of the base and the fit",
    )
    parser.add_argument(
        "--power-plot",
        metavar="FILE",
        help="with --power, draw recall versus squeeze with a 90%% guide line as a PNG "
        "(needs: pip install 'prunewarden[plot]')",
    )


def _add_policy_files(parser: argparse.ArgumentParser) -> None:
    """The base policy, where the fitted one goes, and the date it records."""
    parser.add_argument(
        "--base",
        required=True,
        metavar="POLICY",
        help="the policy in force (a file, or builtin:default)",
    )
    parser.add_argument("--out", required=True, metavar="NEW_POLICY", help="where to write")
    parser.add_argument(
        "--date", type=option.date, metavar="YYYY-MM-DD", help="recorded date (default: today, UTC)"
    )


def run_calibrate(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    base = load_policy(args.base, base_dirs=base_dirs(args))
    _check_arguments(args)
    stages = Stages(stderr, on=args.progress)
    date = args.date or dt.datetime.now(dt.UTC).date().isoformat()
    _prepare_folder(args.out)  # the fit reads its base through the folder it is written to
    ref = extends_reference(args.base, args.out)
    if args.fidelity is not None:
        return _run_fidelity(args, base, (ref, date), stdout, stderr)
    _check_plots(args, base)  # before the fit: a missing extra fails fast
    stages.say(f"reading {len(args.healthy) + len(args.collapsed)} trace(s)")
    healthy = [read_trace(path, base) for path in args.healthy]
    collapsed = [read_trace(path, base) for path in args.collapsed]

    def fit_on(traces: Sequence[TraceData], **more: Any) -> Fit:
        return fit(
            base,
            ref,
            args.out,
            traces,
            collapsed,
            rate=args.target_false_positive_rate,
            headroom=args.headroom,
            date=date,
            spread_test=args.spread_test,
            cusum_margin=args.cusum_margin,
            floor_from=args.floor_from,
            horizon=args.horizon,
            **more,
        )

    if args.power:
        stages.say(f"measuring power: {len(healthy)} fits, each trace held out in turn")
    record = _power(args, base, healthy, fit_on) if args.power else None
    stages.say(f"fitting to {len(healthy)} healthy trace(s)")
    fitted = fit_on(healthy, power=record)
    _refuse_degenerate(args, fitted, healthy, stderr)
    _write(args.out, fitted.text)
    if args.power and fitted.cusum is None:  # the default output stays as it was
        _warn_canary_only(args, base, fitted, stderr)
    if base_outside(ref):
        stderr.write(_how_to_load(args, base, ref))
    stages.say(f"replaying {len(healthy) + len(collapsed)} trace(s) under the base and the fit")
    compared = compare_per_trace(args, base, fitted.policy, [*healthy, *collapsed], stderr)
    stages.done()
    _report(args, (base, fitted, record), (healthy, collapsed), compared, (stdout, stderr))
    missed = [d.trace for d in compared[len(healthy) :] if d.candidate_halt is None]
    for path in missed:
        stderr.write(f"{path}: known collapsed, but the fitted policy does not halt on it\n")
    return ExitCode.REFUSED if missed else ExitCode.OK


def _report(
    args: argparse.Namespace,
    fits: tuple[Policy, Fit, dict[str, Any] | None],
    traces: tuple[Sequence[TraceData], Sequence[TraceData]],
    compared: Sequence[TraceDiff],
    streams: tuple[IO[str], IO[str]],
) -> None:
    """The fit (with ``--power``, its power) as text or JSON, and the plots asked for."""
    (base, fitted, record), (healthy, collapsed), (stdout, stderr) = fits, traces, streams
    if args.format == "json":
        document = fit_document(base, fitted, traces, args.out, compared)
        write_json({**document, "power": record} if record is not None else document, stdout)
    else:
        stdout.write(render(base, fitted, healthy, collapsed, args.out, compared=compared))
        if record is not None:
            stdout.write(render_power(record))
    if record is not None and args.power_plot is not None:
        write_power_plot(record, fitted.policy.identity, args.power_plot)
        stderr.write(f"power plot: written to {args.power_plot}\n")
    if args.plot is not None:
        write_calibration_plot(fitted, base.identity, healthy, collapsed, args.plot)
        stderr.write(f"plot: written to {args.plot}\n")


def _refuse_degenerate(
    args: argparse.Namespace, fitted: Fit, healthy: Sequence[TraceData], stderr: IO[str]
) -> None:
    """A fit that disables a signal is not written, unless ``--accept-degenerate``."""
    found = degenerate(fitted, healthy, args.horizon)
    if found is not None and not args.accept_degenerate:
        raise DegenerateFitError(f"{args.out}: {found.message()}")
    if found is not None:
        stderr.write(f"warning: {args.out}: written with --accept-degenerate: {found.why}\n")


def _check_arguments(args: argparse.Namespace) -> None:
    if (
        not args.base.startswith("builtin:")
        and Path(args.out).resolve() == Path(args.base).resolve()
    ):
        raise CalibrationError(f"{args.out}: --out must not overwrite the base policy")
    if (args.healthy is None) == (args.fidelity is None):
        raise CalibrationError("give either --healthy TRACE... or --fidelity PAIRS")
    if args.fidelity is not None:
        check_fidelity_arguments(args)
        if args.format == "json":
            raise CalibrationError(
                "--format json reports a fit to traces: leave it out with --fidelity"
            )


def _run_fidelity(
    args: argparse.Namespace,
    base: Policy,
    ref_and_date: tuple[str, str],
    stdout: IO[str],
    stderr: IO[str],
) -> int:
    """``--fidelity``: fit the meaning method's floor, write the new version, report."""
    ref, date = ref_and_date
    fitted, report = calibrate_fidelity(args, base, ref, date)
    _write(args.out, fitted.text)
    if base_outside(ref):
        stderr.write(_how_to_load(args, base, ref))
    stdout.write(report)
    return ExitCode.OK


def _check_plots(args: argparse.Namespace, base: Policy) -> None:
    """Each plot asked for can be drawn and written (nothing is fitted otherwise)."""
    if args.plot is not None:
        cusum = args.spread_test == "cusum" or (
            args.spread_test is None and base.spec.collapse.spread_floor_mode == "cusum"
        )
        if cusum:
            msg = "--plot draws the absolute floor; it has none to draw for cusum"
            raise CalibrationError(msg)
        figure_class()
        prepare_file(args.plot)
    if args.power_plot is not None:
        if not args.power:
            raise CalibrationError("--power-plot draws what --power measures: add --power")
        figure_class()
        prepare_file(args.power_plot)


def _warn_canary_only(args: argparse.Namespace, base: Policy, fitted: Fit, stderr: IO[str]) -> None:
    """Warn, naming the traces, when the fitted floor lies above every healthy spread and
    their canary never inverts: the floor then was not fitted on spread evidence."""
    traces = [(path, read_cycles(path, base)) for path in args.healthy]
    named = canary_only_traces(fitted.policy, fitted.floor, traces)
    if named:
        stderr.write(
            f"warning: the fitted floor {fitted.floor} is at or above every healthy spread and "
            "the canary of these healthy traces never inverts, so the floor was not fitted on "
            "spread evidence: under it the guard halts on the canary alone, and a one-cycle "
            "canary glitch halts (consider --spread-test cusum): " + ", ".join(named) + "\n"
        )


def _power(
    args: argparse.Namespace,
    base: Policy,
    healthy: Sequence[TraceData],
    fit_on: Callable[[Sequence[TraceData]], Fit],
) -> dict[str, Any]:
    """``--power``: each healthy trace held out in turn from a fit on the others."""
    if len(healthy) < 2:
        raise CalibrationError("--power needs at least two healthy traces")
    return power(
        base,
        [read_cycles(path, base) for path in args.healthy],
        lambda i: fit_on([*healthy[:i], *healthy[i + 1 :]]).policy,
    )


def _how_to_load(args: argparse.Namespace, base: Policy, ref: str) -> str:
    """The exact ``--base-dir`` options the written policy needs, and the command using them.

    A fitted policy extends its base by a path relative to itself; when the base lies outside
    the fitted policy's folder, loading it needs the base's folder allowed (a policy under
    review may not read files outside its folder), and whatever allowed folders the base's own
    chain reached into to load here.
    """
    needed = [str(Path(args.base).parent)]
    chain = [os.path.realpath(s.path) for s in base.sources if not s.path.startswith("builtin:")]
    for folder in base_dirs(args):
        real = os.path.realpath(folder)
        if any(os.path.commonpath((path, real)) == real for path in chain):
            needed.append(folder)
    options = " ".join(f"--base-dir {shlex.quote(folder)}" for folder in dict.fromkeys(needed))
    return (
        f"{args.out}: extends {ref}, outside its own folder: load it with {options}, as in\n"
        f"  prunewarden {options} replay --policy {shlex.quote(args.out)} TRACE...\n"
    )


def compare_per_trace(
    args: argparse.Namespace,
    base: Policy,
    fitted: Policy,
    traces: Sequence[TraceData],
    stderr: IO[str],
) -> list[TraceDiff]:
    """Every trace replayed under the base and the fitted policy, where ``--jobs``,
    ``--executor`` and ``--scheduler`` say (the fit itself runs here)."""
    paths = [trace.path for trace in traces]
    jobs = [DiffJob(i, path, base, fitted, os.devnull) for i, path in enumerate(paths)]
    progress = progress_for(args, stderr, "calibrate", paths)
    runner = Runner(args.jobs, None, progress, cluster_for(args))
    try:
        results: list[TraceDiff] = runner.run(
            jobs,
            serial=lambda job: run_diff_job(job, None, progress.callback(job.index)),
            parallel=diff_in_worker,
        )
    finally:
        progress.close()
    return results


def _prepare_folder(out: str) -> None:
    """The fitted policy's folder, created if missing, before any work is done."""
    folder = Path(out).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CalibrationError(f"{out}: cannot create {folder}: {exc.strerror}") from None


def _write(path: str, text: str) -> None:
    """Write whole or not at all: a temporary file renamed over the target."""
    target = Path(path)
    scratch = target.with_name(f".{target.name}.tmp")
    try:
        scratch.write_text(text, encoding="utf-8")
        scratch.replace(target)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        raise CalibrationError(f"{path}: cannot write: {exc.strerror}") from None
