"""``prunewarden replay`` and ``prunewarden diff`` on the command line.

``replay`` runs recorded sessions (traces) through a policy and prints what it decided per trace;
``diff`` runs them through two policies and prints every decision that changes, exiting 1 when
one does, so that a policy change can be gated in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from prunewarden._identity import PolicyIdentity
from prunewarden.audit import FSYNC_MODES, AuditLog
from prunewarden.errors import AuditError, ExitCode, Problem, PrunewardenError
from prunewarden.policy import Policy, load_builtin_policy, load_policy
from prunewarden.replay import (
    AuditTarget,
    DiffJob,
    Group,
    GroupKey,
    ReplayJob,
    TraceDiff,
    TraceReader,
    TraceSummary,
    concatenate,
    diff_in_worker,
    replay_in_worker,
    run_diff_job,
    run_jobs,
    run_replay_job,
)

REPLAY_EXIT_CODES = """\
exit codes:
  0   every trace replayed (whatever was decided: the summary says)
  2   usage error, or a malformed trace (its events before the bad line still count)
  3   invalid policy
  70  internal error (a bug: please report it)
"""

DIFF_EXIT_CODES = """\
exit codes:
  0   no decision changes
  1   some decision changes (listed)
  2   usage error, or a malformed trace (it wins over 1: the comparison is incomplete)
  3   invalid policy
  70  internal error (a bug: please report it)
