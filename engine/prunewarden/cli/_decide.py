"""``validate``, ``evaluate``, ``plan`` and ``schema``: one policy, one document, one answer."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from prunewarden import _resources as resources
from prunewarden._files import open_regular
from prunewarden._source import parse_json
from prunewarden.cli import _evaluate_audit, _policy
from prunewarden.cli._common import (
    EXIT_CODES,
    STDIN_NAME,
    UsageError,
    add_format_option,
    load_embedder,
    problem_document,
    report,
    write_json,
)
from prunewarden.cli._printable import printable
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import ExitCode, InputError, PolicyError, Problem
from prunewarden.integrations.compaction_preview import parent_previews, render_previews
from prunewarden.limits import MAX_INPUT_CHARS, MAX_POLICY_BYTES
from prunewarden.planner import Plan
from prunewarden.policy import Policy, load_policy
from prunewarden.policy._lock import enforce as enforce_lock
from prunewarden.policy._overlay import resolve_text

_T = TypeVar("_T")

SCHEMAS = (
    "policy",
    "input",
    "decision",
    "rule-variables",
    "test-suite",
    "audit-record",
    "policy-lock",
    "trace",
    "session-state",
    "tenants",
    "collect-tokens",
    "server-config",
)


def add_validate(commands: Any) -> None:
    validate = commands.add_parser(
        "validate",
        help="check policy files against the schema",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    validate.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="policy YAML files; - reads one from standard input (its extends relative to the "
        "working directory; no lock file unless --lock names one)",
    )
    _policy.add_lock_option(validate)
    add_format_option(validate, "each file's policy or problems")


def add_evaluate(commands: Any) -> None:
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
    evaluate.add_argument(
        "--explain",
        action="store_true",
        help="as the explain command: would_allow on each refusing reason, rule traces",
    )


def add_explain(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="decide on one input document and say what would have allowed each refusal",
        description="Decide as evaluate does, and explain: each refusing reason of the guard "
        "carries detail.would_allow (the changes to the input or the policy that would flip "
        "it) and the decision an explanation with a trace of every rule (docs/explain.md).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_options(
        explain,
        document="input JSON document",
        json_output="the explained decision document",
    )
    explain.add_argument(
        "--preview",
        action="store_true",
        help="for a transition, JSON output as {decision, parents}: per pinned parent the edit "
        "replaced, its facts kept, restated and lost (the text output always shows them)",
    )


def add_schema(commands: Any) -> None:
    schema = commands.add_parser(
        "schema",
        help="print a bundled JSON Schema",
        description="Print a bundled JSON Schema (its latest version), or with --catalog the "
        "catalog of them all\nin SchemaStore's format, each by its $id.",
    )
    schema.add_argument("name", nargs="?", choices=SCHEMAS, help="the schema to print")
    schema.add_argument(
        "--catalog",
        action="store_true",
        help="print the schema catalog (SchemaStore's catalog format) instead of one schema",
    )


def run_validate(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    status = ExitCode.OK
    files: list[dict[str, Any]] = []
    for given in args.files:
        name = STDIN_NAME if given == "-" else given
        try:
            policy = _validated(given, args)
        except PolicyError as exc:
            if args.format == "text":
                report(exc.problems, stderr)
            problems = [problem_document(problem) for problem in exc.problems]
            files.append({"file": name, "valid": False, "problems": problems})
            status = ExitCode.POLICY
            continue
        identity = {"name": policy.name, "version": policy.version, "digest": policy.digest}
        files.append({"file": name, "valid": True, "policy": identity})
        if args.format == "text":
            stdout.write(f"{name}: valid ({policy.name}@{policy.version} {policy.digest})\n")
    if args.format == "json":
        write_json({"valid": status == ExitCode.OK, "files": files}, stdout)
    return status


def _validated(name: str, args: argparse.Namespace) -> Policy:
    """The policy file ``name`` loaded, or with ``-`` the policy on standard input."""
    if name != "-":
        return load_policy(name, lock=_policy.lock_option(args), base_dirs=_policy.base_dirs(args))
    text = sys.stdin.read(MAX_POLICY_BYTES + 1)  # one byte over: the parser names the limit
    resolution = resolve_text(text, STDIN_NAME, _policy.base_dirs(args))
    if args.lock is not None:
        enforce_lock(resolution, Path(args.lock))
    return resolution.policy


def run_evaluate(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    if args.explain:
        return run_explain(args, stdout, stderr)
    decision, out = _on_input(args, stdout, stderr, Engine.evaluate)
    _emit(out, args.format, render_text(decision), decision.to_dict())
    return ExitCode.REFUSED if decision.blocks else ExitCode.OK


def run_explain(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    def explained(engine: Engine, document: Any, **options: Any) -> tuple[Decision, Any, Policy]:
        return engine.evaluate(document, explain=True, **options), document, engine.policy

    (decision, document, policy), out = _on_input(args, stdout, stderr, explained)
    text, output = render_explained(decision), decision.to_dict()
    if decision.check == "transition" and isinstance(document, dict):
        # Beside the decision, never in it: the decision carries no text.
        parents = parent_previews(
            _segments(document, "before"), _segments(document, "after"), policy
        )
        text += "\nPinned parents: the facts the edit kept, restated and lost\n"
        text += render_previews(parents)
        if args.preview:
            output = {"decision": output, "parents": parents}
    _emit(out, args.format, text, output)
    return ExitCode.REFUSED if decision.blocks else ExitCode.OK


def _segments(document: dict[str, Any], window: str) -> list[dict[str, Any]]:
    segments = document.get(window)
    return [s for s in segments if isinstance(s, dict)] if isinstance(segments, list) else []


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
    _evaluate_audit.add_evaluate_options(parser)
    _policy.add_evaluate_options(parser)


def _on_input(
    args: argparse.Namespace,
    stdout: IO[str],
    stderr: IO[str],
    act: Callable[..., _T],
) -> tuple[_T, IO[str]]:
    """Load the policy, read the JSON input, and run ``act`` (``Engine.evaluate`` or
    ``Engine.plan``) on an engine logging to the audit sink the options chose, with the caller's
    session id and labels; return its result and the stream results go to."""
    policy, shadow = _policy.evaluation_policies(args)
    text, filename = _read_input(args.input)
    parsed, problems = parse_json(text, filename)
    if problems:
        raise InputError(problems)
    caller = _evaluate_audit.caller_fields(args)
    embedder = load_embedder(args)  # before the audit log opens: a missing extra logs nothing
    with _evaluate_audit.evaluation_audit(args, stdout, stderr) as (audit, out):
        engine = Engine(policy, audit=audit, shadow=shadow, embedder=embedder)
        return act(engine, parsed.data, filename=filename, text=text, **caller), out


def _emit(out: IO[str], output_format: str, text: str, document: dict[str, Any]) -> None:
    if output_format == "text":
        out.write(text)
    else:
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def render_text(decision: Decision, *, explained: bool = False) -> str:
    """A few readable lines: the verdict, each reason, the remediations, the policy;
    ``explained``: each reason followed by what would have allowed it."""
    binding = "enforced" if decision.enforced else "not enforced"
    lines = [f"{decision.check}: {decision.outcome.upper()} ({binding})"]
    for reason in decision.reasons:
        lines.append(f"  {reason.code}: {reason.message}")
        if explained and "would_allow_text" in reason.detail:
            lines.append(f"    would allow: {reason.detail['would_allow_text']}")
            lines += [f"      - {_change(change)}" for change in reason.detail["would_allow"]]
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
    return "".join(printable(line) + "\n" for line in lines)


def render_explained(decision: Decision) -> str:
    """:func:`render_text`, each refusing reason followed by what would have allowed it, then
    each rule's trace."""
    lines = render_text(decision, explained=True).splitlines()
    explanation = decision.explanation or {}
    for trace in explanation.get("rules", ()):
        verdict = "matched" if trace["matched"] else "did not match"
        cost = trace.get("cost", {}).get("nodes")
        spent = f" ({cost} nodes evaluated)" if cost is not None else ""
        lines.append(printable(f"  rule {trace['rule']}: {verdict}{spent}"))
        for step in trace.get("steps", ()):
            value = json.dumps(step["value"], ensure_ascii=False)
            lines.append(printable(f"    {step['expression']} = {value}"))
        if trace.get("params"):
            lines.append(printable(f"    params: {json.dumps(trace['params'])}"))
    return "".join(line + "\n" for line in lines)


