"""``prunewarden diff`` on the command line.

``diff`` replays traces under two policies and prints every decision that changes, exiting 1
when one does, so that a policy change can be gated in CI. It runs traces as ``replay`` does and
shares its options, policy loading and exit status.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from typing import IO, Any

from prunewarden._identity import PolicyIdentity
from prunewarden.cli._common import UsageError, exit_codes_epilog, stdin_as_file
from prunewarden.cli._jobs import Runner, progress_for
from prunewarden.cli._policy import base_dirs
from prunewarden.cli._replay import (
    add_plot_option,
    add_run_options,
    check_plot_target,
    cluster_for,
    exit_status,
    policy_or_default,
    quantity,
    report_plots,
    report_problems,
    short_identity,
)
from prunewarden.cli._revision import load_policy_at
from prunewarden.errors import ExitCode
from prunewarden.plots import write_diff_plots
from prunewarden.replay import (
    DiffJob,
    Group,
    GroupKey,
    TraceDiff,
    diff_in_worker,
    expand_traces,
    run_diff_job,
)

DIFF_EXIT_CODES = exit_codes_epilog(
    {
        ExitCode.OK: "no decision changes",
        ExitCode.REFUSED: "some decision changes (listed)",
        ExitCode.USAGE: "usage error, or a malformed trace (it wins over 1: the comparison is "
        "incomplete)",
        ExitCode.POLICY: "invalid policy",
        ExitCode.INTERNAL: "internal error (a bug: please report it)",
    }
)


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
    diff.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="trace files (JSON Lines; .gz, .zst; URLs and globs fsspec reads)",
    )
    diff.add_argument(
        "--base", metavar="FILE", help="the policy in force (with --base-ref: as REF holds it)"
    )
    diff.add_argument("--candidate", metavar="FILE", required=True, help="the policy proposed")
    diff.add_argument(
        "--base-ref",
        metavar="REF",
        help="read the base policy and its extends chain from git revision REF (e.g. "
        "origin/main); --base defaults to the candidate's path",
    )
    add_run_options(diff)
    add_plot_option(
        diff,
        "draw one PNG per trace into DIR: both policies' spread, floors and halts, and every "
        "event whose decisions differ (needs: pip install 'prunewarden[plot]')",
    )


def run_diff(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """``diff``; a trace named ``-`` is read from standard input (named ``<stdin>``)."""
    with stdin_as_file(args.traces, stdout, stderr) as (args.traces, out, err):
        return _diff(args, out, err)


def _diff(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    traces = expand_traces(args.traces)
    cluster = cluster_for(args)
    bases = base_dirs(args)
    if args.base_ref is not None:
        base = load_policy_at(args.base_ref, args.base or args.candidate, bases)
    elif args.base is None:
        msg = "prunewarden diff: --base FILE or --base-ref REF is required"
        raise UsageError(msg)
    else:
        base = policy_or_default(args.base, bases)
    candidate = policy_or_default(args.candidate, bases)
    identities = (base.identity, candidate.identity)
    check_plot_target(args.plot)
    progress = progress_for(args, stderr, "diff", traces)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as changes:
        jobs = [DiffJob(i, trace, base, candidate, "") for i, trace in enumerate(traces)]
        results: list[TraceDiff] = Runner(args.jobs, changes, progress, cluster).run(
            jobs,
            serial=lambda job: run_diff_job(job, changes, progress.callback(job.index)),
            parallel=diff_in_worker,
        )
        progress.close()
        report_problems(results, stderr)
        groups = merge_groups(results)
        if args.format == "json":
            changes.seek(0)
            _write_diff_json(identities, results, groups, changes, stdout)
        else:
            stdout.write(render_diff(identities, results, groups))
    if args.plot is not None:
        paths = write_diff_plots(base, candidate, traces, args.plot)
        report_plots(paths, args.plot, stderr)
    return exit_status(results, changed=any(result.changed for result in results))


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
        f"base       {short_identity(base)}",
        f"candidate  {short_identity(candidate)}",
        (
            f"{quantity(len(results), 'trace')}, {quantity(events, 'event')}, "
            f"{quantity(compared, 'result')} compared: {changed} changed"
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
