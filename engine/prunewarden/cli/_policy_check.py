"""``prunewarden policy check``: the analysis of :mod:`prunewarden.analysis`, rendered."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from prunewarden.analysis import SEVERITIES, Finding, check_policies, exit_code, to_sarif
from prunewarden.cli._policy import base_dirs


def run_check(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    findings = check_policies(args.files, args.against, base_dirs(args), timeout=args.timeout)
    if args.witnesses:
        _write_witnesses(Path(args.witnesses), findings)
    if args.format == "sarif":
        stdout.write(json.dumps(to_sarif(findings), indent=2, ensure_ascii=False) + "\n")
    elif args.format == "json":
        report = {
            "policies": list(args.files),
            "against": args.against,
            "timeout": args.timeout,
            "summary": _counts(findings),
            "not_reached": [f.to_dict() for f in findings if f.code == "not-reached"],
            "findings": [finding.to_dict() for finding in findings],
        }
        stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    else:
        stdout.write(render_text(findings))
    return exit_code(findings)


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    return {severity: sum(f.severity == severity for f in findings) for severity in SEVERITIES}


def render_text(findings: Sequence[Finding]) -> str:
    """One line per finding (its primary location first), its other locations and witness
    indented below, and a count."""
    lines: list[str] = []
    for finding in findings:
        first = finding.locations[0] if finding.locations else None
        where = f"{first.file}:{first.line}" if first and first.line else finding.policy
        lines.append(f"{where}: {finding.severity} {finding.code}: {finding.message}")
        lines.extend(f"  also: {location}" for location in finding.locations[1:])
        if finding.witness is not None:
            lines.append(f"  witness: {json.dumps(finding.witness, separators=(',', ':'))}")
            lines.append(
                "  evaluate: " + ", ".join(f"{f} {o}" for f, o in finding.outcomes.items())
            )
    counts = _counts(findings)
    summary = ", ".join(f"{count} {severity}(s)" for severity, count in counts.items())
    missed = sum(f.code == "not-reached" for f in findings)
    if missed:
        summary += f"; {missed} check(s) not reached within the time budget: the report is partial"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def _write_witnesses(folder: Path, findings: Sequence[Finding]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    witnessed = [f for f in findings if f.witness is not None]
    for number, finding in enumerate(witnessed, 1):
        document: dict[str, Any] = finding.witness or {}
        path = folder / f"{number}-{finding.code}.json"
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