def _change(change: dict[str, Any]) -> str:
    """``spec.eviction.stability_delta >= 0.31``, and what must come with it."""
    out = f"{change['field']} {change['op']} {json.dumps(change['value'], ensure_ascii=False)}"
    return " and ".join([out, *(_change(more) for more in change.get("and", ()))])


def run_schema(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    if args.catalog == (args.name is not None):
        msg = "prunewarden schema: give a schema NAME or --catalog, not both"
        if not args.catalog:
            msg = "prunewarden schema: give a schema NAME, or --catalog"
        raise UsageError(msg)
    document = resources.catalog() if args.catalog else resources.schema(args.name)
    stdout.write(json.dumps(document, indent=2) + "\n")
    return ExitCode.OK


def _read_input(name: str) -> tuple[str, str]:
    """The document's text, read no further than one character past the limit (so that
    :func:`parse_json` refuses it as too large): standard input may be endless, and a file
    must be a regular one (a FIFO or ``/dev/zero`` is refused unread)."""
    if name == "-":
        return _read_text(sys.stdin, "<stdin>"), "<stdin>"
    try:
        with open_regular(name) as raw, io.TextIOWrapper(raw, encoding="utf-8") as stream:
            return _read_text(stream, name), name
    except OSError as exc:
        raise InputError([Problem(name, 0, 0, "$", f"cannot read: {exc.strerror}")]) from None


def _read_text(stream: IO[str], name: str) -> str:
    try:
        return stream.read(MAX_INPUT_CHARS + 1)
    except UnicodeDecodeError as exc:
        message = f"cannot read: not UTF-8 text (byte {exc.start})"
        raise InputError([Problem(name, 0, 0, "$", message)]) from None


def add_plan(commands: Any) -> None:
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


def run_plan(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    plan, out = _on_input(args, stdout, stderr, Engine.plan)
    _emit(out, args.format, render_plan(plan), plan.to_dict())
    return ExitCode.REFUSED if plan.frozen else ExitCode.OK


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
    return "".join(printable(line) + "\n" for line in lines)
