"""What ``policy check`` reports: findings with a code, a severity, where, and a witness."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "note"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "note")

# Every code, its severity and one line for the SARIF rule (docs/policy-check.md).
CODES: dict[str, tuple[Severity, str]] = {
    "overlay-more-permissive": (
        "error",
        "The policy allows an eviction its base refuses.",
    ),
    "overlay-more-restrictive": (
        "note",
        "The policy refuses an eviction its base allows.",
    ),
    "policies-equivalent": (
        "note",
        "The policies decide every eviction request alike.",
    ),
    "production-not-enforced": (
        "error",
        "A guard or rule of a production policy is in audit or off mode.",
    ),
    "pinned-kind-dropped": (
        "error",
        "A kind its base pins is no longer pinned.",
    ),
    "rule-never-matches": ("warning", "A rule's condition holds for no input."),
    "rule-always-matches": ("warning", "A rule's condition holds for every input."),
    "threshold-outside-seed-range": (
        "warning",
        "A threshold lies outside the range its source document supports.",
    ),
    "not-analysed": (
        "note",
        "A rule or setting is outside what the analysis models exactly.",
    ),
    "not-reached": (
        "warning",
        "A check was not reached within the total time budget of its policy.",
    ),
}


@dataclass(frozen=True, slots=True)
class Location:
    """A field of a policy and where its value was set (line 0: a default)."""

    pointer: str
    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} ({self.pointer})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pointer": self.pointer,
            "file": self.file,
            "line": self.line,
            "column": self.column,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``policy check`` found in ``policy`` (a file as given)."""

    code: str
    message: str
    policy: str
    locations: tuple[Location, ...] = ()
    witness: dict[str, Any] | None = None
    # What the witness shows: each policy file and the outcome evaluate gives it.
    outcomes: dict[str, str] = field(default_factory=dict)

    @property
    def severity(self) -> Severity:
        return CODES[self.code][0]

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "policy": self.policy,
            "locations": [location.to_dict() for location in self.locations],
        }
        if self.witness is not None:
            found["witness"] = self.witness
            found["outcomes"] = self.outcomes
        return found