"""


class UsageError(PrunewardenError):
    exit_code = ExitCode.USAGE


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
    replay.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (JSON Lines)")
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
    _add_run_options(replay)


def add_diff(commands: Any) -> None:
    """``prunewarden diff``."""
    diff = commands.add_parser(
        "diff",
        help="replay traces under two policies; list every decision that changes (exit 1)",
        description="Replay each trace under the base and the candidate policy and report every "
        "decision that changes,\ngrouped by check, kind and reason with the first example of "
        "each. Exit 0 when nothing changes,\n1 otherwise: a CI gate on a policy change.",
        epilog=DIFF_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (JSON Lines)")
    diff.add_argument("--base", metavar="FILE", required=True, help="the policy in force")
    diff.add_argument("--candidate", metavar="FILE", required=True, help="the policy proposed")
    _add_run_options(diff)


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        metavar="N",
        help="replay up to N traces at once, in worker processes (default: 1)",
    )
    parser.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="table: readable (default); json: the whole report",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show progress on standard error (default: when it is a terminal)",
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


# --------------------------------------------------------------------------------------------
# replay


def run_replay(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    policy = _load(args.policy)
    identity = policy.identity
    audit = _audit_target(args)
    report_to = stderr if args.decisions == "-" else stdout
    progress = _progress(args, stderr, "replay", args.traces)
    with _decisions_stream(args.decisions, stdout) as out:
        jobs = [ReplayJob(i, trace, policy, audit=audit) for i, trace in enumerate(args.traces)]
        summaries = _Runner(args.jobs, out, progress).run(
            jobs,
            serial=lambda job: run_replay_job(job, out, progress.callback(job.index)),
            parallel=replay_in_worker,
        )
    progress.close()
    _report_problems(summaries, stderr)
    if args.format == "json":
        report_to.write(json.dumps(replay_report(identity, summaries), indent=2) + "\n")
    else:
        report_to.write(render_replay(identity, summaries))
    return _status(summaries, changed=False)


@dataclass(frozen=True, slots=True)
class _Runner:
    """Runs jobs one after another here, or in worker processes writing to temporary files
    that are then copied to ``out`` in job order, so that both give the same output."""

    workers: int
    out: IO[str] | None
    progress: _Progress

    def run(
        self,
        jobs: Sequence[Any],
        *,
        serial: Callable[[Any], Any],
        parallel: Callable[[Any], Any],
    ) -> list[Any]:
        if self.workers == 1 or len(jobs) == 1:
            return [serial(job) for job in jobs]
        out, listen = self.out, self.progress.update if self.progress.on else None
        with tempfile.TemporaryDirectory(prefix="prunewarden-") as scratch:
            parts = [str(Path(scratch) / f"{job.index}.jsonl") for job in jobs]
            staged = [
                _with_output(job, part if out is not None else None)
                for job, part in zip(jobs, parts, strict=True)
            ]
            results = run_jobs(parallel, staged, min(self.workers, len(jobs)), listen)
            if out is not None:
                concatenate(parts, out)
                out.flush()
        return results


def _with_output(job: Any, part: str | None) -> Any:
    """The job writing its output to the file ``part`` (None: nowhere)."""
    if isinstance(job, ReplayJob):
        return ReplayJob(job.index, job.trace, job.policy, part, job.audit)
    return DiffJob(job.index, job.trace, job.base, job.candidate, part or os.devnull)


def _load(path: str | None) -> Policy:
    """The policy file at ``path`` (and a ``policy.lock`` beside it, as :func:`load_policy`
    checks by default), else the bundled default."""
    return load_policy(path) if path is not None else load_builtin_policy("default")


def _audit_target(args: argparse.Namespace) -> AuditTarget | None:
    if not args.audit_log:
        return None
    try:
        with AuditLog(args.audit_log, fsync=args.audit_fsync) as audit:
            audit.open()
    except AuditError as exc:
        raise AuditError(str(exc).replace("cannot write", "cannot open")) from None
    return AuditTarget(args.audit_log, args.audit_fsync)


@contextlib.contextmanager
def _decisions_stream(target: str | None, stdout: IO[str]) -> Iterator[IO[str] | None]:
    if target is None:
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


def _status(results: Sequence[TraceSummary | TraceDiff], *, changed: bool) -> int:
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
    lines = [f"policy {_identity(policy)}"]
    for summary in summaries:
        session = f"session {summary.session_id}: " if summary.session_id else ""
        counts = f"{_count(summary.events, 'event')}, {_count(summary.decisions, 'decision')}"
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
        _count(totals[name], name.removesuffix("s")) for name in ("traces", "events", "decisions")
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


# --------------------------------------------------------------------------------------------
# diff


def run_diff(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    base, candidate = _load(args.base), _load(args.candidate)
    identities = (base.identity, candidate.identity)
    progress = _progress(args, stderr, "diff", args.traces)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as changes:
        jobs = [DiffJob(i, trace, base, candidate, "") for i, trace in enumerate(args.traces)]
        results: list[TraceDiff] = _Runner(args.jobs, changes, progress).run(
            jobs,
            serial=lambda job: run_diff_job(job, changes, progress.callback(job.index)),
            parallel=diff_in_worker,
        )
        progress.close()
        _report_problems(results, stderr)
        groups = merge_groups(results)
        if args.format == "json":
            changes.seek(0)
            _write_diff_json(identities, results, groups, changes, stdout)
        else:
            stdout.write(render_diff(identities, results, groups))
    return _status(results, changed=any(result.changed for result in results))


def merge_groups(results: Sequence[TraceDiff]) -> dict[GroupKey, Group]:
    """Every trace's groups as one: counts added, the first example in trace order; halts
    that moved first, then the groups in the order they first occur."""
    merged: dict[GroupKey, Group] = {}
    for result in results:
        for key, group in result.groups.items():
            if key in merged:
                merged[key].count += group.count
            else:
                merged[key] = Group(group.count, group.first)
    order = sorted(merged, key=lambda key: key[1] != "halt moved")
    return {key: merged[key] for key in order}


def _write_diff_json(
    identities: tuple[PolicyIdentity, PolicyIdentity],
    results: Sequence[TraceDiff],
    groups: dict[GroupKey, Group],
    changes: IO[str],
    out: IO[str],
) -> None:
    """The report, with every change streamed from the file it was spilled to."""
    head = {
        "base": identities[0].to_dict(),
        "candidate": identities[1].to_dict(),
        "changed": sum(result.changed for result in results),
        "traces": [result.to_dict() for result in results],
        "groups": [
            {
                "check": key[0],
                "kind": key[1],
                "from": group.first["from"],
                "to": group.first["to"],
                "reason": key[4],
                "count": group.count,
                "first": group.first,
            }
            for key, group in groups.items()
        ],
    }
    text = json.dumps(head, indent=2)
    out.write(text[: text.rfind("}")].rstrip() + ',\n  "changes": [')
    for i, line in enumerate(changes):
        out.write(("\n    " if i == 0 else ",\n    ") + line.rstrip("\n"))
    out.write("\n  ]\n}\n")


def render_diff(
    identities: tuple[PolicyIdentity, PolicyIdentity],
    results: Sequence[TraceDiff],
    groups: dict[GroupKey, Group],
) -> str:
    """The policies, the counts, then each group of changes with its first example."""
    base, candidate = identities
    events = sum(result.events for result in results)
    compared = sum(result.compared for result in results)
    changed = sum(result.changed for result in results)
    lines = [
        f"base       {_identity(base)}",
        f"candidate  {_identity(candidate)}",
        (
            f"{_count(len(results), 'trace')}, {_count(events, 'event')}, "
            f"{_count(compared, 'result')} compared: {changed} changed"
        ),
    ]
    for (check, kind, was, now, reason), group in groups.items():
        first = group.first
        label = f"{check} {was} -> {now}" if was or now else f"{check} {kind}"
        where = f"{first['trace']}:{first['line']}"
        cycle = f", cycle {first['cycle']}" if first.get("cycle") is not None else ""
        lines += [
            "",
            f"{label} ({reason}): {group.count}",
            f"  first: {where} (event {first['event']}{cycle})",
            f"         {first['summary']}",
        ]
    return "\n".join(lines) + "\n"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def _identity(policy: PolicyIdentity) -> str:
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


# --------------------------------------------------------------------------------------------
# Progress on standard error


class _Progress:
    """Events replayed and the share of the traces' bytes read, on one line of standard error
    (rewritten in place on a terminal, a line every few seconds otherwise)."""

    def __init__(self, stream: IO[str], verb: str, traces: Sequence[str], *, on: bool) -> None:
        self.stream = stream
        self.verb = verb
        self.on = on
        self.tty = on and _isatty(stream)
        self.every = 0.1 if self.tty else 2.0
        self.total = sum(_size(trace) for trace in traces) if on else 0
        self.events: dict[int, int] = {}
        self.read: dict[int, int] = {}
        self.shown = 0.0 if self.tty else time.monotonic()  # a log gets its first line later
        self.width = 0

    def callback(self, index: int) -> Callable[[TraceReader], None] | None:
        if not self.on:
            return None

        def report(reader: TraceReader) -> None:
            self.update(index, reader.events, reader.bytes_read)

        return report

    def update(self, index: int, events: int, read: int) -> None:
        self.events[index], self.read[index] = events, read
        now = time.monotonic()
        if now - self.shown >= self.every:
            self.shown = now
            self._show()

    def _show(self) -> None:
        events = sum(self.events.values())
        share = f", {100 * sum(self.read.values()) // self.total}%" if self.total else ""
        text = f"{self.verb}: {events:,} events{share}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the line on a terminal; in a log, say where it ended."""
        if not self.on:
            return
        if self.tty:
            if self.width:
                self.stream.write("\r" + " " * self.width + "\r")
        elif self.events:
            self._show()
        self.stream.flush()


class _Reported(Protocol):
    @property
    def problems(self) -> tuple[Problem, ...]: ...
    @property
    def failure(self) -> str: ...


def _report_problems(results: Iterable[_Reported], stderr: IO[str]) -> None:
    """Each trace's located problems, then why it stopped, if it did."""
    for result in results:
        for problem in result.problems:
            stderr.write(f"{problem}\n")
        if result.failure:
            stderr.write(f"{result.failure}\n")


def _progress(
    args: argparse.Namespace, stderr: IO[str], verb: str, traces: Sequence[str]
) -> _Progress:
    on = args.progress if args.progress is not None else _isatty(stderr)
    return _Progress(stderr, verb, traces, on=on)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size  # noqa: PTH116 - a str path
    except OSError:
        return 0
