"""Findings as SARIF 2.1.0, the format code-scanning interfaces read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prunewarden.__about__ import __version__
from prunewarden.analysis._findings import CODES, Finding, Location

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def to_sarif(findings: Sequence[Finding]) -> dict[str, Any]:
    """One run of the ``prunewarden`` driver: every code as a rule, every finding a result
    located at the policy fields involved (the first is the primary location)."""
    codes = sorted(CODES)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "prunewarden",
                        "version": __version__,
                        "informationUri": "https://prunewarden.dev/docs/policy-check",
                        "rules": [
                            {
                                "id": code,
                                "shortDescription": {"text": CODES[code][1]},
                                "defaultConfiguration": {"level": CODES[code][0]},
                            }
                            for code in codes
                        ],
                    }
                },
                "results": [_result(finding, codes.index(finding.code)) for finding in findings],
                "invocations": [_invocation(findings)],
            }
        ],
    }


def _invocation(findings: Sequence[Finding]) -> dict[str, Any]:
    """Whether every check ran: a check the time budget did not reach makes the run
    unsuccessful, each named in a notification (and a ``not-reached`` result)."""
    missed = [finding for finding in findings if finding.code == "not-reached"]
    invocation: dict[str, Any] = {"executionSuccessful": not missed}
    if missed:
        invocation["toolExecutionNotifications"] = [
            {"level": "warning", "message": {"text": f"{finding.policy}: {finding.message}"}}
            for finding in missed
        ]
    return invocation


def _result(finding: Finding, rule_index: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": finding.severity,
        "message": {"text": finding.message},
        "locations": [_location(location) for location in finding.locations]
        or [_location(Location("", finding.policy))],
    }
    if finding.witness is not None:
        result["properties"] = {"witness": finding.witness, "outcomes": finding.outcomes}
    return result


def _location(location: Location) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": location.file}}
    if location.line:
        physical["region"] = {"startLine": location.line, "startColumn": max(location.column, 1)}
    found: dict[str, Any] = {"physicalLocation": physical}
    if location.pointer:
        found["logicalLocations"] = [{"fullyQualifiedName": location.pointer, "kind": "member"}]
    return found
